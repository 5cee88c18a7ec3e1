"""Reductions of DTensors (torch.distributed.tensor): each rank reduces its local shards, and
ranks exchange only the small partial results of the dims the mesh splits.

A kernel reads one rank's local tensor only. The inputs are first laid out alike over the mesh,
as an elementwise call lays them out (dtensor_layout.py: a `Partial` or `_StridedShard` input is
redistributed, to `Replicate` or to the other inputs' `Shard`), then, mesh dim by mesh dim:
- `Replicate`: every rank holds the whole extent, so the result is replicated too;
- `Shard(d)` on a dim that is not reduced: each rank's rows of the result depend on its own rows
  only, so the result stays sharded along d's place in the result, with no communication;
- `Shard(d)` on a reduced dim: each rank holds part of the reduced extent. It reduces it to a
  partial result (the map and combine, no finalize, in the accumulator's dtype, the reduced dims
  kept as 1; reduce_parts.py), the ranks of that mesh dim all-gather their partials, and every
  rank folds them with the combine alone, in rank order, which is the order of the shards.
  The finalize runs once, after the last fold, with the whole count: a mean divides by every
  element reduced, not by a shard's. The result is then replicated along that mesh dim.
Partials rather than the function's own call on each shard, because a finalize is not a
combine (the mean of means of uneven shards is not the mean) and a result's dtype may be
narrower than the accumulator (float16 sums partials in float32, as one call does).

A `Partial` input (a pending sum over ranks) is summed before the reduction, by DTensor's own
`redistribute`, because a reduction is not linear in general (sum of squares of a + b is not
the sum of the sums of squares): the kernel must see the real values.

A rank whose shard is empty along a reduced dim (uneven sharding, e.g. 1 row over 2 ranks) sends
a partial all the same (collectives need every rank), but every rank drops the partials of empty
shards before the fold, knowing them from the global shape: a reduction with indices has no
value to give for an empty extent, and an identity need not be exact for every combine.

A reduction with indices does the same with `ValuesIndices` partials: each rank turns the indices
of its local call into indices over the whole reduced extent from where its shards start
(`global_indices`), and the fold takes them as its second input, so that it picks what the
eager call on the full tensor picks, ties across shards included (the first occurrence).

Every check reads global metadata only (meshes, shapes, dtypes, placements: the same on every
rank), so a refused call is refused on every rank before any collective, and no rank waits on
another. `out=` is refused and autograd is not supported yet (a `GradientError`).
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard

from jiter_magic.errors import ArgumentTypeError, GradientError, InvalidArgumentError
from jiter_magic.integrations.dtensor_layout import Placements, local_input, mesh_of, output_placements
from jiter_magic.integrations.reduce_parts import TreeParts, global_indices, tree_parts
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.layout import contiguous_strides
from jiter_magic.planning.reduce_result import ReductionResult, reduction_result
from jiter_magic.runtime.reduce_call import ValuesIndices, check_input_count, extra_values, no_backward


def reduce_dtensor(function: Any, args: tuple, options: dict[str, Any], kwargs: dict) -> DTensor | ValuesIndices:
    """`function(*args, dim=, keepdim=, dtype=, **kwargs)` on DTensors (see the module docstring)."""
    mesh, inputs = checked_inputs(function, args, options, kwargs)
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    planned = reduction_result([dtype_name(x.dtype) for x in inputs], [tuple(x.shape) for x in inputs], "torch",
                               options["dim"], bool(options["keepdim"]), requested, function.identity,
                               function.binding.indexed)
    targets = single_shards(output_placements(inputs, planned.shape, mesh.ndim))
    locals_ = [local_input(x, planned.shape, targets) for x in args]
    gathered = [(m, p.dim) for m, p in enumerate(targets) if isinstance(p, Shard) and p.dim in planned.dims]
    if gathered:
        found = _folded_over_ranks(function, locals_, planned, mesh, targets, gathered, kwargs)
    else:  # every rank holds the whole reduced extent: the function's own call is the result
        found = function(*locals_, dim=planned.dims, keepdim=bool(options["keepdim"]), dtype=requested, **kwargs)
    placements = _result_placements(targets, planned, bool(options["keepdim"]))
    stride = contiguous_strides(planned.out_shape, list(reversed(range(len(planned.out_shape)))))
    wrap = wrapper(mesh, placements, planned.out_shape, stride)
    if function.binding.indexed:
        return ValuesIndices(wrap(found.values), wrap(found.indices))
    return wrap(found)


def checked_inputs(function: Any, args: tuple, options: dict[str, Any],
                    kwargs: dict) -> tuple[DeviceMesh, list[DTensor]]:
    """The mesh and the DTensor inputs, after every refusal that global metadata decides (the
    eager call's errors, raised on every rank alike before anything moves)."""
    name = function.name
    check_input_count(function.binding, args)
    for x in args:
        if isinstance(x, numbers.Number):
            raise ArgumentTypeError(f"{name}: the inputs of a reduction are arrays, got the number {x!r}; pass "
                                    "numbers as keyword arguments of the map function")
    mesh, inputs = mesh_of(args)
    if options["out"] is not None:
        raise InvalidArgumentError(f"{name}: out= is not supported with DTensor inputs; use the returned DTensor "
                                   "(result.to_local() is this rank's piece)")
    extra_values(function.binding, function.kwargs, kwargs)  # an unknown keyword: the eager call's error
    if torch.is_grad_enabled() and any(x.requires_grad for x in inputs):
        if function.backward is None:
            raise no_backward(name, function.binding.indexed)
        raise GradientError(f"{name}: {function.operation}s of DTensors have no autograd yet, and an input requires "
                            "grad; call it under torch.no_grad() (or on x.detach()), or on x.full_tensor()")
    return mesh, inputs


def single_shards(targets: Placements) -> Placements:
    """The placements with each tensor dim sharded by one mesh dim at most (the first): a dim
    split by several mesh dims is gathered along the later ones, which keeps a shard's offset
    a single mesh coordinate's (rare layouts, so the simple way)."""
    seen: set[int] = set()
    kept: list[Any] = []
    for p in targets:
        if isinstance(p, Shard) and p.dim in seen:
            p = Replicate()
        elif isinstance(p, Shard):
            seen.add(p.dim)
        kept.append(p)
    return tuple(kept)


def _result_placements(targets: Placements, planned: ReductionResult, keepdim: bool) -> Placements:
    """`Shard` of a kept dim moves to its place in the result; a reduced or replicated dim is `Replicate`."""
    placements: list[Any] = []
    for p in targets:
        if isinstance(p, Shard) and p.dim not in planned.dims:
            placements.append(Shard(p.dim if keepdim else p.dim - sum(a < p.dim for a in planned.dims)))
        else:
            placements.append(Replicate())
    return tuple(placements)


def wrapper(mesh: DeviceMesh, placements: Placements, shape: tuple[int, ...], stride: tuple[int, ...]) -> Any:
    """Wraps a rank's local result as a DTensor of the global shape and stride (uneven shards
    need them given: DTensor would guess them from this rank's piece)."""
    def wrap(local: torch.Tensor) -> DTensor:
        return DTensor.from_local(local, mesh, placements, run_check=False, shape=torch.Size(shape), stride=stride)

    return wrap


# ----------------------------------------------------------------------------- a sharded reduced dim


def shard_extent(size: int, parts: int, coordinate: int) -> tuple[int, int]:
    """Where a `Shard` piece starts and how long it is: torch.chunk's split, as DTensor's `Shard`
    splits (pieces of ceil(size / parts), the last ones shorter or empty)."""
    step = math.ceil(size / parts) if parts else 0
    start = min(coordinate * step, size)
    return start, min(start + step, size) - start


def _folded_over_ranks(function: Any, locals_: list[Any], planned: ReductionResult, mesh: DeviceMesh,
                       targets: Placements, gathered: list[tuple[int, int]], kwargs: dict) -> Any:
    """The rank's result where reduced dims are sharded: its partial, gathered and folded along each
    mesh dim that splits a reduced dim, then finalized with the whole count, cast, reduced dims dropped."""
    parts = tree_parts(function)
    indexed = bool(function.binding.indexed)
    found = _local_partial(parts, locals_, planned, mesh, targets, indexed, kwargs)
    for mesh_dim, dim in gathered:
        found = _gathered_fold(parts, found, planned, mesh, mesh_dim, dim)
    values = _ended(parts, found.values if indexed else found, planned)
    if indexed:
        return ValuesIndices(values, _kept_or_dropped(found.indices, planned))
    return values


def _local_partial(parts: TreeParts, locals_: list[Any], planned: ReductionResult, mesh: DeviceMesh,
                   targets: Placements, indexed: bool, kwargs: dict) -> Any:
    """The partial of this rank's shards (values and GLOBAL indices for a reduction with indices)."""
    if not indexed:  # an empty shard gives the identity, dropped after the gather anyway
        return parts.partial(*locals_, dim=planned.dims, keepdim=True, dtype=planned.accumulate, **kwargs)
    starts, sizes = local_extent(planned.shape, mesh, targets)
    if any(sizes[a] == 0 for a in planned.dims):  # nothing to index here: a placeholder, dropped after the gather
        kept = tuple(1 if a in planned.dims else sizes[a] for a in range(len(sizes)))
        device = locals_[0].device
        return ValuesIndices(torch.zeros(kept, dtype=_torch_dtype(planned.accumulate), device=device),
                             torch.zeros(kept, dtype=torch.int64, device=device))
    found = parts.partial(*locals_, dim=planned.dims, keepdim=True, dtype=planned.accumulate, **kwargs)
    whole = tuple(planned.shape[a] for a in planned.dims)
    own = tuple(sizes[a] for a in planned.dims)
    return ValuesIndices(found.values, global_indices(found.indices, own, tuple(starts[a] for a in planned.dims),
                                                      whole))


def local_extent(shape: tuple[int, ...], mesh: DeviceMesh, targets: Placements) -> tuple[list[int], list[int]]:
    """Where this rank's piece of the broadcast `shape` starts along each dim, and its sizes there."""
    coordinate = mesh.get_coordinate()
    assert coordinate is not None  # DTensor gives no local tensor to a rank outside the mesh
    starts, sizes = [0] * len(shape), list(shape)
    for mesh_dim, p in enumerate(targets):
        if isinstance(p, Shard):
            starts[p.dim], sizes[p.dim] = shard_extent(shape[p.dim], mesh.size(mesh_dim), coordinate[mesh_dim])
    return starts, sizes


def _gathered_fold(parts: TreeParts, found: Any, planned: ReductionResult, mesh: DeviceMesh, mesh_dim: int,
                   dim: int) -> Any:
    """The partials of the ranks along `mesh_dim` (which splits reduced `dim`), gathered onto every
    one of them and folded in rank order (the shards' order), the empty shards' left out."""
    size = mesh.size(mesh_dim)
    tensors = found if isinstance(found, ValuesIndices) else (found,)
    pieces = [all_gathered(t, mesh.get_group(mesh_dim), size) for t in tensors]
    ranks = [r for r in range(size) if shard_extent(planned.shape[dim], size, r)[1] > 0] or list(range(size))
    joined = [torch.cat([piece[r] for r in ranks], dim=dim) for piece in pieces]
    return parts.fold(*joined, dim=(dim,), keepdim=True, dtype=planned.accumulate)


def all_gathered(local: torch.Tensor, group: dist.ProcessGroup, size: int) -> list[torch.Tensor]:
    """Each rank's `local` of the group, in rank order. Every rank of a group has the same shape
    here (the reduced dims are 1, the others split by other mesh dims only), so all of them skip
    an empty one alike."""
    if local.numel() == 0:
        return [local] * size
    local = local.contiguous()
    pieces = [torch.empty_like(local) for _ in range(size)]
    dist.all_gather(pieces, local, group=group)
    return pieces


def _ended(parts: TreeParts, total: torch.Tensor, planned: ReductionResult) -> torch.Tensor:
    """Folded accumulator values finalized once with the whole count, in the result's dtype."""
    if parts.finalize is not None:
        total = parts.finalize(total, planned.count)
    return _kept_or_dropped(total.to(_torch_dtype(planned.dtype)), planned)


def _kept_or_dropped(local: torch.Tensor, planned: ReductionResult) -> torch.Tensor:
    """The reduced dims (1 here) dropped, unless the call keeps them."""
    if planned.out_shape == planned.kept_shape:
        return local
    return local.squeeze(planned.dims)


def _torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name)
    assert isinstance(dtype, torch.dtype)
    return dtype
