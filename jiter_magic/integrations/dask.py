"""Dask arrays: a call on them gives lazy Dask arrays, computed block by block by Dask itself.

A Dask array is a graph of chunks, not memory a kernel can read, so its calls are handed to this adapter: each
block of the result is the eager call on the inputs' matching blocks (NumPy chunks on the CPU,
CuPy chunks on a GPU), laid out by Dask's own `blockwise`, which unifies the inputs' chunks and
broadcasts them. What an eager call would refuse (shapes, dtypes, devices, kwargs) is refused
at call time, not at compute time: shapes are checked here, and the result's dtype and meta
come from the same call on the inputs' zero-size metas, which plans but launches nothing (so
compiles nothing). A function of several outputs computes them together, one task a block,
in one layer that small `getitem` layers split into one Dask array an output.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import dask.array as da
from dask.array.utils import meta_from_array

from jiter_magic.integrations.dask_inputs import (
    as_dask_input,
    check_unknown_sizes,
    known_sizes,
    out_is_refused,
    right_aligned,
    split_outputs,
    zero_size,
)
from jiter_magic.integrations.reduce_dask import reduce_dask
from jiter_magic.integrations.scan_dask import scan_dask
from jiter_magic.planning.layout import broadcast_shape


def map_blocks(function: Any, args: tuple, options: dict, kwargs: dict) -> Any:
    """An elementwise call's lazy result, `function(*args, **kwargs)` on each block: one Dask array an output."""
    if options["out"] is not None:
        raise out_is_refused()
    inputs = [as_dask_input(x) for x in args]
    arrays = [x for x in inputs if isinstance(x, da.Array)]
    broadcast_shape([known_sizes(a.shape) for a in arrays])  # a ShapeError now, not at compute time
    check_unknown_sizes(arrays)
    ndim = max(a.ndim for a in arrays)
    # The eager call on zero-size metas: the output dtypes and array types, and every error a block would raise.
    results = function(*(zero_size(x) for x in inputs), **kwargs)
    metas = [meta_from_array(m, ndim=ndim) for m in (results if function.num_outputs > 1 else (results,))]
    per_block = partial(function, **kwargs) if kwargs else function
    indexed = right_aligned(inputs, ndim)  # an input's dimensions are the output's last ones
    out_index = tuple(range(ndim))
    if len(metas) == 1:
        return da.blockwise(per_block, out_index, *indexed, token=function.name, dtype=metas[0].dtype,
                            meta=metas[0])
    together = da.blockwise(per_block, out_index, *indexed, token=function.name, meta=tuple(metas))
    return split_outputs(together, out_index, tuple(metas), function.name)


class DaskAdapter:
    """Runs a call that has Dask arrays among its inputs as a Dask graph (see the module docstring)."""

    library = "dask"
    delegates = True
    # reduce_dask.py: dask.array.reduction; scan_dask.py: carries along the scanned dim
    strategies = {"elementwise": map_blocks, "reduction": reduce_dask, "scan": scan_dask}


ADAPTER = DaskAdapter()
