"""What an array adapter provides, and the two descriptions of an array it produces.

One adapter a library (torch, NumPy, CuPy). The call path asks the adapter, never the
library's attributes: `fast_key` for the hot path, `describe` (cheap, hashable parts) for
the key of the general path, `normalize` (dtype name, element strides) once a plan.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from jiter_magic.errors import UnsupportedArrayError
from jiter_magic.planning.layout import ArrayDesc


class Described(NamedTuple):
    """An array argument of a call as its adapter describes it cheaply, with the array itself.

    Made on every call of the general path, so adapters build it with `described(...)`.
    """

    key: tuple  # what decides a plan: dtype, shape, strides and the pointer's alignment
    pointer: int
    device: int  # -1 for the host
    array: Any
    dtype: Any  # the library's dtype object
    strides: tuple[int, ...]  # the library's strides: elements (torch) or bytes (NumPy, CuPy)


# Makes a `Described` at C speed: `new_tuple(Described, (key, pointer, ...))` (a NamedTuple's own
# constructor is a Python function, too slow for every argument of every call).
new_tuple = tuple.__new__


# The hot path's key of a call whose inputs are all plain arrays of one library, and their
# pointers: a plain tuple, as a NamedTuple costs several times more to make on every call.
FastKey = tuple[tuple, list[int]]


class ArrayAdapter(Protocol):
    """One library's arrays, as the call path needs them."""

    library: str  # 'torch', 'numpy' or 'cupy'
    delegates: bool  # False: the kernels read these arrays (see `DelegatingAdapter`)
    shrinkable: bool  # whether a storage can shrink under a view (torch): `check_storage` has work to do
    key_checks_storage: bool  # whether `fast_key` itself refuses an array reaching past its storage (torch's C key)
    # Whether the fast key of `out=` arrays covers all `check_output` checks (torch: its key refuses
    # lazy conj/neg views), so that `out=` calls may take the hot path; not NumPy's (read-only flag).
    keys_outputs: bool
    rules: str  # promotion rules: 'torch' or 'numpy'
    stream: Callable[[int], int]  # the raw handle of the library's current stream on a device (0 on the host)
    pointer: Callable[[Any], int]  # an array's data pointer (called for every output of every call)

    def fast_key(self, args: tuple) -> FastKey | None:
        """The hot path's key when every argument is a plain array of this library, else None."""

    def fast_key_for(self, count: int) -> Callable[[tuple], FastKey | None]:
        """`fast_key` for calls of `count` arguments (the hot path binds it once a function)."""

    def reusable(self, key: tuple) -> bool:
        """Whether a plan may be stored under this fast key (torch: no lazy conj/neg views)."""

    def check_storage(self, arrays: list, extents: tuple[int, ...]) -> None:
        """Refuse an array whose plan reads `extents` bytes from its pointer, past the end of its storage."""

    def materialize(self, x: Any) -> Any:
        """An array whose memory holds its values, or a clear error for what the kernels cannot read."""

    def describe(self, x: Any) -> Described: ...

    def normalize(self, described: Described) -> ArrayDesc: ...

    def check_output(self, x: Any) -> None:
        """Raise if `x` cannot be written to as an `out=` array."""

    def check_writable(self, outputs: tuple) -> None:
        """Before every launch into `out=` arrays on the hot path: what their key cannot carry
        (torch: an inference tensor outside inference mode)."""

    def written(self, outputs: list) -> None:
        """After a launch wrote into `out=` arrays (torch: bump their version counters)."""

    def default_float(self) -> str:
        """The dtype a Python float promotes to (torch's default dtype; unused with NumPy rules)."""

    def gradient_inputs(self, items: list, outs: list | None) -> list:
        """Arrays of a call that autograd tracks (raising where torch would refuse the call)."""

    def with_gradient(self, name: str, needing: list, results: list, backward: Any, args: tuple,
                      kwargs: dict) -> list:
        """Results that autograd tracks: their backward calls `backward` (the jitted gradient of
        `fn.def_backward`) on the call's `args` and `kwargs`, or raises when there is none (never
        a silently missing gradient)."""

    def allocator(self, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str, like: Any) -> Callable[[], Any]:
        """A zero-argument function allocating one output, bound once a plan."""

    def asarray(self, x: Any) -> Any: ...


# How a delegating adapter runs one kind of operation: `strategy(function, args, options, kwargs)`,
# `options` the call's own keywords (`out`; a reduction's `dim`, `keepdim`, `dtype` too).
Strategy = Callable[[Any, tuple, dict, dict], Any]


class DelegatingAdapter(Protocol):
    """Arrays a call runs over instead of reading: a DTensor (its local shards), a Dask array
    (its chunks), a tensor being traced (FakeTensor, FunctionalTensor: the function's torch
    operator). A call with one of these among its inputs is handed whole to the adapter's strategy
    for the function's kind of operation (`KernelFunction.operation`): `run_delegated`."""

    library: str
    delegates: bool  # True
    strategies: dict[str, Strategy]  # by kind of operation; a kind without one is refused


def run_delegated(adapter: DelegatingAdapter, function: Any, args: tuple, options: dict, kwargs: dict) -> Any:
    """The call `function(*args, **options, **kwargs)`, run by the arrays' own engine."""
    strategy = adapter.strategies.get(function.operation)
    if strategy is None:
        raise UnsupportedArrayError(f"{function.name}: a {function.operation} does not run on {adapter.library} "
                                    "arrays of this kind yet; pass plain torch, NumPy or CuPy arrays")
    return strategy(function, args, options, kwargs)


class Delegated(Exception):  # noqa: N818 - control flow, never seen by users
    """Raised by `Dispatcher.describe` on meeting an input of a `DelegatingAdapter`."""

    def __init__(self, adapter: DelegatingAdapter) -> None:
        super().__init__(adapter.library)
        self.adapter = adapter
