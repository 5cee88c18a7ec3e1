"""The tiled path: 32x32 tiles of the two innermost loop dimensions, through shared memory.

For inputs that walk the second loop dimension contiguously while the outputs walk the
first (a transpose, NCHW read as NHWC): such inputs are read along their rows into a
padded shared tile and read back transposed, so every global access is coalesced.
"""
from __future__ import annotations

from ..arrays.base import ArrayDesc
from ..bind import Binding
from ..codegen.block import CodeBlock
from ..codegen.element import ARGS, element_body
from ..codegen.offsets import MODULO, operand_offsets
from ..dtypes import ctype
from ..layout import Layout
from ..spec import TILED, KernelSpec
from .args import FieldSpec
from .base import CallShape, CudaPath, Grid, PathChoice, ceil_div, loop_fields, loop_geometry

TILE, TILE_ROWS = 32, 8  # 32x32 tiles, 32x8 threads, 4 rows a thread
MAX_GRID_Y = MAX_GRID_Z = 65535


def _offset(k: int) -> str:
    return f"jm_o{k} + jm_i0 * (jm_index_t){ARGS}.jm_strides{k}[0] + jm_i1 * (jm_index_t){ARGS}.jm_strides{k}[1]"


class Tiled(CudaPath):
    name = TILED
    block = (TILE, TILE_ROWS, 1)

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
        nout, ins, rows = len(spec.outputs), spec.array_inputs, TILE // TILE_ROWS
        code = CodeBlock()
        for i in spec.tiled_inputs:
            code.line(f"__shared__ {ctype(spec.inputs[i])} jm_tile{i}[{TILE}][{TILE + 1}];")
        code.line(f"const jm_index_t jm_i0_base = (jm_index_t)jm_block_x() * {TILE}, "
                  f"jm_i1_base = (jm_index_t)jm_block_y() * {TILE};")
        code.line(f"const jm_index_t jm_s0 = (jm_index_t){ARGS}.jm_sizes[0], jm_s1 = (jm_index_t){ARGS}.jm_sizes[1];")
        code.line("jm_index_t jm_batches = 1;")
        for d in range(2, spec.ndim):
            code.line(f"jm_batches *= (jm_index_t){ARGS}.jm_sizes[{d}];")
        with code.block("for (jm_index_t jm_batch = jm_block_z(); jm_batch < jm_batches; jm_batch += jm_grid_z())"):
            code.extend(operand_offsets(spec, "jm_batch", MODULO, first_dim=2))
            if spec.tiled_inputs:
                code.line("#pragma unroll")
                with code.block(f"for (int jm_r = 0; jm_r < {rows}; ++jm_r)"):
                    code.line(f"const jm_index_t jm_i0 = jm_i0_base + jm_thread_y() + jm_r * {TILE_ROWS}, "
                              "jm_i1 = jm_i1_base + jm_thread_x();")
                    with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                        for i in spec.tiled_inputs:
                            code.line(f"jm_tile{i}[jm_thread_y() + jm_r * {TILE_ROWS}][jm_thread_x()] = "
                                      f"{ARGS}.jm_in{i}[{_offset(nout + ins.index(i))}];")
                code.line("__syncthreads();")
            code.line("#pragma unroll")
            with code.block(f"for (int jm_r = 0; jm_r < {rows}; ++jm_r)"):
                code.line("const jm_index_t jm_i0 = jm_i0_base + jm_thread_x(), "
                          f"jm_i1 = jm_i1_base + jm_thread_y() + jm_r * {TILE_ROWS};")
                with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                    loaded = {i: (f"jm_tile{i}[jm_thread_x()][jm_thread_y() + jm_r * {TILE_ROWS}]"
                                  if i in spec.tiled_inputs else f"{ARGS}.jm_in{i}[{_offset(nout + pos)}]")
                              for pos, i in enumerate(ins)}
                    code.extend(element_body(binding, spec, loaded,
                                             [f"{ARGS}.jm_out{j}[{_offset(j)}]" for j in range(nout)]))
            if spec.tiled_inputs:
                code.line("__syncthreads();")
        return code
