"""The CUDA reduction kernel paths, one class a call's shape, each deterministic (no atomics, fixed
orders); a call takes the first path whose `match` fits its layout, as elementwise calls do.

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

from typing import ClassVar

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels import reduce_cuda_parts as parts
from jiter_magic.kernels.reduce_common import ARGS, kept_offsets, kept_operands, render_with, state_type, stored
from jiter_magic.kernels.reduce_cuda_parts import BLOCK, WARPS
from jiter_magic.planning.dtypes import DTYPES
from jiter_magic.planning.reduce_layout import ReductionLayout
from jiter_magic.planning.reduce_spec import BLOCK_ROWS, COLUMNS, GRID, WARP_ROWS, ReductionSpec

ROW_BLOCK_COUNT = 4096  # dense rows this long get a block each, shorter ones a warp
MIN_ROWS = 64  # fewer output elements than this: the grid path spreads each over several blocks
GRID_ELEMENTS = BLOCK * 8  # elements a block of the grid path folds at least
MAX_GRID_BLOCKS = 1024  # blocks a row at most on the grid path (stage 1 folds their partials)

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
        return _vector_width(layout, inputs, pointers) if dense else None

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

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = CodeBlock(f"__shared__ {state_type(spec)} jm_shared[{WARPS * 33}];")
        code.extend(parts.grid_body(binding, spec, stored(binding, spec, "jm_acc", f"{ARGS}.jm_count")))
        return code


# In the order a call tries them: the last fits every call.
PATHS: tuple[ReductionPath, ...] = (WarpRows(), BlockRows(), Columns(), GridPath())


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
    code = parts.folds(binding, spec)
    with code.block(f'extern "C" __global__ void __launch_bounds__({BLOCK}) jm_kernel(const jm_Args {ARGS})'):
        code.extend(path_of(spec).body(binding, spec))
    return render_with(binding, spec, "cuda", code.text() + "\n")
