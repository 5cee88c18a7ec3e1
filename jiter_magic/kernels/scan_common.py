"""What the host and CUDA scan kernels share: the `Args` struct and the state's functions.

Every scan kernel carries a `jm_state_t` and calls three generated functions, so that the loop
shapes never spell out the kind of state:
- `jm_step(a, b)`: the state of a's elements followed by b's (the user's combine; with indices
  the reductions' `jm_pick`, which skips a state of no element; with a state of several values
  the combine writing through references),
- `jm_element(args, offsets..., position)`: one element's state, from its inputs through the map,
- `jm_store(args, offsets..., state, count)`: a result written, finalized with its count (of a
  state of several values, the values a call returns: all, or those `outputs=` keeps).
A plain scan's state is the accumulator itself. The `jm_Args` struct is a reduction's kind of
struct (reduce_common.py's packer, every field 8-byte aligned): outputs, inputs, a partials
buffer and counts, the extras, then each operand's kept strides, step along the scan and start.
"""
from __future__ import annotations

from functools import lru_cache

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import convert
from jiter_magic.frontend.bind import EXTRA, INPUT, OUTPUT
from jiter_magic.frontend.scan import ScanBinding
from jiter_magic.kernels.reduce_common import (
    ARGS,
    ReduceArgs,
    extra_fields,
    finalized,
    mapped,
    packed_args,
    pair_code,
    source_around,
    template_call,
)
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.scan_plan import ScanSpec

FIELDS = "vwxy"  # a state's value names


@lru_cache(maxsize=256)
def scan_args(spec: ScanSpec) -> ReduceArgs:
    """Outputs (each state value written, or values then indices), inputs, a workspace (a look-back scan's,
    split columns' partials), rows, count, blocks a row, whether the walk is reversed (an index counts
    in the array's order) and the launch's stage (of two launches), the extras, then the kept sizes, each operand's kept
    strides, each operand's step along the scan and its start."""
    if spec.indexed:
        fields = [("jm_out0", f"{ctype(spec.output)}*", 0), ("jm_out1", "int64_t*", 0)]
    else:
        fields = [(f"jm_out{k}", f"{ctype(spec.output)}*", 0) for k in range(spec.outputs)]
    fields += [(f"jm_in{i}", f"const {ctype(d)}*", 0) for i, d in enumerate(spec.inputs)]
    fields += [("jm_partials", "int64_t*", 0), ("jm_rows", "int64_t", 0), ("jm_count", "int64_t", 0),
               ("jm_blocks", "int64_t", 0), ("jm_reverse", "int64_t", 0), ("jm_stage", "int64_t", 0)]
    fields += extra_fields(spec.extras)
    operands = operand_count(spec)
    fields.append(("jm_ksize", "int64_t", spec.kept_ndim))
    fields += [(f"jm_kstride{k}", "int64_t", spec.kept_ndim) for k in range(operands)]
    fields += [("jm_step", "int64_t", operands), ("jm_start", "int64_t", operands)]
    return packed_args(fields, spec.extras)


def operand_count(spec: ScanSpec) -> int:
    return spec.outputs + len(spec.inputs)


def _inline(cuda: bool) -> str:
    return "__device__ __forceinline__ " if cuda else "static inline "


def _state_type(binding: ScanBinding, spec: ScanSpec, cuda: bool) -> str:
    """The state struct and `jm_step`."""
    inline = _inline(cuda)
    if spec.indexed:
        return pair_code(binding.combine, cuda)
    if spec.state == 1:
        call = template_call(binding.combine, ["jm_x", "jm_y"])
        return (f"typedef jm_acc_t jm_state_t;\n"
                f"{inline}jm_state_t jm_step(jm_state_t jm_x, jm_state_t jm_y) {{ return (jm_acc_t){call}; }}\n")
    names = FIELDS[:spec.state]
    call = template_call(binding.combine, [f"jm_x.{n}" for n in names] + [f"jm_y.{n}" for n in names]
                         + [f"jm_r.{n}" for n in names])
    return (f"struct jm_state_t {{ jm_acc_t {', '.join(names)}; }};\n"
            f"{inline}jm_state_t jm_step(jm_state_t jm_x, jm_state_t jm_y) {{\n"
            f"  jm_state_t jm_r = jm_x;\n  {call};\n  return jm_r;\n}}\n")


def shuffles(spec: ScanSpec) -> str:
    """`jm_up(state, offset)` (the state of the lane `offset` below) and `jm_from(state, lane)`,
    field by field."""
    text = ""
    for name, call in (("jm_up", "__shfl_up_sync"), ("jm_from", "__shfl_sync")):
        head = f"__device__ __forceinline__ jm_state_t {name}(jm_state_t jm_s, int jm_off) {{\n"
        if spec.indexed:
            text += head + (f"  return jm_state_t{{{call}(0xffffffffu, jm_s.v, jm_off), "
                            f"(int64_t){call}(0xffffffffu, (long long)jm_s.i, jm_off)}};\n}}\n")
        elif spec.state == 1:
            text += head + f"  return {call}(0xffffffffu, jm_s, jm_off);\n}}\n"
        else:
            text += head + "".join(f"  jm_s.{n} = {call}(0xffffffffu, jm_s.{n}, jm_off);\n"
                                   for n in FIELDS[:spec.state]) + "  return jm_s;\n}\n"
    return text


def step(spec: ScanSpec, a: str, b: str) -> str:
    return f"jm_pick({a}, {b})" if spec.indexed else f"jm_step({a}, {b})"


def identity(spec: ScanSpec) -> str:
    """The state of no element (with indices: index -1, which `jm_pick` passes over)."""
    if spec.indexed:
        return f"jm_state_t{{{spec.identity[0]}, -1}}"
    if spec.state == 1:
        return spec.identity[0]
    return f"jm_state_t{{{', '.join(spec.identity)}}}"


def _element(binding: ScanBinding, spec: ScanSpec, cuda: bool) -> str:
    """`jm_element(args, offsets..., position)`: the state of one element."""
    ins = range(len(spec.inputs))
    loaded = [f"{ARGS}.jm_in{i}[jm_o{i}]" for i in ins]
    params = "".join(f", jm_index_t jm_o{i}" for i in ins)
    head = f"{_inline(cuda)}jm_state_t jm_element(const jm_Args& {ARGS}{params}, jm_index_t jm_pos) {{\n"
    if spec.indexed:
        return head + f"  return jm_state_t{{{mapped(binding, spec, loaded)}, (int64_t)jm_pos}};\n}}\n"
    if spec.state == 1:
        return head + f"  (void)jm_pos;\n  return {mapped(binding, spec, loaded)};\n}}\n"
    values = [convert(expr, d, spec.accumulate) for expr, d in zip(loaded, spec.inputs)]
    body = "  (void)jm_pos;\n  jm_state_t jm_s;\n"
    if binding.map is None:
        body += "".join(f"  jm_s.{n} = {values[k]};\n" for k, n in enumerate(FIELDS[:spec.state]))
    else:
        args = []
        for role, index in binding.map.roles:
            args.append(values[index] if role == INPUT else f"{ARGS}.jm_extra{index}" if role == EXTRA
                        else f"jm_s.{FIELDS[index]}" if role == OUTPUT else "")
        body += f"  {template_call(binding.map.functor, args)};\n"
    return head + body + "  return jm_s;\n}\n"


def _store(binding: ScanBinding, spec: ScanSpec, cuda: bool) -> str:
    """`jm_store(args, offsets..., state, count)`: a result written at each output's offset."""
    outs = range(spec.outputs)
    params = "".join(f", jm_index_t jm_p{k}" for k in outs)
    head = f"{_inline(cuda)}void jm_store(const jm_Args& {ARGS}{params}, jm_state_t jm_s, jm_index_t jm_n) {{\n"
    if spec.indexed:
        value = finalized(binding, spec, "jm_s.v", "jm_n")
        return head + f"  {ARGS}.jm_out0[jm_p0] = {value};\n  {ARGS}.jm_out1[jm_p1] = jm_s.i;\n}}\n"
    if spec.state == 1:
        return head + f"  {ARGS}.jm_out0[jm_p0] = {finalized(binding, spec, 'jm_s', 'jm_n')};\n}}\n"
    # Output k is the k-th value written (all of them, or those `outputs=` keeps): the state stays whole.
    lines = "".join(f"  {ARGS}.jm_out{k}[jm_p{k}] = {convert(f'jm_s.{FIELDS[v]}', spec.accumulate, spec.output)};\n"
                    for k, v in enumerate(spec.written))
    return head + "  (void)jm_n;\n" + lines + "}\n"


def render_scan(binding: ScanBinding, spec: ScanSpec, backend: str, kernel: str) -> str:
    """The whole source: around the user's code, the state's functions, `jm_Args`, then `kernel`."""
    cuda = backend == "cuda"
    middle = _state_type(binding, spec, cuda) + scan_args(spec).declaration() + "\n"
    middle += _element(binding, spec, cuda) + _store(binding, spec, cuda)
    return source_around(binding.code, spec.accumulate, backend, middle + kernel)


def offsets(spec: ScanSpec, row: str, operands: range, sizes: str = "jm_ksize") -> list[str]:
    """Statements setting `jm_k{k}`, operand k's offset of the first element walked of row `row`."""
    lines = [f"jm_index_t {', '.join(f'jm_k{k} = {ARGS}.jm_start[{k}]' for k in operands)}, jm_rest = {row};"]
    for d in range(spec.kept_ndim):
        split = f"jm_rest % {ARGS}.{sizes}[{d}]; jm_rest /= {ARGS}.{sizes}[{d}];" if d < spec.kept_ndim - 1 \
            else "jm_rest;"
        lines.append(f"{{ const jm_index_t jm_c = {split}")
        lines.append("  " + " ".join(f"jm_k{k} += jm_c * {ARGS}.jm_kstride{k}[{d}];" for k in operands) + " }")
    return lines


def element_call(spec: ScanSpec, position: str, offset: str = "jm_k{k} + {j} * {ARGS}.jm_step[{k}]") -> str:
    """`jm_element` of the element at `position` (its index along the scan) of the row at jm_k."""
    first = spec.outputs
    args = ", ".join(offset.format(k=first + i, j=f"({position})", ARGS=ARGS) for i in range(len(spec.inputs)))
    index = f"({ARGS}.jm_reverse ? {ARGS}.jm_count - 1 - ({position}) : ({position}))" if spec.indexed else position
    return f"jm_element({ARGS}, {args}, {index})"


def store_call(spec: ScanSpec, position: str, state: str, count: str,
               offset: str = "jm_k{k} + {j} * {ARGS}.jm_step[{k}]") -> str:
    """`jm_store` of `state` at `position` of the row at jm_k."""
    args = ", ".join(offset.format(k=k, j=f"({position})", ARGS=ARGS) for k in range(spec.outputs))
    return f"jm_store({ARGS}, {args}, {state}, {count});"


def walk(spec: ScanSpec, state: str, first: str, end: str, count_base: str = "0",
          offset: str = "jm_k{k} + {j} * {ARGS}.jm_step[{k}]") -> CodeBlock:
    """Statements scanning positions [first, end) of a row from `state`, storing each result."""
    code = CodeBlock()
    with code.block(f"for (jm_index_t jm_j = {first}; jm_j < {end}; ++jm_j)"):
        code.line(f"const jm_state_t jm_e = {element_call(spec, 'jm_j', offset)};")
        if spec.exclusive:
            code.line(store_call(spec, "jm_j", state, f"jm_j - {count_base}", offset))
            code.line(f"{state} = {step(spec, state, 'jm_e')};")
        else:
            code.line(f"{state} = {step(spec, state, 'jm_e')};")
            code.line(store_call(spec, "jm_j", state, f"jm_j + 1 - {count_base}", offset))
    return code
