"""How a look-back scan's tiles publish and read entries (a state and its flag) in a workspace.

A workspace (int64 words) holds the tile counter alone in its 128-byte line, then the entries of
every row (`jm_row_entries(tiles)` a row, defined by the kernel's scheme). Stage 0 zeroes what
holds flags, so that no entry reads as published before a tile publishes it.
- PACKED (the default): an entry is its state in 4-byte pieces, each in one 8-byte word above a
  nonzero flag. A word is written and read whole (an aligned 64-bit access is single-copy atomic),
  so a reader that sees every piece's flag holds the whole state, with no fence on either side and
  one L2 round trip a read (CUB packs a status with a small value the same way; cutting a state
  into pieces keeps it sound for any size, where one 16-byte vector word is not promised whole).
- Not packed: int32 flags apart from the states; publishing writes the state, fences, then sets
  the flag; reading spins on the flag, fences, then reads the state past L1: three dependent round
  trips a read, two full fences a hop.
A reader sleeps BACKOFF ns between polls, and traps after SPINS of them (an earlier tile that never
published: the launch fails instead of hanging the GPU).
"""
from __future__ import annotations

from jiter_magic.kernels.scan_common import ARGS
from jiter_magic.planning.dtypes import DTYPES
from jiter_magic.planning.scan_plan import ScanSpec

SPINS = 1 << 26  # about a minute at one L2 read a spin: only a bug waits that long
HEAD = 16  # int64 words before the entries: the tile counter alone in its 128-byte line
PACKED = 1  # 1: a flag in each 8-byte word of an entry's state (no fences); 0: flags apart, two fences
BACKOFF = 0  # ns a waiting lane sleeps between polls of an entry (0: poll back to back)


def state_words(spec: ScanSpec) -> int:
    """int64 words a state takes in a workspace: a value is 8 bytes at most, a value and its index 16."""
    return 2 if spec.indexed else spec.state


def pieces(spec: ScanSpec) -> int:
    """4-byte pieces of a state (a packed entry's 8-byte words): the kernel asserts the state fits."""
    size = 16 if spec.indexed else DTYPES[spec.accumulate].itemsize * spec.state
    return -(-size // 4)


def zeroed_words(spec: ScanSpec, entries: int) -> int:
    """The counter and the flags of `entries` entries (packed: the whole entries), in int64 words."""
    return HEAD + (entries * pieces(spec) if PACKED else (entries + 1) // 2)


def workspace_words(spec: ScanSpec, entries: int) -> int:
    return zeroed_words(spec, entries) + (0 if PACKED else entries * state_words(spec))


def _sleep() -> str:
    return f"__nanosleep({BACKOFF});" if BACKOFF else ""


def _packed(spec: ScanSpec) -> str:
    n = pieces(spec)
    return f"""static_assert(sizeof(jm_state_t) <= {4 * n}, "a state must fit its entry's pieces");
__device__ __forceinline__ jm_index_t jm_flag_words(jm_index_t jm_rows, jm_index_t jm_tiles) {{
  return {HEAD} + jm_rows * jm_row_entries(jm_tiles) * {n};  // the counter, then every entry's words
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


def _fenced(spec: ScanSpec) -> str:
    words = state_words(spec)
    return f"""static_assert(sizeof(jm_state_t) <= {8 * words}, "a state must fit its workspace slot");
__device__ __forceinline__ jm_index_t jm_flag_words(jm_index_t jm_rows, jm_index_t jm_tiles) {{
  return {HEAD} + (jm_rows * jm_row_entries(jm_tiles) + 1) / 2;  // the counter, then int32 flags
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


def device_code(spec: ScanSpec) -> str:
    """`jm_flag_words`, `jm_put` and `jm_get`, after `jm_row_entries`."""
    return _packed(spec) if PACKED else _fenced(spec)


def pointers() -> str:
    """Declarations of the workspace's pointers that `publish` and `read` use (with `jm_tiles`)."""
    if PACKED:
        return f"long long* const jm_slots = (long long*){ARGS}.jm_partials + {HEAD};"
    return (f"int* const jm_flags = (int*)({ARGS}.jm_partials + {HEAD});\n"
            f"long long* const jm_states = (long long*){ARGS}.jm_partials + jm_flag_words({ARGS}.jm_rows, jm_tiles);")


def publish(spec: ScanSpec, at: str, state: str) -> str:
    """Statements publishing `state` as entry `at` of the workspace."""
    if PACKED:
        return f"jm_put(jm_slots + ({at}) * {pieces(spec)}, {state});"
    return (f"jm_put(jm_states + ({at}) * {state_words(spec)}, {state}); __threadfence(); "
            f"*(volatile int*)(jm_flags + ({at})) = 1;")


def read(spec: ScanSpec, at: str) -> str:
    """An expression: entry `at`'s state, once published."""
    if PACKED:
        return f"jm_get(jm_slots + ({at}) * {pieces(spec)})"
    return f"jm_get(jm_flags + ({at}), jm_states + ({at}) * {state_words(spec)})"
