"""How a call's DTensor inputs are laid out over the mesh before each rank runs on its local
tensors, for elementwise calls (torch_dtensor.py) and reductions (reduce_dtensor.py) alike.

Placements, mesh dimension by mesh dimension (`output_placements`, `input_placements`):
- The output is `Shard(d)` on the output dimension `d` of the first input sharded (a plain
  `Shard`) along a dimension of full output size, else `Replicate`. Keeping the first sharded
  input where it is keeps the result sharded (memory per rank does not grow) and moves nothing
  when the inputs already agree, the common case; replicating everything instead would gather
  every input onto every rank.
- Each input must then be `Shard` on its own dimension that maps to `d` (right-aligned, as
  broadcasting aligns them), or `Replicate` where the output is `Replicate` or where the input is
  broadcast along `d` (size 1 or no such dimension: every rank needs all of it).
- Anything else is redistributed with DTensor's own `redistribute`, before any local call:
  another shard, a `_StridedShard`, and `Partial`. A `Partial` input is reduced first because an
  elementwise function is not linear (f(a) + f(b) != f(a + b)): to the needed `Shard` (a
  reduce-scatter) or `Replicate` (an all-reduce).
"""
from __future__ import annotations

import numbers
from typing import Any

import torch
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import Placement

from jiter_magic.errors import DeviceError, UnsupportedArrayError
from jiter_magic.planning.layout import broadcast_strides, contiguous_strides, dimension_order

Placements = tuple[Placement, ...]


def _shard_dim(placement: Placement, ndim: int) -> int | None:
    """The tensor dimension a plain `Shard` splits (non-negative), or None for any other placement."""
    if type(placement) is not Shard:
        return None
    return placement.dim % ndim if ndim else None


def output_placements(inputs: list[DTensor], shape: tuple[int, ...], mesh_ndim: int) -> Placements:
    """Per mesh dimension, `Shard` of the first input sharded along a full-size output dimension,
    else `Replicate` (see the module's docstring for why)."""
    chosen: list[Placement] = []
    for mesh_dim in range(mesh_ndim):
        target: Placement = Replicate()
        for x in inputs:
            dim = _shard_dim(x.placements[mesh_dim], x.ndim)
            if dim is not None and x.shape[dim] == shape[dim + len(shape) - x.ndim]:
                target = Shard(dim + len(shape) - x.ndim)
                break
        chosen.append(target)
    return tuple(chosen)


def input_placements(x: DTensor, shape: tuple[int, ...], targets: Placements) -> Placements:
    """What `x` must be for its local tensor to line up with the output's local tensor."""
    needed: list[Placement] = []
    for target in targets:
        dim = _shard_dim(target, len(shape))
        own = -1 if dim is None else dim - (len(shape) - x.ndim)  # x's dimension aligned with it
        full = dim is not None and own >= 0 and x.shape[own] == shape[dim]
        needed.append(Shard(own) if full else Replicate())
    return tuple(needed)


def gradient_placements(needed: Placements, targets: Placements) -> Placements:
    """The layout of a local input's gradient: `Partial` where the input is replicated along a
    sharded output dimension (each rank's backward sums over its shard only), else its own."""
    return tuple(Partial() if isinstance(p, Replicate) and type(t) is Shard else p for p, t in zip(needed, targets))


def output_stride(inputs: list[DTensor], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The global stride the eager call on the full tensors would give its outputs (dense, in
    the inputs' memory order): from global metadata only, so the same on every rank."""
    strides = [broadcast_strides(tuple(x.shape), tuple(x.stride()), shape) for x in inputs]
    return contiguous_strides(shape, dimension_order(shape, strides))


def mesh_of(args: tuple) -> tuple[DeviceMesh, list[DTensor]]:
    """The one mesh every array input lives on, and those inputs; refuses anything but DTensors
    and Python numbers, as torch refuses plain tensors mixed with DTensors."""
    inputs = [x for x in args if isinstance(x, DTensor)]
    mesh = inputs[0].device_mesh
    for position, x in enumerate(args):
        if isinstance(x, DTensor):
            if x.device_mesh != mesh:
                raise DeviceError(f"input {position} is a DTensor on {x.device_mesh}, another input is on {mesh}; "
                                  "put every DTensor of a call on one DeviceMesh")
        elif isinstance(x, torch.Tensor):
            raise DeviceError(
                f"input {position} is a plain torch.Tensor among DTensors; as torch does, jiter_magic does not guess "
                "how it is laid out over the mesh: make it a DTensor first (distribute_tensor(t, mesh, placements) "
                "for a whole tensor, DTensor.from_local(t, mesh, placements) for this rank's piece), or pass a "
                "Python number")
        elif not isinstance(x, numbers.Number):
            raise UnsupportedArrayError(
                f"input {position} is a {type(x).__name__} among DTensors; a call on DTensors takes DTensors on one "
                "mesh and Python numbers only: make it a DTensor (distribute_tensor) or pass a number")
    return mesh, inputs


def local_input(x: Any, shape: tuple[int, ...], targets: Placements) -> Any:
    """The rank's local tensor of an input laid out for the call (a Python number as it is)."""
    if not isinstance(x, DTensor):
        return x
    needed = input_placements(x, shape, targets)
    if tuple(x.placements) != needed:
        x = x.redistribute(x.device_mesh, needed)
    local = x.to_local(grad_placements=gradient_placements(needed, targets))
    # A DTensor redistributed with async_op=True holds a collective's pending result, which the
    # kernels cannot read: a clone waits for it and stays differentiable.
    return local.clone() if isinstance(local, AsyncCollectiveTensor) else local


def as_global(locals_: tuple | list, mesh: DeviceMesh, placements: Placements, shape: tuple[int, ...],
              stride: tuple[int, ...]) -> list[DTensor]:
    """A rank's local results as DTensors of the global shape and stride (uneven shards need them
    given: DTensor would guess them from this rank's piece)."""
    return [DTensor.from_local(t, mesh, placements, run_check=False, shape=torch.Size(shape), stride=stride)
            for t in locals_]
