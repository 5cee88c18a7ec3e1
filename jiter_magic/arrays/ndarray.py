"""What NumPy and CuPy arrays share: dtype names, byte strides, allocation by extent, fast keys."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jiter_magic.arrays.base import Described, FastKey, new_tuple
from jiter_magic.errors import DTypeError, ShapeError, UnsupportedArrayError
from jiter_magic.planning.layout import ArrayDesc

SUPPORTED = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                       "float16", "float32", "float64", "complex64", "complex128"})


def extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements of memory an array of these element strides spans (0 when it is empty)."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0


class NdarrayAdapter:
    """NumPy-style arrays: `.dtype`, `.shape`, byte `.strides`; subclasses give pointer and device."""

    library = ""
    rules = "numpy"
    delegates = False
    shrinkable = False  # NumPy and CuPy never shrink memory a view uses
    key_checks_storage = False  # nothing to check (not shrinkable)
    keys_outputs = False  # their fast keys do not read NumPy's writeable flag: out= takes the general path
    array_type: Any = object

    def _pointer_and_device(self, x: Any) -> tuple[int, int]:
        raise NotImplementedError

    def fast_key(self, args: tuple) -> FastKey | None:
        array_type = self.array_type
        parts, pointers = [], []
        for x in args:
            if type(x) is not array_type:
                return None
            pointer, device = self._pointer_and_device(x)
            parts.append((x.dtype, x.shape, x.strides, pointer & 15, device))
            pointers.append(pointer)
        return tuple(parts), pointers

    def fast_key_for(self, count: int) -> Callable[[tuple], FastKey | None]:
        return self.fast_key

    def reusable(self, key: tuple) -> bool:
        return True

    def check_storage(self, arrays: list, extents: tuple[int, ...]) -> None:
        """NumPy and CuPy refuse to shrink memory that views use: nothing to check."""

    def materialize(self, x: Any) -> Any:
        if type(x).__module__.startswith("numpy.ma"):
            raise UnsupportedArrayError("masked arrays are not supported: a kernel would read the values under "
                                        "the mask; pass x.filled(value) or x.data")
        return x

    def check_writable(self, outputs: tuple) -> None:
        """Their `out=` takes the general path (`check_output`): nothing more to check."""

    def written(self, outputs: list) -> None:
        """NumPy and CuPy arrays have no version counters."""

    def default_float(self) -> str:
        return "float64"

    def gradient_inputs(self, items: list, outs: list | None) -> list:
        return []

    def with_gradient(self, name: str, needing: list, results: list, backward: Any, args: tuple,
                      kwargs: dict) -> list:
        return results

    def describe(self, x: Any) -> Described:
        pointer, device = self._pointer_and_device(x)
        dtype, strides = x.dtype, x.strides
        return new_tuple(Described, ((dtype, x.shape, strides, pointer % 16), pointer, device, x, dtype, strides))

    def dtype_name(self, x: Any) -> str:
        dtype = x.dtype
        if dtype.name not in SUPPORTED or not dtype.isnative:
            raise DTypeError(f"{self.library} dtype {dtype} is not supported by jiter_magic "
                             f"(supported: {sorted(SUPPORTED)}, native byte order)")
        return dtype.name

    def normalize(self, described: Described) -> ArrayDesc:
        x = described.array
        size = x.itemsize
        if any(s % size for s in x.strides):
            raise ShapeError(f"array strides {x.strides} are not multiples of its itemsize {size}; pass a copy")
        return ArrayDesc(self.dtype_name(x), tuple(x.shape), tuple(s // size for s in x.strides), described.pointer)

    def pointer(self, x: Any) -> int:
        return self._pointer_and_device(x)[0]
