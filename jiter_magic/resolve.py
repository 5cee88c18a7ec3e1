"""Resolve a call: from the inputs' dtypes and layouts to a `KernelSpec` and a `Layout`.

Pure functions (no arrays, no devices), so the semantics — promotion, safe casting,
broadcasting, overlap rules and the choice of kernel path — are testable without a GPU.
"""
from __future__ import annotations

from . import dtypes as dt
from .errors import DTypeError, ShapeError
from .layout import Layout, plan_layout
from .plan import BLOCK, CONTIGUOUS, ROWS, STRIDED, TILE, TILED, KernelSpec


def resolve_call(arrays: list, rules: str, cuda: bool, outs: list | None, extras: tuple[str, ...],
                 num_outputs: int) -> tuple[KernelSpec, Layout]:
    """dtypes, layout and kernel path of a call.

    `arrays` holds, per input, (dtype, shape, element strides, pointer) or a Python scalar;
    `outs` the same for `out=` arrays. `rules` is 'torch' or 'numpy'.
    """
    array_items = [a for a in arrays if type(a) is tuple]
    scalar_kinds = tuple(dt.scalar_dtype(a) for a in arrays if type(a) is not tuple)
    if rules == "torch":
        ranked = tuple((a[0], dt.ZERO_DIM if a[1] == () else dt.DIMENSIONED) for a in array_items)
        common = dt.torch_result_type(ranked + tuple((k, dt.WRAPPED) for k in scalar_kinds))
    else:
        common = dt.numpy_result_type(tuple(a[0] for a in array_items), scalar_kinds)
    dt.dtype(common)
    compute = dt.compute_dtype(common)
    if outs is None:
        output_dtypes = (common,) * num_outputs
    else:
        output_dtypes = tuple(o[0] for o in outs)
        for target in output_dtypes:
            if not dt.can_cast(common, target, rules):
                raise DTypeError(f"result type {common} can't be cast to the desired output type {target} (out=)")
    layout = plan_layout(
        [a[1] for a in array_items], [a[2] for a in array_items],
        None if outs is None else [o[1] for o in outs],
        None if outs is None else [o[2] for o in outs],
        num_outputs,
    )
    if outs is not None:
        _check_expanded_outputs(outs)
    inputs = tuple(a[0] if type(a) is tuple else compute for a in arrays)
    scalar = tuple(type(a) is not tuple for a in arrays)
    path = CONTIGUOUS if layout.is_contiguous else STRIDED
    vec = _vector_width(output_dtypes, array_items, outs) if cuda and path == CONTIGUOUS else 1
    tiled = _transposed_inputs(layout, arrays, num_outputs) if cuda and path == STRIDED else ()
    row_broadcast: tuple[int, ...] = ()
    if tiled:
        path = TILED
    elif cuda and path == STRIDED and _rows_of_unit_stride(layout):
        path, vec = ROWS, _vector_width(output_dtypes, array_items, None, check_alignment=False)
        row_broadcast = _row_broadcast_inputs(layout, arrays, num_outputs)
    spec = KernelSpec(inputs, scalar, output_dtypes, compute, extras, path,
                      1 if path == CONTIGUOUS else max(layout.ndim, 1), vec,
                      (not cuda) or layout.needs_int64, tiled, row_broadcast)
    return spec, layout


def spec_for_dtypes(names: list[str], extras: tuple[str, ...], num_outputs: int, backend: str, path: str,
                    ndim: int) -> KernelSpec:
    """The spec of a call on dense arrays of the given dtypes: for inspection and eager compiles."""
    for name in names:
        dt.dtype(name)
    common = dt.torch_result_type(tuple((n, dt.DIMENSIONED) for n in names))
    cuda = backend == "cuda"
    if path not in (CONTIGUOUS, STRIDED):
        raise ValueError(f"path must be {CONTIGUOUS!r} or {STRIDED!r}, got {path!r}")
    vec = 1
    if cuda and path == CONTIGUOUS:
        vec = _vector_width((common,) * num_outputs, [(n,) for n in names], None, check_alignment=False)
    return KernelSpec(tuple(names), (False,) * len(names), (common,) * num_outputs, dt.compute_dtype(common),
                      extras, path, ndim if path == STRIDED else 1, vec, not cuda)


def _vector_width(output_dtypes, array_items, outs, check_alignment: bool = True) -> int:
    """Elements a thread moves per access: 16 bytes of the widest operand, shrunk until every pointer is aligned."""
    sizes = [dt.DTYPES[d].itemsize for d in output_dtypes] + [dt.DTYPES[a[0]].itemsize for a in array_items]
    vec = max(1, min(8, 16 // max(sizes)))
    if not check_alignment:
        return vec
    residues = [a[3] for a in array_items] + ([o[3] for o in outs] if outs else [])
    operand_sizes = [dt.DTYPES[a[0]].itemsize for a in array_items] + (
        [dt.DTYPES[o[0]].itemsize for o in outs] if outs else [])
    while vec > 1 and any(r % min(16, vec * s) for r, s in zip(residues, operand_sizes)):
        vec //= 2
    return vec


def _transposed_inputs(layout: Layout, arrays: list, num_outputs: int) -> tuple[int, ...]:
    """Inputs that walk the second loop dimension contiguously while the outputs walk the first:
    the layouts (a transpose, NCHW read as NHWC) that the tiled path stages through shared memory."""
    if layout.ndim < 2 or layout.sizes[0] < TILE // 2 or layout.sizes[1] < TILE // 2:
        return ()
    if (layout.sizes[1] + TILE - 1) // TILE > 65535:  # tiles of the second dimension go on grid.y
        return ()
    if any(layout.strides[j][0] != 1 for j in range(num_outputs)):
        return ()
    found, position = [], num_outputs
    for index, a in enumerate(arrays):
        if type(a) is tuple:
            strides = layout.strides[position]
            if abs(strides[1]) == 1 and strides[0] != 1 and strides[0] != 0:
                found.append(index)
            position += 1
    return tuple(found)


def _rows_of_unit_stride(layout: Layout) -> bool:
    """Every operand walks the innermost loop dimension densely or not at all (stride 1 or 0), the
    rows are long enough to vectorize, and one block a row-chunk fits the grid: the rows path."""
    if layout.ndim < 2 or layout.sizes[0] < 2 * BLOCK:
        return False
    if any(strides[0] not in (0, 1) for strides in layout.strides):
        return False
    rows = layout.numel // layout.sizes[0]
    return rows * ((layout.sizes[0] + BLOCK - 1) // BLOCK) < 2**31 - 1


def _row_broadcast_inputs(layout: Layout, arrays: list, num_outputs: int) -> tuple[int, ...]:
    found, position = [], num_outputs
    for index, a in enumerate(arrays):
        if type(a) is tuple:
            if layout.strides[position][0] == 0:
                found.append(index)
            position += 1
    return tuple(found)


def _extent(shape: tuple, strides: tuple) -> tuple[int, int]:
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return low, high


def _check_expanded_outputs(outs) -> None:
    """An output may not write one element from several places (a stride 0 over more than one)."""
    for o in outs:
        if 0 not in o[1] and any(s == 0 and n > 1 for s, n in zip(o[2], o[1])):
            raise ShapeError("out= has an expanded (stride 0) dimension: several results would land on one element")


def _byte_span(item) -> tuple[int, int] | None:
    """Bytes an array touches, relative to its pointer: [low, high); None when it is empty."""
    if 0 in item[1]:
        return None
    size = dt.DTYPES[item[0]].itemsize
    low, high = _extent(item[1], item[2])
    return low * size, (high + 1) * size


def overlap_pairs(outs, array_items) -> tuple:
    """Per (output, input) pair, the byte spans and whether they share a layout, so that each call
    can check its own pointers against torch's rule: an output may alias an input exactly,
    never partially."""
    pairs = []
    for j, o in enumerate(outs):
        out_span = _byte_span(o)
        for p, a in enumerate(array_items):
            in_span = _byte_span(a)
            if out_span and in_span:
                same = a[0] == o[0] and tuple(a[1]) == tuple(o[1]) and tuple(a[2]) == tuple(o[2])
                pairs.append((j, p, out_span, in_span, same))
    return tuple(pairs)


def check_overlap(pairs: tuple, out_pointers: list, in_pointers: list) -> None:
    for j, p, (o_lo, o_hi), (a_lo, a_hi), same in pairs:
        o, a = out_pointers[j], in_pointers[p]
        if a + a_lo < o + o_hi and o + o_lo < a + a_hi and not (same and o == a):
            raise ShapeError(
                "out= partially overlaps an input: some elements of the input and the written-to "
                "array refer to the same memory; pass a separate output or the input itself"
            )
