"""What the tiled kernels share: the tiled path's parameters, the block's tile origin and
operand offsets in a tile; for the packed and the vector kernels, which move several elements an
access, the check of pointers and strides at plan time and in the kernel, and the batch loop that
takes whole tiles that allow it a vector at a time and the others an element at a time.

Kept apart from the kernels so that the unpacked (`tiled.py`), the packed (`packed_tiles.py`)
and the vector (`vector_tiles.py`) tiled kernels read one record and render their common lines
from one place.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS
from jiter_magic.codegen.offsets import MODULO, operand_offsets
from jiter_magic.kernels.base import CallShape, params_of
from jiter_magic.planning.spec import KernelSpec

WARP = 32
TILE = 32  # a tile's edge in warp-wide runs: 32 elements, or 32 vectors of a packed tile
SHARED_LIMIT = 48 * 1024  # static shared memory a block: the tiles of the inputs read through it must fit


class TiledParams(NamedTuple):
    """The tiled loop's parameters, for the unpacked and the packed kernel alike."""

    runs: int = 1  # warp-wide runs of a tiled input's row a tile holds: the tile is 32 * runs along those rows
    tiled_inputs: tuple[int, ...] = ()  # inputs read along their rows into shared tiles, and back transposed
    pack: int = 1  # elements a thread moves as one 4-byte access along a row: 1, or 2 or 4 (packed_tiles.py)
    vec: int = 1  # 4-byte elements a thread moves as one 16-byte access: 1, or 4 (vector_tiles.py)


def tile_origin(spec: KernelSpec, edge0: int, edge1: int) -> CodeBlock:
    """The block's tile origin, the two tiled loop sizes and, past two dimensions, the count of
    batches (every loop dimension past the second), which both tiled kernels start from."""
    code = CodeBlock(f"const jm_index_t jm_i0_base = (jm_index_t)jm_block_x() * {edge0}, "
                     f"jm_i1_base = (jm_index_t)jm_block_y() * {edge1};",
                     f"const jm_index_t jm_s0 = (jm_index_t){ARGS}.jm_sizes[0], "
                     f"jm_s1 = (jm_index_t){ARGS}.jm_sizes[1];")
    if spec.ndim > 2:
        code.line("jm_index_t jm_batches = 1;")
        for d in range(2, spec.ndim):
            code.line(f"jm_batches *= (jm_index_t){ARGS}.jm_sizes[{d}];")
    return code


def batch_loop(spec: KernelSpec) -> str:
    """The head of the loop over batches (grid.z), or "" (a plain scope) for a 2-d loop, which has
    one batch. Without the loop the compiler need not keep the tile's addresses in registers from
    one batch to the next, and a 2-d kernel needs fewer than half the registers (docs/benchmarks.md)."""
    if spec.ndim <= 2:
        return ""
    return "for (jm_index_t jm_batch = jm_block_z(); jm_batch < jm_batches; jm_batch += jm_grid_z())"


def operand_offset(k: int, i0: str = "jm_i0", i1: str = "jm_i1") -> str:
    """C++: operand k's element offset at loop indices (i0, i1) of its batch."""
    return f"jm_o{k} + {i0} * (jm_index_t){ARGS}.jm_strides{k}[0] + {i1} * (jm_index_t){ARGS}.jm_strides{k}[1]"


@contextmanager
def inside_tile(code: CodeBlock) -> Iterator[None]:
    """C++: the loop indices of the tile's element (jm_row, jm_col), and a block for the lines that
    read or write it, entered only where the element is inside the loop's edges."""
    code.line("const jm_index_t jm_i0 = jm_i0_base + jm_row, jm_i1 = jm_i1_base + jm_col;")
    with code.block("if (jm_i0 < jm_s0 && jm_i1 < jm_s1)"):
        yield


def load_tiles(code: CodeBlock, spec: KernelSpec, tiled: tuple[int, ...], tile_index: str) -> None:
    """C++: each tiled input's element (jm_row, jm_col) stored at `tile_index` of its shared tile."""
    nout, ins = len(spec.outputs), spec.array_inputs
    with inside_tile(code):
        for i in tiled:
            code.line(f"jm_tile{i}[{tile_index}] = {ARGS}.jm_in{i}[{operand_offset(nout + ins.index(i))}];")


def stride(k: int, dim: int) -> str:
    """C++: operand k's stride along loop dimension `dim`, as an index."""
    return f"(jm_index_t){ARGS}.jm_strides{k}[{dim}]"


def thread_indices(spec: KernelSpec) -> CodeBlock:
    """C++: the thread's x and y as `jm_tx` and `jm_ty`, which the packed and vector kernels' addresses
    use. In a batch loop they pass through an empty `asm` at each batch, so that the compiler computes
    the tile's addresses in the batch instead of keeping them all in registers across it
    (docs/benchmarks.md)."""
    code = CodeBlock("int jm_tx = (int)jm_thread_x(), jm_ty = (int)jm_thread_y();")
    if spec.ndim > 2:
        code.line('asm volatile("" : "+r"(jm_tx), "+r"(jm_ty));')
    return code


def accessible(call: CallShape, staged: list[tuple[int, int]], alignment: int, elements: int) -> bool:
    """Whether the tiled inputs (index, operand position) and the outputs allow accesses of `elements`
    elements along their rows: the tiled inputs' rows run forwards, every tiled input's and output's
    pointer is at `alignment` bytes, and its strides but along its own rows are multiples of
    `elements` (a misaligned view keeps the element-wise tiles). Plans are keyed by pointer alignment,
    so this holds for the plan; the kernel checks it again a batch at a time (`tile_batches`)."""
    layout = call.layout
    if any(layout.strides[position][1] != 1 for _, position in staged):
        return False
    pointers = [call.arrays[i].pointer for i, _ in staged] + [o.pointer for o in call.outs or []]
    other_strides = [s for _, position in staged for d, s in enumerate(layout.strides[position]) if d != 1]
    other_strides += [s for j in range(len(call.output_dtypes)) for s in layout.strides[j][1:]]
    return not any(p % alignment for p in pointers) and not any(s % elements for s in other_strides)


def vector_access(pointer: str, k: int, along: int, elements: int, itemsize: int) -> str:
    """C++: whether operand k (at `pointer`, this batch's offset `jm_o{k}`) can move `elements`
    elements of `itemsize` bytes as one access along loop dimension `along`: its address aligned to
    the access, unit stride along that dimension, the other dimension's stride a multiple of `elements`."""
    return (f"(((unsigned long long)({pointer} + jm_o{k})) & {elements * itemsize - 1}) == 0 && "
            f"{ARGS}.jm_strides{k}[{along}] == 1 && ({ARGS}.jm_strides{k}[{1 - along}] & {elements - 1}) == 0")


def tile_batches(spec: KernelSpec, edges: tuple[int, int], access: tuple[int, int], whole: CodeBlock,
                 element: CodeBlock) -> CodeBlock:
    """The tile origin and the batch loop of the packed and vector kernels, over tiles of `edges`:
    `whole` where the block's tile lies inside the loop and this batch's tiled inputs (along their
    rows, dimension 1) and outputs (along theirs, dimension 0) allow accesses of `access` (elements,
    bytes), else `element`. The choice is one per block and batch, so that a batch the plan did not
    foresee takes the element branch."""
    (edge0, edge1), (elements, size) = edges, access
    nout, ins, tiled = len(spec.outputs), spec.array_inputs, params_of(spec, TiledParams).tiled_inputs
    conditions = [vector_access(f"{ARGS}.jm_in{i}", nout + ins.index(i), 1, elements, size // elements) for i in tiled]
    conditions += [vector_access(f"{ARGS}.jm_out{j}", j, 0, elements, size // elements) for j in range(nout)]
    code = tile_origin(spec, edge0, edge1)
    with code.block(batch_loop(spec)):
        code.extend(thread_indices(spec))
        code.extend(operand_offsets(spec, "jm_batch", MODULO, first_dim=2))
        code.line(f"const bool jm_whole = jm_i0_base + {edge0} <= jm_s0 && jm_i1_base + {edge1} <= jm_s1 &&\n    "
                  + " &&\n    ".join(conditions) + ";")
        with code.block("if (jm_whole)", close="} else {"):
            code.extend(whole)
        with code.block(None):
            code.extend(element)
    return code
