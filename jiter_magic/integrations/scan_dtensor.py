"""Scans of DTensors (torch.distributed.tensor): each rank scans its local shards, and a shard of
the scanned dim carries in the state of the shards before it.

The call is checked and its inputs laid out as a reduction's (reduce_dtensor.py: from global
metadata only, on every rank alike before any collective; `out=` refused, no autograd yet),
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
"""
from __future__ import annotations

from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial, Shard

from jiter_magic.errors import UnsupportedArrayError
from jiter_magic.integrations.dtensor_layout import Placements
from jiter_magic.integrations.kinds import requested_dtype
from jiter_magic.integrations.reduce_dtensor import as_dtensors, checked_inputs, gathered, laid_out, local_extent
from jiter_magic.integrations.reduce_parts import State, tree_parts
from jiter_magic.integrations.scan_parts import combined, piece_partial, piece_result, total
from jiter_magic.planning.scan_plan import ScanResult
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
    plan, targets, locals_ = laid_out(function, mesh, inputs, args, options)
    carried = [m for m, p in enumerate(targets) if isinstance(p, Shard) and p.dim == plan.dim]
    if carried:
        found = _carried_over_ranks(function, locals_, plan, mesh, targets, carried[0], flags, kwargs)
    else:  # every rank holds the whole scanned extent: the function's own call is the result
        found = function(*locals_, dim=plan.dim, dtype=requested_dtype(options), **flags, **kwargs)
    return as_dtensors(function, found, mesh, targets, plan.shape)


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
    by_rank = gathered(edge, mesh, mesh_dim, planned.shape[dim])
    coordinate = mesh.get_coordinate()
    assert coordinate is not None  # DTensor gives no local tensor to a rank outside the mesh
    own = coordinate[mesh_dim]
    carry = None
    for rank in range(mesh.size(mesh_dim) - 1, own, -1) if reverse else range(own):  # in the scan's direction
        if rank in by_rank:
            carry = combined(parts, carry, by_rank[rank], planned, reverse, indexed)
    return piece_result(parts, planned, flags, indexed, starts[dim], carry, partial, function.binding.kept_values)
