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
without computing or compiling anything. A reduction with indices is computed otherwise
(`_with_indices`): whole reduced extents a block.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from functools import partial
from typing import Any

import dask.array as da
from dask.array.utils import meta_from_array

from jiter_magic.arrays import adapter_for
from jiter_magic.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedArrayError
from jiter_magic.integrations.dask_inputs import as_dask_input, known_sizes, out_is_refused, split_outputs
from jiter_magic.integrations.reduce_parts import tree_parts
from jiter_magic.planning.reduce_result import ReductionResult, reduction_result
from jiter_magic.runtime.reduce_call import ValuesIndices, check_input_count, dtype_name, extra_values


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
                               options["dim"], bool(options["keepdim"]), requested, function.identity, with_indices)
    if with_indices:
        return _with_indices(function, inputs, planned, options, kwargs)
    count = _count(inputs, planned) if function.binding.finalize is not None else 0
    partials = partial(_partial, function, kwargs, planned.accumulate)
    chunk: Callable[..., Any]
    if len(inputs) == 1:
        source, chunk = inputs[0], partials
    else:  # several inputs: each block's partial by blockwise, which the tree's chunk step passes on
        ndim = len(planned.shape)
        indexed: list[Any] = []
        for x in inputs:  # right-aligned broadcasting, as dask.py lays out an elementwise call
            indexed += (x, tuple(range(ndim - x.ndim, ndim)))
        source = da.blockwise(partial(partials, axis=planned.dims, keepdims=True), tuple(range(ndim)), *indexed,
                              adjust_chunks=dict.fromkeys(planned.dims, 1), token=f"{name}-partial",
                              dtype=planned.accumulate,
                              meta=meta_from_array(inputs[0]._meta, ndim=ndim, dtype=planned.accumulate))
        chunk = _passed_on
    meta = meta_from_array(inputs[0]._meta, ndim=len(planned.out_shape), dtype=planned.dtype)
    return da.reduction(source, chunk, partial(_aggregate, function, planned.accumulate, planned.dtype, count),
                        axis=planned.dims, keepdims=bool(options["keepdim"]), dtype=planned.dtype,
                        combine=partial(_fold, function, planned.accumulate), concatenate=True, meta=meta,
                        name=name)  # Dask appends a token of its own


def _count(inputs: list, planned: ReductionResult) -> int:
    """The elements each result element folds, for the finalize: every reduced size must be known."""
    for x in inputs:
        offset = len(planned.shape) - x.ndim
        if any(axis >= offset and math.isnan(x.shape[axis - offset]) for axis in planned.dims):
            raise InvalidArgumentError("a reduction with a finalize needs the sizes of the dims it reduces, and a Dask "
                                       "input has unknown chunk sizes there; call x.compute_chunk_sizes() first")
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
    total = parts.finalize(parts.fold(partials, dim=axis, keepdim=keepdims, dtype=accumulate), count=count)
    return total if total.dtype == result else total.astype(result)


def _with_indices(function: Any, inputs: list, planned: ReductionResult, options: dict[str, Any],
                  kwargs: dict) -> ValuesIndices:
    """Values with their indices, lazily. An element's index is its place in the whole reduced
    extent, and the combine compares indices, so partials of separate blocks cannot be folded
    with it: each input's reduced dims are rechunked into one chunk, and every block (whole
    reduced extents, any chunks of the kept dims) is the eager call, exact. The price: a block
    holds whole reduced extents (everything, for `dim=None`)."""
    ndim, dims = len(planned.shape), planned.dims
    indexed: list[Any] = []
    for x in inputs:  # right-aligned broadcasting; a reduced dim the input has becomes one chunk
        offset = ndim - x.ndim
        whole = {axis - offset: -1 for axis in dims if axis >= offset}
        indexed += (x.rechunk(whole) if whole else x, tuple(range(offset, ndim)))
    per_block = partial(_values_and_indices, function, options["dtype"], dims, kwargs)
    metas = (meta_from_array(inputs[0]._meta, ndim=ndim, dtype=planned.dtype),
             meta_from_array(inputs[0]._meta, ndim=ndim, dtype="int64"))
    together = da.blockwise(per_block, tuple(range(ndim)), *indexed, adjust_chunks=dict.fromkeys(dims, 1),
                            token=f"{function.name}-indexed", meta=metas)
    results = split_outputs(together, tuple(range(ndim)), metas, function.name)
    if not options["keepdim"]:
        results = tuple(r.squeeze(axis=dims) for r in results)
    return ValuesIndices(*results)


def _values_and_indices(function: Any, dtype: object, dims: tuple[int, ...], kwargs: dict, *blocks: Any) -> tuple:
    """One block's values and indices, the reduced dims kept as 1 (blockwise's chunks say so)."""
    found = function(*blocks, dim=dims, keepdim=True, dtype=dtype, **kwargs)
    return found.values, found.indices
