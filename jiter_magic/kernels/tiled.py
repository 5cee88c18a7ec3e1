"""The tiled path: square tiles of the two innermost loop dimensions, through shared memory.

For inputs that walk the second loop dimension contiguously while the outputs walk the
first (a transpose, NCHW read as NHWC): such inputs are read along their rows into a
padded shared tile and read back transposed, so every global access is coalesced.
With `PREFETCH`, the other inputs are loaded into registers before the block waits on its
tile, so that all of a thread's loads are in flight at once.
"""
from __future__ import annotations

from ..arrays.base import ArrayDesc
from ..bind import Binding
from ..codegen.block import CodeBlock
from ..codegen.element import ARGS, element_body
from ..codegen.offsets import MODULO, operand_offsets
from ..dtypes import DTYPES, ctype
from ..layout import Layout
from ..spec import TILED, KernelSpec
from .args import FieldSpec
from .base import CallShape, CudaPath, Grid, PathChoice, ceil_div, loop_fields, loop_geometry

WARP = 32
# TILE x TILE tiles, 32 x `thread_rows(spec)` threads: TILE/32 columns and TILE/rows rows a thread.
# On the H200 (bench/sweep_gpu.py --tiled; bench/results/2026-12-01-h200-speed, sweeps 1-3, and
# sweep 5 in bench/results/2026-12-01-h200-speed-2, which confirms the choice below), with
# PREFETCH and 32x32 tiles: 32x4 threads are best where batches run on grid.z (NCHW read as NHWC:
# 3097-3312 GB/s against 2460-2750 with 32x16); two loop dimensions are faster with more rows, 32x16
# for 4-byte elements (transposed 16384^2 3317-3324 against 3108-3202; a 3-d rotation 3400-3407
# against 3090-3213) and 32x8 for 2-byte ones (2024-2105 against 1554-1650). 64x64 tiles: 2-3x slower.
TILE = 32
PREFETCH = True
BATCHED_ROWS, WIDE_ROWS, NARROW_ROWS = 4, 16, 8
MAX_GRID_Y = MAX_GRID_Z = 65535


def thread_rows(spec: KernelSpec) -> int:
    """Rows of threads in a block: its y extent, from the sweeps above."""
    if spec.ndim > 2:
        return BATCHED_ROWS
    widest = max(DTYPES[name].itemsize for name in (*spec.outputs, *(spec.inputs[i] for i in spec.tiled_inputs)))
    return NARROW_ROWS if widest <= 2 else WIDE_ROWS


def _offset(k: int) -> str:
    return f"jm_o{k} + jm_i0 * (jm_index_t){ARGS}.jm_strides{k}[0] + jm_i1 * (jm_index_t){ARGS}.jm_strides{k}[1]"


class Tiled(CudaPath):
    name = TILED

    def block_of(self, spec: KernelSpec) -> Grid:
        return WARP, thread_rows(spec), 1

    def match(self, call: CallShape) -> PathChoice | None:
        layout, nout = call.layout, len(call.output_dtypes)
        if layout.ndim < 2 or layout.sizes[0] < TILE // 2 or layout.sizes[1] < TILE // 2:
            return None
        if ceil_div(layout.sizes[1], TILE) > MAX_GRID_Y:  # tiles of the second dimension go on grid.y
            return None
        if any(layout.strides[j][0] != 1 for j in range(nout)):
            return None
        found, position = [], nout
        for index, a in enumerate(call.arrays):
            if isinstance(a, ArrayDesc):
                strides = layout.strides[position]
                if abs(strides[1]) == 1 and strides[0] != 1 and strides[0] != 0:
                    found.append(index)
                position += 1
        return PathChoice(TILED, layout.ndim, tiled_inputs=tuple(found)) if found else None

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        return loop_fields(spec)

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        return loop_geometry(layout)

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        """Tiles along the two inner dimensions, and up to 65535 batches (the kernel loops over more)."""
        s0, s1 = layout.sizes[0], layout.sizes[1]
        return ceil_div(s0, TILE), ceil_div(s1, TILE), min(layout.numel // (s0 * s1), MAX_GRID_Z)

    def shape_text(self, spec: KernelSpec) -> str:
        return f"{spec.ndim}-d, inputs {list(spec.tiled_inputs)} through shared memory"

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        nout, ins = len(spec.outputs), spec.array_inputs
        threads_y = thread_rows(spec)
        tile, rows, cols = TILE, TILE // threads_y, TILE // WARP
        direct = [i for i in ins if i not in spec.tiled_inputs]  # read in the outputs' order
        prefetch = PREFETCH and bool(spec.tiled_inputs) and bool(direct)
        code = CodeBlock()
        for i in spec.tiled_inputs:
            code.line(f"__shared__ {ctype(spec.inputs[i])} jm_tile{i}[{tile}][{tile + 1}];")
        code.line(f"const jm_index_t jm_i0_base = (jm_index_t)jm_block_x() * {tile}, "
                  f"jm_i1_base = (jm_index_t)jm_block_y() * {tile};")
        code.line(f"const jm_index_t jm_s0 = (jm_index_t){ARGS}.jm_sizes[0], jm_s1 = (jm_index_t){ARGS}.jm_sizes[1];")
        code.line("jm_index_t jm_batches = 1;")
        for d in range(2, spec.ndim):
            code.line(f"jm_batches *= (jm_index_t){ARGS}.jm_sizes[{d}];")
        # (row, column) of a thread's element in the tile: staged reads walk the second dimension
        # with the thread's x; the outputs' reads and writes walk the first.
        staged = (f"jm_thread_y() + jm_r * {threads_y}", f"jm_thread_x() + jm_c * {WARP}")
        each = (f"for (int jm_c = 0; jm_c < {cols}; ++jm_c)\n#pragma unroll\n"
                f"for (int jm_r = 0; jm_r < {rows}; ++jm_r)")
        out_at = (f"const jm_index_t jm_i0 = jm_i0_base + jm_thread_x() + jm_c * {WARP}, "
                  f"jm_i1 = jm_i1_base + jm_thread_y() + jm_r * {threads_y};")
        with code.block("for (jm_index_t jm_batch = jm_block_z(); jm_batch < jm_batches; jm_batch += jm_grid_z())"):
            code.extend(operand_offsets(spec, "jm_batch", MODULO, first_dim=2))
            if spec.tiled_inputs:
                code.line("#pragma unroll")
                with code.block(each):
                    code.line(f"const jm_index_t jm_i0 = jm_i0_base + {staged[0]}, jm_i1 = jm_i1_base + {staged[1]};")
                    with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                        for i in spec.tiled_inputs:
                            code.line(f"jm_tile{i}[{staged[0]}][{staged[1]}] = "
                                      f"{ARGS}.jm_in{i}[{_offset(nout + ins.index(i))}];")
            if prefetch:
                for i in direct:
                    code.line(f"{ctype(spec.inputs[i])} jm_p{i}[{cols}][{rows}];")
                code.line("#pragma unroll")
                with code.block(each):
                    code.line(out_at)
                    with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                        for i in direct:
                            code.line(f"jm_p{i}[jm_c][jm_r] = {ARGS}.jm_in{i}[{_offset(nout + ins.index(i))}];")
            if spec.tiled_inputs:
                code.line("__syncthreads();")
            code.line("#pragma unroll")
            with code.block(each):
                code.line(out_at)
                with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                    loaded = {}
                    for pos, i in enumerate(ins):
                        if i in spec.tiled_inputs:
                            loaded[i] = f"jm_tile{i}[{staged[1]}][{staged[0]}]"
                        elif prefetch:
                            loaded[i] = f"jm_p{i}[jm_c][jm_r]"
                        else:
                            loaded[i] = f"{ARGS}.jm_in{i}[{_offset(nout + pos)}]"
                    code.extend(element_body(binding, spec, loaded,
                                             [f"{ARGS}.jm_out{j}[{_offset(j)}]" for j in range(nout)]))
            if spec.tiled_inputs:
                code.line("__syncthreads();")
        return code
