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


def materialize(t: torch.Tensor) -> torch.Tensor:
    """A tensor whose memory holds its values: lazy conj/neg views resolved; only CPU and CUDA accepted."""
    if t.device.type not in ("cpu", "cuda"):
        from ..errors import DeviceError

        raise DeviceError(f"tensors on {t.device.type!r} are not supported; jiter_magic runs on CPU and CUDA tensors")
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    return t


def describe(t: torch.Tensor) -> tuple:
    """The hot-path description: (dtype object, shape, strides, pointer, device); cheap, hashable parts."""
    return t.dtype, t.shape, t.stride(), t.data_ptr(), t.get_device()


def normalize(t: torch.Tensor) -> tuple[str, tuple, tuple]:
    """dtype name, shape and element strides, for planning (once per key)."""
    return dtype_name(t), tuple(t.shape), tuple(t.stride())


def allocator(shape: tuple, strides: tuple, dtype: str, like: torch.Tensor):
    """A zero-argument function allocating one output like this, bound once per plan.

    Large CPU outputs are advised onto transparent huge pages, as NumPy does for its arrays:
    torch's allocator hands back fresh pages, and faulting 4 KiB pages in is otherwise slower
    than the kernel that fills them (17 ms against 5 ms for 64 MiB on the development machine).
    """
    from functools import partial

    allocate = partial(torch.empty_strided, shape, strides, dtype=_DTYPES[dtype], device=like.device)
    nbytes = _DTYPES[dtype].itemsize
    for size in shape:
        nbytes *= size
    if like.device.type != "cpu" or nbytes < HUGE_PAGE_THRESHOLD or _madvise is None:
        return allocate

    def allocate_on_huge_pages() -> torch.Tensor:
        tensor = allocate()
        start = (tensor.data_ptr() + _HUGE - 1) & ~(_HUGE - 1)
        end = (tensor.data_ptr() + nbytes) & ~(_HUGE - 1)
        if end > start:
            _madvise(start, end - start, _MADV_HUGEPAGE)
        return tensor

    return allocate_on_huge_pages


HUGE_PAGE_THRESHOLD = 4 << 20
_HUGE = 2 << 20
_MADV_HUGEPAGE = 14


def _load_madvise():
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _load_madvise()



def stream(device: int) -> int:
    return _raw_stream(device)




def writable(t: torch.Tensor) -> bool:
    return True


def pointer(t) -> int:
    return t.data_ptr()
