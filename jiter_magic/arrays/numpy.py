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


def materialize(a):
    """Arrays of this library always hold their values in memory."""
    return a


def describe(a: numpy.ndarray) -> tuple:
    """The hot-path description: (dtype object, shape, byte strides, pointer, device -1)."""
    return a.dtype, a.shape, a.strides, a.ctypes.data, -1


def normalize(a: numpy.ndarray) -> tuple[str, tuple, tuple]:
    size = a.itemsize
    if any(s % size for s in a.strides):
        from ..errors import ShapeError

        raise ShapeError(f"array strides {a.strides} are not multiples of its itemsize {size}; pass a copy")
    return dtype_name(a), tuple(a.shape), tuple(s // size for s in a.strides)


def allocator(shape: tuple, strides: tuple, dtype: str, like: numpy.ndarray):
    return lambda: empty(shape, strides, dtype, -1, like)


def empty(shape: tuple, strides: tuple, dtype: str, device: int, like: numpy.ndarray) -> numpy.ndarray:
    itemsize = numpy.dtype(dtype).itemsize
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    base = numpy.empty(max(extent, 1), dtype)
    return numpy.lib.stride_tricks.as_strided(base, shape, tuple(s * itemsize for s in strides), writeable=True)


def stream(device: int) -> int:
    return 0




def writable(a: numpy.ndarray) -> bool:
    return bool(a.flags.writeable)


def pointer(t) -> int:
    return t.ctypes.data


def asarray(x) -> numpy.ndarray:
    return numpy.asarray(x)
