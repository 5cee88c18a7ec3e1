"""The planner: from a described call to its `CallPlan`, once per key.

`plan` reads only what the call's description holds (dtypes, shapes, strides, alignment, the
adapter that made it) and asks `kernel_for` for the loaded kernel; it keeps nothing. Whether the
plan may run in C is decided here, once: where the C call path is loaded and the adapter's key
checks what a C hot path would not (a storage shrunk under a view).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from jiter_magic.arrays.base import ArrayAdapter, Described
from jiter_magic.kernels import path_of
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.resolve import output_overlap_pairs, overlap_pairs
from jiter_magic.planning.spec import KernelSpec
from jiter_magic.planning.values import flattener
from jiter_magic.runtime.loader import Launcher
from jiter_magic.runtime.plan import CallPlan, NativeCalls, PlanChecks, extent_of


class DescribedCall(NamedTuple):
    """A call as the planner sees it."""

    items: list  # per input: the adapter's `Described`, or the Python scalar itself
    adapter: ArrayAdapter  # the one adapter of every array input
    device: int  # -1 for the host
    outs: list[Described] | None  # out= arrays, if given
    kinds: tuple[str, ...]  # the scalar kind of each extra argument
    default_float: str  # the dtype Python floats take where only they decide (torch's default dtype)


def plan(call: DescribedCall, num_outputs: int, kernel_for: Callable[[KernelSpec, int], Launcher]) -> CallPlan:
    """The plan of a call: its spec, kernel, geometry, output allocators and checks."""
    # Imported at the first plan, not with the package: the kernel paths' modules, and the C call
    # path's loader (ctypes, json), which `import jiter_magic` has no use for.
    from jiter_magic.kernels.specialize import resolve_call
    from jiter_magic.native import call_path

    items, adapter, device = call.items, call.adapter, call.device
    arrays = normalized(items, adapter)
    outs = None if call.outs is None else [adapter.normalize(o) for o in call.outs]
    backend = "cuda" if device >= 0 else "cpu"
    spec, layout = resolve_call(arrays, adapter.rules, backend, outs, call.kinds, num_outputs, call.default_float)
    path = path_of(spec, backend)
    computes = layout.numel > 0
    like = next(i.array for i in items if isinstance(i, Described))
    inputs = [a for a in arrays if isinstance(a, ArrayDesc)]
    storage = adapter.check_storage if adapter.shrinkable and not adapter.key_checks_storage else None
    checks = PlanChecks(
        () if outs is None else overlap_pairs(outs, inputs),
        () if outs is None else output_overlap_pairs(outs),
        tuple(extent_of(a) for a in inputs),
        () if outs is None else tuple(extent_of(o) for o in outs),
        storage,
    )
    launcher = kernel_for(spec, device) if computes else None  # the first kernel loads the C call path
    native = storage is None and call_path.current().loaded_core() is not None
    return CallPlan(
        spec, layout.numel, launcher,
        path.geometry(spec, layout) if computes else (),
        path.grid(spec, layout) if computes else (0, 0, 0),
        tuple(adapter.allocator(layout.shape, layout.output_strides, d, like) for d in spec.outputs),
        flattener(spec, adapter.rules == "torch"), adapter.stream, adapter.pointer, device, checks,
        NativeCalls() if native else None,
    )


def normalized(items: list, adapter: ArrayAdapter) -> list:
    """Each described array as planning sees it (`ArrayDesc`); scalars as they are."""
    return [adapter.normalize(i) if isinstance(i, Described) else i for i in items]
