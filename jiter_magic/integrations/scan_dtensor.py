"""Scans of DTensors (torch.distributed.tensor): each rank scans its local shards, and a shard of
the scanned dim carries in the state of the shards before it.

The inputs are laid out alike over the mesh as for an elementwise call (dtensor_layout.py),
then, mesh dim by mesh dim:
- `Replicate`, or `Shard(d)` of a dim other than the scanned one: each rank's piece of the result
  depends on its own piece of the inputs only, so the function's own call on the local tensors
  is the result's local piece, with no communication; the result keeps the placements.
- `Shard` of the scanned dim: each rank scans its piece to a partial (no finalize, in the
  accumulator; scan_parts.py), the ranks of that mesh dim all-gather their partials' totals (one
  slice each), and each rank folds the totals of the ranks before it (after it, for `reverse=`)
  into its carry, in rank order, which is the shards' order. Its piece of the result is then its
  partial with the carry folded in, shifted for `exclusive=`, finalized with counts over the whole
  dim; it stays sharded. Float results match the eager call's within rounding (another grouping).
A `Partial` input (a pending sum over ranks) is refused: the scan of a sum is not the sum of the
scans for every combine, so the caller redistributes it first, as it sees fit.

Every check reads global metadata only, the same on every rank, so a refused call is refused on
every rank before any collective. `out=` is refused and autograd is not supported yet.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial, Shard

from jiter_magic.errors import UnsupportedArrayError
from jiter_magic.integrations.dtensor_layout import Placements, local_input, output_placements
from jiter_magic.integrations.reduce_dtensor import (
    all_gathered,
    checked_inputs,
    local_extent,
    shard_extent,
    single_shards,
    wrapper,
)
from jiter_magic.integrations.reduce_parts import tree_parts
from jiter_magic.integrations.scan_parts import State, as_state, combined, piece_partial, piece_result, total
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.layout import contiguous_strides
from jiter_magic.planning.scan_plan import ScanResult, scan_result
from jiter_magic.runtime.reduce_call import ValuesIndices
from jiter_magic.runtime.scan_call import check_flag


def scan_dtensor(function: Any, args: tuple, options: dict[str, Any], kwargs: dict) -> Any:
    """`function(*args, dim=, reverse=, exclusive=, dtype=, **kwargs)` on DTensors (see the module docstring)."""
    mesh, inputs = checked_inputs(function, args, options, kwargs)
    for x in inputs:
        if any(isinstance(p, Partial) for p in x.placements):
            raise UnsupportedArrayError(
                f"{function.name}: an input has placements {tuple(x.placements)}; a scan does not run on a Partial "
                "DTensor (a pending sum over ranks): redistribute it first, e.g. x.redistribute(mesh, [Replicate()])")
    flags = {name: check_flag(options[name], name) for name in ("reverse", "exclusive")}
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    indexed = bool(function.binding.indexed)
    planned = scan_result([dtype_name(x.dtype) for x in inputs], [tuple(x.shape) for x in inputs], "torch",
                          options["dim"], requested, function.identity, indexed)
    targets = single_shards(output_placements(inputs, planned.shape, mesh.ndim))
    locals_ = [local_input(x, planned.shape, targets) for x in args]
    carried = [m for m, p in enumerate(targets) if isinstance(p, Shard) and p.dim == planned.dim]
    if carried:
        found = _carried_over_ranks(function, locals_, planned, mesh, targets, carried[0], flags, kwargs)
    else:  # every rank holds the whole scanned extent: the function's own call is the result
        found = as_state(function(*locals_, dim=planned.dim, dtype=requested, **flags, **kwargs))
    stride = contiguous_strides(planned.shape, list(reversed(range(len(planned.shape)))))
    wrapped = [wrapper(mesh, targets, planned.shape, stride)(f) for f in found]
    if indexed:
        return ValuesIndices(*wrapped)
    return wrapped[0] if len(wrapped) == 1 else tuple(wrapped)


def _carried_over_ranks(function: Any, locals_: list[Any], planned: ScanResult, mesh: DeviceMesh,
                        targets: Placements, mesh_dim: int, flags: dict[str, bool], kwargs: dict) -> State:
    """The rank's piece of the result where `mesh_dim` shards the scanned dim: its partial, the
    totals of the ranks before it gathered and folded into its carry, then its result."""
    parts, dim, reverse = tree_parts(function), planned.dim, flags["reverse"]
    indexed = bool(function.binding.indexed)
    starts, _ = local_extent(planned.shape, mesh, targets)
    partial = piece_partial(parts, planned, reverse, starts[dim], indexed, tuple(locals_), kwargs)
    edge = total(partial, dim, reverse)
    if edge is None:  # an empty shard sends a placeholder all the same (collectives need every rank), dropped below
        shape = tuple(1 if axis == dim else n for axis, n in enumerate(partial[0].shape))
        edge = tuple(torch.zeros(shape, dtype=p.dtype, device=p.device) for p in partial)
    size, coordinate = mesh.size(mesh_dim), mesh.get_coordinate()
    assert coordinate is not None  # DTensor gives no local tensor to a rank outside the mesh
    gathered = [all_gathered(t, mesh.get_group(mesh_dim), size) for t in edge]
    own = coordinate[mesh_dim]
    before = range(size - 1, own, -1) if reverse else range(own)  # in the scan's direction
    carry = None
    for rank in before:
        if shard_extent(planned.shape[dim], size, rank)[1]:
            carry = combined(parts, carry, tuple(g[rank] for g in gathered), planned, reverse, indexed)
    return piece_result(parts, planned, flags, indexed, starts[dim], carry, partial)
