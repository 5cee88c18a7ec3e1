"""What the call path of every kind of function keeps: its kernels' loader, its plans, counts,
backend and backward. `Dispatcher` (elementwise maps) and `ReductionCalls` (reductions) are the two
kinds' call paths over it; the facade (jiter_magic/kernel_function.py) reads only this surface.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jiter_magic.arrays import BY_TYPE
from jiter_magic.arrays.base import ArrayAdapter, FastKey
from jiter_magic.cache.memory import MemoryCache
from jiter_magic.errors import DeviceError, InvalidArgumentError, device_name
from jiter_magic.runtime.loader import KernelLoader

BACKENDS = ("auto", "cuda", "cpu")


class CallCounts:
    """Calls of one function by the path they took (`fn.call_counts`). A plain class: a new
    process makes it on its first call, where a dataclass costs a millisecond."""

    __slots__ = ("hot", "general")

    def __init__(self, hot: int = 0, general: int = 0) -> None:
        self.hot = hot  # found their plan from the fast key (run in C or launched from Python)
        self.general = general  # described, checked and (on a miss) planned argument by argument

    def __repr__(self) -> str:
        return f"CallCounts(hot={self.hot}, general={self.general})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallCounts) and (self.hot, self.general) == (other.hot, other.general)


class FunctionCalls:
    """One function's call state, whatever its kind: plans are grouped by the spec they run, so
    that `fn.memory_counts(specialization)` reads them alike."""

    def __init__(self, name: str, loader: KernelLoader, plan_limit: int) -> None:
        self.name = name
        self.loader = loader
        self.plans: MemoryCache[Any] = MemoryCache(plan_limit)
        self.counts = CallCounts()
        self.backend = "auto"
        self.backward: Any = None  # the jitted gradient (fn.def_backward), called by autograd
        self._checked_device: int | None = None  # the device the backend was last checked for
        # The adapter's fast key of a call's inputs by the first one's type (hot paths key by it).
        self._fast_keys: dict[type, Callable[[tuple], FastKey | None] | None] = {}
        # The fast key of a call's inputs and out= arrays together, by adapter (`out_key_function`).
        self._out_keys: dict[ArrayAdapter, Callable[[tuple], FastKey | None]] = {}

    def _fast_key_function(self, kind: type) -> Callable[[tuple], FastKey | None] | None:
        """The fast key of calls whose first input is a `kind` (bound once a type, so that a call
        finds it as `_fast_keys.get(kind) or _fast_key_function(kind)`), or None."""
        adapter = BY_TYPE.get(kind)
        if adapter is None or adapter.delegates:  # such arrays take the general path, which hands them on
            return None
        found = self._fast_keys[kind] = adapter.fast_key_for(self.loader.binding.num_inputs)
        return found

    def out_key_function(self, adapter: ArrayAdapter, outputs: int) -> Callable[[tuple], FastKey | None]:
        """The fast key of a call's inputs followed by its `outputs` out= arrays (as many as the
        function gives), for an adapter whose key covers outputs (`keys_outputs`)."""
        found = self._out_keys.get(adapter)
        if found is None:
            found = self._out_keys[adapter] = adapter.fast_key_for(self.loader.binding.num_inputs + outputs)
        return found

    def set_backend(self, value: str) -> None:
        if value not in BACKENDS:
            raise InvalidArgumentError(f"backend must be 'auto', 'cuda' or 'cpu', got {value!r}")
        self.backend = value
        self._checked_device = None
        self.forget_plans()

    def forget_plans(self) -> None:
        """Drop every plan (a new backend plans anew)."""
        self.plans.clear()

    def check_backend(self, device: int) -> None:
        """Refuse inputs that live where the function's backend does not run."""
        if device == self._checked_device:
            return
        if self.backend != "auto" and self.backend != ("cpu" if device < 0 else "cuda"):
            raise DeviceError(f"{self.name} is set to backend={self.backend!r} but its inputs live on "
                              f"{device_name(device)}; move them, or set backend='auto'")
        self._checked_device = device
