"""The CUDA reduction kernel paths, one class a call's shape, each deterministic (no atomics, fixed
orders); a call takes the first path whose `match` fits its layout, as elementwise calls do.

- warp_rows: dense rows of fewer than ROW_BLOCK_COUNT elements, a warp a row (8 a block), lanes
  striding along the row with vector loads, folded by a butterfly of shuffles.
- block_rows: longer dense rows, a block of BLOCK threads a row, warps folded through shared memory;
  not a few long rows (fewer than FILL_ROWS of LONG_ROW_COUNT or more elements): a block a row
  would leave most SMs idle, and the grid path spreads each row over several blocks.
- columns: the reduced dims outside the kept ones (summing over dim 0 of a row-major matrix):
  32 neighbouring output elements a block, so that a warp reads 32 neighbouring elements of each
  reduced row (coalesced), the reduced extent split over the block's 8 rows of threads and folded
  in their order through shared memory; 1- and 2-byte elements 4 bytes' worth of columns a
  thread (`_column_width`), so that a warp still reads 128 bytes.
- dense_runs: rows made of several dense runs (reducing dims 0 and 2 of a row-major 3-d array: the
  innermost reduced dim has unit stride, an outer reduced dim lies beyond a kept one), the runs
  long and enough of them to fill the GPU: stage 0 a block an equal share of a row's runs (as
  many shares as the grid path would give the row blocks, at most one a run), each run read with
  the row paths' vector loads, into a partial; stage 1 folds each row's partials as the grid
  path's stage 1 does. The grid path would walk such rows element by element, dividing each
  index by the run length.
- grid: everything else (a full reduction, a few long or strided rows): `blocks` blocks a row each
  fold a strided share into a partial (stage 0), then a block a row folds the row's partials,
  each thread a strided share of them, then the block's fold (stage 1, the same kernel launched
  again); with one block a row stage 0 stores the result.
  Where each row is one dense run (a full reduction of a contiguous array), the shares are read
  with the row paths' vector loads.
"""
from __future__ import annotations

from typing import ClassVar

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels import reduce_cuda_loads as loads
from jiter_magic.kernels import reduce_cuda_parts as parts
from jiter_magic.kernels.reduce_common import ARGS, kept_offsets, kept_operands, render_with, state_type, stored
from jiter_magic.kernels.reduce_cuda_parts import BLOCK, WARPS
from jiter_magic.planning.dtypes import DTYPES
from jiter_magic.planning.reduce_layout import ReductionLayout
from jiter_magic.planning.reduce_spec import BLOCK_ROWS, COLUMNS, DENSE_RUNS, GRID, WARP_ROWS, ReductionSpec

ROW_BLOCK_COUNT = 4096  # dense rows this long get a block each, shorter ones a warp
MIN_ROWS = 64  # fewer output elements than this: the grid path spreads each over several blocks
GRID_ELEMENTS = BLOCK * 8  # elements a block of the grid path folds at least
MAX_GRID_BLOCKS = 1024  # blocks a row at most on the grid path (stage 1 folds their partials)
# Blocks that keep every SM of a GPU busy: two of BLOCK threads an SM of an H100 (132 SMs). A
# constant, not the device's count, so that a call's plan and kernel depend on its arrays alone.
FILL_ROWS = 2 * 132
LONG_ROW_COUNT = 1 << 16  # rows this long, fewer than FILL_ROWS of them: spread over several blocks
RUN_COUNT = BLOCK * 4  # dense runs this long at least on the dense runs path
# Reductions with indices (argmax) only, for a sweep (bench/sweep_reduce.py) to try others:
INDEXED_COLUMN_BYTES = 4  # bytes of neighbouring columns a thread reads as one access on the columns path
INDEXED_MAX_GRID_BLOCKS = MAX_GRID_BLOCKS  # blocks a row at most on the grid path
INDEXED_MIN_BLOCKS = 0  # blocks an SM that __launch_bounds__ asks registers for (0: none asked)

Grid = tuple[int, int, int]


class ReductionPath:
    """One CUDA kernel shape of reductions: whether it fits a call, its launches and its body."""

    name: ClassVar[str]
    block: ClassVar[Grid] = (BLOCK, 1, 1)

    def match(self, layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int | None:
        """The vector width (elements a load, or columns a thread) if this path fits the call, else None."""
        raise NotImplementedError

    def grids(self, spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, int]]:
        """(grid, stage) of each launch of a call of `rows` output elements."""
        raise NotImplementedError

    def blocks(self, layout: ReductionLayout) -> int:
        """Blocks a row of stage 0 (the partials a row), where a path has two stages; else 1."""
        return 1

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        raise NotImplementedError


class WarpRows(ReductionPath):
    """Dense rows shorter than ROW_BLOCK_COUNT, a warp a row (8 a block), folded in registers."""

    name = WARP_ROWS
    block = (32, WARPS, 1)

    def match(self, layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int | None:
        dense = layout.inner_reduced_dense and layout.rows >= MIN_ROWS and layout.count < ROW_BLOCK_COUNT
        return _vector_width(layout, inputs, pointers) if dense else None

    def grids(self, spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, int]]:
        return [((-(-rows // WARPS), 1, 1), 0)]

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = CodeBlock(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() * {WARPS} + jm_thread_y();")
        code.line(f"if (jm_row >= {ARGS}.jm_rows) return;  // a whole warp: no block-wide sync follows")
        code.extend(CodeBlock(*kept_offsets(spec, "jm_row", kept_operands(spec))))
        code.extend(parts.dense_row(binding, spec, "jm_thread_x()", 32))
        code.line("jm_acc = jm_warp_fold(jm_acc);")
        code.line(f"if (jm_thread_x() == 0) {{ {stored(binding, spec, 'jm_acc', f'{ARGS}.jm_count')} }}")
        return code


class BlockRows(ReductionPath):
    """Longer dense rows, a block a row, its warps folded through shared memory."""

    name = BLOCK_ROWS

    def match(self, layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int | None:
        dense = layout.inner_reduced_dense and layout.rows >= MIN_ROWS and layout.count >= ROW_BLOCK_COUNT
        few_long = layout.rows < FILL_ROWS and layout.count >= LONG_ROW_COUNT
        return _vector_width(layout, inputs, pointers) if dense and not few_long else None

    def grids(self, spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, int]]:
        return [((rows, 1, 1), 0)]

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = CodeBlock(f"__shared__ {state_type(spec)} jm_shared[{WARPS * 33}];")
        code.line("const jm_index_t jm_row = (jm_index_t)jm_block_x();")
        code.extend(CodeBlock(*kept_offsets(spec, "jm_row", kept_operands(spec))))
        code.extend(parts.dense_row(binding, spec, "jm_thread_x()", BLOCK))
        code.line("jm_acc = jm_block_fold(jm_acc, jm_shared);")
        code.line(f"if (jm_thread_x() == 0) {{ {stored(binding, spec, 'jm_acc', f'{ARGS}.jm_count')} }}")
        return code


class Columns(ReductionPath):
    """Reduced dims outside the kept ones: 32 neighbouring output elements a block (parts.columns)."""

    name = COLUMNS
    block = (32, WARPS, 1)

    def match(self, layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int | None:
        fits = not layout.inner_reduced_dense and bool(layout.kept_sizes) and layout.rows >= MIN_ROWS and \
            all(s[0] == 1 for s in layout.input_kept_strides)
        return _column_width(layout, inputs, pointers) if fits else None

    def grids(self, spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, int]]:
        return [((-(-rows // (32 * spec.vec)), 1, 1), 0)]

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        return parts.columns(binding, spec)


class GridPath(ReductionPath):
    """Everything else, in two stages (module docstring); fits any call."""

    name = GRID

    def match(self, layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int | None:
        return _vector_width(layout, inputs, pointers) if layout.inner_reduced_dense else 1

    def grids(self, spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, int]]:
        first = ((rows * blocks, 1, 1), 0)
        return [first] if blocks == 1 else [first, ((rows, 1, 1), 1)]

    def blocks(self, layout: ReductionLayout) -> int:
        return grid_blocks(layout)

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = CodeBlock(f"__shared__ {state_type(spec)} jm_shared[{WARPS * 33}];")
        code.extend(parts.grid_body(binding, spec, stored(binding, spec, "jm_acc", f"{ARGS}.jm_count")))
        return code


class DenseRuns(GridPath):
    """Rows of several long dense runs, a block a share of them, then the grid path's stage 1
    (module docstring)."""

    name = DENSE_RUNS

    def match(self, layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int | None:
        sizes = layout.reduced_sizes
        fits = len(sizes) >= 2 and all(s[0] == 1 for s in layout.reduced_strides) and sizes[0] >= RUN_COUNT and \
            layout.rows * (layout.count // sizes[0]) >= FILL_ROWS
        if not fits:
            return None
        strides = [s for st in layout.input_kept_strides for s in st] + \
            [s for st in layout.reduced_strides for s in st[1:]]
        return _aligned_width(inputs, pointers, strides, sizes[0])

    def blocks(self, layout: ReductionLayout) -> int:
        """About 4096 blocks in all, as on the grid path, but no more than a row's runs (every
        reduced size but the first); shares of equal runs (jm_share in the kernel) differ by one
        run at most, and a share may be empty (its partial the identity)."""
        return min(layout.count // layout.reduced_sizes[0], max(1, 4096 // max(layout.rows, 1)))

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = CodeBlock(f"__shared__ {state_type(spec)} jm_shared[{WARPS * 33}];")
        code.extend(parts.runs_body(binding, spec, stored(binding, spec, "jm_acc", f"{ARGS}.jm_count")))
        return code


# In the order a call tries them: the last fits every call.
PATHS: tuple[ReductionPath, ...] = (WarpRows(), BlockRows(), Columns(), DenseRuns(), GridPath())


def path_of(spec: ReductionSpec) -> ReductionPath:
    """The path object of a CUDA spec."""
    for path in PATHS:
        if path.name == spec.path:
            return path
    raise KeyError(f"no CUDA reduction path named {spec.path!r}")


def choose_path(layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> tuple[str, int]:
    """The first path that fits a call, and its vector width (1 where rows are not aligned)."""
    for path in PATHS:
        vec = path.match(layout, inputs, pointers)
        if vec is not None:
            return path.name, vec
    raise AssertionError("the grid path fits every call")


def blocks_a_row(name: str, layout: ReductionLayout) -> int:
    """Blocks a row of stage 0 of path `name` for a call (the partials a row; 1: one stage)."""
    return next(path for path in PATHS if path.name == name).blocks(layout)


def _vector_width(layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int:
    """16-byte loads (at most 8 elements) where every input has one itemsize and every row starts aligned."""
    return _aligned_width(inputs, pointers, [s for st in layout.input_kept_strides for s in st], layout.count)


def _aligned_width(inputs: tuple[str, ...], pointers: list[int], strides: list[int], length: int) -> int:
    """16-byte loads (at most 8 elements) of dense runs of `length` elements, where every input has
    one itemsize and every run starts aligned: aligned pointers, every stride of a run's start and
    `length` multiples of the width."""
    sizes = {DTYPES[d].itemsize for d in inputs}
    if len(sizes) != 1:
        return 1
    vec = min(16 // sizes.pop(), 8)
    aligned = all(p % 16 == 0 for p in pointers) and all(s % vec == 0 for s in strides)
    return vec if aligned and length % vec == 0 else 1


def _column_width(layout: ReductionLayout, inputs: tuple[str, ...], pointers: list[int]) -> int:
    """Neighbouring columns a thread folds together on the columns path: as many 1- or 2-byte
    elements as fill 4 bytes (with indices INDEXED_COLUMN_BYTES, at most 8 elements), read as one
    access (a warp then reads 128 bytes of a reduced row, not 32 or 64), where every group of them
    starts aligned: the innermost kept size a multiple of the width, aligned pointers, every other
    stride a multiple of it. Elements as wide as those bytes or wider: 1."""
    sizes = {DTYPES[d].itemsize for d in inputs}
    wanted = INDEXED_COLUMN_BYTES if layout.indexed else 4
    if len(sizes) != 1 or (size := sizes.pop()) >= wanted:
        return 1
    width = min(wanted // size, 8)
    strides = [s for st in layout.input_kept_strides for s in st[1:]] + [s for st in layout.reduced_strides for s in st]
    if layout.kept_sizes[0] % width or any(p % (width * size) for p in pointers) or any(s % width for s in strides):
        return 1
    return width


def grid_blocks(layout: ReductionLayout) -> int:
    """Blocks a row on the grid path: enough for the count, fewer the more rows there are."""
    wanted = -(-layout.count // GRID_ELEMENTS)
    most = INDEXED_MAX_GRID_BLOCKS if layout.indexed else MAX_GRID_BLOCKS
    return max(1, min(wanted, most, max(1, 4096 // max(layout.rows, 1))))


def block_of(spec: ReductionSpec) -> Grid:
    """The thread block of every launch of `spec`."""
    return path_of(spec).block


def partials_of(spec: ReductionSpec, rows: int, blocks: int) -> tuple[int, str]:
    """The size and dtype of the partials buffer of a grid reduction over several blocks: one state
    a block of each row; a pair (value, index) takes 16 bytes, two int64 slots, whatever the
    accumulator."""
    return (rows * blocks * 2, "int64") if spec.indexed else (rows * blocks, spec.accumulate)


def launches(spec: ReductionSpec, rows: int, blocks: int) -> list[tuple[Grid, Grid, int]]:
    """(grid, block, stage) of each launch of a call."""
    path = path_of(spec)
    return [(grid, path.block, stage) for grid, stage in path.grids(spec, rows, blocks)]


def render_cuda(binding: ReductionBinding, spec: ReductionSpec) -> str:
    kernel = CodeBlock()
    # With indices, INDEXED_MIN_BLOCKS blocks an SM asks the compiler to fit the registers to them.
    bounds = f"{BLOCK}, {INDEXED_MIN_BLOCKS}" if spec.indexed and INDEXED_MIN_BLOCKS else str(BLOCK)
    with kernel.block(f'extern "C" __global__ void __launch_bounds__({bounds}) jm_kernel(const jm_Args {ARGS})'):
        kernel.extend(path_of(spec).body(binding, spec))
    code = loads.helpers(binding, spec, kernel.text())
    code.extend(parts.folds(binding, spec))
    code.extend(kernel)
    return render_with(binding, spec, "cuda", code.text() + "\n")
