"""Reductions of Dask arrays: a lazy Dask array, folded block by block by `dask.array.reduction`.

Each block (of the inputs broadcast and unified by `map_blocks`: Dask arrays, NumPy or CuPy
arrays among them) is reduced to its partial result (the map and combine, no finalize) with the
reduced dims kept as 1, in the accumulator's dtype, so that partials lose nothing to the
result's rounding (float16 sums partials in float32, as one call does); Dask's tree then
concatenates partials and folds them with the combine alone (reduce_parts.py), and the last fold
ends them with the finalize, given the count of every element reduced (a mean divides by the
whole count, not a block's), then casts to the result's dtype. What an eager call would refuse
is refused now, from the inputs' dtypes and shapes (planning/reduce_result.py), without
computing or compiling anything.

A reduction with indices is the same tree over `ValuesIndices` partials: each block's eager call
(no finalize) gives values and indices local to the block, which become flat indices over the
whole reduced extent from where the block lies (`map_blocks`' block_info); the folds concatenate
values and indices apart (so int64 indices never pass through the values' dtype) and fold them
with the combine, given the global indices as a second input, so that it picks what the eager
call picks, ties included, on any chunks. That needs the sizes of the reduced dims: unknown
chunk sizes there are refused.
"""
from __future__ import annotations

from functools import partial
from operator import itemgetter
from typing import Any

import dask.array as da
from dask.array.core import _concatenate2, unify_chunks  # _concatenate2: as Dask's own dict reductions join
from dask.array.utils import meta_from_array
from dask.utils import deepmap

from jiter_magic.integrations.dask_inputs import (
    as_dask_input,
    check_known_along,
    check_unknown_sizes,
    out_is_refused,
    plan_of,
    right_aligned,
    split_outputs,
)
from jiter_magic.integrations.kinds import check_array_inputs, result_dtypes
from jiter_magic.integrations.reduce_parts import State, as_state, ended, placed_partial, tree_parts
from jiter_magic.planning.reduce_result import ReductionResult
from jiter_magic.runtime.reduce_call import ValuesIndices, extra_values


def reduce_dask(function: Any, args: tuple, options: dict[str, Any], kwargs: dict) -> da.Array | ValuesIndices:
    """The lazy result of `function(*args, dim=, keepdim=, dtype=, **kwargs)`, folded as a tree of
    partials: each block's by `map_blocks` (which tells it where it lies), then the partials by
    `dask.array.reduction` (`concatenate=False`: each fold concatenates its partials' arrays itself)."""
    name, indexed = function.name, function.binding.indexed
    if options["out"] is not None:
        raise out_is_refused()
    check_array_inputs(function, args)
    extra_values(function.binding, function.kwargs, kwargs)  # an unknown keyword: the eager call's error, now
    inputs = [as_dask_input(x) for x in args]
    planned = plan_of(function, inputs, options)
    check_unknown_sizes(inputs)
    ndim, dims = len(planned.shape), planned.dims
    count = 0
    if indexed or function.binding.finalize is not None:
        why = "a reduction with indices needs them to count each index over the whole reduced extent" if indexed \
            else "a finalize needs the count of every element reduced"
        check_known_along(inputs, ndim, dims, "", "the reduced dims", why)
        count = planned.count if function.binding.finalize is not None else 0
    chunkss, aligned = unify_chunks(*right_aligned(inputs, ndim))  # the chunks map_blocks aligns them to
    partials = da.map_blocks(
        partial(_block_partial, function, kwargs, planned, tuple(x.ndim for x in inputs)), *aligned,
        chunks=tuple((1,) * len(chunkss[axis]) if axis in dims else chunkss[axis] for axis in range(ndim)),
        meta=meta_from_array(inputs[0]._meta, ndim=ndim, dtype=planned.accumulate), token=f"{name}-block")
    metas = tuple(meta_from_array(inputs[0]._meta, ndim=len(planned.out_shape), dtype=d)
                  for d in result_dtypes(function, planned))
    together = da.reduction(partials, _passed_on, partial(_aggregate, function, planned, count), axis=dims,
                            keepdims=bool(options["keepdim"]), dtype=planned.dtype,
                            combine=partial(_fold, function, planned), concatenate=False, meta=metas[0],
                            name=name)  # Dask appends a token of its own
    if not indexed:
        return together
    return ValuesIndices(*split_outputs(together, tuple(range(len(planned.out_shape))), metas, name))


def _passed_on(partials: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
    """The tree's chunk step where map_blocks already made each block's partial."""
    return partials


def _block_partial(function: Any, kwargs: dict, planned: ReductionResult, ndims: tuple[int, ...], *blocks: Any,
                   block_info: dict) -> State:
    """A block's partial state: the eager call without the finalize, in the accumulator, the
    reduced dims kept as 1; with indices, its indices placed where the block lies in the whole
    extent (an index counts over the whole reduced extent, so that the folds compare indices as
    the eager call's combine does)."""
    parts = tree_parts(function)
    if not function.binding.indexed:
        return (parts.partial(*blocks, dim=planned.dims, keepdim=True, dtype=planned.accumulate, **kwargs),)
    return placed_partial(parts, blocks, planned, *_block_extent(block_info, planned, ndims), kwargs)


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


def _joined(partials: Any, axis: tuple[int, ...], fields: int) -> State:
    """The arrays of the partials a fold gets (states of `fields` arrays: values, and indices with
    indices; nested lists along the reduced dims, as `concatenate=False` leaves them), each
    concatenated apart as Dask concatenates arrays."""
    if not isinstance(partials, list):  # no reduced dim (a 0-d input): one partial, no nest
        return partials
    return tuple(_concatenate2(deepmap(itemgetter(i), partials), axes=sorted(axis)) for i in range(fields))


def _fold(function: Any, planned: ReductionResult, partials: Any, axis: tuple[int, ...], keepdims: bool,
          computing_meta: bool = False) -> Any:
    """Partials folded together by the combine alone (which compares their global indices)."""
    if computing_meta:  # Dask asks for a meta: the declared one stands
        return partials
    joined = _joined(partials, axis, function.num_outputs)
    return as_state(tree_parts(function).fold(*joined, dim=axis, keepdim=keepdims, dtype=planned.accumulate))


def _aggregate(function: Any, planned: ReductionResult, count: int, partials: Any, axis: tuple[int, ...],
               keepdims: bool, computing_meta: bool = False) -> Any:
    """The last fold: values in the result's dtype (finalized with the whole count), global indices."""
    if computing_meta:
        return partials
    parts = tree_parts(function)
    joined = _joined(partials, axis, function.num_outputs)
    if parts.finalize is None:  # the fold's kernel converts to the result's dtype itself
        return parts.fold(*joined, dim=axis, keepdim=keepdims, dtype=planned.dtype)
    found = parts.fold(*joined, dim=axis, keepdim=keepdims, dtype=planned.accumulate)
    if isinstance(found, ValuesIndices):
        return ValuesIndices(ended(parts, found.values, count, planned.dtype), found.indices)
    return ended(parts, found, count, planned.dtype)
