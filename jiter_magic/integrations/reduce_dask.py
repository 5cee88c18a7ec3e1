"""Reductions of Dask arrays: a lazy Dask array, folded block by block by `dask.array.reduction`.

Each block is reduced to its partial result (the map and combine, no finalize) with the reduced
dims kept as 1, in the accumulator's dtype, so that partials lose nothing to the result's
rounding (float16 sums partials in float32, as one call does); Dask's tree then concatenates
partials and folds them with the combine alone (reduce_parts.py), and the last fold ends them
with the finalize, given the count of every element reduced (a mean divides by the whole
count, not a block's), then casts to the result's dtype. A single Dask input is the reduction's
own `x`; several inputs (Dask arrays, NumPy or CuPy arrays among them) are first broadcast and
reduced block by block by `blockwise`, whose partials the tree then folds. What an eager call
would refuse is refused now, from the inputs' dtypes and shapes (planning/reduce_result.py),
without computing or compiling anything.

A reduction with indices (`_with_indices`) is the same tree over `ValuesIndices` partials: each
block's eager call (no finalize) gives values and indices local to the block, which become flat
indices over the whole reduced extent from where the block lies (`map_blocks`' block_info); the
folds concatenate values and indices apart and fold them with the combine, given the global
indices as a second input, so that it picks what the eager call picks, ties included, on any
chunks. That needs the sizes of the reduced dims: unknown chunk sizes there are refused.
"""
from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import dask.array as da
from dask.array.core import _concatenate2, unify_chunks  # _concatenate2: as Dask's own dict reductions join
from dask.array.utils import meta_from_array
from dask.utils import deepmap

from jiter_magic.arrays import adapter_for
from jiter_magic.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedArrayError
from jiter_magic.integrations.dask_inputs import (
    as_dask_input,
    check_unknown_sizes,
    known_sizes,
    out_is_refused,
    split_outputs,
)
from jiter_magic.integrations.reduce_parts import TreeParts, global_indices, tree_parts
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.reduce_result import ReductionResult, reduction_result
from jiter_magic.runtime.reduce_call import ValuesIndices, check_input_count, extra_values


def reduce_dask(function: Any, args: tuple, options: dict[str, Any], kwargs: dict) -> da.Array | ValuesIndices:
    """The lazy result of `function(*args, dim=, keepdim=, dtype=, **kwargs)` (see the module docstring)."""
    name = function.name
    if options["out"] is not None:
        raise out_is_refused()
    check_input_count(function.binding, args)
    for x in args:
        if isinstance(x, numbers.Number):
            raise ArgumentTypeError(f"{name}: the inputs of a reduction are arrays, got the number {x!r}; pass "
                                    "numbers as keyword arguments of the map function")
    extra_values(function.binding, function.kwargs, kwargs)  # an unknown keyword: the eager call's error, now
    inputs = [as_dask_input(x) for x in args]
    adapter = adapter_for(inputs[0]._meta)
    if adapter is None or adapter.delegates:
        raise UnsupportedArrayError(f"{name}: Dask arrays of {type(inputs[0]._meta).__name__} chunks cannot be "
                                    "reduced; use NumPy or CuPy chunks")
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    with_indices = function.binding.indexed
    planned = reduction_result([x.dtype.name for x in inputs], [known_sizes(x.shape) for x in inputs], adapter.rules,
                               options["dim"], options["keepdim"], requested, function.identity, with_indices)
    check_unknown_sizes(inputs)
    if with_indices:
        return _with_indices(function, inputs, planned, options, kwargs)
    count = _count(inputs, planned) if function.binding.finalize is not None else 0
    partials = partial(_partial, function, kwargs, planned.accumulate)
    chunk: Callable[..., Any]
    if len(inputs) == 1:
        source, chunk = inputs[0], partials
    else:  # several inputs: each block's partial by blockwise, which the tree's chunk step passes on
        ndim = len(planned.shape)
        source = da.blockwise(partial(partials, axis=planned.dims, keepdims=True), tuple(range(ndim)),
                              *right_aligned(inputs, ndim),
                              adjust_chunks=dict.fromkeys(planned.dims, 1), token=f"{name}-partial",
                              dtype=planned.accumulate,
                              meta=meta_from_array(inputs[0]._meta, ndim=ndim, dtype=planned.accumulate))
        chunk = _passed_on
    meta = meta_from_array(inputs[0]._meta, ndim=len(planned.out_shape), dtype=planned.dtype)
    return da.reduction(source, chunk, partial(_aggregate, function, planned.accumulate, planned.dtype, count),
                        axis=planned.dims, keepdims=bool(options["keepdim"]), dtype=planned.dtype,
                        combine=partial(_fold, function, planned.accumulate), concatenate=True, meta=meta,
                        name=name)  # Dask appends a token of its own


def right_aligned(inputs: list, ndim: int) -> list[Any]:
    """Each input and its dims' indices, broadcast right-aligned, as dask.py lays out an elementwise call."""
    indexed: list[Any] = []
    for x in inputs:
        indexed += (x, tuple(range(ndim - x.ndim, ndim)))
    return indexed


def _count(inputs: list, planned: ReductionResult) -> int:
    """The elements each result element folds, for the finalize: every reduced size must be known."""
    _check_known_reduced(inputs, planned, "a finalize needs the count of every element reduced")
    return planned.count


def _partial(function: Any, kwargs: dict, accumulate: str, *blocks: Any, axis: tuple[int, ...],
             keepdims: bool) -> Any:
    """A block's partial result: map and combine, no finalize, the reduced dims kept, in the accumulator."""
    return tree_parts(function).partial(*blocks, dim=axis, keepdim=True, dtype=accumulate, **kwargs)


def _passed_on(partials: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    """The tree's chunk step where blockwise already made each block's partial."""
    return partials


def _fold(function: Any, accumulate: str, partials: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    """Concatenated partials folded together by the combine alone."""
    return tree_parts(function).fold(partials, dim=axis, keepdim=keepdims, dtype=accumulate)


def _aggregate(function: Any, accumulate: str, result: str, count: int, partials: Any, axis: tuple[int, ...],
               keepdims: bool) -> Any:
    """The last fold, ended with the finalize and the whole count, in the result's dtype."""
    parts = tree_parts(function)
    if parts.finalize is None:  # the fold's kernel converts to the result's dtype itself
        return parts.fold(partials, dim=axis, keepdim=keepdims, dtype=result)
    return _ended(parts, parts.fold(partials, dim=axis, keepdim=keepdims, dtype=accumulate), count, result)


def _ended(parts: TreeParts, total: Any, count: int, result: str) -> Any:
    """Folded accumulator values finalized with the whole count, then cast to the result's dtype."""
    assert parts.finalize is not None
    total = parts.finalize(total, count)
    return total if total.dtype == result else total.astype(result)


# Reductions with indices. An index counts over the whole reduced extent, so a block's partial turns
# the local indices its call gives into global ones (from where the block starts), and the folds
# compare those with the user's combine (reduce_parts.py: `fold` takes them as its second input):
# the tree then picks what the eager call picks, ties included, whatever the chunks.


def _with_indices(function: Any, inputs: list, planned: ReductionResult, options: dict[str, Any],
                  kwargs: dict) -> ValuesIndices:
    """Values with their indices, lazily, folded as a tree of (values, global indices) partials:
    each block by `map_blocks` (which tells it where it lies), the partials by `dask.array.reduction`
    carrying `ValuesIndices` pairs (`concatenate=False`: each fold concatenates values and indices
    apart, so int64 indices never pass through the values' dtype), then one Dask array of each."""
    name, ndim, dims, keepdim = function.name, len(planned.shape), planned.dims, bool(options["keepdim"])
    _check_known_reduced(inputs, planned, "a reduction with indices needs them to count each index over the "
                                          "whole reduced extent")
    count = planned.count if function.binding.finalize is not None else 0
    chunkss, aligned = unify_chunks(*right_aligned(inputs, ndim))  # the chunks map_blocks aligns them to
    partials = da.map_blocks(
        partial(_indexed_partial, function, kwargs, planned, tuple(x.ndim for x in inputs)), *aligned,
        chunks=tuple((1,) * len(chunkss[axis]) if axis in dims else chunkss[axis] for axis in range(ndim)),
        meta=meta_from_array(inputs[0]._meta, ndim=ndim, dtype=planned.accumulate), token=f"{name}-block")
    metas = tuple(meta_from_array(inputs[0]._meta, ndim=len(planned.out_shape), dtype=d)
                  for d in (planned.dtype, "int64"))
    together = da.reduction(partials, _passed_on, partial(_aggregate_pairs, function, planned, count), axis=dims,
                            keepdims=keepdim, dtype=planned.dtype, combine=partial(_fold_pairs, function, planned),
                            concatenate=False, meta=metas[0], name=name)
    return ValuesIndices(*split_outputs(together, tuple(range(len(planned.out_shape))), metas, name))


def _check_known_reduced(inputs: list, planned: ReductionResult, why: str) -> None:
    """Every size along the reduced dims known (boolean indexing leaves them NaN), or an error saying `why`."""
    for x in inputs:
        offset = len(planned.shape) - x.ndim
        if any(axis >= offset and math.isnan(x.shape[axis - offset]) for axis in planned.dims):
            raise InvalidArgumentError(f"a Dask input has unknown chunk sizes along the reduced dims, and {why}; "
                                       "call x.compute_chunk_sizes() first")


def _indexed_partial(function: Any, kwargs: dict, planned: ReductionResult, ndims: tuple[int, ...], *blocks: Any,
                     block_info: dict) -> ValuesIndices:
    """A block's values and GLOBAL indices: the eager call without the finalize, in the accumulator,
    the reduced dims kept as 1, its local indices placed where the block lies in the whole extent.
    A block empty along a reduced dim (an empty chunk of a non-empty extent) holds no element: its
    indices are -1, which the fold passes over, as the kernels' own empty states."""
    starts, sizes = _block_extent(block_info, planned, ndims)
    if 0 in sizes:
        xp = sys.modules[type(blocks[0]).__module__.split(".")[0]]  # NumPy or CuPy, as the blocks are
        shape = list(xp.broadcast_shapes(*(b.shape for b in blocks)))
        for axis in planned.dims:
            shape[axis] = 1
        return ValuesIndices(xp.zeros(shape, dtype=planned.accumulate), xp.full(shape, -1, dtype="int64"))
    found = tree_parts(function).partial(*blocks, dim=planned.dims, keepdim=True, dtype=planned.accumulate, **kwargs)
    whole = tuple(planned.shape[axis] for axis in planned.dims)
    return ValuesIndices(found.values, global_indices(found.indices, sizes, starts, whole))


def _block_extent(block_info: dict, planned: ReductionResult,
                  ndims: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where a block starts along each reduced dim, and its size there, from Dask's `block_info`:
    the place of an input spanning that dim (one of size 1 there is broadcast: 0 and 1)."""
    starts, sizes = [], []
    for axis in planned.dims:
        start, stop = 0, 1
        for position, ndim in enumerate(ndims):
            own = axis - (len(planned.shape) - ndim)
            if own >= 0 and block_info[position]["shape"][own] == planned.shape[axis]:
                start, stop = block_info[position]["array-location"][own]
                break
        starts.append(start)
        sizes.append(stop - start)
    return tuple(starts), tuple(sizes)


def _joined(pairs: Any, axis: tuple[int, ...]) -> tuple[Any, Any]:
    """The values and the indices of the partials a fold gets (nested lists along the reduced
    dims, as `concatenate=False` leaves them), each concatenated as Dask concatenates arrays."""
    if not isinstance(pairs, list):  # no reduced dim (a 0-d input): one partial, no nest
        return pairs.values, pairs.indices
    axes = sorted(axis)
    return (_concatenate2(deepmap(lambda pair: pair.values, pairs), axes=axes),
            _concatenate2(deepmap(lambda pair: pair.indices, pairs), axes=axes))


def _fold_pairs(function: Any, planned: ReductionResult, pairs: Any, axis: tuple[int, ...], keepdims: bool,
                computing_meta: bool = False) -> Any:
    """Partials folded together by the combine, which compares their global indices."""
    if computing_meta:  # Dask asks for a meta: the declared one stands
        return pairs
    return tree_parts(function).fold(*_joined(pairs, axis), dim=axis, keepdim=keepdims, dtype=planned.accumulate)


def _aggregate_pairs(function: Any, planned: ReductionResult, count: int, pairs: Any, axis: tuple[int, ...],
                     keepdims: bool, computing_meta: bool = False) -> Any:
    """The last fold: values in the result's dtype (finalized with the whole count), global indices."""
    if computing_meta:
        return pairs
    parts = tree_parts(function)
    values, indices = _joined(pairs, axis)
    if parts.finalize is None:  # the fold's kernel converts to the result's dtype itself
        return parts.fold(values, indices, dim=axis, keepdim=keepdims, dtype=planned.dtype)
    found = parts.fold(values, indices, dim=axis, keepdim=keepdims, dtype=planned.accumulate)
    return ValuesIndices(_ended(parts, found.values, count, planned.dtype), found.indices)


