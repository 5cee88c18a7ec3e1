"""Packed tiles: the tiled path's kernel for 1- and 2-byte layouts, 4 bytes an access.

Where the tiled inputs and the outputs share a 1- or 2-byte dtype, a thread moves 4 or 2
elements (`TiledParams.pack`) as one 4-byte access along the tiled input's rows and along the
outputs' rows, so that a warp's access is 128 bytes as with 4-byte elements. A tile is 32*pack
elements along the outputs' rows and 32*runs along the tiled inputs' rows (`TiledParams.runs`):
square (runs = pack), or half as wide where those rows are shorter than a square tile (64 channels
of int8). `packing` decides at plan time; `packed_body` renders the kernel.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body, vector_elements
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels import tile_code
from jiter_magic.kernels.base import CallShape, params_of
from jiter_magic.kernels.tile_code import TILE, WARP, TiledParams, operand_offset, stride, vector_access
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.spec import KernelSpec

# Packed tiles (`pack` elements an access, tiles of 32*pack x 32*runs): the packs allowed and the rows
# of threads for each, two loop dimensions and batched: 32x8 threads, each reading its square of the
# tile as words, were faster than 32x16 and 32x32 for both packs (batched: once `thread_indices` fences
# the indices). A block walks 2 batches: int8 ran faster than with one, float16 as fast. The
# measurements: docs/benchmarks.md.
PACKS = (2, 4)
PACKED_ROWS = {2: 8, 4: 8}
PACKED_BATCHED_ROWS = {2: 8, 4: 8}
PACKED_BATCHES_A_BLOCK = 2
PREFETCH = True  # direct inputs loaded into registers before the block waits on its tiles


def rows_for(ndim: int, pack: int) -> int:
    """Rows of threads of a packed kernel's block over `ndim` loop dimensions, as chosen above."""
    return (PACKED_BATCHED_ROWS if ndim > 2 else PACKED_ROWS)[pack]


def packed_rows(spec: KernelSpec) -> int:
    """Rows of threads of `spec`'s packed kernel's block."""
    return rows_for(spec.ndim, params_of(spec, TiledParams).pack)


def packed_edges(pack: int, runs: int) -> tuple[int, int]:
    """A packed tile's edges in elements: along the outputs' rows (the tile's rows, 32 words) and
    along the tiled inputs' rows (32 or 16 words)."""
    return TILE * pack, TILE * runs


def packed_tile_elements(pack: int, runs: int) -> int:
    """Elements of a packed tile: rows of 32*runs elements and one 4-byte word of padding, and one
    more word after every 32 rows. A warp's packed reads down a column take rows 32 apart in
    `pack` groups; the extra word puts each group on its own banks."""
    edge0, edge1 = packed_edges(pack, runs)
    return edge0 * (edge1 + pack) + (edge0 // TILE) * pack


def packed_tile_index(pack: int, runs: int, row: str, column: str) -> str:
    """The flat index of (row, column) in a packed tile, as C++."""
    return f"({row}) * {TILE * runs + pack} + (({row}) >> 5) * {pack} + ({column})"


def packed_runs(pack: int, size1: int) -> int:
    """`runs` of a packed tile over a second loop dimension of `size1` elements, or 0 where it
    is too short for one: square tiles (runs = pack), or half as wide where the dimension is shorter
    than a square tile, or a whole number of half tiles and not of square ones (192 channels of
    int8: three half tiles, rather than a square one and one that takes the element branch)."""
    if size1 < TILE * pack // 2:
        return 0
    if size1 < TILE * pack or (size1 % (TILE * pack) and not size1 % (TILE * pack // 2)):
        return pack // 2
    return pack


def packing(call: CallShape, staged: list[tuple[int, int]]) -> tuple[int, int]:
    """(pack, runs) of a packed tile for these tiled inputs (index, operand position), or (1, 1):
    packed where the tiled inputs and the outputs share a 1- or 2-byte dtype, the tiled inputs'
    rows run forwards, both loop dimensions fill a packed tile (`packed_runs`), the tiles fit in
    shared memory, and pointers and strides allow 4-byte accesses. The kernel checks the last
    again, a batch at a time."""
    layout = call.layout
    widths = {DTYPES[d].itemsize for d in call.output_dtypes}
    widths |= {DTYPES[call.arrays[i].dtype].itemsize for i, _ in staged}
    if len(widths) != 1:
        return 1, 1
    pack = 4 // widths.pop()
    if pack not in PACKS or layout.sizes[0] < TILE * pack:
        return 1, 1
    runs = packed_runs(pack, layout.sizes[1])
    if not runs or (TILE * runs // pack) % rows_for(layout.ndim, pack):  # rows of threads split a row's words
        return 1, 1
    if len(staged) * packed_tile_elements(pack, runs) * (4 // pack) > tile_code.SHARED_LIMIT:
        return 1, 1
    return (pack, runs) if tile_code.accessible(call, staged, 4, pack) else (1, 1)


def packed_body(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """The tiled kernel over packed tiles (`packed_edges`). Whole tiles move `pack` elements
    as one 4-byte access (`_vector_tile`); partial tiles, and batches whose pointers or strides
    turn out not to allow it, take an element at a time over the same tiles (`_element_tile`).
    The choice is one per block and batch."""
    params = params_of(spec, TiledParams)
    code = CodeBlock()
    for i in params.tiled_inputs:
        code.line(f"__shared__ alignas(16) {ctype(spec.inputs[i])} "
                  f"jm_tile{i}[{packed_tile_elements(params.pack, params.runs)}];")
    code.extend(tile_code.tile_batches(spec, packed_edges(params.pack, params.runs), (params.pack, 4),
                                       _vector_tile(binding, spec, params), _element_tile(binding, spec, params)))
    return code


def _vector_tile(binding: Binding, spec: KernelSpec, params: TiledParams) -> CodeBlock:
    """A whole tile, 4 bytes an access. A warp stages one tiled input's row of 32 words, or two
    rows of 16 (half tiles), which lie next to each other in memory where the rows are the
    innermost dimension (64 int8 channels). Then each thread reads a square of `pack` x `pack`
    elements as `pack` words, one from each of `pack` tile rows, and computes and stores it as
    `pack` output words, one for each tile column. Reading words rather than single elements down
    a tile column takes 1-byte tiles from 16 shared-memory loads a thread's square to 4, the shared
    memory traffic a byte of a 4-byte tile; picking elements out of the words is register work
    (byte permutes). Each operand's address is taken once and stepped by a multiple of its stride."""
    nout, ins, pack, runs, tiled = len(spec.outputs), spec.array_inputs, params.pack, params.runs, params.tiled_inputs
    rows = packed_rows(spec)
    edge0, edge1 = packed_edges(pack, runs)
    row_words = edge1 // pack  # words of a staged row: 32, or 16 in a half tile
    per_warp = WARP // row_words  # staged rows a warp covers at once
    steps = edge0 // (rows * per_warp)  # staging passes of the block over the tile's rows
    words = row_words // rows  # word columns a thread computes, each `pack` tile columns
    assert steps * rows * per_warp == edge0 and words * rows == row_words, (rows, pack, runs)
    direct = [i for i in ins if i not in tiled]
    prefetch = PREFETCH and bool(direct)
    each_k = f"for (int jm_k = 0; jm_k < {pack}; ++jm_k)"
    each_column = (f"for (int jm_c = 0; jm_c < {words}; ++jm_c)\n#pragma unroll\n"
                   f"for (int jm_q = 0; jm_q < {pack}; ++jm_q)")
    k_of = {i: nout + ins.index(i) for i in ins}
    # A staging thread's first row and word of the tile.
    first_row, first_word = ("jm_ty", "jm_tx") if per_warp == 1 else \
        (f"(jm_ty * {per_warp} + (jm_tx >> {row_words.bit_length() - 1}))", f"(jm_tx & {row_words - 1})")

    def column(k: int) -> str:  # column (jm_c, jm_q)'s offset from a thread's first column, in elements
        return f"(jm_c * {rows * pack} + jm_q) * {stride(k, 1)}"

    code = CodeBlock()
    for i in tiled:
        code.line(f"const {ctype(spec.inputs[i])}* jm_at{i} = {ARGS}.jm_in{i} + (jm_o{k_of[i]} + "
                  f"(jm_i0_base + {first_row}) * {stride(k_of[i], 0)} + jm_i1_base + {first_word} * {pack});")
    for i in direct:
        code.line(f"const {ctype(spec.inputs[i])}* jm_at{i} = {ARGS}.jm_in{i} + (jm_o{k_of[i]} + "
                  f"(jm_i0_base + jm_tx * {pack}) * {stride(k_of[i], 0)} + "
                  f"(jm_i1_base + jm_ty * {pack}) * {stride(k_of[i], 1)});")
    for j, d in enumerate(spec.outputs):
        code.line(f"{ctype(d)}* jm_to{j} = {ARGS}.jm_out{j} + (jm_o{j} + jm_i0_base + jm_tx * {pack} + "
                  f"(jm_i1_base + jm_ty * {pack}) * {stride(j, 1)});")
    code.line("#pragma unroll")
    with code.block(f"for (int jm_r = 0; jm_r < {steps}; ++jm_r)"):
        code.line(f"const int jm_row = {first_row} + jm_r * {rows * per_warp};")
        for i in tiled:
            vec_t = f"jm_vec<{ctype(spec.inputs[i])}, {pack}>"
            slot = packed_tile_index(pack, runs, "jm_row", f"{first_word} * {pack}")
            code.line(f"*reinterpret_cast<{vec_t}*>(jm_tile{i} + {slot}) = *reinterpret_cast<const {vec_t}*>"
                      f"(jm_at{i} + jm_r * {rows * per_warp} * {stride(k_of[i], 0)});")

    def direct_at(i: int) -> str:
        return f"jm_at{i}[{column(k_of[i])} + jm_k * {stride(k_of[i], 0)}]"

    if prefetch:
        for i in direct:
            code.line(f"jm_vec<{ctype(spec.inputs[i])}, {pack}> jm_p{i}[{words * pack}];")
        for i in direct:
            vec_t = f"jm_vec<{ctype(spec.inputs[i])}, {pack}>"
            scalar = CodeBlock("#pragma unroll")
            with scalar.block(each_column):
                scalar.line("#pragma unroll")
                scalar.line(f"{each_k} jm_p{i}[jm_c * {pack} + jm_q].jm_v[jm_k] = {direct_at(i)};")
            if DTYPES[spec.inputs[i]].itemsize * pack != 4:
                code.extend(scalar)
                continue
            # As wide as the tiled inputs: a vector at a time where this input allows it.
            with code.block(f"if ({vector_access(f'{ARGS}.jm_in{i}', k_of[i], 0, pack, 4 // pack)})", close="} else {"):
                code.line("#pragma unroll")
                code.line(f"{each_column} jm_p{i}[jm_c * {pack} + jm_q] = "
                          f"*reinterpret_cast<const {vec_t}*>(jm_at{i} + {column(k_of[i])});")
            with code.block(None):
                code.extend(scalar)
    code.line("__syncthreads();")
    loaded = {}
    for i in ins:
        if i in tiled:
            loaded[i] = f"jm_t{i}[jm_k].jm_v[jm_q]"
        else:
            loaded[i] = f"jm_p{i}[jm_c * {pack} + jm_q].jm_v[jm_k]" if prefetch else direct_at(i)
    code.line("#pragma unroll")
    with code.block(f"for (int jm_c = 0; jm_c < {words}; ++jm_c)"):
        for i in tiled:
            vec_t = f"jm_vec<{ctype(spec.inputs[i])}, {pack}>"
            slot = packed_tile_index(pack, runs, f"jm_tx * {pack} + jm_k", f"(jm_ty + jm_c * {rows}) * {pack}")
            code.line(f"{vec_t} jm_t{i}[{pack}];")
            code.line("#pragma unroll")
            code.line(f"{each_k} jm_t{i}[jm_k] = *reinterpret_cast<const {vec_t}*>(jm_tile{i} + {slot});")
        code.line("#pragma unroll")
        with code.block(f"for (int jm_q = 0; jm_q < {pack}; ++jm_q)"):
            code.extend(vector_elements(binding, spec, loaded, pack))
            for j, d in enumerate(spec.outputs):
                code.line(f"*reinterpret_cast<jm_vec<{ctype(d)}, {pack}>*>(jm_to{j} + {column(j)}) = jm_y{j};")
    code.line("__syncthreads();")
    return code


def _element_tile(binding: Binding, spec: KernelSpec, params: TiledParams) -> CodeBlock:
    """A partial tile (at the loop's edges): an element an access, consecutive lanes on consecutive
    elements, over the same tile layout. In rolled loops and without prefetching, because the
    kernel's registers are those of both branches: unrolled, this branch's registers slowed the
    whole tiles' branch (docs/benchmarks.md)."""
    nout, ins, pack, runs, tiled = len(spec.outputs), spec.array_inputs, params.pack, params.runs, params.tiled_inputs
    rows = packed_rows(spec)
    edge0, edge1 = packed_edges(pack, runs)
    code = CodeBlock("#pragma unroll 1")
    with code.block(f"for (int jm_r = 0; jm_r < {edge0 // rows}; ++jm_r)\n#pragma unroll\n"
                    f"for (int jm_k = 0; jm_k < {edge1 // WARP}; ++jm_k)"):
        code.line(f"const int jm_row = jm_ty + jm_r * {rows}, jm_col = jm_tx + jm_k * {WARP};")
        tile_code.load_tiles(code, spec, tiled, packed_tile_index(pack, runs, "jm_row", "jm_col"))
    code.line("__syncthreads();")
    loaded = {}
    for pos, i in enumerate(ins):
        if i in tiled:
            loaded[i] = f"jm_tile{i}[{packed_tile_index(pack, runs, 'jm_row', 'jm_col')}]"
        else:
            loaded[i] = f"{ARGS}.jm_in{i}[{operand_offset(nout + pos)}]"
    code.line("#pragma unroll 1")
    with code.block(f"for (int jm_c = 0; jm_c < {edge1 // rows}; ++jm_c)\n#pragma unroll\n"
                    f"for (int jm_k = 0; jm_k < {edge0 // WARP}; ++jm_k)"):
        code.line(f"const int jm_row = jm_tx + jm_k * {WARP}, jm_col = jm_ty + jm_c * {rows};")
        with tile_code.inside_tile(code):
            stores = [f"{ARGS}.jm_out{j}[{operand_offset(j)}]" for j in range(nout)]
            code.extend(element_body(binding, spec, loaded, stores))
    code.line("__syncthreads();")
    return code
