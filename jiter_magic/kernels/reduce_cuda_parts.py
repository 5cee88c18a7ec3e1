"""Device code the CUDA reduction kernel paths (reduce_cuda.py) are made of: the warp's and the
block's folds, a thread's fold of a dense row or of a strided share, and the bodies of the columns,
grid and dense runs paths."""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels import reduce_cuda_loads as loads
from jiter_magic.kernels.reduce_common import (
    ARGS,
    element,
    folded,
    folded_element,
    initial,
    kept_offsets,
    kept_operands,
    reduced_offsets,
    shuffled,
    state_type,
    stored,
)
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.reduce_spec import ReductionSpec

BLOCK = 256  # threads a block, on every path
WARPS = BLOCK // 32


def folds(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """Device functions: a warp's butterfly fold (every lane gets it) and a block's (thread 0 gets it)."""
    state = state_type(spec)
    code = CodeBlock()
    with code.block(f"__device__ __forceinline__ {state} jm_warp_fold({state} jm_v)"):
        code.line("#pragma unroll")
        with code.block("for (int jm_off = 16; jm_off > 0; jm_off >>= 1)"):
            code.line(f"jm_v = {folded(binding, spec, 'jm_v', shuffled(spec, 'jm_v', 'jm_off'))};")
        code.line("return jm_v;")
    with code.block(f"__device__ __forceinline__ {state} jm_block_fold({state} jm_v, {state}* jm_shared)"):
        code.line("const unsigned int jm_t = jm_thread_y() * 32 + jm_thread_x();")
        code.line("jm_v = jm_warp_fold(jm_v);")
        code.line("if (jm_t % 32 == 0) jm_shared[jm_t / 32] = jm_v;")
        code.line("__syncthreads();")
        with code.block("if (jm_t < 32)"):
            code.line(f"jm_v = jm_t < {WARPS} ? jm_shared[jm_t] : jm_shared[0];")
            # Lanes 0..WARPS-1 hold the warps' folds, the others a copy of warp 0's: with xor offsets
            # below WARPS (a power of two), lane 0's butterfly reads lanes 0..WARPS-1 only.
            code.line("#pragma unroll")
            with code.block(f"for (int jm_off = {WARPS // 2}; jm_off > 0; jm_off >>= 1)"):
                code.line(f"jm_v = {folded(binding, spec, 'jm_v', shuffled(spec, 'jm_v', 'jm_off'))};")
        code.line("return jm_v;")
    return code


def dense_row(binding: ReductionBinding, spec: ReductionSpec, lane: str, step: int | str, *,
              base: str = "jm_k{1}", count: str = f"{ARGS}.jm_count", first: str = "") -> CodeBlock:
    """A thread's fold of a dense row from vector `lane` on, `step` threads (an expression on the
    grid path) sharing it: `count` elements from input i's offset `base.format(i, i + 1)` (the
    runs path: one run of a row), the first of them reduced element `{first}0`."""
    ins, vec = range(len(spec.inputs)), spec.vec
    stride = step * vec if isinstance(step, int) else f"(jm_index_t)({step}) * {vec}"
    code = CodeBlock(f"{state_type(spec)} jm_acc = {initial(spec)};")
    if loads.batched(spec):
        code.extend(loads.dense_loop(binding, spec, lane, str(stride), base, count, first))
        return code
    unrolled(code, spec)
    with code.block(f"for (jm_index_t jm_j = (jm_index_t)({lane}) * {vec}; jm_j < {count}; jm_j += {stride})"):
        for i in ins:
            vector = f"jm_vec<{ctype(spec.inputs[i])}, {vec}>"
            pointer = f"{ARGS}.jm_in{i} + {base.format(i, i + 1)} + jm_j"
            code.line(f"const {vector} jm_v{i} = *reinterpret_cast<const {vector}*>({pointer});")
        code.line("#pragma unroll")
        with code.block(f"for (int jm_e = 0; jm_e < {vec}; ++jm_e)"):
            loaded = [f"jm_v{i}.jm_v[jm_e]" for i in ins]
            index = f"{first}jm_j + jm_e"
            code.line(f"jm_acc = {folded_element(binding, spec, 'jm_acc', element(binding, spec, loaded, index))};")
    return code


def unrolled(code: CodeBlock, spec: ReductionSpec) -> None:
    """With indices, unroll a thread's loop over elements 4 times, so that it issues the loads of 4
    steps before their folds: the compiler unrolls a plain fold's short body by itself, but not a
    pair's longer one, whose thread then waits for each load in turn (too few bytes in flight to
    keep the memory busy). The folds stay in the same order."""
    if spec.indexed:
        code.line("#pragma unroll 4")


def strided_share(binding: ReductionBinding, spec: ReductionSpec, first: str, step: str) -> CodeBlock:
    """A thread's fold of reduced elements `first`, `first + step`, ... of the row at the bases."""
    ins = range(len(spec.inputs))
    code = CodeBlock(f"{state_type(spec)} jm_acc = {initial(spec)};")
    with code.block(f"for (jm_index_t jm_r = {first}; jm_r < {ARGS}.jm_count; jm_r += {step})"):
        code.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_k{i + 1}" for i in ins) + ";")
        for line in reduced_offsets(spec, "jm_r"):
            code.line(line)
        loaded = [f"{ARGS}.jm_in{i}[jm_o{i}]" for i in ins]
        code.line(f"jm_acc = {folded_element(binding, spec, 'jm_acc', element(binding, spec, loaded, 'jm_r'))};")
    return code


def columns(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """The columns path, `spec.vec` neighbouring output elements a thread (1, or _column_width's):
    each reduced element's group of them read as one access and folded into one accumulator each,
    then the block's 8 rows of threads folded in their order through shared memory."""
    width, state = spec.vec, state_type(spec)
    operands = kept_operands(spec)
    code = CodeBlock(f"__shared__ {state} jm_shared[{WARPS * 33 * width}];")
    code.line(f"const jm_index_t jm_row = ((jm_index_t)jm_block_x() * 32 + jm_thread_x()) * {width};")
    code.line(f"const bool jm_active = jm_row < {ARGS}.jm_rows;")
    code.extend(CodeBlock(*kept_offsets(spec, "jm_active ? jm_row : 0", operands)))
    code.line(f"{state} jm_acc[{width}];")
    code.line(f"for (int jm_c = 0; jm_c < {width}; ++jm_c) jm_acc[jm_c] = {initial(spec)};")
    start = f"jm_active ? (jm_index_t)jm_thread_y() : {ARGS}.jm_count"
    if loads.batched(spec):
        code.extend(loads.column_loop(binding, spec, lambda index: reduced_offsets(spec, index), start, WARPS))
    else:
        _column_folds(binding, spec, code, start)
    code.line("#pragma unroll")
    with code.block(f"for (int jm_c = 0; jm_c < {width}; ++jm_c)"):
        code.line(f"jm_shared[(jm_c * {WARPS} + jm_thread_y()) * 33 + jm_thread_x()] = jm_acc[jm_c];")
    code.line("__syncthreads();")
    with code.block("if (jm_thread_y() == 0 && jm_active)"):
        with code.block(f"for (int jm_c = 0; jm_c < {width}; ++jm_c)"):
            code.line(f"{state} jm_total = jm_shared[jm_c * {WARPS * 33} + jm_thread_x()];")
            partial = f"jm_shared[(jm_c * {WARPS} + jm_w) * 33 + jm_thread_x()]"
            code.line(f"for (int jm_w = 1; jm_w < {WARPS}; ++jm_w) jm_total = "
                      f"{folded(binding, spec, 'jm_total', partial)};")
            # Output element jm_row + jm_c: the group never crosses the innermost kept dim, so it
            # is jm_c steps of that dim's stride past jm_row's.
            code.line(stored(binding, spec, "jm_total", f"{ARGS}.jm_count",
                             f"jm_k{{0}} + jm_c * {ARGS}.jm_kstride{{0}}[0]"))
    return code


def _column_folds(binding: ReductionBinding, spec: ReductionSpec, code: CodeBlock, start: str) -> None:
    """The columns path's loop of plain folds, one reduced element at a time from `start`."""
    width, ins = spec.vec, range(len(spec.inputs))
    unrolled(code, spec)
    with code.block(f"for (jm_index_t jm_r = {start}; jm_r < {ARGS}.jm_count; jm_r += {WARPS})"):
        code.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_k{i + 1}" for i in ins) + ";")
        for line in reduced_offsets(spec, "jm_r"):
            code.line(line)
        loaded = [f"{ARGS}.jm_in{i}[jm_o{i}]" for i in ins]  # one column a thread: plain loads
        if width > 1:
            for i in ins:
                vector = f"jm_vec<{ctype(spec.inputs[i])}, {width}>"
                code.line(f"const {vector} jm_v{i} = *reinterpret_cast<const {vector}*>({ARGS}.jm_in{i} + jm_o{i});")
            loaded = [f"jm_v{i}.jm_v[jm_c]" for i in ins]
        code.line("#pragma unroll")
        with code.block(f"for (int jm_c = 0; jm_c < {width}; ++jm_c)"):
            value = element(binding, spec, loaded, "jm_r")
            code.line(f"jm_acc[jm_c] = {folded_element(binding, spec, 'jm_acc[jm_c]', value)};")


def stage_one(binding: ReductionBinding, spec: ReductionSpec, store: str) -> CodeBlock:
    """Stage 1 of the two-stage paths (grid, dense runs): a block a row folds the row's
    `jm_blocks` partials, each thread a strided share, then the block's fold; one thread a row
    would read a full reduction's 1024 partials one after another."""
    state = state_type(spec)
    code = CodeBlock()
    with code.block(f"if ({ARGS}.jm_stage == 1)"):
        code.line("const jm_index_t jm_row = (jm_index_t)jm_block_x();")
        # The outputs' offsets alone: an input's jm_k stays 0, unused.
        outputs = [0, len(spec.inputs) + 1] if spec.indexed else [0]
        code.extend(CodeBlock(*kept_offsets(spec, "jm_row", outputs)))
        code.line(f"const {state}* jm_p = {ARGS}.jm_partials + jm_row * {ARGS}.jm_blocks;")
        code.line(f"{state} jm_acc = {initial(spec)};")
        code.line(f"for (jm_index_t jm_g = jm_thread_x(); jm_g < {ARGS}.jm_blocks; jm_g += {BLOCK}) "
                  f"jm_acc = {folded(binding, spec, 'jm_acc', 'jm_p[jm_g]')};")
        code.line("jm_acc = jm_block_fold(jm_acc, jm_shared);")
        code.line(f"if (jm_thread_x() == 0) {{ {store} }}")
        code.line("return;")
    return code


def stage_zero_end(store: str) -> CodeBlock:
    """The end of stage 0 of the two-stage paths: the block's fold, then its partial `jm_g` of
    the row, or with one block a row the result."""
    code = CodeBlock("jm_acc = jm_block_fold(jm_acc, jm_shared);")
    with code.block("if (jm_thread_x() == 0)"):
        code.line(f"if ({ARGS}.jm_blocks == 1) {{ {store} }}")
        code.line(f"else {ARGS}.jm_partials[jm_row * {ARGS}.jm_blocks + jm_g] = jm_acc;")
    return code


def grid_body(binding: ReductionBinding, spec: ReductionSpec, store: str) -> CodeBlock:
    code = stage_one(binding, spec, store)
    code.line(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() / {ARGS}.jm_blocks, "
              f"jm_g = (jm_index_t)jm_block_x() % {ARGS}.jm_blocks;")
    code.extend(CodeBlock(*kept_offsets(spec, "jm_row", kept_operands(spec))))
    first, step = f"jm_g * {BLOCK} + jm_thread_x()", f"{ARGS}.jm_blocks * {BLOCK}"
    if spec.vec > 1:  # a dense row read with vector loads (choose_path gives vec > 1 only then)
        code.extend(dense_row(binding, spec, first, step))
    else:
        code.extend(strided_share(binding, spec, first, step))
    code.extend(stage_zero_end(store))
    return code


def runs_body(binding: ReductionBinding, spec: ReductionSpec, store: str) -> CodeBlock:
    """The dense runs path: stage 0 a block an equal share of a row's runs (jm_g of the row's
    jm_blocks shares, in order), each run (the innermost reduced dim) read with the row paths'
    vector loads from its start, whose offset the outer reduced dims give; stage 1 folds each
    row's partials as the grid path does (with one share a row, stage 0 stores the result)."""
    ins, state = range(len(spec.inputs)), state_type(spec)
    code = stage_one(binding, spec, store)
    code.line(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() / {ARGS}.jm_blocks, "
              f"jm_g = (jm_index_t)jm_block_x() % {ARGS}.jm_blocks;")
    code.extend(CodeBlock(*kept_offsets(spec, "jm_row", kept_operands(spec))))
    code.line(f"const jm_index_t jm_runs = {ARGS}.jm_count / {ARGS}.jm_rsize[0], "
              f"jm_share = (jm_runs + {ARGS}.jm_blocks - 1) / {ARGS}.jm_blocks;")
    code.line(f"{state} jm_total = {initial(spec)};")
    with code.block("for (jm_index_t jm_q = jm_g * jm_share; jm_q < jm_runs && jm_q < (jm_g + 1) * jm_share; ++jm_q)"):
        # The run's first element is reduced element jm_q * (the innermost reduced size): its
        # coordinate in that dim is 0, and the odometer gives the outer dims' offsets.
        code.line(f"const jm_index_t jm_first = jm_q * {ARGS}.jm_rsize[0];")
        code.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_k{i + 1}" for i in ins) + ";")  # input i's run start
        code.extend(CodeBlock(*reduced_offsets(spec, "jm_first")))
        code.extend(dense_row(binding, spec, "jm_thread_x()", BLOCK, base="jm_o{0}", count=f"{ARGS}.jm_rsize[0]",
                              first="jm_first + "))
        code.line(f"jm_total = {folded(binding, spec, 'jm_total', 'jm_acc')};")
    code.line(f"{state} jm_acc = jm_total;")
    code.extend(stage_zero_end(store))
    return code
