"""torch tensors: CPU tensors for the host backend, CUDA tensors for the GPU backend."""
from __future__ import annotations

import torch

LIBRARY = "torch"
RULES = "torch"
_NAMES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.float32: "float32", torch.float64: "float64", torch.complex64: "complex64",
    torch.complex128: "complex128", torch.uint16: "uint16", torch.uint32: "uint32", torch.uint64: "uint64",
}
_DTYPES = {name: dt for dt, name in _NAMES.items()}
_raw_stream = torch._C._cuda_getCurrentRawStream if torch.cuda.is_available() else None


def dtype_name(t: torch.Tensor) -> str:
    try:
        return _NAMES[t.dtype]
    except KeyError:
        from ..errors import DTypeError

        raise DTypeError(f"torch dtype {t.dtype} is not supported by jiter_magic") from None


def describe(t: torch.Tensor) -> tuple:
    """The hot-path description: (dtype object, shape, strides, pointer, device); cheap, hashable parts."""
    return t.dtype, t.shape, t.stride(), t.data_ptr(), t.get_device()


def normalize(t: torch.Tensor) -> tuple[str, tuple, tuple]:
    """dtype name, shape and element strides, for planning (once per key)."""
    return dtype_name(t), tuple(t.shape), tuple(t.stride())


def allocator(shape: tuple, strides: tuple, dtype: str, like: torch.Tensor):
    """A zero-argument function allocating one output like this, bound once per plan."""
    from functools import partial

    return partial(torch.empty_strided, shape, strides, dtype=_DTYPES[dtype], device=like.device)


def empty(shape: tuple, strides: tuple, dtype: str, device: int, like: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(shape, strides, dtype=_DTYPES[dtype], device=like.device)


def stream(device: int) -> int:
    return _raw_stream(device)




def writable(t: torch.Tensor) -> bool:
    return True


def pointer(t) -> int:
    return t.data_ptr()
