"""The CUDA scan kernel paths, each deterministic for a given shape (fixed orders of combines).

A tile scan is the step every row path takes: a group of threads (a warp, or a block of BLOCK)
scans `items_of(spec)` consecutive elements a thread in registers, the threads' totals by shuffles within
each warp, the warps' totals through shared memory, then writes each result combined with the
carry of the row's earlier tiles, and carries the tile's total on.
- warp_scan: rows of up to WARP_COUNT elements, a warp a row (WARPS a block).
- block_scan: longer rows, a block a row, tile after tile.
- column_scan: neighbouring rows next to each other in memory (a scan along a leading dim): a
  thread a row, stepping along the scan, so that a warp reads 32 neighbouring elements each step
  (`items_of(spec)` steps' loads in flight before their stores). Where the columns are too few to keep the
  GPU busy, each is split along the scan into segments, one a block row (`blocks`): stage 0 folds
  each segment but the last, stage 1 scans it from the fold of the segments before it.
- lookback_scan: a few long rows, a block a tile, its carry from a deterministic look-back over
  fixed entries of earlier tiles (scan_lookback.py, scan_window.py): the input is read once.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.scan import ScanBinding
from jiter_magic.kernels import scan_entries, scan_loads, scan_lookback
from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.scan_common import (
    ARGS,
    element_call,
    identity,
    offsets,
    operand_count,
    render_scan,
    shuffles,
    step,
    store_call,
)
from jiter_magic.kernels.scan_loads import slot
from jiter_magic.planning.dtypes import DTYPES
from jiter_magic.planning.scan_plan import BLOCK_SCAN, COLUMN_SCAN, LOOKBACK_SCAN, WARP_SCAN, ScanLayout, ScanSpec

BLOCK = 256  # threads a block, on every path
WARPS = BLOCK >> 5  # warps a block
ITEMS = 8  # consecutive elements a thread scans in registers (a column: steps loaded together), states over 4 bytes
# A state of 4 bytes at most takes twice as many: more loads in flight and fewer shuffles a value,
# with registers to spare; an 8-byte state (a linear recurrence's pair) lost a quarter of its speed
# with 16 (bench/results/2026-12-07-h100-gpu-run). A look-back tile's length is `items_of`'s own.
SMALL_ITEMS = 16
TILE = BLOCK * ITEMS  # elements a block's tile at least (the look-back path's rows are counted in these)
WARP_COUNT = 32 * ITEMS * 4  # rows this short get a warp each
MIN_ROWS = 512  # fewer rows than this, and long: the look-back path spreads each over many blocks
LOOKBACK_COUNT = 8 * TILE  # elements a row at least, for the look-back path
MAX_GRID_BLOCKS = 1024
# Columns are split along the scan until this many threads run: a split column is read almost twice
# (stage 0 folds each segment but the last), which costs more than idle lanes once a few hundred
# threads an SM load.
BUSY_THREADS = 1 << 15
SEGMENT = 64  # steps along the scan a column's segment takes at least
STAGE_BYTES = 16  # the largest state a tile stages through shared memory (2048 of them and padding: 34 KiB)


def staged_states(items: int) -> int:
    """States of a block's staging buffer: a tile of BLOCK x `items`, padded (`_at`)."""
    return BLOCK * items + BLOCK * items // 32


def choose_path(layout: ScanLayout, inputs: tuple[str, ...], pointers: list[int]) -> tuple[str, int, int]:
    """(path, vector width, blocks a row) of a call."""
    if layout.columns_dense and not layout.rows_dense:
        # Few columns: each split along the scan into segments, scanned from the fold of the ones before.
        wanted = -(-BUSY_THREADS // max(layout.rows, 1))
        return COLUMN_SCAN, 1, max(1, min(wanted, layout.count // SEGMENT, MAX_GRID_BLOCKS))
    tiles = layout.rows * -(-layout.count // TILE)
    if layout.rows < MIN_ROWS and layout.count >= LOOKBACK_COUNT and tiles <= scan_lookback.MAX_TILES:
        return LOOKBACK_SCAN, 1, 1
    return (WARP_SCAN if layout.count <= WARP_COUNT else BLOCK_SCAN), 1, 1


def items_of(spec: ScanSpec) -> int:
    """Consecutive elements a thread of `spec`'s path scans in registers (a column's steps loaded
    together): SMALL_ITEMS for a state of 4 bytes at most, ITEMS above. A staged look-back tile
    takes scan_lookback.TILE_ITEMS (0: ITEMS) as far as its states fit STAGE_BYTES x ITEMS bytes a
    thread: the longer the tile, the more elements share each tile's look-back waits."""
    size = 16 if spec.indexed else DTYPES[spec.accumulate].itemsize * spec.state
    if spec.path != LOOKBACK_SCAN:
        return SMALL_ITEMS if size <= 4 else ITEMS
    return min(scan_lookback.TILE_ITEMS or ITEMS, max(ITEMS, STAGE_BYTES * ITEMS // size)) if spec.staged else ITEMS


def staged(path: str, accumulate: str, state: int, indexed: bool) -> bool:
    """Whether a row path's tiles go through shared memory: where a tile of states fits (STAGE_BYTES
    a state at most), so that a warp's loads and stores each cover a dense run."""
    size = 16 if indexed else DTYPES[accumulate].itemsize * state
    return path in (WARP_SCAN, BLOCK_SCAN, LOOKBACK_SCAN) and size <= STAGE_BYTES


def block_of(spec: ScanSpec) -> Grid:
    return (BLOCK, 1, 1)


def partials_size(spec: ScanSpec, layout: ScanLayout, blocks: int) -> int:
    """int64 words of a call's workspace: the look-back's, or the partials of split columns (a
    state a segment of each row); none on the other paths."""
    if spec.path == LOOKBACK_SCAN:
        return scan_lookback.workspace_words(spec, layout.rows, layout.count, BLOCK * items_of(spec))
    if spec.path != COLUMN_SCAN or blocks == 1:
        return 0
    return layout.rows * blocks * scan_entries.state_words(spec)


def launches(spec: ScanSpec, layout: ScanLayout, blocks: int) -> list[tuple[Grid, int]]:
    """(grid, stage) of each launch of a call."""
    if spec.path == WARP_SCAN:
        return [((-(-layout.rows // WARPS), 1, 1), 0)]
    if spec.path == BLOCK_SCAN:
        return [((layout.rows, 1, 1), 0)]
    if spec.path == COLUMN_SCAN:  # stage 0 folds each segment, stage 1 scans it from its carry
        columns = -(-layout.rows // BLOCK)
        # No segment's carry holds the last segment's fold, so stage 0 leaves it unread.
        return [((columns, blocks - 1, 1), 0), ((columns, blocks, 1), 1)] if blocks > 1 else [((columns, 1, 1), 1)]
    return scan_lookback.launches(spec, layout.rows, layout.count, BLOCK * items_of(spec))


def _tile(spec: ScanSpec, threads: int, tid: str, look_back: CodeBlock | None = None) -> CodeBlock:
    """One tile of `threads` x `items_of(spec)` elements from position `jm_j0` of the row at `jm_k`:
    each thread's items in registers, a scan of the threads' totals (by warp shuffles, a block's warps'
    totals through `jm_totals` in shared memory), results stored from the carry `jm_carry` (set by
    `look_back` once the warps' totals are known, where given), which moves on by the tile's
    total. Every thread of the group runs it."""
    ident, items = identity(spec), items_of(spec)
    sync = "__syncwarp();" if threads == 32 else "__syncthreads();"
    mine = f"jm_buf[{slot(f'(int)({tid}) * {items} + jm_i')}]"  # a thread's own slots of a staged tile
    # The look-back path may keep a thread's running states in its own staged slots across the
    # look-back, not in registers: the same combines, fewer registers, more blocks an SM.
    kept = look_back is not None and spec.staged and scan_lookback.KEEP_STAGED
    code = CodeBlock() if kept else CodeBlock(f"jm_state_t jm_v[{items}];")
    code.line(f"jm_state_t jm_t = {ident};")
    code.line(f"const jm_index_t jm_first = jm_j0 + (jm_index_t)({tid}) * {items};")
    if spec.staged:  # the group reads the tile densely into shared memory, each thread then its items
        code.extend(scan_loads.read(spec, threads, tid, items))
        code.line(sync)
    with code.block(f"for (int jm_i = 0; jm_i < {items}; ++jm_i)"):
        code.line("const jm_index_t jm_j = jm_first + jm_i;")
        value = mine if spec.staged else element_call(spec, "jm_j")
        code.line(f"if (jm_j < {ARGS}.jm_count) jm_t = {step(spec, 'jm_t', value)};")
        code.line(f"{mine if kept else 'jm_v[jm_i]'} = jm_t;")
    if spec.staged:
        code.line(sync)
    code.line(f"const int jm_lane = (int)({tid}) & 31, jm_warp = (int)({tid}) >> 5;")
    with code.block("for (int jm_off = 1; jm_off < 32; jm_off <<= 1)"):
        code.line("const jm_state_t jm_o = jm_up(jm_t, jm_off);")
        code.line(f"if (jm_lane >= jm_off) jm_t = {step(spec, 'jm_o', 'jm_t')};")
    code.line(f"jm_state_t jm_before = jm_up(jm_t, 1);\nif (jm_lane == 0) jm_before = {ident};")
    code.line("jm_state_t jm_prefix = jm_carry, jm_total = jm_carry;")
    if threads == 32:
        code.line(f"jm_total = {step(spec, 'jm_total', 'jm_from(jm_t, 31)')};")
    else:
        code.line("if (jm_lane == 31) jm_totals[jm_warp] = jm_t;")
        code.line("__syncthreads();")
        if look_back is not None:
            code.extend(look_back)
            code.line("jm_prefix = jm_carry;")
        with code.block(f"for (int jm_w = 0; jm_w < {threads // 32}; ++jm_w)"):
            code.line(f"if (jm_w < jm_warp) jm_prefix = {step(spec, 'jm_prefix', 'jm_totals[jm_w]')};")
            code.line(f"jm_total = {step(spec, 'jm_total', 'jm_totals[jm_w]')};")
        code.line("__syncthreads();")
    code.line(f"jm_prefix = {step(spec, 'jm_prefix', 'jm_before')};")
    counted = "jm_j" if spec.exclusive else "jm_j + 1"
    if kept and spec.exclusive:  # the slot before is overwritten by then: its state carried over
        code.line(f"jm_state_t jm_was = {ident};")
    # `if (true)`: once the grid path's stage condition, kept so that the row paths' kernels stay as timed.
    with code.block("if (true)"):
        with code.block(f"for (int jm_i = 0; jm_i < {items}; ++jm_i)"):
            code.line("const jm_index_t jm_j = jm_first + jm_i;")
            code.line(f"if (jm_j >= {ARGS}.jm_count) break;")
            if kept:
                code.line(f"const jm_state_t jm_here = {mine};")
            if spec.exclusive:
                earlier = step(spec, "jm_prefix", "jm_was" if kept else "jm_v[jm_i - 1]")
                code.line(f"const jm_state_t jm_r = jm_i == 0 ? jm_prefix : {earlier};")
                if kept:
                    code.line("jm_was = jm_here;")
            else:
                code.line(f"const jm_state_t jm_r = {step(spec, 'jm_prefix', 'jm_here' if kept else 'jm_v[jm_i]')};")
            if spec.staged:
                code.line(f"{mine} = jm_r;")
            else:
                code.line(store_call(spec, "jm_j", "jm_r", counted))
        if spec.staged:  # then the group writes the tile densely
            code.line(sync)
            with code.block(f"for (int jm_i = 0; jm_i < {items}; ++jm_i)"):
                code.line(f"const jm_index_t jm_j = jm_j0 + jm_i * {threads} + (int)({tid});")
                code.line(f"if (jm_j < {ARGS}.jm_count) "
                          + store_call(spec, "jm_j", f"jm_buf[{slot(f'jm_i * {threads} + (int)({tid})')}]", counted))
            code.line(sync)
    code.line("jm_carry = jm_total;")
    return code


def _columns(spec: ScanSpec) -> CodeBlock:
    """A thread a column (a row of the layout), its segment `jm_block_y()` of the scan: stage 0
    folds the segment into the partials, stage 1 folds the earlier segments' partials into its
    carry and scans the segment from it, `items_of(spec)` steps' loads issued before their stores."""
    items = items_of(spec)
    code = CodeBlock(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() * {BLOCK} + jm_thread_x();")
    code.line(f"if (jm_row >= {ARGS}.jm_rows) return;")
    code.line(f"const jm_index_t jm_segs = {ARGS}.jm_blocks, jm_seg = ({ARGS}.jm_count + jm_segs - 1) / jm_segs;")
    code.line(f"const jm_index_t jm_begin = jm_block_y() * jm_seg, jm_end = jm_begin + jm_seg < {ARGS}.jm_count ? "
              f"jm_begin + jm_seg : {ARGS}.jm_count;")
    code.line("\n".join(_row_offsets(spec, "jm_row")))
    code.line(f"jm_state_t* const jm_parts = (jm_state_t*){ARGS}.jm_partials;")
    code.line(f"jm_state_t jm_s = {identity(spec)};")
    with code.block(f"if ({ARGS}.jm_stage == 0)"):
        with code.block("for (jm_index_t jm_j = jm_begin; jm_j < jm_end; ++jm_j)"):
            code.line(f"jm_s = {step(spec, 'jm_s', element_call(spec, 'jm_j'))};")
        code.line(f"jm_parts[jm_block_y() * {ARGS}.jm_rows + jm_row] = jm_s;")
        code.line("return;")
    code.line(f"for (jm_index_t jm_q = 0; jm_q < jm_block_y(); ++jm_q) "
              f"jm_s = {step(spec, 'jm_s', f'jm_parts[jm_q * {ARGS}.jm_rows + jm_row]')};")
    with code.block(f"for (jm_index_t jm_j0 = jm_begin; jm_j0 < jm_end; jm_j0 += {items})"):
        code.line(f"jm_state_t jm_e[{items}];")
        with code.block(f"for (int jm_i = 0; jm_i < {items}; ++jm_i)"):
            code.line(f"if (jm_j0 + jm_i < jm_end) jm_e[jm_i] = {element_call(spec, 'jm_j0 + jm_i')};")
        with code.block(f"for (int jm_i = 0; jm_i < {items} && jm_j0 + jm_i < jm_end; ++jm_i)"):
            code.line("const jm_index_t jm_j = jm_j0 + jm_i;")
            if spec.exclusive:
                code.line(store_call(spec, "jm_j", "jm_s", "jm_j"))
                code.line(f"jm_s = {step(spec, 'jm_s', 'jm_e[jm_i]')};")
            else:
                code.line(f"jm_s = {step(spec, 'jm_s', 'jm_e[jm_i]')};")
                code.line(store_call(spec, "jm_j", "jm_s", "jm_j + 1"))
    return code


def _row_offsets(spec: ScanSpec, row: str) -> list[str]:
    return offsets(spec, row, range(operand_count(spec)))


def _body(spec: ScanSpec) -> CodeBlock:
    items = items_of(spec)
    tile, staged = (32 if spec.path == WARP_SCAN else BLOCK) * items, staged_states(items)
    code = CodeBlock()
    if spec.path == COLUMN_SCAN:
        code.extend(_columns(spec))
        return code
    if spec.path == WARP_SCAN:
        code.line(f"const jm_index_t jm_row = (jm_index_t)jm_block_x() * {WARPS} + (jm_thread_x() >> 5);")
        code.line(f"if (jm_row >= {ARGS}.jm_rows) return;  // the whole warp: a warp scans one row")
        code.line("\n".join(_row_offsets(spec, "jm_row")))
        code.line(f"jm_state_t jm_carry = {identity(spec)};")
        if spec.staged:  # a warp's own part of the block's buffer
            code.line(f"__shared__ jm_state_t jm_stage[{staged}];")
            code.line(f"jm_state_t* const jm_buf = jm_stage + (jm_thread_x() >> 5) * {staged // WARPS};")
        with code.block(f"for (jm_index_t jm_j0 = 0; jm_j0 < {ARGS}.jm_count; jm_j0 += {tile})"):
            code.extend(_tile(spec, 32, "jm_thread_x() & 31"))
        return code
    code.line(f"__shared__ jm_state_t jm_totals[{WARPS}];")
    if spec.staged:
        code.line(f"__shared__ jm_state_t jm_buf[{staged}];")
    if spec.path == BLOCK_SCAN:
        code.line("\n".join(_row_offsets(spec, "(jm_index_t)jm_block_x()")))
        code.line(f"jm_state_t jm_carry = {identity(spec)};")
        with code.block(f"for (jm_index_t jm_j0 = 0; jm_j0 < {ARGS}.jm_count; jm_j0 += {tile})"):
            code.extend(_tile(spec, BLOCK, "jm_thread_x()"))
        return code
    # The look-back path: the tile the block takes, its carry from earlier tiles' entries.
    scan = CodeBlock("\n".join(_row_offsets(spec, "jm_row")), f"jm_state_t jm_carry = {identity(spec)};")
    scan.extend(_tile(spec, BLOCK, "jm_thread_x()", scan_lookback.carry(spec, WARPS)))
    code.extend(scan_lookback.tiles(spec, tile, BLOCK, scan))
    return code


def render_cuda(binding: ScanBinding, spec: ScanSpec) -> str:
    code = CodeBlock(shuffles(spec))
    if spec.path == LOOKBACK_SCAN:
        code.line(scan_lookback.device_code(spec, WARPS))
    bounds = scan_lookback.launch_bounds(BLOCK) if spec.path == LOOKBACK_SCAN else BLOCK
    with code.block(f'extern "C" __global__ void __launch_bounds__({bounds}) jm_kernel(const jm_Args {ARGS})'):
        code.extend(_body(spec))
    return render_scan(binding, spec, "cuda", code.text() + "\n")
