"""NumPy arrays (and, through `coerce`, buffer-protocol and __array_interface__ objects)."""
from __future__ import annotations

import numpy

from ..errors import DTypeError

LIBRARY = "numpy"
RULES = "numpy"
_SUPPORTED = {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128"}


def dtype_name(a: numpy.ndarray) -> str:
    dt = a.dtype
    if dt.name not in _SUPPORTED or not dt.isnative:
        raise DTypeError(f"NumPy dtype {dt} is not supported by jiter_magic (supported: {sorted(_SUPPORTED)}, native byte order)")
    return dt.name


def describe(a: numpy.ndarray) -> tuple[str, tuple, tuple, int, int]:
    size = a.itemsize
    strides = a.strides
    if any(s % size for s in strides):
        from ..errors import ShapeError

        raise ShapeError(f"array strides {strides} are not multiples of its itemsize {size}; pass a copy")
    return dtype_name(a), a.shape, tuple(s // size for s in strides), a.__array_interface__["data"][0], -1


def empty(shape: tuple, strides: tuple, dtype: str, device: int, like: numpy.ndarray) -> numpy.ndarray:
    itemsize = numpy.dtype(dtype).itemsize
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    base = numpy.empty(max(extent, 1), dtype)
    return numpy.lib.stride_tricks.as_strided(base, shape, tuple(s * itemsize for s in strides), writeable=True)


def stream(device: int) -> int:
    return 0


def is_zero_dim(a: numpy.ndarray) -> bool:
    return a.ndim == 0


def item(a: numpy.ndarray) -> object:
    return a.item()


def writable(a: numpy.ndarray) -> bool:
    return bool(a.flags.writeable)


def pointer(t) -> int:
    return t.__array_interface__["data"][0]
