"""CuPy arrays (and, through `coerce`, anything with __cuda_array_interface__ or CUDA DLPack)."""
from __future__ import annotations

import cupy

from ..errors import DTypeError

LIBRARY = "cupy"
RULES = "numpy"


def dtype_name(a: cupy.ndarray) -> str:
    name = a.dtype.name
    if name not in _SUPPORTED:
        raise DTypeError(f"CuPy dtype {name} is not supported by jiter_magic")
    return name


_SUPPORTED = {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128"}


def materialize(a):
    """Arrays of this library always hold their values in memory."""
    return a


def describe(a: cupy.ndarray) -> tuple:
    """The hot-path description: (dtype object, shape, byte strides, pointer, device)."""
    return a.dtype, a.shape, a.strides, a.data.ptr, a.device.id


def normalize(a: cupy.ndarray) -> tuple[str, tuple, tuple]:
    size = a.itemsize
    if any(s % size for s in a.strides):
        from ..errors import ShapeError

        raise ShapeError(f"array strides {a.strides} are not multiples of its itemsize {size}; pass a copy")
    return dtype_name(a), tuple(a.shape), tuple(s // size for s in a.strides)


def allocator(shape: tuple, strides: tuple, dtype: str, like: cupy.ndarray):
    device = like.device.id
    return lambda: empty(shape, strides, dtype, device, like)


def empty(shape: tuple, strides: tuple, dtype: str, device: int, like: cupy.ndarray) -> cupy.ndarray:
    with cupy.cuda.Device(device):
        itemsize = cupy.dtype(dtype).itemsize
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        memory = cupy.cuda.alloc(max(extent, 1) * itemsize)
        return cupy.ndarray(shape, dtype, memory, tuple(s * itemsize for s in strides))


def stream(device: int) -> int:
    return cupy.cuda.get_current_stream(device).ptr




def writable(a: cupy.ndarray) -> bool:
    return True


def pointer(t) -> int:
    return t.data.ptr


def asarray(x) -> cupy.ndarray:
    return cupy.asarray(x)
