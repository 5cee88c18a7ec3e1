"""`CallPlan`: what a call with a known key needs besides its pointers and scalar values.

A plan is made once per key by the planner (planner.py) and never changes. Its checks are data
(`PlanChecks`). Where it may run in C, it holds a `NativeCalls`: the C hot paths made from it,
for the default keyword values and for other values seen twice, each made once.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from jiter_magic.kernels.args import args_layout
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.resolve import OverlapPair, byte_span
from jiter_magic.planning.spec import KernelSpec
from jiter_magic.runtime.loader import Launcher

if TYPE_CHECKING:
    from jiter_magic.kernels.base import Grid  # base.py imports a code generator: types only

KWARGS_LIMIT = 64  # keyword values a plan keeps C hot paths for


# NamedTuples, as the other records a first call makes: a class of them costs a fifth of a frozen
# dataclass's at import. No code compares or hashes two plans (they hold callables): equality by
# value comes with the tuple, unused.
class PlanChecks(NamedTuple):
    """What is checked on every call of a plan, beyond its key."""

    overlap_pairs: tuple[OverlapPair, ...] = ()  # out= plans: (output, input) pairs that must not partly overlap
    output_pairs: tuple = ()  # out= plans with several outputs: pairs of outputs to check
    input_extents: tuple[int, ...] = ()  # bytes each array input reads from its pointer on (`extent_of`)
    output_extents: tuple[int, ...] = ()  # the same for out= arrays
    # The adapter's check that each array's storage still holds its extent, where storages can
    # shrink under a view and the key does not check it (torch's key read in Python); else None.
    storage: Callable[[Any, tuple], None] | None = None


class CallPlan(NamedTuple):
    """Everything a call with a known key needs besides its pointers and scalar values."""

    spec: KernelSpec
    numel: int
    launcher: Launcher | None  # None when there is nothing to compute
    geometry: tuple[int, ...]  # the path's loop geometry, packed after the values
    grid: Grid
    allocators: tuple[Callable[[], Any], ...]  # one per output
    flatten: Callable | None  # None when extras pack as they are and no input is a scalar
    stream: Callable[[int], int]  # the library's current raw stream on a device
    pointer: Callable[[Any], int]  # an output's data pointer
    device: int  # -1 for the host
    checks: PlanChecks = PlanChecks()
    # The C hot paths made from this plan, where it may have them: the C call path was loaded
    # when the plan was made and no storage check is due (a C hot path checks none). Else None.
    native_calls: NativeCalls | None = None

    def launch(self, pointers: list, input_pointers: list, extras: list, items: list | tuple) -> None:
        """Pack pointers, element count, extras and scalar inputs; launch on the current stream."""
        assert self.launcher is not None
        values = pointers + input_pointers
        if self.flatten is None:
            values.append(self.numel)
            values += extras
        else:
            values += self.flatten(self.numel, extras, items)
        self.launcher(values, self.geometry, self.grid, self.stream(self.device) if self.device >= 0 else 0)


class NativeCalls:
    """The C hot paths (native/fast_call.cpp's HotPlan) made from one plan: one for the default
    keyword values, made on the plan's first hot call, and one for each other set of keyword
    values on its second sight, so that a sweep over values makes none. At most KWARGS_LIMIT of
    each: values seen once long ago give way to new ones. An entry of None: no C hot path."""

    __slots__ = ("default", "default_made", "by_values", "seen_values")

    def __init__(self) -> None:
        self.default: Callable[[list], Any] | None = None  # input pointers -> the call's result(s)
        self.default_made = False
        self.by_values: dict[tuple, Callable[[list], Any] | None] = {}
        self.seen_values: set[tuple] = set()

    def make_default(self, plan: CallPlan, inputs: int, extras: list, returns_one: bool) -> None:
        self.default_made = True
        self.default = hot_plan(plan, inputs, extras, returns_one)

    def make_for_values(self, key: tuple, plan: CallPlan, inputs: int, extras: list, returns_one: bool) -> None:
        if key in self.by_values:
            return
        if key not in self.seen_values:
            if len(self.seen_values) >= KWARGS_LIMIT:
                self.seen_values.clear()
            self.seen_values.add(key)
        elif len(self.by_values) < KWARGS_LIMIT:
            self.by_values[key] = hot_plan(plan, inputs, extras, returns_one)


def hot_plan(plan: CallPlan, inputs: int, extras: list, returns_one: bool) -> Callable[[list], Any] | None:
    """A C hot path of `plan` with these extras, where its kernel has a C launcher: the Args
    struct packed here once, leaving only the pointers (its first fields, 8 bytes each) to
    write on each call. None where the kernel has no C launcher or the struct does not start so."""
    from jiter_magic.native import call_path  # loaded by the planner before any plan is made

    kernel = getattr(plan.launcher, "native", None)  # both launchers have one; `Launcher` types the call
    core = call_path.current().loaded_core()
    if kernel is None or core is None:
        return None
    layout = args_layout(plan.spec, "cpu" if plan.device < 0 else "cuda")
    pointers = len(plan.allocators) + inputs
    if any(f.offset != 8 * k or f.format != "Q" for k, f in enumerate(layout.fields[:pointers])):
        return None
    tail = [plan.numel, *extras] if plan.flatten is None else list(plan.flatten(plan.numel, extras, ()))
    packed = layout.packer.pack(*([0] * pointers), *tail, *plan.geometry)
    return core.HotPlan(kernel, plan.launcher, packed, plan.grid, inputs, plan.allocators, plan.pointer,
                        None if plan.device < 0 else plan.stream, plan.device, returns_one)


def extent_of(a: ArrayDesc) -> int:
    """Bytes a kernel reads from the array's pointer on (to the end of its last element); an
    empty array reads nothing, so any storage will do."""
    span = byte_span(a)
    return -(1 << 62) if span is None else span[1]
