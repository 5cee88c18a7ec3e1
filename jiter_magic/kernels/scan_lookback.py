"""The CUDA look-back scan of long rows: one pass over the input, deterministic for a given shape.

Each block scans one tile (BLOCK x ITEMS consecutive elements of a row), taking its tile from a
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
Publishing writes the state, fences, then sets the entry's flag; reading spins on the flag (from
L2), fences, then reads the state past L1. The workspace (int64 words) holds the tile counter, each
row's flags (int32), then each row's states; the first launch (stage 0) zeroes counter and flags.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.scan_common import ARGS, identity, step
from jiter_magic.planning.scan_plan import ScanSpec

# Spins on one flag before a waiting tile gives up (about a minute at one L2 read a spin): only a
# bug waits that long, and a trap that fails the launch is better than a GPU hung for good.
SPINS = 1 << 26
MAX_TILES = (1 << 31) - 1  # tiles of a call at most: one block each, and a grid's x is below 2^31
HEAD = 16  # int64 words before the flags: the tile counter alone in its 128-byte line, apart from polled flags


def tree_size(tiles: int) -> int:
    """Entries of a row's tree: tiles >> k of each level k, 2 tiles - popcount(tiles) in all."""
    return 2 * tiles - bin(tiles).count("1")


def entry(tiles: int, level: int, m: int) -> int:
    """Where entry (level, m) sits in its row's tree: after every lower level's entries."""
    return tree_size(tiles) - tree_size(tiles >> level) + m


def state_words(spec: ScanSpec) -> int:
    """int64 words a state takes in a workspace: a value is 8 bytes at most, a value and its index 16."""
    return 2 if spec.indexed else spec.state


def _flag_words(rows: int, tiles: int) -> int:
    """The tile counter and the rows' int32 flags, in int64 words: what stage 0 zeroes."""
    return HEAD + (rows * tree_size(tiles) + 1) // 2


def workspace_words(spec: ScanSpec, rows: int, count: int, tile: int) -> int:
    tiles = -(-count // tile)
    return _flag_words(rows, tiles) + rows * tree_size(tiles) * state_words(spec)


def launches(rows: int, count: int, tile: int) -> list[tuple[Grid, int]]:
    """Stage 0 zeroes the counter and flags (`tile` words a block), stage 1 scans, a block a tile."""
    tiles = -(-count // tile)
    return [((-(-_flag_words(rows, tiles) // tile), 1, 1), 0), ((rows * tiles, 1, 1), 1)]


def device_code(spec: ScanSpec) -> str:
    """The functions a look-back kernel calls, after the state's type and `jm_from`."""
    words = state_words(spec)
    fold = step(spec, "jm_carry", "jm_o")
    level = step(spec, "jm_from(jm_e, jm_k - 1)", "jm_level")
    return f"""static_assert(sizeof(jm_state_t) <= {8 * words}, "a state must fit its workspace slot");
__device__ __forceinline__ jm_index_t jm_tree_size(jm_index_t jm_tiles) {{ return 2 * jm_tiles - __popcll(jm_tiles); }}
// Entry (k, m) of a row's tree: the fold of tiles [m 2^k, (m+1) 2^k), after the lower levels' entries.
__device__ __forceinline__ jm_index_t jm_entry(jm_index_t jm_tiles, int jm_k, jm_index_t jm_m) {{
  return jm_tree_size(jm_tiles) - jm_tree_size(jm_tiles >> jm_k) + jm_m;
}}
__device__ __forceinline__ jm_index_t jm_flag_words(jm_index_t jm_rows, jm_index_t jm_tiles) {{
  return {HEAD} + (jm_rows * jm_tree_size(jm_tiles) + 1) / 2;  // the counter, then int32 flags
}}
__device__ __forceinline__ void jm_put(long long* jm_slot, jm_state_t jm_s) {{
  long long jm_w[{words}] = {{}};
  memcpy(jm_w, &jm_s, sizeof(jm_state_t));
  for (int jm_i = 0; jm_i < {words}; ++jm_i) __stcg(jm_slot + jm_i, jm_w[jm_i]);
}}
// An entry's state once its flag is set: the flag read from L2 each spin, the state past L1.
__device__ __forceinline__ jm_state_t jm_get(const int* jm_flag, const long long* jm_slot) {{
  for (long long jm_n = 0; *(const volatile int*)jm_flag == 0; ++jm_n)
    if (jm_n == {SPINS}LL) __trap();  // an earlier tile never published: fail the launch, never hang
  __threadfence();  // the flag seen, so is the state written before it
  long long jm_w[{words}];
  for (int jm_i = 0; jm_i < {words}; ++jm_i) jm_w[jm_i] = __ldcg(jm_slot + jm_i);
  jm_state_t jm_s;
  memcpy(&jm_s, jm_w, sizeof(jm_state_t));
  return jm_s;
}}
// Warp 0 of the block of tile jm_tile of a row (its tree from entry jm_base): publishes the tile's
// aggregate and the entries it ends, and gives every lane the fold of the tiles before it.
__device__ __forceinline__ jm_state_t jm_look_back(const jm_Args& {ARGS}, jm_index_t jm_base, jm_index_t jm_tile,
                                                   jm_index_t jm_tiles, jm_state_t jm_agg) {{
  int* const jm_flags = (int*)({ARGS}.jm_partials + {HEAD});
  long long* const jm_states = (long long*){ARGS}.jm_partials + jm_flag_words({ARGS}.jm_rows, jm_tiles);
  const int jm_lane = jm_thread_x() & 31;
  if (jm_lane == 0) {{  // level 0 first: later tiles wait on it, and it waits on nothing
    jm_put(jm_states + (jm_base + jm_tile) * {words}, jm_agg);
    __threadfence();
    *(volatile int*)(jm_flags + jm_base + jm_tile) = 1;
  }}
  // The levels the tile ends (one a trailing 1 bit): level k is bit k-1's entry, then level k-1.
  // Their left siblings (the entries of bits below jm_ends, all set) are read first and the levels
  // published before the carry's other entries are waited for: a level that waited on the whole
  // carry would chain every tile's publishing to the one before it (0.6-0.9 us a tile on an H100,
  // 2026-12-07), where this way a tile's levels wait on a chain of at most log2(tiles) others.
  const int jm_ends = __ffsll(~jm_tile) - 1;
  jm_state_t jm_e = {identity(spec)};  // lane b: the entry of the tile's bit b, where it is set
  if (jm_lane < jm_ends) {{
    const jm_index_t jm_at = jm_base + jm_entry(jm_tiles, jm_lane, (jm_tile >> jm_lane) - 1);
    jm_e = jm_get(jm_flags + jm_at, jm_states + jm_at * {words});
  }}
  jm_state_t jm_level = jm_agg, jm_mine = jm_agg;
  for (int jm_k = 1; jm_k <= jm_ends; ++jm_k) {{
    jm_level = {level};
    if (jm_lane == jm_k) jm_mine = jm_level;
  }}
  const bool jm_ends_here = jm_lane >= 1 && jm_lane <= jm_ends;
  const jm_index_t jm_mine_at = jm_base + jm_entry(jm_tiles, jm_lane, ((jm_tile + 1) >> jm_lane) - 1);
  if (jm_ends_here) jm_put(jm_states + jm_mine_at * {words}, jm_mine);
  __threadfence();
  if (jm_ends_here) *(volatile int*)(jm_flags + jm_mine_at) = 1;
  if (jm_lane > jm_ends && ((jm_tile >> jm_lane) & 1)) {{  // the carry's higher entries (bit jm_ends is 0)
    const jm_index_t jm_at = jm_base + jm_entry(jm_tiles, jm_lane, (jm_tile >> jm_lane) - 1);
    jm_e = jm_get(jm_flags + jm_at, jm_states + jm_at * {words});
  }}
  jm_state_t jm_carry = {identity(spec)};  // the set bits' entries, highest first: left to right
  for (int jm_b = 63 - __clzll(jm_tile | 1); jm_b >= 0; --jm_b) {{
    const bool jm_set = (jm_tile >> jm_b) & 1;  // a shuffle every lane takes, a fold where the bit is set
    const jm_state_t jm_o = jm_from(jm_e, jm_b);
    if (jm_set) jm_carry = {fold};
  }}
  return jm_carry;
}}
"""


def tile_head(spec: ScanSpec, tile: int, block: int) -> CodeBlock:
    """Stage 0: zero the counter and flags, `tile` words a block. Stage 1: take a tile from the
    counter; `jm_row`, `jm_tile` (the tile of the row), `jm_tiles` (a row's) and `jm_j0` its first."""
    code = CodeBlock(f"const jm_index_t jm_tiles = ({ARGS}.jm_count + {tile - 1}) / {tile};")
    with code.block(f"if ({ARGS}.jm_stage == 0)"):
        code.line(f"const jm_index_t jm_zeroed = jm_flag_words({ARGS}.jm_rows, jm_tiles);")
        with code.block(f"for (int jm_i = 0; jm_i < {tile // block}; ++jm_i)"):
            code.line(f"const jm_index_t jm_w = (jm_index_t)jm_block_x() * {tile} + jm_i * {block} + jm_thread_x();")
            code.line(f"if (jm_w < jm_zeroed) {ARGS}.jm_partials[jm_w] = 0;")
        code.line("return;")
    code.line("__shared__ long long jm_taken;")
    code.line(f"if (jm_thread_x() == 0) jm_taken = (long long)atomicAdd((unsigned long long*){ARGS}.jm_partials, "
              "1ull);  // tiles in the order blocks start")
    code.line("__syncthreads();")
    code.line("const jm_index_t jm_row = jm_taken / jm_tiles, jm_tile = jm_taken - jm_row * jm_tiles;")
    code.line(f"const jm_index_t jm_j0 = jm_tile * {tile};")
    return code


def carry(spec: ScanSpec, warps: int) -> CodeBlock:
    """Inside a tile, once the warps' totals are in `jm_totals`: `jm_carry` from the look-back."""
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
