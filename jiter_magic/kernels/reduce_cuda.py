"""The CUDA reduction kernels, one a call's shape, each deterministic (no atomics, fixed orders).

- warp_rows: dense rows of fewer than ROW_BLOCK_COUNT elements, a warp a row (8 a block), lanes
  striding along the row with vector loads, folded by a butterfly of shuffles.
- block_rows: longer dense rows, a block of BLOCK threads a row, warps folded through shared memory.
- columns: the reduced dims outside the kept ones (summing over dim 0 of a row-major matrix):
  32 neighbouring output elements a block, so that a warp reads 32 neighbouring elements of each
  reduced row (coalesced), the reduced extent split over the block's 8 rows of threads and folded
  in their order through shared memory; 1- and 2-byte elements 4 bytes' worth of columns a
  thread (`_column_width`), so that a warp still reads 128 bytes.
- grid: everything else (a full reduction, a few long or strided rows): `blocks` blocks a row each
  fold a strided share into a partial (stage 0), then a block a row folds the row's partials,
  each thread a strided share of them, then the block's fold (stage 1, the same kernel launched
  again); with one block a row stage 0 stores the result.
  Where each row is one dense run (a full reduction of a contiguous array), the shares are read
  with the row paths' vector loads.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels.reduce_common import (
    ARGS,
    element,
    folded,
    initial,
    kept_offsets,
    kept_operands,
    reduced_offsets,
    render_with,
    shuffled,
    state_type,
    stored,
)
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.reduce_layout import ReductionLayout
from jiter_magic.planning.reduce_spec import BLOCK_ROWS, COLUMNS, GRID, WARP_ROWS, ReductionSpec

BLOCK = 256  # threads a block, on every path
WARPS = BLOCK // 32
ROW_BLOCK_COUNT = 4096  # dense rows this long get a block each, shorter ones a warp
MIN_ROWS = 64  # fewer output elements than this: the grid path spreads each over several blocks
GRID_ELEMENTS = BLOCK * 8  # elements a block of the grid path folds at least
MAX_GRID_BLOCKS = 1024  # blocks a row at most on the grid path (stage 1 folds their partials)

Grid = tuple[int, int, int]


def choose_path(layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> tuple[str, int]:
    """The kernel shape of a call and its vector width (elements a load, 1 where rows are not aligned)."""
    if layout.inner_reduced_dense:
        vec = _vector_width(layout, inputs, pointers)
        if layout.rows >= MIN_ROWS:
            return (WARP_ROWS if layout.count < ROW_BLOCK_COUNT else BLOCK_ROWS), vec
        return GRID, vec
    if layout.kept_sizes and all(s[0] == 1 for s in layout.input_kept_strides) and layout.rows >= MIN_ROWS:
        return COLUMNS, _column_width(layout, inputs, pointers)
    return GRID, 1


def _vector_width(layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int:
    """16-byte loads (at most 8 elements) where every input has one itemsize and every row starts aligned."""
    sizes = {DTYPES[d].itemsize for d in inputs}
    if len(sizes) != 1:
        return 1
    vec = min(16 // sizes.pop(), 8)
    aligned = all(p % 16 == 0 for p in pointers) and all(s % vec == 0 for st in layout.input_kept_strides for s in st)
    return vec if aligned and layout.count % vec == 0 else 1


def _column_width(layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int:
    """Neighbouring columns a thread folds together on the columns path: as many 1- or 2-byte
    elements as fill 4 bytes, read as one access (a warp then reads 128 bytes of a reduced row, not
    32 or 64), where every group of them starts aligned: the innermost kept size a multiple of
    the width, aligned pointers, every other stride a multiple of it. 4-byte and wider: 1."""
    sizes = {DTYPES[d].itemsize for d in inputs}
    if len(sizes) != 1 or (size := sizes.pop()) >= 4:
        return 1
    width = 4 // size
    strides = [s for st in layout.input_kept_strides for s in st[1:]] + [s for st in layout.reduced_strides for s in st]
    if layout.kept_sizes[0] % width or any(p % 4 for p in pointers) or any(s % width for s in strides):
        return 1
    return width


def grid_blocks(layout: ReductionLayout) -> int:
    """Blocks a row on the grid path: enough for the count, fewer the more rows there are."""
    wanted = -(-layout.count // GRID_ELEMENTS)
    return max(1, min(wanted, MAX_GRID_BLOCKS, max(1, 4096 // max(layout.rows, 1))))


def block_of(spec: ReductionSpec) -> Grid:
    """The thread block of every launch of `spec`: 32 x WARPS where a block folds 32-wide groups
    (a warp a row, 32 columns), else BLOCK threads in one dimension."""
    return (32, WARPS, 1) if spec.path in (WARP_ROWS, COLUMNS) else (BLOCK, 1, 1)


def partials_of(spec: ReductionSpec, rows: int, blocks: int) -> tuple[int, str]:
    """The size and dtype of the partials buffer of a grid reduction over several blocks: one state
    a block of each row; a pair (value, index) takes 16 bytes, two int64 slots, whatever the
    accumulator."""
    return (rows * blocks * 2, "int64") if spec.indexed else (rows * blocks, spec.accumulate)


def launches(spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, Grid, int]]:
    """(grid, block, stage) of each launch of a call."""
    block = block_of(spec)
    if spec.path == WARP_ROWS:
        return [((-(-rows // WARPS), 1, 1), block, 0)]
    if spec.path == BLOCK_ROWS:
        return [((rows, 1, 1), block, 0)]
    if spec.path == COLUMNS:
        return [((-(-rows // (32 * spec.vec)), 1, 1), block, 0)]
    first = ((rows * blocks, 1, 1), block, 0)
    return [first] if blocks == 1 else [first, ((rows, 1, 1), block, 1)]


def _folds(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
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


def _dense_row(binding: ReductionBinding, spec: ReductionSpec, lane: str, step: int | str) -> CodeBlock:
    """A thread's fold of a dense row from vector `lane` on, `step` threads (an expression on the
    grid path) sharing it."""
    ins, vec = range(len(spec.inputs)), spec.vec
    code = CodeBlock(f"{state_type(spec)} jm_acc = {initial(spec)};")
    with code.block(f"for (jm_index_t jm_j = (jm_index_t)({lane}) * {vec}; jm_j < {ARGS}.jm_count; "
                    f"jm_j += {step * vec if isinstance(step, int) else f'(jm_index_t)({step}) * {vec}'})"):
        for i in ins:
            vector = f"jm_vec<{ctype(spec.inputs[i])}, {vec}>"
            pointer = f"{ARGS}.jm_in{i} + jm_k{i + 1} + jm_j"
            code.line(f"const {vector} jm_v{i} = *reinterpret_cast<const {vector}*>({pointer});")
        code.line("#pragma unroll")
        with code.block(f"for (int jm_e = 0; jm_e < {vec}; ++jm_e)"):
            loaded = [f"jm_v{i}.jm_v[jm_e]" for i in ins]
            code.line(f"jm_acc = {folded(binding, spec, 'jm_acc', element(binding, spec, loaded, 'jm_j + jm_e'))};")
    return code


def _strided_share(binding: ReductionBinding, spec: ReductionSpec, first: str, step: str) -> CodeBlock:
    """A thread's fold of reduced elements `first`, `first + step`, ... of the row at the bases."""
    ins = range(len(spec.inputs))
    code = CodeBlock(f"{state_type(spec)} jm_acc = {initial(spec)};")
    with code.block(f"for (jm_index_t jm_r = {first}; jm_r < {ARGS}.jm_count; jm_r += {step})"):
        code.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_k{i + 1}" for i in ins) + ";")
        for line in reduced_offsets(spec, "jm_r"):
            code.line(line)
        loaded = [f"{ARGS}.jm_in{i}[jm_o{i}]" for i in ins]
        code.line(f"jm_acc = {folded(binding, spec, 'jm_acc', element(binding, spec, loaded, 'jm_r'))};")
    return code


def _body(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    operands = kept_operands(spec)
    store = stored(binding, spec, "jm_acc", f"{ARGS}.jm_count")
    code = CodeBlock()
    if spec.path == COLUMNS:
        code.extend(_columns(binding, spec))
        return code
    if spec.path != WARP_ROWS:  # a warp a row folds in registers only
        code.line(f"__shared__ {state_type(spec)} jm_shared[{WARPS * 33}];")
    if spec.path == WARP_ROWS:
        code.line(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() * {WARPS} + jm_thread_y();")
        code.line(f"if (jm_row >= {ARGS}.jm_rows) return;  // a whole warp: no block-wide sync follows")
        code.extend(CodeBlock(*kept_offsets(spec, "jm_row", operands)))
        code.extend(_dense_row(binding, spec, "jm_thread_x()", 32))
        code.line("jm_acc = jm_warp_fold(jm_acc);")
        code.line(f"if (jm_thread_x() == 0) {{ {store} }}")
    elif spec.path == BLOCK_ROWS:
        code.line("const jm_index_t jm_row = (jm_index_t)jm_block_x();")
        code.extend(CodeBlock(*kept_offsets(spec, "jm_row", operands)))
        code.extend(_dense_row(binding, spec, "jm_thread_x()", BLOCK))
        code.line("jm_acc = jm_block_fold(jm_acc, jm_shared);")
        code.line(f"if (jm_thread_x() == 0) {{ {store} }}")
    else:
        code.extend(_grid_body(binding, spec, store))
    return code


def _columns(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """The columns path, `spec.vec` neighbouring output elements a thread (1, or _column_width's):
    each reduced element's group of them read as one access and folded into one accumulator each,
    then the block's 8 rows of threads folded in their order through shared memory."""
    width, ins, state = spec.vec, range(len(spec.inputs)), state_type(spec)
    operands = kept_operands(spec)
    code = CodeBlock(f"__shared__ {state} jm_shared[{WARPS * 33 * width}];")
    code.line(f"const jm_index_t jm_row = ((jm_index_t)jm_block_x() * 32 + jm_thread_x()) * {width};")
    code.line(f"const bool jm_active = jm_row < {ARGS}.jm_rows;")
    code.extend(CodeBlock(*kept_offsets(spec, "jm_active ? jm_row : 0", operands)))
    code.line(f"{state} jm_acc[{width}];")
    code.line(f"for (int jm_c = 0; jm_c < {width}; ++jm_c) jm_acc[jm_c] = {initial(spec)};")
    with code.block(f"for (jm_index_t jm_r = jm_active ? (jm_index_t)jm_thread_y() : {ARGS}.jm_count; "
                    f"jm_r < {ARGS}.jm_count; jm_r += {WARPS})"):
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
            code.line(f"jm_acc[jm_c] = {folded(binding, spec, 'jm_acc[jm_c]', value)};")
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


def _grid_body(binding: ReductionBinding, spec: ReductionSpec, store: str) -> CodeBlock:
    operands = kept_operands(spec)
    state = state_type(spec)
    code = CodeBlock()
    with code.block(f"if ({ARGS}.jm_stage == 1)"):
        # A block a row folds the row's partials: each thread a strided share, then the block's
        # fold; one thread a row would read a full reduction's 1024 partials one after another.
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
    code.line(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() / {ARGS}.jm_blocks, "
              f"jm_g = (jm_index_t)jm_block_x() % {ARGS}.jm_blocks;")
    code.extend(CodeBlock(*kept_offsets(spec, "jm_row", operands)))
    first, step = f"jm_g * {BLOCK} + jm_thread_x()", f"{ARGS}.jm_blocks * {BLOCK}"
    if spec.vec > 1:  # a dense row read with vector loads (choose_path gives vec > 1 only then)
        code.extend(_dense_row(binding, spec, first, step))
    else:
        code.extend(_strided_share(binding, spec, first, step))
    code.line("jm_acc = jm_block_fold(jm_acc, jm_shared);")
    with code.block("if (jm_thread_x() == 0)"):
        code.line(f"if ({ARGS}.jm_blocks == 1) {{ {store} }}")
        code.line(f"else {ARGS}.jm_partials[jm_row * {ARGS}.jm_blocks + jm_g] = jm_acc;")
    return code


def render_cuda(binding: ReductionBinding, spec: ReductionSpec) -> str:
    code = _folds(binding, spec)
    with code.block(f'extern "C" __global__ void __launch_bounds__({BLOCK}) jm_kernel(const jm_Args {ARGS})'):
        code.extend(_body(binding, spec))
    return render_with(binding, spec, "cuda", code.text() + "\n")
