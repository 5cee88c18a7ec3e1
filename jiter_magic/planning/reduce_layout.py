"""Which dimensions a reduction folds, and how its kernel walks them: pure functions over shapes.

`normalize_dims` reads `dim=` as torch.sum does (an int, a tuple, or None for all; negative dims
count from the end; a 0-d array takes dim 0 or -1). `plan_reduction_layout` splits the broadcast
shape into kept dimensions (one output element each) and reduced ones, then coalesces each group
on its own, innermost first: kept dimensions in the output's order, reduced ones ordered by the
first input's strides so the innermost walk is the densest. A reduction that also gives each
result's index (argmax) walks its reduced dimensions in their logical order instead, so that an
element's position in the walk is its flat index over the reduced dims, as torch.argmax counts.
A kernel then sees a few loop dimensions, usually one of each.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from jiter_magic.errors import ArgumentTypeError, DimensionError, InvalidArgumentError
from jiter_magic.planning.layout import broadcast_strides, coalesce, contiguous_strides, dimension_order


def dim_index(dim: object, ndim: int, takes: str) -> int:
    """One dim of an `ndim`-d array, in range(max(ndim, 1)): a 0-d array takes dim 0 or -1, as
    torch's do; `takes` says what `dim=` takes, where `dim` is no int."""
    # isinstance(dim, int) first: a dim Dynamo traces as a symbolic int is an int to it, and
    # int() makes it a plain one (guarded, as torch.sum's dims are), where hasattr cannot be traced.
    if isinstance(dim, bool) or not (isinstance(dim, int) or hasattr(dim, "__index__")):
        raise ArgumentTypeError(f"dim must be {takes}, got {type(dim).__name__}: {dim!r}")
    value = int(dim) if isinstance(dim, int) else operator.index(dim)
    bound = max(ndim, 1)
    if not -bound <= value < bound:
        raise DimensionError(f"dim {value} is out of range for a {ndim}-d input: expected a dim in "
                             f"[{-bound}, {bound - 1}]")
    return value % bound


def normalize_dims(dim: object, ndim: int) -> tuple[int, ...]:
    """The reduced dimensions of an `ndim`-d array, sorted, each in range(ndim); None or () is all.
    A dim out of range is an IndexError as torch raises; a repeated one (5 and -1 of 6) an error."""
    if dim is None:
        return tuple(range(ndim))
    items = dim if isinstance(dim, (tuple, list)) else (dim,)
    if not items:  # torch.sum(x, dim=()) reduces everything
        return tuple(range(ndim))
    seen: dict[int, object] = {}
    for item in items:
        normal = dim_index(item, ndim, "an int, a tuple of ints or None")
        if normal in seen:
            raise InvalidArgumentError(f"dim {item!r} appears twice in dim={dim!r} (as {seen[normal]!r} and "
                                       f"{item!r}): each dimension may be reduced once")
        seen[normal] = item
    return tuple(sorted(d for d in seen if d < ndim))


def check_not_empty(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    """A reduction with indices needs an element in each result: no reduced dim of size 0 (torch.max
    and argmax raise an IndexError there too)."""
    if any(shape[axis] == 0 for axis in dims):
        raise DimensionError(f"a reduction with indices gives the index of each result, and reducing dims "
                             f"{list(dims)} of shape {shape} leaves no element to give: expected reduced dims of "
                             "non-zero size")


def reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    """The result's shape: the reduced dims dropped, or kept as 1 with `keepdim`."""
    if keepdim:
        return tuple(1 if axis in dims else size for axis, size in enumerate(shape))
    return tuple(size for axis, size in enumerate(shape) if axis not in dims)


@dataclass(frozen=True, slots=True)
class ReductionLayout:
    """How one reduction call iterates: its output elements (rows) and the elements of each (count)."""

    out_shape: tuple[int, ...]
    kept_sizes: tuple[int, ...]  # coalesced kept dims, innermost first
    kept_strides: tuple[tuple[int, ...], ...]  # per operand: the output, each input, then the indices' output
    reduced_sizes: tuple[int, ...]  # coalesced reduced dims, innermost first
    reduced_strides: tuple[tuple[int, ...], ...]  # per input
    rows: int  # output elements
    count: int  # elements folded into each

    @property
    def inner_reduced_dense(self) -> bool:
        """One reduced dim that every input walks with unit stride: each row a dense run."""
        return len(self.reduced_sizes) == 1 and all(s == (1,) for s in self.reduced_strides)

    @property
    def indexed(self) -> bool:
        """Whether the call also writes each result's index: kept strides of an indices' output too."""
        return len(self.kept_strides) == len(self.reduced_strides) + 2

    @property
    def input_kept_strides(self) -> tuple[tuple[int, ...], ...]:
        """The kept strides of the inputs alone (not the outputs')."""
        return self.kept_strides[1:1 + len(self.reduced_strides)]



def dense_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of `shape`: a result allocated for a call has them."""
    return contiguous_strides(shape, list(reversed(range(len(shape)))))


def loop_values(sizes: tuple[int, ...], strides: tuple[tuple[int, ...], ...], ndim: int) -> list[int]:
    """Coalesced loop dims as a kernel's `jm_Args` take them (a reduction's kept or reduced ones, a
    scan's kept ones): the sizes, then each operand's strides, padded to the kernel's `ndim` loop
    dims with sizes of 1 and strides of 0."""
    values = list(sizes) + [1] * (ndim - len(sizes))
    for operand in strides:
        values += list(operand) + [0] * (ndim - len(operand))
    return values


def product(sizes: tuple[int, ...] | list[int]) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total


def plan_reduction_layout(shape: tuple[int, ...], input_strides: list[tuple[tuple[int, ...], tuple[int, ...]]],
                          dims: tuple[int, ...], keepdim: bool, out_strides: tuple[int, ...] | None = None, *,
                          indexed: bool = False, index_strides: tuple[int, ...] | None = None) -> ReductionLayout:
    """The layout of reducing `dims` of `shape`. `input_strides` holds each input's own (shape,
    element strides), broadcast here; `out_strides` are an `out=` array's element strides (over the
    result's shape), None for a dense result. `indexed`: the call also writes each result's index
    (into an array of `index_strides`, None for dense), and walks the reduced dims in logical order."""
    inputs = [broadcast_strides(s, st, shape) for s, st in input_strides]
    out_shape = reduced_shape(shape, dims, keepdim)
    outputs = [out_strides if out_strides is not None else dense_strides(out_shape)]
    if indexed:
        outputs.append(index_strides if index_strides is not None else dense_strides(out_shape))
    kept = [axis for axis in range(len(shape)) if axis not in dims]
    # An output's stride of each kept axis: its own axis, which keepdim leaves at the same place.
    out_axis = {axis: (axis if keepdim else index) for index, axis in enumerate(kept)}
    kept_inner = kept[::-1]
    per_output = [[strides[out_axis[a]] for a in kept_inner] for strides in outputs]
    kept_sizes, kept_strides = coalesce([shape[a] for a in kept_inner],
                                        per_output[:1] + [[st[a] for a in kept_inner] for st in inputs]
                                        + per_output[1:])
    sub_shape = tuple(shape[a] for a in dims)
    if indexed:  # innermost first, in logical order: a walk's position is the flat index
        order = list(range(len(dims) - 1, -1, -1))
    else:
        order = dimension_order(sub_shape, [tuple(st[a] for a in dims) for st in inputs]) if dims else []
    reduced_inner = [dims[i] for i in order]
    reduced_sizes, reduced_strides = coalesce([shape[a] for a in reduced_inner],
                                              [[st[a] for a in reduced_inner] for st in inputs])
    if 0 in [shape[a] for a in dims]:  # an empty reduction: coalescing keeps no 0, so say it here
        reduced_sizes, reduced_strides = (0,), tuple((0,) for _ in inputs)
    return ReductionLayout(tuple(out_shape), kept_sizes, kept_strides, reduced_sizes, reduced_strides,
                           product([shape[a] for a in kept]), product(sub_shape))
