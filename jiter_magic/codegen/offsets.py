"""Split a linear index into each operand's element offset: the one generator every path uses.

Loop dimensions are innermost first; operand k's offset `jm_o{k}` accumulates index times
stride over the dimensions from `first_dim` on. Three ways to divide: `magic` (32-bit
indices: a multiply-high by a precomputed magic number, as TensorIterator's offset
calculator), `divide` (64-bit: one division a dimension, the remainder by multiplication)
and `modulo` (once a block or a batch, where the cost does not matter).
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS
from jiter_magic.planning.spec import KernelSpec

MAGIC, DIVIDE, MODULO = "magic", "divide", "modulo"


def _accumulate(spec: KernelSpec, dim: int, pad: str) -> list[str]:
    return [f"{pad}jm_o{k} += jm_idx * (jm_index_t){ARGS}.jm_strides{k}[{dim}];" for k in range(spec.num_operands)]


def _quotient(dim: int, division: str) -> str:
    size = f"(jm_index_t){ARGS}.jm_sizes[{dim}]"
    if division == DIVIDE:
        return f"const jm_index_t jm_q{dim} = jm_rem / {size};"
    return (f"const jm_index_t jm_q{dim} = (jm_index_t)((__umulhi((unsigned)jm_rem, {ARGS}.jm_div_mul[{dim}]) "
            f"+ (unsigned)jm_rem) >> {ARGS}.jm_div_shift[{dim}]);")


def operand_offsets(spec: KernelSpec, linear: str, division: str, first_dim: int = 0) -> CodeBlock:
    """Declarations of `jm_o0..` for the element at linear index `linear` (counted from `first_dim`)."""
    code = CodeBlock()
    dims = range(first_dim, spec.ndim)
    if len(dims):
        code.line(f"jm_index_t jm_rem = {linear};")
    code.line("jm_index_t " + ", ".join(f"jm_o{k} = 0" for k in range(spec.num_operands)) + ";")
    for dim in dims:
        size = f"(jm_index_t){ARGS}.jm_sizes[{dim}]"
        if division == MODULO:
            code.line(f"{{ const jm_index_t jm_idx = jm_rem % {size}; jm_rem /= {size};")
            code.line("\n".join(_accumulate(spec, dim, "  ")))
            code.line("}")
        elif dim == spec.ndim - 1:  # the outermost dimension: what is left is its index
            code.line("const jm_index_t jm_idx = jm_rem;")
            code.line("\n".join(_accumulate(spec, dim, "")))
        else:
            code.line(_quotient(dim, division))
            code.line(f"{{ const jm_index_t jm_idx = jm_rem - jm_q{dim} * {size};")
            code.line("\n".join(_accumulate(spec, dim, "  ")))
            code.line(f"  jm_rem = jm_q{dim}; }}")
    return code
