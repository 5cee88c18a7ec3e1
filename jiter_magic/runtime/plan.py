"""`CallPlan`: what a call with a known key needs besides its pointers and scalar values.

A plan is made once per key by the dispatcher (dispatch.py). Where the C call path was loaded when
it was made, the plan also gets a hot path in C on its second hot call (`heat`), and the same for
keyword values seen twice (`heat_with`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jiter_magic.kernels.args import args_layout
from jiter_magic.kernels.base import Grid
from jiter_magic.native import loader as fast_call
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.resolve import OverlapPair, byte_span
from jiter_magic.planning.spec import KernelSpec
from jiter_magic.runtime.loader import Launcher

KWARGS_LIMIT = 64  # keyword values a plan keeps hot paths for


@dataclass(eq=False, slots=True)
class CallPlan:
    """Everything a call with a known key needs besides its pointers and scalar values; `hot` is
    its hot path run from C (`heat`), where the C call path was loaded when the plan was made."""

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
    overlap_pairs: tuple[OverlapPair, ...] = ()  # out= plans: pairs to check on every call
    output_pairs: tuple = ()  # out= plans with several outputs: pairs of outputs to check
    reach: tuple[int, ...] = ()  # bytes each array input reads from its pointer on (see `reach_of`)
    out_reach: tuple[int, ...] = ()  # the same for out= arrays
    # The adapter's storage check, where storages can shrink and the fast key does not check them.
    room: Callable[[Any, tuple], None] | None = None
    hot: Callable[[list], Any] | None = None  # input pointers -> the call's result(s), from C
    # Whether hot paths in C may be made: the C call path was loaded when the plan was made, and the
    # hot path has no storage room to check (a HotPlan checks none).
    native: bool = False
    heatable: bool = True  # whether `heat` is still to be tried
    hot_with: dict[tuple, Callable[[list], Any] | None] | None = None  # keyword values -> their hot path
    seen_with: set | None = None  # keyword values seen once (`heat_with`)

    def heat(self, inputs: int, extras: list, returns_one: bool) -> None:
        """Give the plan its hot path in C (native/fast_call.cpp's HotPlan) where the kernel has a C launcher:
        the Args struct is packed here once with the default extras, leaving only the pointers
        (the struct's first fields, 8 bytes each) to write on each call."""
        self.heatable = False
        self.hot = self._hot_path(inputs, extras, returns_one)

    def heat_with(self, key: tuple, inputs: int, extras: list, returns_one: bool) -> None:
        """The same for calls with these keyword values, on their second sight (a sweep over
        values builds none); a plan keeps at most KWARGS_LIMIT of them (None where there is none),
        and remembers at most KWARGS_LIMIT values seen once."""
        table = self.hot_with
        if table is None:
            table = self.hot_with = {}
        seen = self.seen_with
        if seen is None:
            seen = self.seen_with = set()
        if key not in seen:
            if len(seen) >= KWARGS_LIMIT:  # values seen once long ago give way to new ones
                seen.clear()
            seen.add(key)
        elif len(table) < KWARGS_LIMIT:
            table[key] = self._hot_path(inputs, extras, returns_one)

    def _hot_path(self, inputs: int, extras: list, returns_one: bool) -> Callable[[list], Any] | None:
        kernel = getattr(self.launcher, "native", None)  # both launchers have one; `Launcher` types the call
        core = fast_call.CORE.module
        if kernel is None or core is None:
            return None
        layout = args_layout(self.spec, "cpu" if self.device < 0 else "cuda")
        pointers = len(self.allocators) + inputs
        if any(f.offset != 8 * k or f.format != "Q" for k, f in enumerate(layout.fields[:pointers])):
            return None
        tail = [self.numel, *extras] if self.flatten is None else list(self.flatten(self.numel, extras, ()))
        packed = layout.packer.pack(*([0] * pointers), *tail, *self.geometry)
        return core.HotPlan(kernel, self.launcher, packed, self.grid, inputs, self.allocators,
                                        self.pointer, None if self.device < 0 else self.stream, self.device,
                                        returns_one)

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


def reach_of(a: ArrayDesc) -> int:
    """Bytes a kernel reads from the array's pointer on (to the end of its last element); an
    empty array reads nothing, so any room will do."""
    span = byte_span(a)
    return -(1 << 62) if span is None else span[1]
