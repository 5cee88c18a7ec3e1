"""What both tiled kernels share: the tiled path's parameters, the block's tile origin and
operand offsets in a tile.

Kept apart from the kernels so that the unpacked (`tiled.py`), the packed (`packed_tiles.py`)
and the vector (`vector_tiles.py`) tiled kernels read one record and render their common lines
from one place.
"""
from __future__ import annotations

from dataclasses import dataclass

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS
from jiter_magic.planning.spec import KernelSpec, PathParams

WARP = 32
TILE = 32  # a tile's edge in warp-wide runs: 32 elements, or 32 vectors of a packed tile
SHARED_LIMIT = 48 * 1024  # static shared memory a block: the tiles of the inputs read through it must fit


@dataclass(frozen=True, slots=True)
class TiledParams(PathParams):
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


def stride(k: int, dim: int) -> str:
    """C++: operand k's stride along loop dimension `dim`, as an index."""
    return f"(jm_index_t){ARGS}.jm_strides{k}[{dim}]"
