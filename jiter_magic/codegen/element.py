"""The per-element body every kernel path shares: load, convert in registers, call, convert, store.

Paths differ only in where an element lives; they pass each input's storage expression and
each output's lvalue, and get back the statements for one element. Every name written
here carries the reserved `jm_` prefix, so none can shadow, or be broken by, the user's.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.bind import EXTRA, INPUT, Binding
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.spec import KernelSpec

ARGS = "jm_a"  # the kernel's by-value Args struct


def convert(expr: str, source: str, target: str) -> str:
    """C++ expression converting `expr` of dtype `source` to dtype `target`, in registers."""
    if source == target:
        return expr
    if source in ("float16", "bfloat16"):
        expr, source = f"jm_to_float({expr})", "float32"
        if source == target:
            return expr
    src, dst = DTYPES[source], DTYPES[target]
    if src.kind == "c" and dst.kind != "c":
        expr, source = f"jm_real({expr})", ("float32" if source == "complex64" else "float64")
    if target == "float16":
        return f"jm_to_half((float)({expr}))"
    if target == "bfloat16":
        return f"jm_to_bfloat16((float)({expr}))"
    if dst.kind == "c":
        return f"{dst.ctype}({expr})"
    return f"static_cast<{dst.ctype}>({expr})"


def _functor_call(binding: Binding, values: list[str], outs: list[str]) -> str:
    """The statement calling the user's entry function, arguments in its declared order."""
    functor = binding.functor
    args = []
    for role, index in binding.roles:
        if role == INPUT:
            args.append(values[index])
        elif role == EXTRA:
            args.append(f"{ARGS}.jm_extra{index}")
        else:
            args.append(outs[index])
    params = functor.template_params
    typed = len(params) == 1 and not params[0].startswith(("int ", "bool "))
    call = f"{functor.name}{'<jm_compute_t>' if typed else ''}({', '.join(args)})"
    return f"{outs[0]} = {call};" if binding.returns_value else f"{call};"


def element_body(binding: Binding, spec: KernelSpec, loaded: dict[int, str], stores: list[str]) -> CodeBlock:
    """Statements for one element: `loaded[i]` is array input i's storage expression, `stores[j]`
    output j's lvalue; scalar inputs come from the Args struct."""
    code = CodeBlock()
    values = []
    for i, dtype in enumerate(spec.inputs):
        source = f"{ARGS}.jm_scalar{i}" if spec.scalar_inputs[i] else loaded[i]
        code.line(f"const jm_compute_t jm_v{i} = {convert(source, dtype, spec.compute)};")
        values.append(f"jm_v{i}")
    outs = [f"jm_r{j}" for j in range(len(spec.outputs))]
    code.line(f"jm_compute_t {', '.join(outs)};")
    code.line(_functor_call(binding, values, outs))
    for j, dtype in enumerate(spec.outputs):
        code.line(f"{stores[j]} = {convert(outs[j], spec.compute, dtype)};")
    return code


def vector_elements(binding: Binding, spec: KernelSpec, loaded: dict[int, str], width: int) -> CodeBlock:
    """Statements for `width` elements a thread holds as vectors: `loaded[i]` is array input i's
    storage expression of lane `jm_k`; output j's lanes land in `jm_y{j}` (declared here), which
    the path stores where its output lives."""
    code = CodeBlock()
    for j, dtype in enumerate(spec.outputs):
        code.line(f"jm_vec<{ctype(dtype)}, {width}> jm_y{j};")
    code.line("#pragma unroll")
    with code.block(f"for (int jm_k = 0; jm_k < {width}; ++jm_k)"):
        code.extend(element_body(binding, spec, loaded, [f"jm_y{j}.jm_v[jm_k]" for j in range(len(spec.outputs))]))
    return code
