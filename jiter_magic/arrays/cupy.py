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


def describe(a: cupy.ndarray) -> tuple[str, tuple, tuple, int, int]:
    size = a.itemsize
    return dtype_name(a), a.shape, tuple(s // size for s in a.strides), a.data.ptr, a.device.id


def empty(shape: tuple, strides: tuple, dtype: str, device: int, like: cupy.ndarray) -> cupy.ndarray:
    with cupy.cuda.Device(device):
        itemsize = cupy.dtype(dtype).itemsize
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        memory = cupy.cuda.alloc(max(extent, 1) * itemsize)
        return cupy.ndarray(shape, dtype, memory, tuple(s * itemsize for s in strides))


def stream(device: int) -> int:
    return cupy.cuda.get_current_stream(device).ptr


def is_zero_dim(a: cupy.ndarray) -> bool:
    return a.ndim == 0


def item(a: cupy.ndarray) -> object:
    return a.item()


def writable(a: cupy.ndarray) -> bool:
    return True


def pointer(t) -> int:
    return t.data.ptr
