"""The hot path of scan calls: a call keyed like one planned before runs in C, as a reduction's does.

A call of plain arrays of one library, with no `out=` and no keyword values of the map, is keyed
by the adapter's fast key of its inputs and its `dim`, `reverse`, `exclusive` and `dtype`; once
the general path (scan_call.py) has planned such a call of one launch, it leaves the C call path's
`HotPlan` under that key (reduce_hot.py's `keep`), so that a later call only allocates its results,
writes the pointers and launches. Calls of two launches (a grid scan, split columns) and options
of other types (a bool or a NumPy int as `dim`) take the general path.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jiter_magic.arrays.base import ArrayAdapter
from jiter_magic.kernels import scan_cuda
from jiter_magic.planning.reduce_layout import dense_strides
from jiter_magic.runtime import reduce_hot
from jiter_magic.runtime.reduce_calls import ReductionCalls


def options_key(options: dict[str, Any]) -> tuple | None:
    """`dim`, `reverse`, `exclusive` and `dtype` as part of a hot key, or None where they take the
    general path (a bool is not keyed as the int it equals: the general path refuses `dim=True`)."""
    dim, reverse, exclusive = options["dim"], options["reverse"], options["exclusive"]
    if type(dim) is not int or type(reverse) is not bool or type(exclusive) is not bool:
        return None
    return dim, reverse, exclusive, options["dtype"]


def hot_call(calls: ReductionCalls, args: tuple, options: dict[str, Any]) -> Any:
    """The result of a call run by its C hot path, or None where the call takes the general path."""
    if not calls.hot or len(args) != calls.binding.num_inputs:
        return None
    return reduce_hot.hot_run(calls, args, options_key(options))


def keep_hot(calls: ReductionCalls, args: tuple, options: dict[str, Any], plan: Any, adapter: ArrayAdapter,
             device: int, packed: Callable[[int], bytes], shape: tuple[int, ...], wrap: Callable[..., Any] | None
             ) -> None:
    """After the general path planned a call without `out=` or keyword values: its hot path, where
    it has one launch. `packed(stage)`: the launch's `jm_Args` with every pointer 0; `shape`: the
    results'; `wrap`: what makes the result of the outputs (None: one output, as is)."""
    spec, layout = plan.spec, plan.layout
    launches = scan_cuda.launches(spec, layout, plan.blocks) if device >= 0 else [((1, 1, 1), 0)]
    if len(launches) != 1 or layout.rows == 0 or layout.count == 0:
        return
    (grid, stage), = launches

    def make(core: Any, launcher: Any) -> Callable[[list], Any]:
        # The outputs' allocators are built here, once `keep` has decided to keep the plan.
        dtypes = [spec.output, "int64"] if spec.indexed else [spec.output] * spec.state
        allocators = tuple(adapter.allocator(shape, dense_strides(shape), d, args[0]) for d in dtypes)
        return reduce_hot.single_launch(core, launcher, packed(stage), grid, args, allocators, adapter, device, wrap)

    reduce_hot.keep(calls, args, options_key(options), spec, adapter, device, make)

