"""The look-back over a fixed window of tiles: a deterministic chained scan, a few round trips deep.

Each tile t of a row publishes two entries: A(t), its aggregate, as soon as its warps' totals are
in, and I(t), the fold of the row's tiles [0, t], once it knows its carry. Its carry E(t) folds a
window of W = 32 x `warps` items, [I(t - W), A(t - W + 1), ..., A(t - 1)] (the identity where a
tile number is negative): warp w reads items [32 w, 32 w + 32), a lane each, folds them by a
fixed warp scan (lane 31 ends with their fold), and thread 0 folds the warps' folds in order. The
grouping depends on t alone, so a float combine rounds the same way on every run; I(t) = E(t)
then A(t) chains every W-th tile, so the chain moves W tiles a round trip, and a tile's carry
waits about one round trip after its predecessor's aggregate (the tree's waits chain about
log2(round trip / tile period) deep). A tile waits only on earlier tiles, which publish A
without waiting and I after their own window: none deadlocks.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.kernels import scan_entries
from jiter_magic.kernels.scan_common import ARGS, identity, step
from jiter_magic.planning.scan_plan import ScanSpec


def row_entries(tiles: int) -> int:
    """A(t) then I(t) of each tile: I(t) at `tiles + t`."""
    return 2 * tiles


def device_code(spec: ScanSpec, warps: int) -> str:
    """`jm_row_entries`, the entries' functions and `jm_window` (a warp's fold of its items)."""
    read = scan_entries.read(spec, "jm_base + (jm_q == 0 ? jm_tiles + jm_s : jm_s)")
    return f"""__device__ __forceinline__ jm_index_t jm_row_entries(jm_index_t jm_tiles) {{
  return 2 * jm_tiles;
}}
{scan_entries.device_code(spec)}// Warp jm_warp's items of tile jm_tile's window (a row's entries from jm_base), a
// lane each, folded by a fixed warp scan: lane 31 returns their fold.
__device__ __forceinline__ jm_state_t jm_window(const jm_Args& {ARGS}, jm_index_t jm_base, jm_index_t jm_tile,
                                                jm_index_t jm_tiles, int jm_warp) {{
  {scan_entries.pointers()}
  const int jm_lane = jm_thread_x() & 31, jm_q = jm_warp * 32 + jm_lane;
  const jm_index_t jm_s = jm_tile - {32 * warps} + jm_q;  // item q's tile: I(s) for item 0, else A(s)
  jm_state_t jm_x = {identity(spec)};
  if (jm_s >= 0) jm_x = {read};
  for (int jm_off = 1; jm_off < 32; jm_off <<= 1) {{
    const jm_state_t jm_o = jm_up(jm_x, jm_off);
    if (jm_lane >= jm_off) jm_x = {step(spec, "jm_o", "jm_x")};
  }}
  return jm_x;
}}
"""


def carry(spec: ScanSpec, warps: int, window: int) -> CodeBlock:
    """Inside a tile, once the warps' totals are in `jm_totals`: A(t) published, `jm_carry` from
    the window's `window` warps, then I(t) published."""
    code = CodeBlock(f"__shared__ jm_state_t jm_looked, jm_parts[{window}];",
                     "const jm_index_t jm_base = jm_row * 2 * jm_tiles;",
                     f"jm_state_t jm_agg = {identity(spec)};  // the same fold of the same totals in every thread")
    code.line(f"for (int jm_w = 0; jm_w < {warps}; ++jm_w) jm_agg = {step(spec, 'jm_agg', 'jm_totals[jm_w]')};")
    with code.block("if (jm_thread_x() == 0)"):  # A(t) first: later tiles wait on it, and it waits on nothing
        code.line(scan_entries.pointers())
        code.line(scan_entries.publish(spec, "jm_base + jm_tile", "jm_agg"))
    with code.block(f"if (jm_warp < {window})"):
        code.line(f"const jm_state_t jm_part = jm_window({ARGS}, jm_base, jm_tile, jm_tiles, jm_warp);")
        code.line("if (jm_lane == 31) jm_parts[jm_warp] = jm_part;")
    code.line("__syncthreads();")
    with code.block("if (jm_thread_x() == 0)"):
        code.line("jm_state_t jm_e = jm_parts[0];")
        code.line(f"for (int jm_w = 1; jm_w < {window}; ++jm_w) jm_e = {step(spec, 'jm_e', 'jm_parts[jm_w]')};")
        code.line(scan_entries.pointers())
        code.line(scan_entries.publish(spec, "jm_base + jm_tiles + jm_tile", step(spec, "jm_e", "jm_agg")))
        code.line("jm_looked = jm_e;")
    code.line("__syncthreads();")
    code.line("jm_carry = jm_looked;")
    return code
