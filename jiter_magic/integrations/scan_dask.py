"""Scans of Dask arrays: a lazy Dask array whose blocks carry the state of the blocks before them.

Blocks along the other dims are independent. Along the scanned dim (as `dask.array.cumreduction`
does, with the states scan_parts.py folds rather than one array): each block's partial scan runs
by `map_blocks` (indices global from where the block starts); a chain of small tasks folds each
block's total into the carry of the next (in the scan's direction: from the last block for
`reverse=`); each block's result folds its carry into its partial, shifted for `exclusive=`,
finalized with counts over the whole dim. Several inputs (NumPy or CuPy arrays among Dask ones)
broadcast as an elementwise call's, their chunks unified. Float results match the eager call's
within rounding, not bit for bit: the states are combined in another grouping.

What an eager call would refuse (the dim, the input count, an unknown keyword, dtypes, shapes) is
refused now: the eager call runs on the inputs' zero-size metas, which plans but launches
nothing. Unknown chunk sizes (NaN, after boolean indexing) along the scanned dim are refused,
as a block's start and the counts need them.
"""
from __future__ import annotations

from functools import partial
from itertools import product
from typing import Any

import dask.array as da
from dask.array.core import unify_chunks
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from jiter_magic.integrations import dask_inputs
from jiter_magic.integrations.dask_inputs import zero_size
from jiter_magic.integrations.kinds import as_results
from jiter_magic.integrations.reduce_parts import State, as_state, tree_parts
from jiter_magic.integrations.scan_parts import combined, piece_partial, piece_result, total
from jiter_magic.planning.scan_plan import ScanResult

_FLAGS = ("reverse", "exclusive")


def scan_dask(function: Any, args: tuple, options: dict[str, Any], kwargs: dict) -> Any:
    """The lazy result of `function(*args, dim=, reverse=, exclusive=, dtype=, **kwargs)` (see the module docstring)."""
    if options["out"] is not None:
        raise dask_inputs.out_is_refused()
    inputs = [dask_inputs.as_dask_input(x) for x in args]
    arrays = [x for x in inputs if isinstance(x, da.Array)]
    # The eager call on zero-size metas: every error a block would raise, and the results' array types.
    found = function(*(zero_size(x) for x in inputs), **{k: v for k, v in options.items() if k != "out"}, **kwargs)
    dask_inputs.check_unknown_sizes(arrays)
    planned = dask_inputs.plan_of(function, arrays, options)  # the meta call accepted the chunks' library
    ndim = len(planned.shape)
    if ndim == 0:  # 0-d inputs: the scan of one element, as a 1-d one
        options = {**options, "dim": 0}
        found = scan_dask(function, tuple(x[None] if isinstance(x, da.Array) else x for x in args), options, kwargs)
        if not isinstance(found, tuple):
            return found[0]
        firsts = tuple(f[0] for f in found)  # a plain tuple of a state's values, or ValuesIndices
        return type(found)(*firsts) if hasattr(found, "_fields") else firsts
    chunkss, aligned = unify_chunks(*dask_inputs.right_aligned(inputs, ndim))  # by index: each dim's unified chunks
    dask_inputs.check_known_along(arrays, ndim, (planned.dim,), f"{function.name}: ", f"the scanned dim {planned.dim}",
                                  "a scan carries each block's state into the next from where the blocks start")
    flags = {name: bool(options[name]) for name in _FLAGS}
    indexed = bool(function.binding.indexed)
    partials = da.map_blocks(partial(_block_partial, function, planned, flags["reverse"], indexed, kwargs), *aligned,
                             chunks=tuple(chunkss[axis] for axis in range(ndim)),
                             meta=meta_from_array(arrays[0]._meta, ndim=ndim, dtype=planned.accumulate),
                             token=f"{function.name}-partial")
    metas = tuple(meta_from_array(m, ndim=ndim) for m in as_state(found))
    name = f"{function.name}-{tokenize(partials.name, flags)}"
    graph = HighLevelGraph.from_collections(name, _carried(function, planned, flags, indexed, partials, name),
                                            dependencies=[partials])
    together = da.Array(graph, name, partials.chunks, meta=metas[0])
    return as_results(function, dask_inputs.split_outputs(together, tuple(range(ndim)), metas, function.name))


def _start(block_info: dict, dim: int) -> int:
    """Where the output block starts along the dim."""
    return int(block_info[None]["array-location"][dim][0])


def _block_partial(function: Any, planned: ScanResult, reverse: bool, indexed: bool, kwargs: dict, *blocks: Any,
                   block_info: dict) -> State:
    return piece_partial(tree_parts(function), planned, reverse, _start(block_info, planned.dim), indexed,
                         blocks, kwargs)


def _carried(function: Any, planned: ScanResult, flags: dict[str, bool], indexed: bool, partials: da.Array,
             name: str) -> dict:
    """The tasks of the blocks' results: along the dim a chain of carries, in the scan's direction."""
    dim, reverse = planned.dim, flags["reverse"]
    chunks = partials.chunks[dim]
    starts = [sum(chunks[:k]) for k in range(len(chunks))]
    order = range(len(chunks) - 1, -1, -1) if reverse else range(len(chunks))
    result = partial(_block_result, function, planned, flags, indexed)
    carry_next = partial(_next_carry, function, planned, reverse, indexed)
    tasks: dict = {}
    others = [range(n) for axis, n in enumerate(partials.numblocks) if axis != dim]
    for other in product(*others):
        carry = None
        for k in order:
            index = (*other[:dim], k, *other[dim:])
            block = (partials.name, *index)
            key = (name, *index)
            tasks[key] = (result, starts[k], carry, block)
            if k != order[-1]:  # the last block's total carries into none
                carry_key = (name, "carry", *index)
                tasks[carry_key] = (carry_next, carry, block)
                carry = carry_key
    return tasks


def _block_result(function: Any, planned: ScanResult, flags: dict[str, bool], indexed: bool, start: int,
                  carry: State | None, block: State) -> State:
    return piece_result(tree_parts(function), planned, flags, indexed, start, carry, block,
                        function.binding.kept_values)


def _next_carry(function: Any, planned: ScanResult, reverse: bool, indexed: bool, carry: State | None,
                block: State) -> State | None:
    """The state of the blocks up to this one's end: its total folded after the carry into it."""
    return combined(tree_parts(function), carry, total(block, planned.dim, reverse), planned, reverse, indexed)
