"""The CUDA look-back scan of long rows: one pass over the input, deterministic for a given shape.

Each block scans one tile (BLOCK x TILE_ITEMS consecutive elements of a row), taking it from a
global counter, so that every tile it waits for was taken by a block already running or done (the
waits cannot deadlock). A tile needs the fold of the tiles before it (its carry). Classic
decoupled look-back folds whatever earlier tiles have published when it looks, a grouping that
depends on timing; here every tile folds fixed entries of its row's tree, so a float combine
rounds the same way on every run:
- entry (k, m) of a row's tree is the fold of tiles [m 2^k, (m+1) 2^k); the tile that ends it
  (tile (m+1) 2^k - 1) publishes it: level 0 is its own aggregate, level k its left sibling
  (entry (k-1, 2m), published by an earlier tile) followed by its own level k-1;
- tile t's carry folds, left to right, the entries of [0, t)'s split into aligned powers of two
  (t's set bits, highest first): entry (b, (t >> b) - 1) for each set bit b. The left siblings a
  tile needs to publish its levels are the entries of its lowest bits, so one warp reads each
  entry once (a lane a bit) and uses it twice.
How an entry is published and read is scan_entries.py's. With WINDOW, a tile folds a fixed window
of the tiles before it instead (scan_window.py): a chain that moves 32 x WINDOW tiles a round trip.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.kernels import scan_entries, scan_window
from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.scan_common import ARGS, identity, step
from jiter_magic.planning.scan_plan import ScanSpec

MAX_TILES = (1 << 31) - 1  # tiles of a call at most: one block each, and a grid's x is below 2^31
# Tuning constants (bench/sweep_scan.py patches them, and scan_entries' PACKED and BACKOFF): with
# any of them the grouping of values depends on the shape alone, never on timing.
WINDOW = 8  # warps that read a window of 32 x WINDOW tiles (scan_window.py); 0: the tree
PERSIST = 0  # blocks of the scan launch, each looping over tiles (the GPU's resident blocks or more); 0: a tile each
TILE_ITEMS = 32  # elements a thread of a staged tile, where its states fit (0: scan_cuda.ITEMS; scan_cuda.items_of)
KEEP_STAGED = 1  # 1: a thread's running states wait out the look-back in its staged slots; 0: in registers
MIN_BLOCKS = 0  # the kernel's blocks an SM at least (__launch_bounds__' second argument, caps registers); 0: none


def tree_size(tiles: int) -> int:
    """Entries of a row's tree: tiles >> k of each level k, 2 tiles - popcount(tiles) in all."""
    return 2 * tiles - bin(tiles).count("1")


def entry(tiles: int, level: int, m: int) -> int:
    """Where entry (level, m) sits in its row's tree: after every lower level's entries."""
    return tree_size(tiles) - tree_size(tiles >> level) + m


def row_entries(tiles: int) -> int:
    return scan_window.row_entries(tiles) if WINDOW else tree_size(tiles)


def workspace_words(spec: ScanSpec, rows: int, count: int, tile: int) -> int:
    return scan_entries.workspace_words(spec, rows * row_entries(-(-count // tile)))


def launches(spec: ScanSpec, rows: int, count: int, tile: int) -> list[tuple[Grid, int]]:
    """Stage 0 zeroes the counter and flags (`tile` words a block), stage 1 scans, a block a tile
    (or PERSIST blocks at most, each taking tile after tile)."""
    tiles = -(-count // tile)
    blocks = min(rows * tiles, PERSIST) if PERSIST else rows * tiles
    zeroed = scan_entries.zeroed_words(spec, rows * row_entries(tiles))
    return [((-(-zeroed // tile), 1, 1), 0), ((blocks, 1, 1), 1)]


def launch_bounds(block: int) -> str:
    return f"{block}, {MIN_BLOCKS}" if MIN_BLOCKS else f"{block}"


def device_code(spec: ScanSpec, warps: int) -> str:
    """The functions a look-back kernel of `warps` warps a block calls, after the state's type and
    `jm_up`/`jm_from`."""
    if WINDOW:
        return scan_window.device_code(spec, min(WINDOW, warps))
    fold = step(spec, "jm_carry", "jm_o")
    level = step(spec, "jm_from(jm_e, jm_k - 1)", "jm_level")
    publish, read = scan_entries.publish, scan_entries.read
    return f"""__device__ __forceinline__ jm_index_t jm_tree_size(jm_index_t jm_tiles) {{
  return 2 * jm_tiles - __popcll(jm_tiles);
}}
__device__ __forceinline__ jm_index_t jm_row_entries(jm_index_t jm_tiles) {{
  return jm_tree_size(jm_tiles);
}}
// Entry (k, m) of a row's tree: the fold of tiles [m 2^k, (m+1) 2^k), after the lower levels' entries.
__device__ __forceinline__ jm_index_t jm_entry(jm_index_t jm_tiles, int jm_k, jm_index_t jm_m) {{
  return jm_tree_size(jm_tiles) - jm_tree_size(jm_tiles >> jm_k) + jm_m;
}}
{scan_entries.device_code(spec)}// Warp 0 of the block of tile jm_tile of a row (its tree from entry jm_base): publishes
// the tile's aggregate and the entries it ends, and gives every lane the fold of the tiles before it.
__device__ __forceinline__ jm_state_t jm_look_back(const jm_Args& {ARGS}, jm_index_t jm_base, jm_index_t jm_tile,
                                                   jm_index_t jm_tiles, jm_state_t jm_agg) {{
  {scan_entries.pointers()}
  const int jm_lane = jm_thread_x() & 31;
  if (jm_lane == 0) {{  // level 0 first: later tiles wait on it, and it waits on nothing
    {publish(spec, "jm_base + jm_tile", "jm_agg")}
  }}
  // The levels the tile ends (one a trailing 1 bit): level k is bit k-1's entry, then level k-1.
  // Their left siblings (the entries of bits below jm_ends, all set) are read first and the levels
  // published before the carry's other entries are waited for: a level that waited on the whole
  // carry would chain every tile's publishing to the one before it (0.6-0.9 us a tile on an H100,
  // 2026-12-07), where this way a tile's levels wait on a chain of at most log2(tiles) others.
  const int jm_ends = __ffsll(~jm_tile) - 1;
  jm_state_t jm_e = {identity(spec)};  // lane b: the entry of the tile's bit b, where it is set
  if (jm_lane < jm_ends) jm_e = {read(spec, "jm_base + jm_entry(jm_tiles, jm_lane, (jm_tile >> jm_lane) - 1)")};
  jm_state_t jm_level = jm_agg, jm_mine = jm_agg;
  for (int jm_k = 1; jm_k <= jm_ends; ++jm_k) {{
    jm_level = {level};
    if (jm_lane == jm_k) jm_mine = jm_level;
  }}
  if (jm_lane >= 1 && jm_lane <= jm_ends) {{
    {publish(spec, "jm_base + jm_entry(jm_tiles, jm_lane, ((jm_tile + 1) >> jm_lane) - 1)", "jm_mine")}
  }}
  if (jm_lane > jm_ends && ((jm_tile >> jm_lane) & 1))  // the carry's higher entries (bit jm_ends is 0)
    jm_e = {read(spec, "jm_base + jm_entry(jm_tiles, jm_lane, (jm_tile >> jm_lane) - 1)")};
  jm_state_t jm_carry = {identity(spec)};  // the set bits' entries, highest first: left to right
  for (int jm_b = 63 - __clzll(jm_tile | 1); jm_b >= 0; --jm_b) {{
    const bool jm_set = (jm_tile >> jm_b) & 1;  // a shuffle every lane takes, a fold where the bit is set
    const jm_state_t jm_o = jm_from(jm_e, jm_b);
    if (jm_set) jm_carry = {fold};
  }}
  return jm_carry;
}}
"""


def tiles(spec: ScanSpec, tile: int, block: int, body: CodeBlock) -> CodeBlock:
    """Stage 0: zero the counter and flags, `tile` words a block. Stage 1: `body` on each tile the
    block takes from the counter, with `jm_row`, `jm_tile` (the tile of the row), `jm_tiles` (a
    row's) and `jm_j0` its first element: one tile a block, or (PERSIST) tile after tile, the next
    one's number asked for as the current one starts, so that its round trip to L2 is hidden."""
    code = CodeBlock(f"const jm_index_t jm_tiles = ({ARGS}.jm_count + {tile - 1}) / {tile};")
    with code.block(f"if ({ARGS}.jm_stage == 0)"):
        code.line(f"const jm_index_t jm_zeroed = jm_flag_words({ARGS}.jm_rows, jm_tiles);  // what holds flags")
        with code.block(f"for (int jm_i = 0; jm_i < {tile // block}; ++jm_i)"):
            code.line(f"const jm_index_t jm_w = (jm_index_t)jm_block_x() * {tile} + jm_i * {block} + jm_thread_x();")
            code.line(f"if (jm_w < jm_zeroed) {ARGS}.jm_partials[jm_w] = 0;")
        code.line("return;")
    take = f"atomicAdd((unsigned long long*){ARGS}.jm_partials, 1ull)"  # tiles in the order they are asked for
    named = CodeBlock("const jm_index_t jm_row = jm_taken / jm_tiles, jm_tile = jm_taken - jm_row * jm_tiles;",
                      f"const jm_index_t jm_j0 = jm_tile * {tile};")
    named.extend(body)
    code.line("__shared__ long long jm_taken;")
    if not PERSIST:
        code.line(f"if (jm_thread_x() == 0) jm_taken = (long long){take};")
        code.line("__syncthreads();")
        code.extend(named)
        return code
    # A block holds at most its current tile and the next, numbered after it: the lowest unfinished
    # tile is always some block's current one, waiting only on finished tiles, so none deadlocks.
    code.line(f"unsigned long long jm_next = jm_thread_x() == 0 ? {take} : 0ull;")
    with code.block("for (;;)"):
        code.line("if (jm_thread_x() == 0) jm_taken = (long long)jm_next;")
        code.line("__syncthreads();")
        code.line(f"if (jm_taken >= {ARGS}.jm_rows * jm_tiles) break;  // every thread of the block alike")
        code.line(f"if (jm_thread_x() == 0) jm_next = {take};  // used only once this tile is done")
        code.extend(named)
        code.line("__syncthreads();  // every thread has read jm_taken before it changes")
    return code


def carry(spec: ScanSpec, warps: int) -> CodeBlock:
    """Inside a tile, once the warps' totals are in `jm_totals`: `jm_carry` from the look-back."""
    if WINDOW:
        return scan_window.carry(spec, warps, min(WINDOW, warps))
    code = CodeBlock("__shared__ jm_state_t jm_looked;")
    with code.block("if (jm_warp == 0)"):
        code.line(f"jm_state_t jm_agg = {identity(spec)};")
        code.line(f"for (int jm_w = 0; jm_w < {warps}; ++jm_w) jm_agg = {step(spec, 'jm_agg', 'jm_totals[jm_w]')};")
        code.line(f"const jm_state_t jm_c = jm_look_back({ARGS}, jm_row * jm_tree_size(jm_tiles), jm_tile, jm_tiles, "
                  "jm_agg);")
        code.line("if (jm_lane == 0) jm_looked = jm_c;")
    code.line("__syncthreads();")
    code.line("jm_carry = jm_looked;")
    return code
