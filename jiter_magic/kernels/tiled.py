"""The tiled path: tiles of the two innermost loop dimensions, through shared memory.

For inputs that walk the second loop dimension contiguously while the outputs walk the
first (a transpose, NCHW read as NHWC): such inputs are read along their rows into a
padded shared tile and read back transposed, so every global access is coalesced.
With `PREFETCH`, the other inputs are loaded into registers before the block waits on its
tile, so that all of a thread's loads are in flight at once. Where the tiled inputs and the
outputs share a 1- or 2-byte dtype, a thread moves 4 and 2 elements as one 4-byte access along
both rows (`spec.pack`), so that a warp's access is 128 bytes as with 4-byte elements.
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
# Tiles of edge0 x edge1 elements (`tile_edges`), 32 x `thread_rows(spec)` threads: a thread moves
# edge0/32 columns of edge1/rows rows. On the H200 (bench/sweep_gpu.py; bench/results/2026-12-01-h200-speed
# sweeps 1-3, 2026-12-01-h200-speed-2 sweep 5, and 2026-12-02-h200-layouts sweep 12), with PREFETCH:
# - two loop dimensions: 32x32 tiles, 32x16 threads for 4-byte elements (transposed 16384^2 3317-3442 GB/s
#   against 3108-3304 with 32x4 or 32x8; a 3-d rotation 3400-3565 against 3090-3381) and 32x8 for 2-byte
#   ones (2024-2130 against 1554-1733). Wider tiles lose there: 64x64 1.5-3x slower, 32x64 6-20%.
# - batches on grid.z (NCHW read as NHWC): with 256 channels, 32x64 tiles (64 along the tiled input's
#   rows: spec.vec 2) and 32x8 threads, 3391-3768 GB/s for float32 against 3071-3413 with 32x32 tiles
#   and 32x4 threads, 2034-2307 against 1673-1794 for float16; with 32 channels, 2577-2658 against
#   3280-3433, and 1282-1373 against 1730-1821 (sweep 13 of 2026-12-02-h200-layouts). So the wide
#   tiles only where the tiled input's rows fill two of them. A block walking 2 or 4 batches gained nothing.
TILE = 32
PREFETCH = True
BATCHED_ROWS, WIDE_BATCHED_ROWS, WIDE_ROWS, NARROW_ROWS = 4, 8, 16, 8
WIDE_TILE_ROWS = 4 * TILE  # batched loops whose second dimension has at least this many elements: 32x64 tiles
SHARED_LIMIT = 48 * 1024  # static shared memory a block: the tiles of the inputs read through it must fit
BATCHES_A_BLOCK = 1  # batches (loop dimensions past the second) a block walks: grid.z is batches / this
MAX_GRID_Y = MAX_GRID_Z = 65535
# Packed tiles (`spec.pack` elements an access, tiles of 32*pack x 32*pack): the packs allowed and the
# rows of threads for each, two loop dimensions and batched. On the H200 (sweeps 15-17 of
# bench/results/2026-12-02-h200-packed), transposed 16384^2 float16: 3375-3545 GB/s with 32x8 threads
# against 3080-3246 with 32x16 and 2002-2129 unpacked; NCHW float16 read as NHWC, 256 channels: 3049-3237
# with 32x16 against 2763-3225 with 32x8 and 1984-2188 unpacked; int8 transposed: 1842-1995 with 32x32
# threads against 1126-1178 unpacked (32x8 and 32x16 threads spill registers there).
PACKS = (2, 4)
PACKED_ROWS = {2: 8, 4: 32}
PACKED_BATCHED_ROWS = {2: 16, 4: 32}


def thread_rows(spec: KernelSpec) -> int:
    """Rows of threads in a block: its y extent, from the sweeps above."""
    if spec.pack > 1:
        return (PACKED_BATCHED_ROWS if spec.ndim > 2 else PACKED_ROWS)[spec.pack]
    if spec.ndim > 2:
        return WIDE_BATCHED_ROWS if spec.vec > 1 else BATCHED_ROWS
    widest = max(DTYPES[name].itemsize for name in (*spec.outputs, *(spec.inputs[i] for i in spec.tiled_inputs)))
    return NARROW_ROWS if widest <= 2 else WIDE_ROWS


def tile_edges(spec: KernelSpec) -> tuple[int, int]:
    """A tile's edge along the first loop dimension (the outputs' rows) and along the second (the
    tiled inputs' rows), in elements: multiples of 32 and of the block's rows. `spec.vec` counts the
    warp-wide runs of a tiled input's row that a tile holds; packed tiles are square, a warp's
    packed accesses wide."""
    if spec.pack > 1:
        return TILE * spec.pack, TILE * spec.pack
    return TILE, TILE * spec.vec


def tile_padding(dtype: str) -> int:
    """Elements past a shared tile's row, so that a warp reading down a column hits 32 banks: rows of
    an odd number of 4-byte words for elements narrower than 4 bytes, one element otherwise."""
    return max(1, 4 // DTYPES[dtype].itemsize)


def tile_bytes(dtype: str, edge1: int) -> int:
    """Shared memory one tiled input's tile takes: TILE rows of `edge1` elements and the padding."""
    return TILE * (edge1 + tile_padding(dtype)) * DTYPES[dtype].itemsize


def packed_tile_elements(pack: int) -> int:
    """Elements of a packed tile: rows of 32*pack elements and one 4-byte word of padding, and one
    more word after every 32 rows. A warp's packed reads down a column take rows 32 apart in
    `pack` groups; the extra word puts each group on its own banks."""
    edge = TILE * pack
    return edge * (edge + pack) + (edge // TILE) * pack


def packed_tile_index(pack: int, row: str, column: str) -> str:
    """The flat index of (row, column) in a packed tile, as C++."""
    return f"({row}) * {TILE * pack + pack} + (({row}) >> 5) * {pack} + ({column})"


def packing(call: CallShape, staged: list[tuple[int, int]]) -> int:
    """Elements of a packed access for these tiled inputs (index, operand position), or 1: packed
    where the tiled inputs and the outputs share a 1- or 2-byte dtype, the tiled inputs' rows run
    forwards, both loop dimensions fill a packed tile, the tiles fit in shared memory, and pointers
    and strides allow 4-byte accesses. The kernel checks the last again, a batch at a time."""
    layout = call.layout
    widths = {DTYPES[d].itemsize for d in call.output_dtypes}
    widths |= {DTYPES[call.arrays[i].dtype].itemsize for i, _ in staged}
    if len(widths) != 1:
        return 1
    pack = 4 // widths.pop()
    edge = TILE * pack
    if pack not in PACKS or layout.sizes[0] < edge or layout.sizes[1] < edge:
        return 1
    if any(layout.strides[position][1] != 1 for _, position in staged):
        return 1
    if len(staged) * packed_tile_elements(pack) * (4 // pack) > SHARED_LIMIT:
        return 1
    # 4-byte accesses need every tiled input's and output's pointer at 4 bytes and its strides,
    # but along its own rows, multiples of the pack (a misaligned view keeps the unpacked tiles,
    # which move it as fast). Plans are keyed by pointer alignment, so this holds for the plan.
    pointers = [call.arrays[i].pointer for i, _ in staged] + [o.pointer for o in call.outs or []]
    other_strides = [s for _, position in staged for d, s in enumerate(layout.strides[position]) if d != 1]
    other_strides += [s for j in range(len(call.output_dtypes)) for s in layout.strides[j][1:]]
    if any(p % 4 for p in pointers) or any(s % pack for s in other_strides):
        return 1
    return pack


def _tile_origin(spec: KernelSpec, edge0: int, edge1: int) -> CodeBlock:
    """The block's tile origin, the two tiled loop sizes and the count of batches (every loop
    dimension past the second), which both tiled kernels start from."""
    code = CodeBlock(f"const jm_index_t jm_i0_base = (jm_index_t)jm_block_x() * {edge0}, "
                     f"jm_i1_base = (jm_index_t)jm_block_y() * {edge1};",
                     f"const jm_index_t jm_s0 = (jm_index_t){ARGS}.jm_sizes[0], "
                     f"jm_s1 = (jm_index_t){ARGS}.jm_sizes[1];",
                     "jm_index_t jm_batches = 1;")
    for d in range(2, spec.ndim):
        code.line(f"jm_batches *= (jm_index_t){ARGS}.jm_sizes[{d}];")
    return code


def _offset(k: int, i0: str = "jm_i0", i1: str = "jm_i1") -> str:
    return f"jm_o{k} + {i0} * (jm_index_t){ARGS}.jm_strides{k}[0] + {i1} * (jm_index_t){ARGS}.jm_strides{k}[1]"


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
                    found.append((index, position))
                position += 1
        # As many inputs through tiles as their tiles fit in shared memory (three complex128 ones do
        # not); the others are read directly, as the inputs that walk the outputs' way are.
        chosen, used = [], 0
        for index, position in found:
            need = tile_bytes(call.arrays[index].dtype, TILE)
            if used + need <= SHARED_LIMIT:
                chosen.append((index, position))
                used += need
        if not chosen:
            return None
        staged = [index for index, _ in chosen]
        pack = packing(call, chosen)
        if pack > 1:
            return PathChoice(TILED, layout.ndim, 1, tiled_inputs=tuple(staged), pack=pack)
        wide = layout.ndim > 2 and layout.sizes[1] >= WIDE_TILE_ROWS and \
            sum(tile_bytes(call.arrays[i].dtype, 2 * TILE) for i in staged) <= SHARED_LIMIT
        return PathChoice(TILED, layout.ndim, 2 if wide else 1, tiled_inputs=tuple(staged))

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        return loop_fields(spec)

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        return loop_geometry(layout)

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        """Tiles along the two inner dimensions, and up to 65535 batches (the kernel loops over more)."""
        s0, s1 = layout.sizes[0], layout.sizes[1]
        edge0, edge1 = tile_edges(spec)
        batches = layout.numel // (s0 * s1)
        return ceil_div(s0, edge0), ceil_div(s1, edge1), min(ceil_div(batches, BATCHES_A_BLOCK), MAX_GRID_Z)

    def shape_text(self, spec: KernelSpec) -> str:
        edge0, edge1 = tile_edges(spec)
        packed = f", {spec.pack} elements an access" if spec.pack > 1 else ""
        return f"{spec.ndim}-d, inputs {list(spec.tiled_inputs)} through {edge0}x{edge1} shared-memory tiles{packed}"

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        if spec.pack > 1:
            return packed_body(binding, spec)
        nout, ins = len(spec.outputs), spec.array_inputs
        threads_y = thread_rows(spec)
        edge0, edge1 = tile_edges(spec)
        # A thread's share: staged reads cover edge0 rows (dimension 0) of edge1 columns (dimension 1);
        # the outputs' pass covers edge1 rows of edge0 columns.
        staged_rows, staged_cols = edge0 // threads_y, edge1 // WARP
        rows, cols = edge1 // threads_y, edge0 // WARP
        direct = [i for i in ins if i not in spec.tiled_inputs]  # read in the outputs' order
        prefetch = PREFETCH and bool(spec.tiled_inputs) and bool(direct)
        code = CodeBlock()
        for i in spec.tiled_inputs:
            padded = edge1 + tile_padding(spec.inputs[i])
            code.line(f"__shared__ {ctype(spec.inputs[i])} jm_tile{i}[{edge0}][{padded}];")
        code.extend(_tile_origin(spec, edge0, edge1))
        # (row, column) of a thread's element in the tile: staged reads walk the second dimension
        # with the thread's x; the outputs' reads and writes walk the first.
        staged = (f"jm_thread_y() + jm_r * {threads_y}", f"jm_thread_x() + jm_c * {WARP}")
        each = (f"for (int jm_c = 0; jm_c < {cols}; ++jm_c)\n#pragma unroll\n"
                f"for (int jm_r = 0; jm_r < {rows}; ++jm_r)")
        each_staged = (f"for (int jm_c = 0; jm_c < {staged_cols}; ++jm_c)\n#pragma unroll\n"
                       f"for (int jm_r = 0; jm_r < {staged_rows}; ++jm_r)")
        out_at = (f"const jm_index_t jm_i0 = jm_i0_base + jm_thread_x() + jm_c * {WARP}, "
                  f"jm_i1 = jm_i1_base + jm_thread_y() + jm_r * {threads_y};")
        with code.block("for (jm_index_t jm_batch = jm_block_z(); jm_batch < jm_batches; jm_batch += jm_grid_z())"):
            code.extend(operand_offsets(spec, "jm_batch", MODULO, first_dim=2))
            if spec.tiled_inputs:
                code.line("#pragma unroll")
                with code.block(each_staged):
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


def _stride(k: int, dim: int) -> str:
    return f"(jm_index_t){ARGS}.jm_strides{k}[{dim}]"


def _packed_condition(spec: KernelSpec) -> str:
    """C++: whether this batch's tiled inputs and outputs allow 4-byte accesses along their rows
    (pointers at 4 bytes, unit strides along the row, the other dimension's stride a multiple of
    the pack). Checked a batch at a time, so that a misaligned view takes the element branch."""
    nout, ins, mask = len(spec.outputs), spec.array_inputs, spec.pack - 1
    conditions = []
    for i in spec.tiled_inputs:
        k = nout + ins.index(i)
        conditions.append(f"(((unsigned long long)({ARGS}.jm_in{i} + jm_o{k})) & 3) == 0 && "
                          f"{ARGS}.jm_strides{k}[1] == 1 && ({ARGS}.jm_strides{k}[0] & {mask}) == 0")
    for j in range(nout):
        conditions.append(f"(((unsigned long long)({ARGS}.jm_out{j} + jm_o{j})) & 3) == 0 && "
                          f"{ARGS}.jm_strides{j}[0] == 1 && ({ARGS}.jm_strides{j}[1] & {mask}) == 0")
    return " &&\n    ".join(conditions)


def _direct_condition(spec: KernelSpec, i: int) -> str:
    """C++: whether direct input i is read `spec.pack` elements at a time along the outputs' rows."""
    k, mask = len(spec.outputs) + spec.array_inputs.index(i), spec.pack - 1
    return (f"(((unsigned long long)({ARGS}.jm_in{i} + jm_o{k})) & 3) == 0 && "
            f"{ARGS}.jm_strides{k}[0] == 1 && ({ARGS}.jm_strides{k}[1] & {mask}) == 0")


def packed_body(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """The tiled kernel over square tiles of 32*pack elements. Whole tiles move `spec.pack`
    elements as one 4-byte access (`_vector_tile`); partial tiles, and batches whose pointers or
    strides turn out not to allow it, take an element at a time over the same tiles
    (`_element_tile`). The choice is one per block and batch."""
    edge = TILE * spec.pack
    code = CodeBlock()
    for i in spec.tiled_inputs:
        code.line(f"__shared__ alignas(16) {ctype(spec.inputs[i])} jm_tile{i}[{packed_tile_elements(spec.pack)}];")
    code.extend(_tile_origin(spec, edge, edge))
    with code.block("for (jm_index_t jm_batch = jm_block_z(); jm_batch < jm_batches; jm_batch += jm_grid_z())"):
        code.extend(operand_offsets(spec, "jm_batch", MODULO, first_dim=2))
        code.line(f"const bool jm_whole = jm_i0_base + {edge} <= jm_s0 && jm_i1_base + {edge} <= jm_s1 &&\n"
                  f"    {_packed_condition(spec)};")
        with code.block("if (jm_whole)", close="} else {"):
            code.extend(_vector_tile(binding, spec))
        with code.block(None):
            code.extend(_element_tile(binding, spec))
    return code


def _vector_tile(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """A whole tile, `spec.pack` elements an access: a warp stages a tiled input's row as 32
    vectors, and computes and stores an output row as 32 vectors, each read down a tile column.
    Each operand's address is taken once and stepped by a multiple of its stride."""
    nout, ins, pack = len(spec.outputs), spec.array_inputs, spec.pack
    rows, edge = thread_rows(spec), TILE * pack
    steps = edge // rows  # tile rows a thread stages, and tile columns it computes
    direct = [i for i in ins if i not in spec.tiled_inputs]
    prefetch = PREFETCH and bool(direct)
    each_k = f"for (int jm_k = 0; jm_k < {pack}; ++jm_k)"
    k_of = {i: nout + ins.index(i) for i in ins}
    code = CodeBlock()
    for i in spec.tiled_inputs:
        code.line(f"const {ctype(spec.inputs[i])}* jm_at{i} = {ARGS}.jm_in{i} + (jm_o{k_of[i]} + "
                  f"(jm_i0_base + jm_thread_y()) * {_stride(k_of[i], 0)} + jm_i1_base + jm_thread_x() * {pack});")
    for i in direct:
        code.line(f"const {ctype(spec.inputs[i])}* jm_at{i} = {ARGS}.jm_in{i} + (jm_o{k_of[i]} + "
                  f"(jm_i0_base + jm_thread_x() * {pack}) * {_stride(k_of[i], 0)} + "
                  f"(jm_i1_base + jm_thread_y()) * {_stride(k_of[i], 1)});")
    for j, d in enumerate(spec.outputs):
        code.line(f"{ctype(d)}* jm_to{j} = {ARGS}.jm_out{j} + (jm_o{j} + jm_i0_base + jm_thread_x() * {pack} + "
                  f"(jm_i1_base + jm_thread_y()) * {_stride(j, 1)});")
    code.line("#pragma unroll")
    with code.block(f"for (int jm_r = 0; jm_r < {steps}; ++jm_r)"):
        code.line(f"const int jm_row = jm_thread_y() + jm_r * {rows};")
        for i in spec.tiled_inputs:
            vec_t = f"jm_vec<{ctype(spec.inputs[i])}, {pack}>"
            slot = packed_tile_index(pack, "jm_row", f"jm_thread_x() * {pack}")
            code.line(f"*reinterpret_cast<{vec_t}*>(jm_tile{i} + {slot}) = *reinterpret_cast<const {vec_t}*>"
                      f"(jm_at{i} + jm_r * {rows} * {_stride(k_of[i], 0)});")

    def direct_at(i: int) -> str:
        return f"jm_at{i}[jm_c * {rows} * {_stride(k_of[i], 1)} + jm_k * {_stride(k_of[i], 0)}]"

    if prefetch:
        for i in direct:
            code.line(f"jm_vec<{ctype(spec.inputs[i])}, {pack}> jm_p{i}[{steps}];")
        for i in direct:
            vec_t = f"jm_vec<{ctype(spec.inputs[i])}, {pack}>"
            scalar = CodeBlock("#pragma unroll")
            with scalar.block(f"for (int jm_c = 0; jm_c < {steps}; ++jm_c)"):
                scalar.line("#pragma unroll")
                scalar.line(f"{each_k} jm_p{i}[jm_c].jm_v[jm_k] = {direct_at(i)};")
            if DTYPES[spec.inputs[i]].itemsize * pack != 4:
                code.extend(scalar)
                continue
            # As wide as the tiled inputs: a vector at a time where this input allows it.
            with code.block(f"if ({_direct_condition(spec, i)})", close="} else {"):
                code.line("#pragma unroll")
                code.line(f"for (int jm_c = 0; jm_c < {steps}; ++jm_c) jm_p{i}[jm_c] = "
                          f"*reinterpret_cast<const {vec_t}*>(jm_at{i} + jm_c * {rows} * {_stride(k_of[i], 1)});")
            with code.block(None):
                code.extend(scalar)
    code.line("__syncthreads();")
    loaded = {}
    for i in ins:
        if i in spec.tiled_inputs:
            loaded[i] = f"jm_tile{i}[{packed_tile_index(pack, f'jm_thread_x() * {pack} + jm_k', 'jm_col')}]"
        else:
            loaded[i] = f"jm_p{i}[jm_c].jm_v[jm_k]" if prefetch else direct_at(i)
    code.line("#pragma unroll")
    with code.block(f"for (int jm_c = 0; jm_c < {steps}; ++jm_c)"):
        code.line(f"const int jm_col = jm_thread_y() + jm_c * {rows};")
        for j, d in enumerate(spec.outputs):
            code.line(f"jm_vec<{ctype(d)}, {pack}> jm_y{j};")
        code.line("#pragma unroll")
        with code.block(each_k):
            code.extend(element_body(binding, spec, loaded, [f"jm_y{j}.jm_v[jm_k]" for j in range(nout)]))
        for j, d in enumerate(spec.outputs):
            code.line(f"*reinterpret_cast<jm_vec<{ctype(d)}, {pack}>*>(jm_to{j} + jm_c * {rows} * {_stride(j, 1)}) "
                      f"= jm_y{j};")
    code.line("__syncthreads();")
    return code


def _element_tile(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """A partial tile (at the loop's edges): an element an access, consecutive lanes on consecutive
    elements, over the same tile layout. In rolled loops and without prefetching, because the
    kernel's registers are those of both branches: unrolled, this branch halved the whole tiles'
    speed on the H200 (sweeps 15 and 16 of bench/results/2026-12-02-h200-packed)."""
    nout, ins, pack = len(spec.outputs), spec.array_inputs, spec.pack
    rows, edge = thread_rows(spec), TILE * pack
    steps = edge // rows
    each = (f"for (int jm_c = 0; jm_c < {steps}; ++jm_c)\n#pragma unroll\n"
            f"for (int jm_k = 0; jm_k < {pack}; ++jm_k)")
    code = CodeBlock("#pragma unroll 1")
    with code.block(f"for (int jm_r = 0; jm_r < {steps}; ++jm_r)\n#pragma unroll\n"
                    f"for (int jm_k = 0; jm_k < {pack}; ++jm_k)"):
        code.line(f"const int jm_row = jm_thread_y() + jm_r * {rows}, jm_col = jm_thread_x() + jm_k * {WARP};")
        code.line("const jm_index_t jm_i0 = jm_i0_base + jm_row, jm_i1 = jm_i1_base + jm_col;")
        with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
            for i in spec.tiled_inputs:
                code.line(f"jm_tile{i}[{packed_tile_index(pack, 'jm_row', 'jm_col')}] = "
                          f"{ARGS}.jm_in{i}[{_offset(nout + ins.index(i))}];")
    code.line("__syncthreads();")
    loaded = {}
    for pos, i in enumerate(ins):
        if i in spec.tiled_inputs:
            loaded[i] = f"jm_tile{i}[{packed_tile_index(pack, 'jm_row', 'jm_col')}]"
        else:
            loaded[i] = f"{ARGS}.jm_in{i}[{_offset(nout + pos)}]"
    code.line("#pragma unroll 1")
    with code.block(each):
        code.line(f"const int jm_row = jm_thread_x() + jm_k * {WARP}, jm_col = jm_thread_y() + jm_c * {rows};")
        code.line("const jm_index_t jm_i0 = jm_i0_base + jm_row, jm_i1 = jm_i1_base + jm_col;")
        with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
            code.extend(element_body(binding, spec, loaded, [f"{ARGS}.jm_out{j}[{_offset(j)}]" for j in range(nout)]))
    code.line("__syncthreads();")
    return code
