"""CuPy arrays (and, through `coerce`, anything with __cuda_array_interface__ or CUDA DLPack)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cupy

from jiter_magic.arrays.ndarray import NdarrayAdapter, extent


class CupyAdapter(NdarrayAdapter):
    library = "cupy"
    array_type = cupy.ndarray

    def _pointer_and_device(self, x: Any) -> tuple[int, int]:
        memory = x.data
        return memory.ptr, memory.device_id

    def check_output(self, x: Any) -> None:
        """CuPy arrays are always writable."""

    def allocator(self, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str, like: Any) -> Callable[[], Any]:
        device = like.device.id
        itemsize = cupy.dtype(dtype).itemsize
        byte_strides = tuple(s * itemsize for s in strides)
        nbytes = max(extent(shape, strides), 1) * itemsize

        def allocate() -> cupy.ndarray:
            with cupy.cuda.Device(device):
                return cupy.ndarray(shape, dtype, cupy.cuda.alloc(nbytes), byte_strides)

        return allocate

    @staticmethod
    def stream(device: int) -> int:
        return cupy.cuda.get_current_stream(device).ptr

    def asarray(self, x: Any) -> cupy.ndarray:
        return cupy.asarray(x)


ADAPTER = CupyAdapter()
