"""Vector tiles: the tiled path's kernel for 4-byte layouts, 16 bytes an access.

Where the tiled inputs and the outputs hold 4-byte elements (float32, int32), a thread moves
four elements as one 16-byte access along a tiled input's rows when it stages them, and four
along the outputs' rows when it stores them, over 64x64 tiles and 32x8 threads: each thread
has four 16-byte loads of every input in flight before the block waits on its tiles, where
the element-wise tiles of `tiled.py` have two 4-byte ones. The shared tiles are read and
written an element at a time, at bank-conflict-free addresses (see `_vector_tile`).
`TiledParams.vec` (4) selects this kernel at plan time (`vectoring`); whole tiles whose
pointers and strides allow 16-byte accesses take the vector branch, the others (the loop's
edges, odd views) an element a thread over the same tile. In a batch loop the thread's indices
pass through the fence of `tile_code.thread_indices`: without it the 32-bit batched kernel
spilled (48 registers and 16 bytes of spills against 40 and none, `ptxas -v`).
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body, vector_elements
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels.base import CallShape, params_of
from jiter_magic.kernels.tile_code import (
    SHARED_LIMIT,
    WARP,
    TiledParams,
    accessible,
    inside_tile,
    load_tiles,
    operand_offset,
    stride,
    tile_batches,
    vector_access,
)
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.spec import KernelSpec

VEC = 4  # 4-byte elements an access: 16 bytes
EDGE = 64  # a tile's edge along both loop dimensions, in elements
ROWS = 8  # rows of threads: 32 x 8 threads a block
ROW = EDGE + 1  # a shared tile row's length: one element of padding, so that columns spread over the banks
TILE_BYTES = EDGE * ROW * 4


def vectoring(call: CallShape, staged: list[tuple[int, int]]) -> int:
    """VEC where the vector-tile kernel fits these tiled inputs (index, operand position), else 1:
    the tiled inputs and the outputs hold 4-byte elements, both loop dimensions span a tile, the
    tiled inputs' rows run forwards, their tiles fit in shared memory, and pointers and strides
    allow 16-byte accesses. Plans are keyed by pointer alignment, so the last holds for the plan;
    the kernel checks it again a batch at a time."""
    layout = call.layout
    sizes = {DTYPES[d].itemsize for d in call.output_dtypes} | {DTYPES[call.arrays[i].dtype].itemsize
                                                               for i, _ in staged}
    if sizes != {4} or layout.sizes[0] < EDGE or layout.sizes[1] < EDGE:
        return 1
    if len(staged) * TILE_BYTES > SHARED_LIMIT or not accessible(call, staged, VEC * 4, VEC):
        return 1
    return VEC


def vector_body(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """The tiled kernel over 64x64 tiles, 16 bytes an access where a whole tile allows it."""
    code = CodeBlock()
    for i in params_of(spec, TiledParams).tiled_inputs:
        code.line(f"__shared__ {ctype(spec.inputs[i])} jm_tile{i}[{EDGE * ROW}];")
    code.extend(tile_batches(spec, (EDGE, EDGE), (VEC, VEC * 4), _vector_tile(binding, spec),
                             _element_tile(binding, spec)))
    return code


def _vector_tile(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """A whole tile. Staging: a warp reads 4 tiled-input rows of 8 vectors (128 bytes each), a
    thread 4 vectors, and writes them to the tile an element at a time (rows 65 elements apart and
    vectors 4 apart put a warp's 32 writes on 32 banks). Computing: a warp takes 8 vectors down the
    outputs' rows (32 consecutive elements of dimension 0) at 4 columns, a thread 4 such vectors:
    it reads element k of its vector from tile row 4q+k (again 32 banks), the inputs read in the
    outputs' order as vectors (elements where their strides or alignment do not allow it, decided
    a batch at a time), and stores each output as one vector."""
    params = params_of(spec, TiledParams)
    nout, ins, tiled = len(spec.outputs), spec.array_inputs, params.tiled_inputs
    direct = [i for i in ins if i not in tiled]
    k_of = {i: nout + ins.index(i) for i in ins}
    passes = EDGE * EDGE // VEC // (WARP * ROWS)  # vectors a thread moves, staging and computing alike
    code = CodeBlock("#pragma unroll")
    with code.block(f"for (int jm_p = 0; jm_p < {passes}; ++jm_p)"):
        # Staging: lanes 8 vectors along a row, 4 rows a warp; passes cover the tile's other half
        # of rows (bit 0 of jm_p) and of vectors (bit 1).
        code.line(f"const int jm_row = jm_ty * 4 + (jm_tx >> 3) + (jm_p & 1) * {EDGE // 2}, "
                  f"jm_col = ((jm_tx & 7) + (jm_p >> 1) * 8) * {VEC};")
        for i in tiled:
            vec_t, k = f"jm_vec<{ctype(spec.inputs[i])}, {VEC}>", k_of[i]
            code.line(f"const {vec_t} jm_staged{i} = *reinterpret_cast<const {vec_t}*>({ARGS}.jm_in{i} + jm_o{k} + "
                      f"(jm_i0_base + jm_row) * {stride(k, 0)} + jm_i1_base + jm_col);")
            code.line("#pragma unroll")
            code.line(f"for (int jm_k = 0; jm_k < {VEC}; ++jm_k) jm_tile{i}[jm_row * {ROW} + jm_col + jm_k] = "
                      f"jm_staged{i}.jm_v[jm_k];")
    for i in direct:
        code.extend(_direct_vectors(spec, i, k_of[i], passes))
    code.line("__syncthreads();")
    code.line("#pragma unroll")
    with code.block(f"for (int jm_p = 0; jm_p < {passes}; ++jm_p)"):
        loaded = {i: (f"jm_tile{i}[({Q} * {VEC} + jm_k) * {ROW} + {J}]" if i in tiled
                      else f"jm_d{i}[jm_p].jm_v[jm_k]") for i in ins}
        code.extend(vector_elements(binding, spec, loaded, VEC))
        for j, d in enumerate(spec.outputs):
            code.line(f"*reinterpret_cast<jm_vec<{ctype(d)}, {VEC}>*>({ARGS}.jm_out{j} + "
                      f"{operand_offset(j, f'(jm_i0_base + {Q} * {VEC})', f'(jm_i1_base + {J})')}) "
                      f"= jm_y{j};")
    code.line("__syncthreads();")
    return code


# A thread's vector of pass jm_p in the outputs' order: vector Q (of 16 down a tile column) at column
# J. Written out where used rather than kept in arrays: NVRTC 12's ptxas spilled the arrays.
Q = f"((jm_tx & 7) + ((jm_ty + jm_p * {ROWS}) & 1) * 8)"
J = f"((jm_tx >> 3) + ((jm_ty + jm_p * {ROWS}) >> 1) * 4)"


def _direct_vectors(spec: KernelSpec, i: int, k: int, passes: int) -> CodeBlock:
    """Input i, read in the outputs' order, loaded into registers before the block waits on its
    tiles: as vectors where this batch allows it, else an element at a time."""
    dtype = spec.inputs[i]
    vec_t = f"jm_vec<{ctype(dtype)}, {VEC}>"
    at = operand_offset(k, f"(jm_i0_base + {Q} * {VEC})", f"(jm_i1_base + {J})")
    code = CodeBlock(f"{vec_t} jm_d{i}[{passes}];")
    with code.block(f"if ({vector_access(f'{ARGS}.jm_in{i}', k, 0, VEC, DTYPES[dtype].itemsize)})", close="} else {"):
        code.line("#pragma unroll")
        code.line(f"for (int jm_p = 0; jm_p < {passes}; ++jm_p) "
                  f"jm_d{i}[jm_p] = *reinterpret_cast<const {vec_t}*>({ARGS}.jm_in{i} + {at});")
    with code.block(None):
        code.line("#pragma unroll")
        with code.block(f"for (int jm_p = 0; jm_p < {passes}; ++jm_p)"):
            code.line("#pragma unroll")
            code.line(f"for (int jm_k = 0; jm_k < {VEC}; ++jm_k) jm_d{i}[jm_p].jm_v[jm_k] = "
                      f"{ARGS}.jm_in{i}[{at} + jm_k * {stride(k, 0)}];")
    return code


def _element_tile(binding: Binding, spec: KernelSpec) -> CodeBlock:
    """A partial tile, or one whose pointers or strides do not allow vectors: an element a thread
    over the same tile, consecutive lanes on consecutive elements of each operand's rows. In rolled
    loops, so that this branch's registers do not weigh on the vector branch."""
    params = params_of(spec, TiledParams)
    nout, ins, tiled = len(spec.outputs), spec.array_inputs, params.tiled_inputs
    code = CodeBlock()
    if tiled:
        code.line("#pragma unroll 1")
        with code.block(f"for (int jm_row = jm_ty; jm_row < {EDGE}; jm_row += {ROWS})\n"
                        f"for (int jm_col = jm_tx; jm_col < {EDGE}; jm_col += {WARP})"):
            load_tiles(code, spec, tiled, f"jm_row * {ROW} + jm_col")
        code.line("__syncthreads();")
    loaded = {i: (f"jm_tile{i}[jm_row * {ROW} + jm_col]" if i in tiled
                  else f"{ARGS}.jm_in{i}[{operand_offset(nout + pos)}]") for pos, i in enumerate(ins)}
    code.line("#pragma unroll 1")
    with code.block(f"for (int jm_col = jm_ty; jm_col < {EDGE}; jm_col += {ROWS})\n"
                    f"for (int jm_row = jm_tx; jm_row < {EDGE}; jm_row += {WARP})"):
        with inside_tile(code):
            code.extend(element_body(binding, spec, loaded, [f"{ARGS}.jm_out{j}[{operand_offset(j)}]"
                                                             for j in range(nout)]))
    if tiled:
        code.line("__syncthreads();")
    return code
