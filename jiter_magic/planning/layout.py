"""Layout planning: broadcasting, output strides, dimension order and coalescing.

Pure functions over shapes and element strides, modelled on TensorIterator: dimensions
are ordered by the operands' strides (so a transposed or channels-last input gives an
output of the same memory order), then adjacent dimensions that walk memory as one
are merged, so most calls end on a single contiguous dimension.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.errors import ShapeError

INT32_MAX = 2**31 - 1
INDEX_HEADROOM = 1 << 20  # kernels step past n by up to a block's work before their bound check


class ArrayDesc(NamedTuple):
    """An array as planning sees it: dtype name, shape, element strides, data pointer."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    pointer: int


class Layout(NamedTuple):
    """How one call iterates: the user-visible shape and the coalesced loop nest."""

    shape: tuple[int, ...]  # broadcast shape, as the user sees it
    output_strides: tuple[int, ...]  # element strides to allocate outputs with
    sizes: tuple[int, ...]  # coalesced loop sizes, innermost first
    strides: tuple[tuple[int, ...], ...]  # per operand (outputs first, then array inputs), innermost first
    numel: int

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    @property
    def is_contiguous(self) -> bool:
        """One dimension walked with unit stride by every operand: the vectorizable case."""
        return self.ndim <= 1 and all(s == (1,) or s == () for s in self.strides)

    @property
    def needs_int64(self) -> bool:
        limit = INT32_MAX - INDEX_HEADROOM
        if self.numel > limit:
            return True
        for strides in self.strides:
            extent = sum(abs(st) * (n - 1) for st, n in zip(strides, self.sizes))
            if extent > limit:
                return True
        return False


def broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy broadcasting of several shapes; a ShapeError names the shapes that clash."""
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        for axis, size in enumerate(shape, start=ndim - len(shape)):
            if size != 1:
                if result[axis] not in (1, size):
                    listed = ", ".join(str(tuple(s)) for s in shapes)
                    raise ShapeError(f"input shapes {listed} cannot be broadcast together")
                result[axis] = size
    return tuple(result)


def broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of an operand viewed at the broadcast shape: 0 along broadcast axes."""
    pad = len(target) - len(shape)
    out = [0] * pad
    for size, stride in zip(shape, strides):
        out.append(0 if size == 1 else stride)
    return tuple(out)


def _should_swap(dim0: int, dim1: int, shape: tuple[int, ...], operands: list[tuple[int, ...]]) -> int:
    """TensorIterator's comparison: 1 if dim0 should be inner to dim1, -1 if not, 0 if undecided."""
    for strides in operands:
        s0, s1 = abs(strides[dim0]), abs(strides[dim1])
        if s0 == 0 or s1 == 0:
            continue
        if s0 < s1:
            return -1
        if s0 > s1:
            return 1
        if shape[dim0] > shape[dim1]:
            return 1
    return 0


def dimension_order(shape: tuple[int, ...], operands: list[tuple[int, ...]]) -> list[int]:
    """Axes innermost first, by the strides of the operands in order (an insertion sort, as TensorIterator)."""
    perm = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(perm)):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = _should_swap(perm[dim0], perm[dim1], shape, operands)
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return perm


def contiguous_strides(shape: tuple[int, ...], order: list[int]) -> tuple[int, ...]:
    """Dense element strides for `shape` with axes laid out innermost-first as `order`."""
    strides = [0] * len(shape)
    step = 1
    for axis in order:
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def coalesce(sizes: list[int], strides: list[list[int]]) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Merge adjacent loop dimensions (innermost first) that every operand walks as one."""
    if not sizes:
        return (), tuple(() for _ in strides)
    out_sizes = [sizes[0]]
    out_strides = [[s[0]] for s in strides]
    for dim in range(1, len(sizes)):
        size = sizes[dim]
        prev = out_sizes[-1]
        if size == 1:
            continue
        if prev == 1:
            out_sizes[-1] = size
            for target, source in zip(out_strides, strides):
                target[-1] = source[dim]
            continue
        if all(s[dim] == t[-1] * prev for s, t in zip(strides, out_strides)):
            out_sizes[-1] = prev * size
            continue
        out_sizes.append(size)
        for target, source in zip(out_strides, strides):
            target.append(source[dim])
    if out_sizes == [1]:
        return (), tuple(() for _ in strides)
    return tuple(out_sizes), tuple(tuple(t) for t in out_strides)


def plan_layout(
    input_shapes: list[tuple[int, ...]],
    input_strides: list[tuple[int, ...]],
    output_shapes: list[tuple[int, ...]] | None = None,
    output_strides: list[tuple[int, ...]] | None = None,
    num_outputs: int = 1,
) -> Layout:
    """Plan one call: broadcast the inputs, place the outputs, order and coalesce the loops.

    Given outputs (`out=`) must already have the broadcast shape; their strides are used as
    they are. Otherwise outputs are allocated dense in the inputs' memory order.
    """
    shape = broadcast_shape(list(input_shapes))
    in_strides = [broadcast_strides(s, st, shape) for s, st in zip(input_shapes, input_strides)]
    if output_shapes is not None:
        for out_shape in output_shapes:
            if tuple(out_shape) != shape:
                raise ShapeError(f"out= has shape {tuple(out_shape)}, but the result has shape {shape}")
        outs = [tuple(s) for s in output_strides or []]
    else:
        outs = []
    order = dimension_order(shape, outs + in_strides)
    dense = contiguous_strides(shape, order)
    if output_shapes is None:
        outs = [dense] * num_outputs
    operands = outs + in_strides
    numel = 1
    for size in shape:
        numel *= size
    sizes = [shape[axis] for axis in order]
    strides = [[op[axis] for axis in order] for op in operands]
    loop_sizes, loop_strides = coalesce(sizes, strides)
    return Layout(shape=shape, output_strides=dense, sizes=loop_sizes, strides=loop_strides, numel=numel)


def transposed_operands(layout: Layout, num_outputs: int) -> tuple[int, ...]:
    """Positions in `layout.strides` of the inputs that walk loop dimension 1 with unit stride (either
    way) while every output walks dimension 0 with unit stride: a transposed input, NCHW read as NHWC.
    Such an input, read in the outputs' order, moves a whole row of its own a step; both the CUDA
    tiled path and the host's blocked loop read it through tiles of the two dimensions instead.
    Empty below two loop dimensions or where an output does not walk dimension 0 densely."""
    if layout.ndim < 2 or any(layout.strides[j][0] != 1 for j in range(num_outputs)):
        return ()
    return tuple(p for p in range(num_outputs, len(layout.strides))
                 if abs(layout.strides[p][1]) == 1 and layout.strides[p][0] not in (0, 1))
