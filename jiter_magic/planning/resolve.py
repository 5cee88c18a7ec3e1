"""What a call's arrays mean for its result: the result dtype, and the overlap rules of `out=`.

Pure functions (no arrays, no devices), so the semantics — promotion, safe casting and overlap
rules — are testable without a GPU. kernels/specialize.py adds the layout and the kernel path.
"""
from __future__ import annotations

from jiter_magic.errors import ShapeError
from jiter_magic.planning import dtypes as dt
from jiter_magic.planning.layout import ArrayDesc

Argument = ArrayDesc | bool | int | float | complex  # an input as planning sees it


def result_dtype(arrays: list[Argument], rules: str, default_float: str = "float32") -> str:
    """The common dtype of a call's inputs under torch's (with its default float dtype) or
    NumPy's promotion rules."""
    items = [a for a in arrays if isinstance(a, ArrayDesc)]
    scalar_kinds = tuple(dt.scalar_dtype(a) for a in arrays if not isinstance(a, ArrayDesc))
    if rules == "torch":
        ranked = tuple((a.dtype, dt.ZERO_DIM if a.shape == () else dt.DIMENSIONED) for a in items)
        return dt.torch_result_type(ranked + tuple((k, dt.WRAPPED) for k in scalar_kinds), default_float)
    return dt.numpy_result_type(tuple(a.dtype for a in items), scalar_kinds)


def _extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return low, high


ENUMERATED_LIMIT = 1 << 22  # outputs up to this many elements whose strides prove nothing are checked one by one


def distinct_elements(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool | None:
    """Whether every element of a strided array has its own memory: True or False when known,
    None when too large to tell. Strides sorted by size each stepping past everything the smaller
    ones reach prove it (any dense, transposed, sliced or permuted array); fewer offsets than
    elements disprove it; anything else small enough is enumerated."""
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    reach = 0
    for stride, n in dims:
        if stride <= reach:
            break
        reach += (n - 1) * stride
    else:
        return True
    numel = 1
    for _stride, n in dims:
        numel *= n
    if sum((n - 1) * stride for stride, n in dims) + 1 < numel:
        return False
    if numel > ENUMERATED_LIMIT:
        return None
    import numpy as np

    offsets = np.zeros(1, dtype=np.int64)
    for stride, n in dims:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * stride).ravel()
    return bool(np.unique(offsets).size == numel)


def check_expanded_outputs(outs: list[ArrayDesc]) -> None:
    """An output may not write one element from several places: a stride 0 over more than one,
    or strides that make two elements meet (torch checks only the first; outputs too large to
    tell are accepted, as torch accepts them)."""
    for o in outs:
        if 0 in o.shape:
            continue
        if any(s == 0 and n > 1 for s, n in zip(o.strides, o.shape)):
            raise ShapeError("out= has an expanded (stride 0) dimension: several results would land on one element")
        if distinct_elements(tuple(o.shape), tuple(o.strides)) is False:
            raise ShapeError(f"out= has elements that refer to the same memory (shape {tuple(o.shape)}, strides "
                             f"{tuple(o.strides)} in elements): several results would land on one element; pass an "
                             "array whose elements are distinct")


def byte_span(a: ArrayDesc) -> tuple[int, int] | None:
    """Bytes an array touches, relative to its pointer: [low, high); None when it is empty."""
    if 0 in a.shape:
        return None
    size = dt.DTYPES[a.dtype].itemsize
    low, high = _extent(a.shape, a.strides)
    return low * size, (high + 1) * size


OverlapPair = tuple[int, int, tuple[int, int], tuple[int, int], bool]


def overlap_pairs(outs: list[ArrayDesc], items: list[ArrayDesc]) -> tuple[OverlapPair, ...]:
    """Per (output, input) pair, the byte spans and whether they share a layout, so that each call
    can check its own pointers against torch's rule: an output may alias an input exactly,
    never partially."""
    pairs = []
    for j, o in enumerate(outs):
        out_span = byte_span(o)
        for p, a in enumerate(items):
            in_span = byte_span(a)
            if out_span and in_span:
                same = a.dtype == o.dtype and tuple(a.shape) == tuple(o.shape) and tuple(a.strides) == tuple(o.strides)
                pairs.append((j, p, out_span, in_span, same))
    return tuple(pairs)


def _dense(a: ArrayDesc) -> tuple[int, int] | None:
    """The byte span of an array whose elements fill it exactly (no gaps, no overlap), else None:
    only for such arrays does a shared byte mean a shared element (torch's rule too)."""
    span = byte_span(a)
    numel = 1
    for n in a.shape:
        numel *= n
    return span if span and span[1] - span[0] == numel * dt.DTYPES[a.dtype].itemsize else None


def output_overlap_pairs(outs: list[ArrayDesc]) -> tuple[tuple[int, int, tuple[int, int], tuple[int, int]], ...]:
    """Pairs of dense `out=` arrays whose memory each call must check for overlap."""
    spans = [_dense(o) for o in outs]
    pairs = []
    for j, first in enumerate(spans):
        for k in range(j + 1, len(spans)):
            second = spans[k]
            if first and second:
                pairs.append((j, k, first, second))
    return tuple(pairs)


def check_output_overlap(pairs: tuple, out_pointers: list[int]) -> None:
    for j, k, (j_lo, j_hi), (k_lo, k_hi) in pairs:
        if out_pointers[k] + k_lo < out_pointers[j] + j_hi and out_pointers[j] + j_lo < out_pointers[k] + k_hi:
            raise ShapeError(f"out= arrays {j} and {k} overlap each other: one output's results would overwrite "
                             "another's; pass separate arrays")


def check_overlap(pairs: tuple[OverlapPair, ...], out_pointers: list[int], in_pointers: list[int]) -> None:
    for j, p, (o_lo, o_hi), (a_lo, a_hi), same in pairs:
        o, a = out_pointers[j], in_pointers[p]
        if a + a_lo < o + o_hi and o + o_lo < a + a_hi and not (same and o == a):
            raise ShapeError(
                "out= partially overlaps an input: some elements of the input and the written-to "
                "array refer to the same memory; pass a separate output or the input itself"
            )


def check_written(outs: list[ArrayDesc], inputs: list[ArrayDesc]) -> tuple[tuple, tuple]:
    """Every check of `out=` arrays against themselves, each other and the inputs, at once, for a
    call that plans no pairs ahead (a reduction's): no element written from several places, no
    partial overlap with an input, no overlap between outputs. Gives the pairs it checked (with the
    inputs, between the outputs), which a hot path checks against each later call's pointers."""
    check_expanded_outputs(outs)
    out_pointers = [o.pointer for o in outs]
    pairs = overlap_pairs(outs, inputs), output_overlap_pairs(outs)
    check_overlap(pairs[0], out_pointers, [a.pointer for a in inputs])
    check_output_overlap(pairs[1], out_pointers)
    return pairs
