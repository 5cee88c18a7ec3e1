"""A CUDA thread's loop over its elements in a reduction with indices (argmax): the loads of
INDEXED_LOADS steps issued before any of their folds.

The pair's combine compiles to branches (the user's `||`, the check of a state of no element), and
the compiler issues no load past a branch: with the `#pragma unroll 4` loop of plain folds, each
step's load waited behind the previous step's folds, one load in flight a thread, too few bytes
to keep the memory busy (the columns path's SASS on sm_90: LDG, a dozen branches, the next LDG).
Here each batch of steps loads into registers first, then folds them in the same order as before,
so the result is the same bit for bit. The first step of a thread sets its accumulators to its
elements' states outright (the fold of the identity with an element gives the element), so every
later fold calls the combine directly (`jm_pick_next`), without `jm_pick_element`'s check. With
`spec.index32` (planned where fewer than 2^31 elements are reduced) the loop's states are
`jm_narrow_t`, a 32-bit index (`jm_pick_narrow`), widened once after the loop: the combine keeps
one of its two pairs, so its int64 indices hold the same values (grid path on sm_90: 38 registers
with 64-bit indices, 32 with these).

Only reductions with indices of the elements' own positions take this loop (`batched`): a plain
fold's short body the compiler unrolls and schedules by itself, and a fold of given indices (a
Dask tree's partials) may read states of no element, which need the check.
"""
from __future__ import annotations

from collections.abc import Callable

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels.reduce_common import ARGS, element, mapped, template_call
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.reduce_spec import ReductionSpec

INDEXED_LOADS = 4  # steps a thread loads before folding them (0: the unrolled loop of plain folds)
# 1: where fewer than 2^31 elements are reduced, a thread's loop carries its index in 32 bits
# (`jm_narrow_t`), widened once after it: a 64-bit index costs a carry a step and two compares
# and selects a fold. The combine still sees int64 indices, of the same values.
INDEXED_INDEX32 = 1

# load(position, slot) -> the statements reading the step at `position` into slot `slot` of each input's
# registers; fold(position, slot, first) -> the statements folding that slot's elements.
Step = Callable[[str, str], CodeBlock]
Fold = Callable[[str, str, bool], CodeBlock]


def batched(spec: ReductionSpec) -> bool:
    """Whether a CUDA spec's element loops take the batched form."""
    return spec.indexed and not spec.indices_given and INDEXED_LOADS > 0


def narrow(count: int) -> bool:
    """Whether a call reducing `count` elements a row carries 32-bit indices in its loops."""
    return bool(INDEXED_INDEX32) and count < 1 << 31


def helpers(binding: ReductionBinding, spec: ReductionSpec, kernel: str) -> CodeBlock:
    """`jm_pick_next`, the fold of two states that both name an element, where `kernel` calls it
    (not the grid path's strided shares, which keep their loop); with `spec.index32` the same on
    `jm_narrow_t`, a state of a 32-bit index, whose index the combine gets and gives as int64."""
    code = CodeBlock()
    if batched(spec) and "jm_pick_next(" in kernel:
        call = template_call(binding.combine, ["jm_a.v", "jm_a.i", "jm_b.v", "jm_b.i", "jm_r.v", "jm_r.i"])
        with code.block("__device__ __forceinline__ jm_state_t jm_pick_next(jm_state_t jm_a, jm_state_t jm_b)"):
            code.line(f"jm_state_t jm_r = jm_a;\n{call};\nreturn jm_r;")
    if batched(spec) and "jm_pick_narrow(" in kernel:
        code.line("struct jm_narrow_t { jm_acc_t v; int32_t i; };")
        call = template_call(binding.combine, ["jm_a.v", "(int64_t)jm_a.i", "jm_b.v", "(int64_t)jm_b.i", "jm_v",
                                               "jm_i"])
        with code.block("__device__ __forceinline__ jm_narrow_t jm_pick_narrow(jm_narrow_t jm_a, jm_narrow_t jm_b)"):
            code.line(f"jm_acc_t jm_v = jm_a.v;\nint64_t jm_i = jm_a.i;\n{call};\n"
                      "return jm_narrow_t{jm_v, (int32_t)jm_i};")
    return code


def registers(spec: ReductionSpec, width: int) -> str:
    """The declarations of each input's registers: INDEXED_LOADS vectors of `width` elements."""
    return " ".join(f"jm_vec<{ctype(d)}, {width}> jm_b{i}[{INDEXED_LOADS}];" for i, d in enumerate(spec.inputs))


def thread_loop(code: CodeBlock, var: str, end: str, step: str, load: Step, fold: Fold) -> None:
    """Positions `var` (declared and set by the caller), `var + step`, ... below `end`: the first
    on its own (it starts the accumulators), then batches of INDEXED_LOADS, then the rest one by one."""
    batch = INDEXED_LOADS
    with code.block(f"if ({var} < {end})"):
        code.extend(load(var, "0"))
        code.extend(fold(var, "0", True))
        code.line(f"{var} += {step};")
    with code.block(f"for (; {var} + {batch - 1} * ({step}) < {end}; {var} += {batch} * ({step}))"):
        code.line("#pragma unroll")
        with code.block(f"for (int jm_u = 0; jm_u < {batch}; ++jm_u)"):
            code.extend(load(f"{var} + jm_u * ({step})", "jm_u"))
        code.line("#pragma unroll")
        with code.block(f"for (int jm_u = 0; jm_u < {batch}; ++jm_u)"):
            code.extend(fold(f"{var} + jm_u * ({step})", "jm_u", False))
    with code.block(f"for (; {var} < {end}; {var} += {step})"):
        code.extend(load(var, "0"))
        code.extend(fold(var, "0", False))


def picked(binding: ReductionBinding, spec: ReductionSpec, acc: str, slot: str, lane: str, index: str,
           first: bool) -> str:
    """The statement folding lane `lane` of slot `slot` (reduced index `index`) into `acc`, or
    with `first` setting `acc` to it."""
    loaded = [f"jm_b{i}[{slot}].jm_v[{lane}]" for i in range(len(spec.inputs))]
    if spec.index32:
        value, pick = f"jm_narrow_t{{{mapped(binding, spec, loaded)}, (int32_t)({index})}}", "jm_pick_narrow"
    else:
        value, pick = element(binding, spec, loaded, index), "jm_pick_next"
    return f"{acc} = {value};" if first else f"{acc} = {pick}({acc}, {value});"


def accumulators(spec: ReductionSpec, code: CodeBlock, acc: str, count: int) -> str:
    """The name the loop folds into: `acc` itself, or with `spec.index32` narrow accumulators
    declared here (as many as `acc` holds: 0, a plain variable), which `widened` copies back."""
    if not spec.index32:
        return acc
    name, identity = f"jm_n{acc.removeprefix('jm_')}", f"jm_narrow_t{{{spec.identity}, -1}}"
    if not count:
        code.line(f"jm_narrow_t {name} = {identity};")
        return name
    code.line(f"jm_narrow_t {name}[{count}];")
    code.line(f"for (int jm_c = 0; jm_c < {count}; ++jm_c) {name}[jm_c] = {identity};")
    return f"{name}[jm_c]"


def widened(spec: ReductionSpec, code: CodeBlock, acc: str, count: int) -> None:
    """After the loop, with `spec.index32`: `acc` (or its `count` elements) from the narrow ones."""
    if spec.index32:
        name = f"jm_n{acc.removeprefix('jm_')}"
        loop = f"for (int jm_c = 0; jm_c < {count}; ++jm_c) " if count else ""
        each = "[jm_c]" if count else ""
        code.line(f"{loop}{acc}{each} = jm_state_t{{{name}{each}.v, (int64_t){name}{each}.i}};")


def dense_loop(binding: ReductionBinding, spec: ReductionSpec, lane: str, step: str, base: str, count: str,
               first: str) -> CodeBlock:
    """parts.dense_row's loop in the batched form: `spec.vec` elements a load, from vector `lane`
    on, `step` elements between a thread's loads (an expression)."""
    ins, vec = range(len(spec.inputs)), spec.vec

    def load(position: str, slot: str) -> CodeBlock:
        code = CodeBlock()
        for i in ins:
            vector = f"jm_vec<{ctype(spec.inputs[i])}, {vec}>"
            pointer = f"{ARGS}.jm_in{i} + {base.format(i, i + 1)} + {position}"
            code.line(f"jm_b{i}[{slot}] = *reinterpret_cast<const {vector}*>({pointer});")
        return code

    def fold(position: str, slot: str, start: bool) -> CodeBlock:
        code = CodeBlock()
        if start:
            code.line(picked(binding, spec, acc, slot, "0", f"{first}{position}", True))
        code.line("#pragma unroll")
        with code.block(f"for (int jm_e = {1 if start else 0}; jm_e < {vec}; ++jm_e)"):
            code.line(picked(binding, spec, acc, slot, "jm_e", f"{first}{position} + jm_e", False))
        return code

    code = CodeBlock(registers(spec, vec))
    acc = accumulators(spec, code, "jm_acc", 0)
    code.line(f"jm_index_t jm_j = (jm_index_t)({lane}) * {vec};")
    thread_loop(code, "jm_j", count, step, load, fold)
    widened(spec, code, "jm_acc", 0)
    return code


def column_loop(binding: ReductionBinding, spec: ReductionSpec, offsets: Callable[[str], list[str]],
                start: str, rows: int) -> CodeBlock:
    """parts.columns' loop in the batched form: reduced elements `start`, `start + rows`, ..., each
    a load of `spec.vec` neighbouring columns an input at the offsets `offsets(index)` sets."""
    ins, width = range(len(spec.inputs)), spec.vec

    def load(position: str, slot: str) -> CodeBlock:
        code = CodeBlock()
        with code.block(""):
            code.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_k{i + 1}" for i in ins) + ";")
            for line in offsets(position):
                code.line(line)
            for i in ins:
                vector = f"jm_vec<{ctype(spec.inputs[i])}, {width}>"
                code.line(f"jm_b{i}[{slot}] = *reinterpret_cast<const {vector}*>({ARGS}.jm_in{i} + jm_o{i});")
        return code

    def fold(position: str, slot: str, first: bool) -> CodeBlock:
        code = CodeBlock("#pragma unroll")
        with code.block(f"for (int jm_c = 0; jm_c < {width}; ++jm_c)"):
            code.line(picked(binding, spec, acc, slot, "jm_c", position, first))
        return code

    code = CodeBlock(registers(spec, width))
    acc = accumulators(spec, code, "jm_acc", width) if spec.index32 else "jm_acc[jm_c]"
    code.line(f"jm_index_t jm_r = {start};")
    thread_loop(code, "jm_r", f"{ARGS}.jm_count", str(rows), load, fold)
    widened(spec, code, "jm_acc", width)
    return code
