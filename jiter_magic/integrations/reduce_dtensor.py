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
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard

from jiter_magic.errors import GradientError, InvalidArgumentError
from jiter_magic.integrations.dtensor_layout import Placements, as_global, local_input, mesh_of, output_placements
from jiter_magic.integrations.kinds import as_results, check_array_inputs, planned, requested_dtype
from jiter_magic.integrations.reduce_parts import State, TreeParts, as_state, ended, placed_partial, tree_parts
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.reduce_layout import dense_strides
from jiter_magic.planning.reduce_result import ReductionResult, check_flag
from jiter_magic.runtime.reduce_call import ValuesIndices, extra_values, no_backward


def reduce_dtensor(function: Any, args: tuple, options: dict[str, Any], kwargs: dict) -> DTensor | ValuesIndices:
    """`function(*args, dim=, keepdim=, dtype=, **kwargs)` on DTensors (see the module docstring)."""
    mesh, inputs = checked_inputs(function, args, options, kwargs)
    # Checked before anything reads it, as the eager call does: bool("no") would be True.
    options = {**options, "keepdim": check_flag(options["keepdim"], "keepdim")}
    plan, targets, locals_ = laid_out(function, mesh, inputs, args, options)
    gathered = [(m, p.dim) for m, p in enumerate(targets) if isinstance(p, Shard) and p.dim in plan.dims]
    if gathered:
        found = _folded_over_ranks(function, locals_, plan, mesh, targets, gathered, kwargs)
    else:  # every rank holds the whole reduced extent: the function's own call is the result
        found = function(*locals_, dim=plan.dims, keepdim=options["keepdim"], dtype=requested_dtype(options), **kwargs)
    return as_dtensors(function, found, mesh, _result_placements(targets, plan, options["keepdim"]), plan.out_shape)


def checked_inputs(function: Any, args: tuple, options: dict[str, Any],
                   kwargs: dict) -> tuple[DeviceMesh, list[DTensor]]:
    """The mesh and the DTensor inputs, after every refusal that global metadata decides (the
    eager call's errors, raised on every rank alike before anything moves)."""
    name = function.name
    check_array_inputs(function, args)
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


def laid_out(function: Any, mesh: DeviceMesh, inputs: list[DTensor], args: tuple,
             options: dict[str, Any]) -> tuple[Any, Placements, list[Any]]:
    """The call's plan (kinds.py), the placements its inputs are laid out to (each tensor dim
    sharded by one mesh dim at most), and this rank's local tensors of them."""
    plan = planned(function, options, [dtype_name(x.dtype) for x in inputs], [tuple(x.shape) for x in inputs], "torch")
    targets = single_shards(output_placements(inputs, plan.shape, mesh.ndim))
    return plan, targets, [local_input(x, plan.shape, targets) for x in args]


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


def as_dtensors(function: Any, found: Any, mesh: DeviceMesh, placements: Placements, shape: tuple[int, ...]) -> Any:
    """A rank's local results as DTensors of the global shape, dense, as the eager call gives them."""
    stride = dense_strides(shape)
    return as_results(function, as_global(as_state(found), mesh, placements, shape, stride))


# ----------------------------------------------------------------------------- a sharded reduced dim


def shard_extent(size: int, parts: int, coordinate: int) -> tuple[int, int]:
    """Where a `Shard` piece starts and how long it is: torch.chunk's split, as DTensor's `Shard`
    splits (pieces of ceil(size / parts), the last ones shorter or empty)."""
    step = math.ceil(size / parts) if parts else 0
    start = min(coordinate * step, size)
    return start, min(start + step, size) - start


def _folded_over_ranks(function: Any, locals_: list[Any], planned: ReductionResult, mesh: DeviceMesh,
                       targets: Placements, gathered: list[tuple[int, int]], kwargs: dict) -> State:
    """The rank's result where reduced dims are sharded: its partial, gathered and folded along each
    mesh dim that splits a reduced dim, then finalized once with the whole count, cast, reduced dims dropped."""
    parts = tree_parts(function)
    if not function.binding.indexed:  # an empty shard gives the identity, dropped after the gather anyway
        found = as_state(parts.partial(*locals_, dim=planned.dims, keepdim=True, dtype=planned.accumulate, **kwargs))
    else:  # values and GLOBAL indices; an empty shard's placeholder is dropped after the gather
        starts, sizes = local_extent(planned.shape, mesh, targets)
        found = placed_partial(parts, locals_, planned, tuple(starts[a] for a in planned.dims),
                               tuple(sizes[a] for a in planned.dims), kwargs)
    for mesh_dim, dim in gathered:
        found = _gathered_fold(parts, found, planned, mesh, mesh_dim, dim)
    ended_ = ended(parts, found[0], planned.count, planned.dtype)
    return tuple(_kept_or_dropped(t, planned) for t in (ended_, *found[1:]))


def local_extent(shape: tuple[int, ...], mesh: DeviceMesh, targets: Placements) -> tuple[list[int], list[int]]:
    """Where this rank's piece of the broadcast `shape` starts along each dim, and its sizes there."""
    coordinate = mesh.get_coordinate()
    assert coordinate is not None  # DTensor gives no local tensor to a rank outside the mesh
    starts, sizes = [0] * len(shape), list(shape)
    for mesh_dim, p in enumerate(targets):
        if isinstance(p, Shard):
            starts[p.dim], sizes[p.dim] = shard_extent(shape[p.dim], mesh.size(mesh_dim), coordinate[mesh_dim])
    return starts, sizes


def _gathered_fold(parts: TreeParts, found: State, planned: ReductionResult, mesh: DeviceMesh, mesh_dim: int,
                   dim: int) -> State:
    """The partials of the ranks along `mesh_dim` (which splits reduced `dim`), gathered onto every
    one of them and folded in rank order (the shards' order), the empty shards' left out."""
    by_rank = gathered(found, mesh, mesh_dim, planned.shape[dim])
    joined = [torch.cat(pieces, dim=dim) for pieces in zip(*by_rank.values())]
    return as_state(parts.fold(*joined, dim=(dim,), keepdim=True, dtype=planned.accumulate))


def gathered(tensors: tuple, mesh: DeviceMesh, mesh_dim: int, whole: int) -> dict[int, tuple]:
    """The `tensors` of each rank along `mesh_dim` (every rank sends them: collectives need every
    rank), gathered onto every one, by rank in the shards' order; those of ranks whose shard of
    the `whole` extent is empty are left out (unless all are: an empty extent)."""
    size = mesh.size(mesh_dim)
    pieces = [all_gathered(t, mesh.get_group(mesh_dim), size) for t in tensors]
    ranks = [r for r in range(size) if shard_extent(whole, size, r)[1] > 0] or list(range(size))
    return {r: tuple(piece[r] for piece in pieces) for r in ranks}


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


def _kept_or_dropped(local: torch.Tensor, planned: ReductionResult) -> torch.Tensor:
    """The reduced dims (1 here) dropped, unless the call keeps them."""
    if planned.out_shape == planned.kept_shape:
        return local
    return local.squeeze(planned.dims)
