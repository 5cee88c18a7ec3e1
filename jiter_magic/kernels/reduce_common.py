"""What the host and CUDA reduction kernels share: the `Args` struct, the functor calls, the source.

Every field of a reduction's `jm_Args` is 8-byte aligned (pointers, int64 counts and loop
geometry, the map's extras), so one struct format packs it on both backends. The user's
functions are called with the accumulator type as their `T`: `map` on each element's inputs
converted to it, `combine` on two accumulator values, `finalize` on the result and the count.

A reduction with indices folds `jm_state_t` pairs instead, a value and the index of its element
(-1: no element yet, which every combine passes over, so that lanes and threads holding no
element never win a tie whatever the user's combine prefers); plain reductions fold `jm_acc_t`
values themselves, and their sources name no pair at all. A spec with `indices_given` (the fold
of a Dask tree's partials) reads each pair from two inputs, the value and its int64 index.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from jiter_magic.codegen.element import convert
from jiter_magic.codegen.names import with_user_code
from jiter_magic.codegen.prelude import prelude
from jiter_magic.frontend.bind import EXTRA, INPUT
from jiter_magic.frontend.parse import Functor
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.reduce_spec import ReductionSpec

ARGS = "jm_a"


class Typed(Protocol):
    """The dtypes of a kernel's spec that the functor calls convert between (a reduction's or a scan's)."""

    @property
    def inputs(self) -> tuple[str, ...]: ...

    @property
    def accumulate(self) -> str: ...

    @property
    def output(self) -> str: ...
_EXTRA_FORMAT = {"int64": ("int64_t", "q"), "float64": ("double", "d"), "bool": ("bool", "?")}


# Infinity and NaN for identities (a max's -inf): NVRTC has neither INFINITY nor the builtins.
_SPECIAL_VALUES = {
    False: "static inline double jm_inf() { return HUGE_VAL; }\nstatic inline double jm_nan() { return NAN; }\n",
    True: "__device__ __forceinline__ double jm_inf() { return __longlong_as_double(0x7ff0000000000000LL); }\n"
          "__device__ __forceinline__ double jm_nan() { return __longlong_as_double(0x7ff8000000000000LL); }\n",
}


@dataclass(frozen=True, slots=True)
class ReduceArgs:
    """The `jm_Args` struct of a reduction: its C declaration and the packer of its values."""

    fields: tuple[tuple[str, str, int], ...]  # name, C type, array length (0: a plain field)
    packer: struct.Struct

    def declaration(self) -> str:
        lines = ["struct jm_Args {"]
        for name, c_type, count in self.fields:
            lines.append(f"  alignas(8) {c_type} {name}{f'[{count}]' if count else ''};")
        lines.append("};")
        lines.append(f'static_assert(sizeof(jm_Args) == {self.packer.size}, "jm_Args layout: does a macro in the '
                     'code string redefine a type?");')
        return "\n".join(lines)


@lru_cache(maxsize=256)
def reduce_args(spec: ReductionSpec) -> ReduceArgs:
    """Pointers (the result, each input, the partials of a grid reduction), rows and count, blocks a
    row and stage (the grid reduction's), the extras, then the kept and reduced loop geometry."""
    fields: list[tuple[str, str, int]] = [("jm_out", f"{ctype(spec.output)}*", 0)]
    if spec.indexed:
        fields.append(("jm_out_index", "int64_t*", 0))
    fields += [(f"jm_in{i}", f"const {ctype(d)}*", 0) for i, d in enumerate(spec.inputs)]
    fields += [("jm_partials", f"{state_type(spec)}*", 0), ("jm_rows", "int64_t", 0), ("jm_count", "int64_t", 0),
               ("jm_blocks", "int64_t", 0), ("jm_stage", "int64_t", 0)]
    fields += extra_fields(spec.extras)
    fields.append(("jm_ksize", "int64_t", spec.kept_ndim))
    fields += [(f"jm_kstride{k}", "int64_t", spec.kept_ndim) for k in kept_operands(spec)]
    fields.append(("jm_rsize", "int64_t", spec.reduced_ndim))
    fields += [(f"jm_rstride{i}", "int64_t", spec.reduced_ndim) for i in range(len(spec.inputs))]
    return packed_args(fields, spec.extras)


def extra_fields(extras: Sequence[str]) -> list[tuple[str, str, int]]:
    """The `jm_extra{k}` fields of the map's extras (int64, float64, bool), in order."""
    return [(f"jm_extra{k}", _EXTRA_FORMAT[d][0], 0) for k, d in enumerate(extras)]


def packed_args(fields: list[tuple[str, str, int]], extras: Sequence[str]) -> ReduceArgs:
    """A `jm_Args` of 8-byte aligned fields (pointers, int64 values and arrays, the extras of
    kinds `extras`, each padded to 8 bytes) and its packer."""
    fmt = "<"
    for name, c_type, count in fields:
        if name.startswith("jm_extra"):
            code = _EXTRA_FORMAT[next(d for k, d in enumerate(extras) if name == f"jm_extra{k}")][1]
            fmt += code + ("7x" if code == "?" else "")
        elif count:
            fmt += f"{count}q"
        else:
            fmt += "Q" if c_type.endswith("*") else "q"
    return ReduceArgs(tuple(fields), struct.Struct(fmt))


def template_call(functor: Functor, args: list[str]) -> str:
    """A call of a user function with the accumulator type as its one type parameter, if it has one."""
    params = functor.template_params
    typed = len(params) == 1 and not params[0].startswith(("int ", "bool "))
    return f"{functor.name}{'<jm_acc_t>' if typed else ''}({', '.join(args)})"


def kept_operands(spec: ReductionSpec) -> range:
    """The operands with kept strides: the result (0), each input (1..n), the indices' output (n+1)."""
    return range(len(spec.inputs) + (2 if spec.indexed else 1))


def state_type(spec: ReductionSpec) -> str:
    """The C type a fold carries: the accumulator, or its pair with an index."""
    return "jm_state_t" if spec.indexed else "jm_acc_t"


def initial(spec: ReductionSpec) -> str:
    """The state a fold starts from: the identity (and no element)."""
    return f"jm_state_t{{{spec.identity}, -1}}" if spec.indexed else spec.identity


def element(binding: ReductionBinding, spec: ReductionSpec, loaded: list[str], index: str) -> str:
    """The state of one element: its mapped value, and with indices its reduced index `index`, or
    where the indices are given (a tree's fold of partials) input 0's value and input 1's index."""
    if spec.indices_given:  # the partials' indices count over the whole reduced extent, not this call's
        return f"jm_state_t{{{mapped(binding, spec, loaded[:1])}, (int64_t)({loaded[1]})}}"
    value = mapped(binding, spec, loaded)
    return f"jm_state_t{{{value}, (int64_t)({index})}}" if spec.indexed else value


def folded(binding: ReductionBinding, spec: ReductionSpec, a: str, b: str) -> str:
    """Two states folded into one: the user's combine, or with indices the generated `jm_pick`."""
    return f"jm_pick({a}, {b})" if spec.indexed else combined(binding, a, b)


def folded_element(binding: ReductionBinding, spec: ReductionSpec, a: str, b: str) -> str:
    """A CUDA thread's state `a` and an element's `b` folded: with indices of the elements' own
    positions `b` always names its element, and `jm_pick_element` skips the check (given
    indices are read from an input, so they keep it)."""
    if spec.indexed and not spec.indices_given:
        return f"jm_pick_element({a}, {b})"
    return folded(binding, spec, a, b)


def stored(binding: ReductionBinding, spec: ReductionSpec, state: str, count: str, offset: str = "jm_k{}") -> str:
    """Statements storing a row's finalized result (and its index), at `offset` of each output
    (a format of the operand number: the result is 0, the indices' output len(inputs) + 1)."""
    value = f"{state}.v" if spec.indexed else state
    text = f"{ARGS}.jm_out[{offset.format(0)}] = {finalized(binding, spec, value, count)};"
    if spec.indexed:
        text += f" {ARGS}.jm_out_index[{offset.format(len(spec.inputs) + 1)}] = {state}.i;"
    return text


def _state_code(binding: ReductionBinding, spec: ReductionSpec, cuda: bool) -> str:
    return pair_code(binding.combine, cuda) if spec.indexed else ""


def pair_code(combine: Functor, cuda: bool) -> str:
    """The pair type, `jm_pick` (which skips states of no element), and on CUDA its warp shuffle."""
    inline = "__device__ __forceinline__ " if cuda else "static inline "
    call = template_call(combine, ["jm_a.v", "jm_a.i", "jm_b.v", "jm_b.i", "jm_r.v", "jm_r.i"])
    text = ("struct jm_state_t { jm_acc_t v; int64_t i; };\n"
            f"{inline}jm_state_t jm_pick(jm_state_t jm_a, jm_state_t jm_b) {{\n"
            "  if (jm_b.i < 0) return jm_a;\n  if (jm_a.i < 0) return jm_b;\n"
            f"  jm_state_t jm_r = jm_a;\n  {call};\n  return jm_r;\n}}\n")
    if cuda:
        # An element's state always names its element: folding one into a thread's accumulator
        # skips jm_pick's check of the second state, a few instructions of the loop's dozens.
        text += (f"{inline}jm_state_t jm_pick_element(jm_state_t jm_a, jm_state_t jm_b) {{\n"
                 f"  if (jm_a.i < 0) return jm_b;\n  jm_state_t jm_r = jm_a;\n  {call};\n  return jm_r;\n}}\n")
        text += (f"{inline}jm_state_t jm_shuffle_xor(jm_state_t jm_s, int jm_off) {{\n"
                 "  return jm_state_t{__shfl_xor_sync(0xffffffffu, jm_s.v, jm_off), "
                 "(int64_t)__shfl_xor_sync(0xffffffffu, (long long)jm_s.i, jm_off)};\n}\n")
    return text


def shuffled(spec: ReductionSpec, state: str, offset: str) -> str:
    """A warp lane's state `offset` lanes over (xor), on CUDA."""
    if spec.indexed:
        return f"jm_shuffle_xor({state}, {offset})"
    return f"__shfl_xor_sync(0xffffffffu, {state}, {offset})"


def mapped(binding: ReductionBinding, spec: Typed, loaded: list[str]) -> str:
    """The accumulator value of one element: `loaded[i]` is input i's storage expression."""
    values = [convert(expr, d, spec.accumulate) for expr, d in zip(loaded, spec.inputs)]
    if binding.map is None:
        return values[0]
    args = []
    for role, index in binding.map.roles:
        args.append(values[index] if role == INPUT else f"{ARGS}.jm_extra{index}" if role == EXTRA else "")
    return f"(jm_acc_t){template_call(binding.map.functor, args)}"


def combined(binding: ReductionBinding, a: str, b: str) -> str:
    return f"(jm_acc_t){template_call(binding.combine, [a, b])}"


def finalized(binding: ReductionBinding, spec: Typed, acc: str, count: str) -> str:
    """The value stored for a row: the result finalized with its count, in the output's dtype."""
    if binding.finalize is not None:
        acc = f"(jm_acc_t){template_call(binding.finalize, [acc, f'(int64_t)({count})'])}"
    return convert(acc, spec.accumulate, spec.output)


def render_with(binding: ReductionBinding, spec: ReductionSpec, backend: str, kernel: str) -> str:
    """Prelude, the accumulator's typedef, the user's code under its `#line`, `jm_Args`, the kernel."""
    middle = _state_code(binding, spec, backend == "cuda") + reduce_args(spec).declaration() + "\n"
    return source_around(binding.code, spec.accumulate, backend, middle + kernel)


def source_around(code: str, accumulate: str, backend: str, kernel: str) -> str:
    """A kernel's whole source: the prelude, the accumulator's typedef and the special values, the
    user's `code` under its `#line`, its macros undefined, then `kernel` (the generated rest)."""
    head = prelude("cuda" if backend == "cuda" else "host", "complex" in code)
    head += f"\ntypedef {ctype(accumulate)} jm_acc_t;\ntypedef int64_t jm_index_t;\n"
    head += _SPECIAL_VALUES[backend == "cuda"]
    return with_user_code(head, code) + kernel


def _odometer(ndim: int, rest: str, sizes: str, strides: list[tuple[str, str]]) -> list[str]:
    """Statements splitting index `rest` into coordinates of `ndim` dims (innermost first) and adding
    each times its stride to each offset (`strides`: (offset, stride array) pairs). The outermost
    coordinate is what is left, with no division: a 64-bit division costs tens of instructions on
    a GPU, and one-dim walks (most, once coalesced) then need none."""
    lines = []
    for d in range(ndim):
        split = f"{rest} % {sizes}[{d}]; {rest} /= {sizes}[{d}];" if d < ndim - 1 else f"{rest};"
        lines.append(f"{{ const jm_index_t jm_c = {split}")
        lines.append("  " + " ".join(f"{offset} += jm_c * {array}[{d}];" for offset, array in strides) + " }")
    return lines


def kept_offsets(spec: ReductionSpec, row: str, operands: Sequence[int]) -> list[str]:
    """Statements setting `jm_k{k}`, operand k's offset of output element `row` (0: the output)."""
    lines = [f"jm_index_t {', '.join(f'jm_k{k} = 0' for k in operands)}, jm_krest = {row};"]
    return lines + _odometer(spec.kept_ndim, "jm_krest", f"{ARGS}.jm_ksize",
                             [(f"jm_k{k}", f"{ARGS}.jm_kstride{k}") for k in operands])


def reduced_offsets(spec: ReductionSpec, index: str) -> list[str]:
    """Statements adding to `jm_o{i}` input i's offset of reduced element `index`."""
    return [f"jm_index_t jm_rrest = {index};"] + _odometer(
        spec.reduced_ndim, "jm_rrest", f"{ARGS}.jm_rsize",
        [(f"jm_o{i}", f"{ARGS}.jm_rstride{i}") for i in range(len(spec.inputs))])
