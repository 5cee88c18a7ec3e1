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
With PACKED (the default) an entry is its state in 4-byte pieces, each in one 8-byte word beside
a flag: a word is written and read whole (an aligned 64-bit access is single-copy atomic), so a
reader that sees every piece's flag holds the whole state, with no fence on either side and one
L2 round trip a read (CUB packs a status with a small value the same way). Without it, publishing
writes the state, fences, then sets a separate int32 flag; reading spins on the flag, fences, then
reads the state past L1: three dependent round trips. A reader sleeps BACKOFF ns between polls.
The workspace (int64 words) holds the tile counter, then (packed) each row's entries, or each row's
flags then each row's states; the first launch (stage 0) zeroes the counter and the flags.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.scan_common import ARGS, identity, step
from jiter_magic.planning.dtypes import DTYPES
from jiter_magic.planning.scan_plan import ScanSpec

# Spins on one flag before a waiting tile gives up (about a minute at one L2 read a spin): only a
# bug waits that long, and a trap that fails the launch is better than a GPU hung for good.
SPINS = 1 << 26
MAX_TILES = (1 << 31) - 1  # tiles of a call at most: one block each, and a grid's x is below 2^31
HEAD = 16  # int64 words before the flags: the tile counter alone in its 128-byte line, apart from polled flags
# Tuning constants (bench/sweep_scan.py patches them; none changes how values group, so each keeps
# the scan deterministic):
PACKED = 1  # 1: an entry's flag in each 8-byte word of its state (no fences); 0: separate flags, two fences
BACKOFF = 0  # ns a waiting lane sleeps between polls of an entry (0: poll back to back)
PERSIST = 0  # blocks of the scan launch, each looping over tiles (the GPU's resident blocks or more); 0: a tile each
TILE_ITEMS = 16  # elements a thread of a staged tile, where its states fit (0: scan_cuda.ITEMS, as on other paths)
KEEP_STAGED = 1  # 1: a thread's running states wait out the look-back in its staged slots; 0: in registers
MIN_BLOCKS = 0  # the kernel's blocks an SM at least (__launch_bounds__' second argument, caps registers); 0: none


def tree_size(tiles: int) -> int:
    """Entries of a row's tree: tiles >> k of each level k, 2 tiles - popcount(tiles) in all."""
    return 2 * tiles - bin(tiles).count("1")


def entry(tiles: int, level: int, m: int) -> int:
    """Where entry (level, m) sits in its row's tree: after every lower level's entries."""
    return tree_size(tiles) - tree_size(tiles >> level) + m


def state_words(spec: ScanSpec) -> int:
    """int64 words a state takes in a workspace: a value is 8 bytes at most, a value and its index 16."""
    return 2 if spec.indexed else spec.state


def pieces(spec: ScanSpec) -> int:
    """4-byte pieces of a state (a packed entry's 8-byte words): the kernel asserts the state fits."""
    size = 16 if spec.indexed else DTYPES[spec.accumulate].itemsize * spec.state
    return -(-size // 4)


def _flag_words(spec: ScanSpec, rows: int, tiles: int) -> int:
    """The tile counter and the rows' flags (packed: the whole entries), in int64 words: what stage 0 zeroes."""
    if PACKED:
        return HEAD + rows * tree_size(tiles) * pieces(spec)
    return HEAD + (rows * tree_size(tiles) + 1) // 2


def workspace_words(spec: ScanSpec, rows: int, count: int, tile: int) -> int:
    tiles = -(-count // tile)
    states = 0 if PACKED else rows * tree_size(tiles) * state_words(spec)
    return _flag_words(spec, rows, tiles) + states


def launches(spec: ScanSpec, rows: int, count: int, tile: int) -> list[tuple[Grid, int]]:
    """Stage 0 zeroes the counter and flags (`tile` words a block), stage 1 scans, a block a tile
    (or PERSIST blocks at most, each taking tile after tile)."""
    tiles = -(-count // tile)
    blocks = min(rows * tiles, PERSIST) if PERSIST else rows * tiles
    return [((-(-_flag_words(spec, rows, tiles) // tile), 1, 1), 0), ((blocks, 1, 1), 1)]


def launch_bounds(block: int) -> str:
    return f"{block}, {MIN_BLOCKS}" if MIN_BLOCKS else f"{block}"


def _sleep() -> str:
    return f"__nanosleep({BACKOFF});" if BACKOFF else ""


def _packed(spec: ScanSpec) -> tuple[str, str]:
    """An entry as `pieces` 8-byte words, each a piece of the state above a nonzero flag, each
    written and read whole: (the functions, the workspace pointer's declaration)."""
    n = pieces(spec)
    code = f"""static_assert(sizeof(jm_state_t) <= {4 * n}, "a state must fit its entry's pieces");
__device__ __forceinline__ jm_index_t jm_flag_words(jm_index_t jm_rows, jm_index_t jm_tiles) {{
  return {HEAD} + jm_rows * jm_tree_size(jm_tiles) * {n};  // the counter, then every entry's words
}}
__device__ __forceinline__ void jm_put(long long* jm_slot, jm_state_t jm_s) {{
  unsigned int jm_p[{n}] = {{}};
  memcpy(jm_p, &jm_s, sizeof(jm_state_t));
  for (int jm_i = 0; jm_i < {n}; ++jm_i)
    asm volatile("st.relaxed.gpu.b64 [%0], %1;" :: "l"(jm_slot + jm_i), "l"((unsigned long long)jm_p[jm_i] << 32 | 1ull)
                 : "memory");
}}
// An entry's state once every piece's flag is set: each word loaded whole from L2, no fence needed.
__device__ __forceinline__ jm_state_t jm_get(const long long* jm_slot) {{
  unsigned int jm_p[{n}];
  for (long long jm_n = 0;; ++jm_n) {{
    bool jm_all = true;
    for (int jm_i = 0; jm_i < {n}; ++jm_i) {{
      unsigned long long jm_w;
      asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(jm_w) : "l"(jm_slot + jm_i) : "memory");
      jm_all &= (unsigned int)jm_w != 0u;
      jm_p[jm_i] = (unsigned int)(jm_w >> 32);
    }}
    if (jm_all) break;
    if (jm_n == {SPINS}LL) __trap();  // an earlier tile never published: fail the launch, never hang
    {_sleep()}
  }}
  jm_state_t jm_s;
  memcpy(&jm_s, jm_p, sizeof(jm_state_t));
  return jm_s;
}}
"""
    return code, f"long long* const jm_slots = (long long*){ARGS}.jm_partials + {HEAD};"


def _fenced(spec: ScanSpec) -> tuple[str, str]:
    """An entry as an int32 flag and a state apart: the state written, fenced, then flagged."""
    words = state_words(spec)
    code = f"""static_assert(sizeof(jm_state_t) <= {8 * words}, "a state must fit its workspace slot");
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
  for (long long jm_n = 0; *(const volatile int*)jm_flag == 0; ++jm_n) {{
    if (jm_n == {SPINS}LL) __trap();  // an earlier tile never published: fail the launch, never hang
    {_sleep()}
  }}
  __threadfence();  // the flag seen, so is the state written before it
  long long jm_w[{words}];
  for (int jm_i = 0; jm_i < {words}; ++jm_i) jm_w[jm_i] = __ldcg(jm_slot + jm_i);
  jm_state_t jm_s;
  memcpy(&jm_s, jm_w, sizeof(jm_state_t));
  return jm_s;
}}
"""
    pointers = (f"int* const jm_flags = (int*)({ARGS}.jm_partials + {HEAD});\n"
                f"  long long* const jm_states = (long long*){ARGS}.jm_partials + "
                f"jm_flag_words({ARGS}.jm_rows, jm_tiles);")
    return code, pointers


def _publish(spec: ScanSpec, at: str, state: str) -> str:
    """Statements publishing `state` as entry `at` of the workspace."""
    if PACKED:
        return f"jm_put(jm_slots + ({at}) * {pieces(spec)}, {state});"
    return (f"jm_put(jm_states + ({at}) * {state_words(spec)}, {state}); __threadfence(); "
            f"*(volatile int*)(jm_flags + ({at})) = 1;")


def _read(spec: ScanSpec, at: str) -> str:
    if PACKED:
        return f"jm_get(jm_slots + ({at}) * {pieces(spec)})"
    return f"jm_get(jm_flags + ({at}), jm_states + ({at}) * {state_words(spec)})"


def device_code(spec: ScanSpec) -> str:
    """The functions a look-back kernel calls, after the state's type and `jm_from`."""
    fold = step(spec, "jm_carry", "jm_o")
    level = step(spec, "jm_from(jm_e, jm_k - 1)", "jm_level")
    protocol, pointers = _packed(spec) if PACKED else _fenced(spec)
    return f"""__device__ __forceinline__ jm_index_t jm_tree_size(jm_index_t jm_tiles) {{
  return 2 * jm_tiles - __popcll(jm_tiles);
}}
// Entry (k, m) of a row's tree: the fold of tiles [m 2^k, (m+1) 2^k), after the lower levels' entries.
__device__ __forceinline__ jm_index_t jm_entry(jm_index_t jm_tiles, int jm_k, jm_index_t jm_m) {{
  return jm_tree_size(jm_tiles) - jm_tree_size(jm_tiles >> jm_k) + jm_m;
}}
{protocol}// Warp 0 of the block of tile jm_tile of a row (its tree from entry jm_base): publishes the tile's
// aggregate and the entries it ends, and gives every lane the fold of the tiles before it.
__device__ __forceinline__ jm_state_t jm_look_back(const jm_Args& {ARGS}, jm_index_t jm_base, jm_index_t jm_tile,
                                                   jm_index_t jm_tiles, jm_state_t jm_agg) {{
  {pointers}
  const int jm_lane = jm_thread_x() & 31;
  if (jm_lane == 0) {{  // level 0 first: later tiles wait on it, and it waits on nothing
    {_publish(spec, "jm_base + jm_tile", "jm_agg")}
  }}
  // The levels the tile ends (one a trailing 1 bit): level k is bit k-1's entry, then level k-1.
  // Their left siblings (the entries of bits below jm_ends, all set) are read first and the levels
  // published before the carry's other entries are waited for: a level that waited on the whole
  // carry would chain every tile's publishing to the one before it (0.6-0.9 us a tile on an H100,
  // 2026-12-07), where this way a tile's levels wait on a chain of at most log2(tiles) others.
  const int jm_ends = __ffsll(~jm_tile) - 1;
  jm_state_t jm_e = {identity(spec)};  // lane b: the entry of the tile's bit b, where it is set
  if (jm_lane < jm_ends) jm_e = {_read(spec, "jm_base + jm_entry(jm_tiles, jm_lane, (jm_tile >> jm_lane) - 1)")};
  jm_state_t jm_level = jm_agg, jm_mine = jm_agg;
  for (int jm_k = 1; jm_k <= jm_ends; ++jm_k) {{
    jm_level = {level};
    if (jm_lane == jm_k) jm_mine = jm_level;
  }}
  if (jm_lane >= 1 && jm_lane <= jm_ends) {{
    {_publish(spec, "jm_base + jm_entry(jm_tiles, jm_lane, ((jm_tile + 1) >> jm_lane) - 1)", "jm_mine")}
  }}
  if (jm_lane > jm_ends && ((jm_tile >> jm_lane) & 1))  // the carry's higher entries (bit jm_ends is 0)
    jm_e = {_read(spec, "jm_base + jm_entry(jm_tiles, jm_lane, (jm_tile >> jm_lane) - 1)")};
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
        code.line(f"const jm_index_t jm_zeroed = jm_flag_words({ARGS}.jm_rows, jm_tiles);")
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
