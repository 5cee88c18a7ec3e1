"""The strided path: any layout, each thread splitting linear indices into per-operand offsets.

The fallback for layouts no other path fits. A thread handles `ITEMS` elements a block
apart (coalesced where the operands allow), loading all inputs before computing; 32-bit
indices divide by magic numbers computed once a plan (`fast_divisor`), 64-bit ones divide.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body
from jiter_magic.codegen.offsets import DIVIDE, MAGIC, operand_offsets
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels.args import FieldSpec
from jiter_magic.kernels.base import BLOCK, CallShape, Grid, LoopPath, PathChoice, ceil_div
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.layout import Layout
from jiter_magic.planning.spec import STRIDED, KernelSpec, PathParams

ITEMS = 4  # elements a thread


def fast_divisor(d: int) -> tuple[int, int]:
    """Magic multiplier and shift so that n // d == (umulhi(n, mul) + n) >> shift for 0 <= n < 2**31."""
    shift = 0
    while (1 << shift) < d:
        shift += 1
    mul = ((1 << 32) * ((1 << shift) - d)) // d + 1
    return mul & 0xFFFFFFFF, shift


class Strided(LoopPath):
    name = STRIDED

    def match(self, call: CallShape) -> PathChoice | None:
        return PathChoice(STRIDED, max(call.layout.ndim, 1), PathParams())  # no parameters of its own

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        fields = super().geometry_fields(spec)
        if not spec.index64:
            n = spec.ndim
            fields += [("jm_div_mul", "uint32_t", "I" * n, 4 * n, n), ("jm_div_shift", "uint32_t", "I" * n, 4 * n, n)]
        return fields

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        geometry = super().geometry(spec, layout)
        if not spec.index64:
            divisors = [fast_divisor(n) for n in layout.sizes]
            geometry += tuple(m for m, _ in divisors) + tuple(s for _, s in divisors)
        return geometry

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        return ceil_div(layout.numel, BLOCK * ITEMS), 1, 1

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        nout, ins = len(spec.outputs), spec.array_inputs
        code = CodeBlock(f"const jm_index_t jm_n = (jm_index_t){ARGS}.jm_n;",
                         f"const jm_index_t jm_base = (jm_index_t)jm_block_x() * {BLOCK * ITEMS} "
                         "+ (jm_index_t)jm_thread_x();")
        for i in ins:
            code.line(f"{ctype(spec.inputs[i])} jm_x{i}[{ITEMS}];")
        code.line(f"jm_index_t jm_out_offset[{ITEMS}][{max(nout, 1)}];")
        code.line("#pragma unroll")
        with code.block(f"for (int jm_it = 0; jm_it < {ITEMS}; ++jm_it)"):
            code.line(f"const jm_index_t jm_li = jm_base + jm_it * {BLOCK};")
            with code.block("if (jm_li < jm_n)"):
                code.extend(operand_offsets(spec, "jm_li", DIVIDE if spec.index64 else MAGIC))
                for k in range(nout):
                    code.line(f"jm_out_offset[jm_it][{k}] = jm_o{k};")
                for pos, i in enumerate(ins):
                    code.line(f"jm_x{i}[jm_it] = {ARGS}.jm_in{i}[jm_o{nout + pos}];")
        code.line("#pragma unroll")
        with code.block(f"for (int jm_it = 0; jm_it < {ITEMS}; ++jm_it)"):
            with code.block(f"if (jm_base + jm_it * {BLOCK} < jm_n)"):
                code.extend(element_body(binding, spec, {i: f"jm_x{i}[jm_it]" for i in ins},
                                         [f"{ARGS}.jm_out{j}[jm_out_offset[jm_it][{j}]]" for j in range(nout)]))
        return code
