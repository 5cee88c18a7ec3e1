"""DTensors (torch.distributed.tensor): a jitted call runs on every rank's local shards.

A kernel cannot read a DTensor (its data pointer covers one rank's shard), but it need not: an
elementwise function's output element depends only on the same-index input elements, so once
every input is laid out alike over the mesh, each rank runs the function on its local tensors
with no communication, and the local results are wrapped back as DTensors.

How the inputs are laid out over the mesh first: dtensor_layout.py.

Every check reads only global metadata (meshes, shapes, placements), the same on every rank,
so a refused call is refused on every rank before any collective and no rank waits on another.
Autograd passes through `to_local`, `from_local` and `redistribute`, which are differentiable; an
input replicated along a sharded output dimension gets a `Partial` gradient (each rank's local
backward sums over its own shard only).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor

from jiter_magic.errors import BindError, DeviceError, InvalidArgumentError, ShapeError
from jiter_magic.integrations.dtensor_layout import (
    Placements,
    as_global,
    local_input,
    mesh_of,
    output_placements,
    output_stride,
)
from jiter_magic.integrations.reduce_dtensor import reduce_dtensor
from jiter_magic.integrations.scan_dtensor import scan_dtensor
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.runtime.keywords import check_kwarg_names


def _outputs(out: Any, count: int, mesh: DeviceMesh, shape: tuple[int, ...], targets: Placements) -> list[DTensor]:
    """The `out=` DTensors, when they have the result's mesh, global shape and placements."""
    given = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(given) != count:
        raise BindError(f"the function has {count} output(s), but out= gives {len(given)}")
    for o in given:
        if not isinstance(o, DTensor):
            raise InvalidArgumentError(f"out= must be DTensors like the inputs, got {type(o).__name__}")
        if o.device_mesh != mesh:
            raise DeviceError(f"out= is on {o.device_mesh}, the inputs on {mesh}; put them on one DeviceMesh")
        if tuple(o.shape) != shape:
            raise ShapeError(f"out= has global shape {tuple(o.shape)}, but the result has global shape {shape}")
        if tuple(o.placements) != targets:
            raise InvalidArgumentError(
                f"out= has placements {tuple(o.placements)}, but a call on these inputs gives {targets}; pass an "
                "out= with those placements, or redistribute the inputs to the placements of out=")
    return given


def _local_out(o: DTensor) -> torch.Tensor:
    """The rank's local tensor of an `out=` DTensor, to be written in place (a pending
    collective's result waited for first)."""
    local = o.to_local()
    return local.wait() if isinstance(local, AsyncCollectiveTensor) else local


def on_shards(function: Any, args: tuple, options: dict, kwargs: dict) -> Any:
    """An elementwise call `function(*args, out=out, **kwargs)` on DTensors: DTensor results, or the given `out=`."""
    out = options["out"]
    mesh, inputs = mesh_of(args)
    check_kwarg_names(kwargs, function.kwargs)  # before any redistribution, as the eager call refuses them
    shape = broadcast_shape([tuple(x.shape) for x in inputs])
    targets = output_placements(inputs, shape, mesh.ndim)
    given = None if out is None else _outputs(out, function.num_outputs, mesh, shape, targets)
    local_inputs = [local_input(x, shape, targets) for x in args]
    if given is not None:
        function(*local_inputs, out=tuple(_local_out(o) for o in given), **kwargs)
        return given[0] if function.num_outputs == 1 else tuple(given)
    results = function(*local_inputs, **kwargs)
    wrapped = as_global(results if isinstance(results, tuple) else (results,), mesh, targets, shape,
                        output_stride(inputs, shape))
    return wrapped[0] if function.num_outputs == 1 else tuple(wrapped)


class DTensorAdapter:
    """Runs a call with DTensor inputs on their local shards (see the module's docstring)."""

    library = "torch"
    delegates = True
    # reduce_dtensor.py: partials gathered; scan_dtensor.py: the totals of the shards before carried in
    strategies = {"elementwise": on_shards, "reduction": reduce_dtensor, "scan": scan_dtensor}


ADAPTER = DTensorAdapter()
