"""How a staged tile of a CUDA scan is read into shared memory (warp, block and look-back paths).

A group of `threads` threads reads `items` x `threads` consecutive elements densely (element
`i * threads + thread` of the tile is a thread's item i, so that a warp's loads cover a dense run)
and stores them to the staging buffer `jm_buf`, padded by `slot`. Issue 46: storing each element
as it is loaded lets ptxas keep only 2 to 6 loads in flight a thread (each store waits for its
load); loading a thread's items into registers first puts all of them in flight (a float32 linear
recurrence's block scan went from 1717 to 2136 GB/s on an H100, with FULL_TILES).
None of it changes which values a thread combines or in what order: results stay the same.
"""
from __future__ import annotations

from contextlib import nullcontext

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.kernels.scan_common import ARGS, element_call
from jiter_magic.planning.scan_plan import ScanSpec

# Tuning constants (bench/sweep_scan.py patches them; 0 and 0: each element stored as it is loaded).
STAGED_LOADS = 1  # 1: a thread's items loaded into registers, all in flight, then stored to shared memory
FULL_TILES = 1  # 1 (with STAGED_LOADS): a tile wholly inside the row loads without a guard on each element


def slot(index: str) -> str:
    """A staging buffer's slot of tile position `index`: one padding slot every 32, so that a
    thread's consecutive states and a warp's dense run spread over the banks."""
    return f"({index}) + (({index}) >> 5)"


def read(spec: ScanSpec, threads: int, tid: str, items: int) -> CodeBlock:
    """The group's tile from position `jm_j0` of the row into `jm_buf` (the caller syncs after).
    The registers `jm_n` live in a scope of their own, dead once stored: the look-back path that
    keeps its running states in the staged slots (scan_lookback.KEEP_STAGED) writes them only
    after the group's barrier that follows, so the loads and the kept slots never overlap."""
    loop = f"for (int jm_i = 0; jm_i < {items}; ++jm_i)"
    guard = f"if (jm_j0 + jm_x < {ARGS}.jm_count) "
    code = CodeBlock()
    if not STAGED_LOADS:
        with code.block(loop):
            code.line(f"const int jm_x = jm_i * {threads} + (int)({tid});")
            code.line(f"{guard}jm_buf[{slot('jm_x')}] = {element_call(spec, 'jm_j0 + jm_x')};")
        return code
    load = f"jm_n[jm_i] = {element_call(spec, 'jm_j0 + jm_x')};"
    with code.block(""):
        code.line(f"jm_state_t jm_n[{items}];")
        if FULL_TILES:  # no guard where the whole tile is in the row, so that nothing keeps the loads apart
            with code.block(f"if (jm_j0 + {threads * items} <= {ARGS}.jm_count)", close="} else {"), code.block(loop):
                code.line(f"const int jm_x = jm_i * {threads} + (int)({tid});\n{load}")
        with code.block(None) if FULL_TILES else nullcontext(), code.block(loop):  # the row's last tile
            code.line(f"const int jm_x = jm_i * {threads} + (int)({tid});\n{guard}{load}")
        with code.block(loop):
            code.line(f"const int jm_x = jm_i * {threads} + (int)({tid});")
            code.line(f"{guard}jm_buf[{slot('jm_x')}] = jm_n[jm_i];")
    return code
