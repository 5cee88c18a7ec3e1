"""A CUDA thread's loop over its elements in a reduction with indices (argmax): the loads of
INDEXED_LOADS steps issued before any of their folds.

The pair's combine compiles to branches (the user's `||`, the check of a state of no element), and
the compiler issues no load past a branch: with the `#pragma unroll 4` loop of plain folds, each
step's load waited behind the previous step's folds, one load in flight a thread, too few bytes
to keep the memory busy (the columns path's SASS on sm_90: LDG, a dozen branches, the next LDG).
Here each batch of steps loads into registers first, then folds them in the same order as before,
so the result is the same bit for bit. The first step of a thread sets its accumulators to its
elements' states outright (the fold of the identity with an element gives the element), so every
later fold calls the combine directly (`jm_pick_next`), without `jm_pick_element`'s check.

Only reductions with indices of the elements' own positions take this loop (`batched`): a plain
fold's short body the compiler unrolls and schedules by itself, and a fold of given indices (a
Dask tree's partials) may read states of no element, which need the check.
"""
from __future__ import annotations

from collections.abc import Callable

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels.reduce_common import ARGS, element, template_call
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.reduce_spec import ReductionSpec

INDEXED_LOADS = 4  # steps a thread loads before folding them (0: the unrolled loop of plain folds)

# load(position, slot) -> the statements reading the step at `position` into slot `slot` of each input's
# registers; fold(position, slot, first) -> the statements folding that slot's elements.
Step = Callable[[str, str], CodeBlock]
Fold = Callable[[str, str, bool], CodeBlock]


def batched(spec: ReductionSpec) -> bool:
    """Whether a CUDA spec's element loops take the batched form."""
    return spec.indexed and not spec.indices_given and INDEXED_LOADS > 0


def helpers(binding: ReductionBinding, spec: ReductionSpec, kernel: str) -> CodeBlock:
    """`jm_pick_next`, the fold of two states that both name an element, where `kernel` calls it
    (not the grid path's strided shares, which keep their loop)."""
    code = CodeBlock()
    if batched(spec) and "jm_pick_next(" in kernel:
        call = template_call(binding.combine, ["jm_a.v", "jm_a.i", "jm_b.v", "jm_b.i", "jm_r.v", "jm_r.i"])
        with code.block("__device__ __forceinline__ jm_state_t jm_pick_next(jm_state_t jm_a, jm_state_t jm_b)"):
            code.line(f"jm_state_t jm_r = jm_a;\n{call};\nreturn jm_r;")
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
    value = element(binding, spec, [f"jm_b{i}[{slot}].jm_v[{lane}]" for i in range(len(spec.inputs))], index)
    return f"{acc} = {value};" if first else f"{acc} = jm_pick_next({acc}, {value});"


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
            code.line(picked(binding, spec, "jm_acc", slot, "0", f"{first}{position}", True))
        code.line("#pragma unroll")
        with code.block(f"for (int jm_e = {1 if start else 0}; jm_e < {vec}; ++jm_e)"):
            code.line(picked(binding, spec, "jm_acc", slot, "jm_e", f"{first}{position} + jm_e", False))
        return code

    code = CodeBlock(registers(spec, vec))
    code.line(f"jm_index_t jm_j = (jm_index_t)({lane}) * {vec};")
    thread_loop(code, "jm_j", count, step, load, fold)
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
            code.line(picked(binding, spec, "jm_acc[jm_c]", slot, "jm_c", position, first))
        return code

    code = CodeBlock(registers(spec, width))
    code.line(f"jm_index_t jm_r = {start};")
    thread_loop(code, "jm_r", f"{ARGS}.jm_count", str(rows), load, fold)
    return code
