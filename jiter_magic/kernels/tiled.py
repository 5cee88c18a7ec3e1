"""The tiled path: tiles of the two innermost loop dimensions, through shared memory.

For inputs that walk the second loop dimension contiguously while the outputs walk the
first (a transpose, NCHW read as NHWC): such inputs are read along their rows into a
padded shared tile and read back transposed, so every global access is coalesced.
With `PREFETCH`, the other inputs are loaded into registers before the block waits on its
tile, so that all of a thread's loads are in flight at once. Where the tiled inputs and the
outputs share a 1- or 2-byte dtype and pointers and strides allow it, the kernel is the packed
one of `packed_tiles.py` (`TiledParams.pack`: elements moved as one 4-byte access); where they share
a 4-byte dtype, the one of `vector_tiles.py` (`TiledParams.vec`: 16-byte accesses over 64x64 tiles).
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body
from jiter_magic.codegen.offsets import MODULO, operand_offsets
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels import vector_tiles
from jiter_magic.kernels.base import (
    CallShape,
    Grid,
    LoopPath,
    PathChoice,
    ceil_div,
    params_of,
    transposed_inputs,
    within_budget,
)
from jiter_magic.kernels.packed_tiles import PACKED_BATCHES_A_BLOCK, packed_body, packed_edges, packed_rows, packing
from jiter_magic.kernels.tile_code import (
    SHARED_LIMIT,
    TILE,
    WARP,
    TiledParams,
    batch_loop,
    operand_offset,
    tile_origin,
)
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.layout import Layout
from jiter_magic.planning.spec import TILED, KernelSpec

# Tiles of edge0 x edge1 elements (`tile_edges`), 32 x `thread_rows(spec)` threads: a thread moves
# edge0/32 columns of edge1/rows rows. The shapes are the fastest of those measured, with PREFETCH
# (the measurements: docs/benchmarks.md):
# - two loop dimensions: 32x32 tiles; 32x16 threads for 4-byte elements, 32x8 for 2-byte ones.
#   Larger tiles (64x64, 32x64) were slower.
# - batches on grid.z (NCHW read as NHWC): 32x64 tiles (64 along the tiled input's rows: `runs` 2)
#   and 32x8 threads where the tiled input's rows fill two such tiles, else 32x32 tiles and 32x4
#   threads: over short rows (32 channels) the wide tiles were slower. A block walking 2 or 4
#   batches instead of one gained nothing.
PREFETCH = True
# Rows of threads: "wide" and "narrow" name the elements (4 bytes or more; 1 or 2) in 2-d loops,
# the tiles (32x64 or 32x32) in batched ones.
ROWS_WIDE_ELEMENTS, ROWS_NARROW_ELEMENTS, ROWS_BATCHED, ROWS_BATCHED_WIDE_TILES = 16, 8, 4, 8
WIDE_TILE_ROWS = 4 * TILE  # batched loops whose second dimension has at least this many elements: 32x64 tiles
BATCHES_A_BLOCK = 1  # batches (loop dimensions past the second) a block walks: grid.z is batches / this
MAX_GRID_Y = MAX_GRID_Z = 65535


def thread_rows(spec: KernelSpec) -> int:
    """Rows of threads in a block: its y extent, as chosen above."""
    params = params_of(spec, TiledParams)
    if params.pack > 1:
        return packed_rows(spec)
    if params.vec > 1:
        return vector_tiles.ROWS
    if spec.ndim > 2:
        return ROWS_BATCHED_WIDE_TILES if params.runs > 1 else ROWS_BATCHED
    widest = max(DTYPES[name].itemsize for name in (*spec.outputs, *(spec.inputs[i] for i in params.tiled_inputs)))
    return ROWS_NARROW_ELEMENTS if widest <= 2 else ROWS_WIDE_ELEMENTS


def tile_edges(spec: KernelSpec) -> tuple[int, int]:
    """A tile's edge along the first loop dimension (the outputs' rows) and along the second (the
    tiled inputs' rows), in elements: multiples of 32 and of the block's rows. A tile holds `runs`
    warp-wide runs of a tiled input's row; a packed tile's rows are a warp's packed accesses wide
    (`packed_edges`)."""
    params = params_of(spec, TiledParams)
    if params.pack > 1:
        return packed_edges(params.pack, params.runs)
    if params.vec > 1:
        return vector_tiles.EDGE, vector_tiles.EDGE
    return TILE, TILE * params.runs


def tile_padding(dtype: str) -> int:
    """Elements past a shared tile's row, so that a warp reading down a column hits 32 banks: rows of
    an odd number of 4-byte words for elements narrower than 4 bytes, one element otherwise."""
    return max(1, 4 // DTYPES[dtype].itemsize)


def tile_bytes(dtype: str, edge1: int) -> int:
    """Shared memory one tiled input's tile takes: TILE rows of `edge1` elements and the padding."""
    return TILE * (edge1 + tile_padding(dtype)) * DTYPES[dtype].itemsize


class Tiled(LoopPath):
    name = TILED

    def block_of(self, spec: KernelSpec) -> Grid:
        return WARP, thread_rows(spec), 1

    def match(self, call: CallShape) -> PathChoice | None:
        layout = call.layout
        if layout.ndim < 2 or layout.sizes[0] < TILE // 2 or layout.sizes[1] < TILE // 2:
            return None
        if ceil_div(layout.sizes[1], TILE) > MAX_GRID_Y:  # tiles of the second dimension go on grid.y
            return None
        # As many inputs through tiles as their tiles fit in shared memory (three complex128 ones do
        # not); the others are read directly, as the inputs that walk the outputs' way are.
        chosen = within_budget(transposed_inputs(call), lambda found: tile_bytes(call.arrays[found[0]].dtype, TILE),
                               SHARED_LIMIT)
        if not chosen:
            return None
        staged = [index for index, _ in chosen]
        pack, runs = packing(call, chosen)
        if pack > 1:
            return PathChoice(TILED, layout.ndim, TiledParams(runs=runs, tiled_inputs=tuple(staged), pack=pack))
        vec = vector_tiles.vectoring(call, chosen)
        if vec > 1:
            return PathChoice(TILED, layout.ndim, TiledParams(tiled_inputs=tuple(staged), vec=vec))
        wide = layout.ndim > 2 and layout.sizes[1] >= WIDE_TILE_ROWS and \
            sum(tile_bytes(call.arrays[i].dtype, 2 * TILE) for i in staged) <= SHARED_LIMIT
        return PathChoice(TILED, layout.ndim, TiledParams(runs=2 if wide else 1, tiled_inputs=tuple(staged)))

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        """Tiles along the two inner dimensions, and up to 65535 batches (the kernel loops over more)."""
        s0, s1 = layout.sizes[0], layout.sizes[1]
        edge0, edge1 = tile_edges(spec)
        batches = layout.numel // (s0 * s1)
        walked = PACKED_BATCHES_A_BLOCK if params_of(spec, TiledParams).pack > 1 else BATCHES_A_BLOCK
        return ceil_div(s0, edge0), ceil_div(s1, edge1), min(ceil_div(batches, walked), MAX_GRID_Z)

    def shape_text(self, spec: KernelSpec) -> str:
        params, (edge0, edge1) = params_of(spec, TiledParams), tile_edges(spec)
        packed = f", {params.pack} elements an access" if params.pack > 1 else ""
        packed += f", {params.vec} elements an access" if params.vec > 1 else ""
        return f"{spec.ndim}-d, inputs {list(params.tiled_inputs)} through {edge0}x{edge1} shared-memory tiles{packed}"

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        params = params_of(spec, TiledParams)
        if params.pack > 1:
            return packed_body(binding, spec)
        if params.vec > 1:
            return vector_tiles.vector_body(binding, spec)
        nout, ins, tiled = len(spec.outputs), spec.array_inputs, params.tiled_inputs
        threads_y = thread_rows(spec)
        edge0, edge1 = tile_edges(spec)
        # A thread's share: staged reads cover edge0 rows (dimension 0) of edge1 columns (dimension 1);
        # the outputs' pass covers edge1 rows of edge0 columns.
        staged_rows, staged_cols = edge0 // threads_y, edge1 // WARP
        rows, cols = edge1 // threads_y, edge0 // WARP
        direct = [i for i in ins if i not in tiled]  # read in the outputs' order
        prefetch = PREFETCH and bool(tiled) and bool(direct)
        code = CodeBlock()
        for i in tiled:
            padded = edge1 + tile_padding(spec.inputs[i])
            code.line(f"__shared__ {ctype(spec.inputs[i])} jm_tile{i}[{edge0}][{padded}];")
        code.extend(tile_origin(spec, edge0, edge1))
        # (row, column) of a thread's element in the tile: staged reads walk the second dimension
        # with the thread's x; the outputs' reads and writes walk the first.
        staged = (f"jm_thread_y() + jm_r * {threads_y}", f"jm_thread_x() + jm_c * {WARP}")
        each = (f"for (int jm_c = 0; jm_c < {cols}; ++jm_c)\n#pragma unroll\n"
                f"for (int jm_r = 0; jm_r < {rows}; ++jm_r)")
        each_staged = (f"for (int jm_c = 0; jm_c < {staged_cols}; ++jm_c)\n#pragma unroll\n"
                       f"for (int jm_r = 0; jm_r < {staged_rows}; ++jm_r)")
        out_at = (f"const jm_index_t jm_i0 = jm_i0_base + jm_thread_x() + jm_c * {WARP}, "
                  f"jm_i1 = jm_i1_base + jm_thread_y() + jm_r * {threads_y};")
        with code.block(batch_loop(spec)):
            code.extend(operand_offsets(spec, "jm_batch", MODULO, first_dim=2))
            if tiled:
                code.line("#pragma unroll")
                with code.block(each_staged):
                    code.line(f"const jm_index_t jm_i0 = jm_i0_base + {staged[0]}, jm_i1 = jm_i1_base + {staged[1]};")
                    with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                        for i in tiled:
                            code.line(f"jm_tile{i}[{staged[0]}][{staged[1]}] = "
                                      f"{ARGS}.jm_in{i}[{operand_offset(nout + ins.index(i))}];")
            if prefetch:
                for i in direct:
                    code.line(f"{ctype(spec.inputs[i])} jm_p{i}[{cols}][{rows}];")
                code.line("#pragma unroll")
                with code.block(each):
                    code.line(out_at)
                    with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                        for i in direct:
                            code.line(f"jm_p{i}[jm_c][jm_r] = {ARGS}.jm_in{i}[{operand_offset(nout + ins.index(i))}];")
            if tiled:
                code.line("__syncthreads();")
            code.line("#pragma unroll")
            with code.block(each):
                code.line(out_at)
                with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
                    loaded = {}
                    for pos, i in enumerate(ins):
                        if i in tiled:
                            loaded[i] = f"jm_tile{i}[{staged[1]}][{staged[0]}]"
                        elif prefetch:
                            loaded[i] = f"jm_p{i}[jm_c][jm_r]"
                        else:
                            loaded[i] = f"{ARGS}.jm_in{i}[{operand_offset(nout + pos)}]"
                    code.extend(element_body(binding, spec, loaded,
                                             [f"{ARGS}.jm_out{j}[{operand_offset(j)}]" for j in range(nout)]))
            if tiled:
                code.line("__syncthreads();")
        return code
