"""NumPy arrays (and, through `coerce`, buffer-protocol and __array_interface__ objects)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from jiter_magic.arrays.ndarray import NdarrayAdapter, extent
from jiter_magic.errors import InvalidArgumentError


class NumpyAdapter(NdarrayAdapter):
    library = "numpy"
    array_type = numpy.ndarray

    def _pointer_and_device(self, x: Any) -> tuple[int, int]:
        return x.ctypes.data, -1

    def check_output(self, x: Any) -> None:
        if not x.flags.writeable:
            raise InvalidArgumentError("out= array is read-only; pass a writable array")

    def allocator(self, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str, like: Any) -> Callable[[], Any]:
        itemsize = numpy.dtype(dtype).itemsize
        byte_strides = tuple(s * itemsize for s in strides)
        size = max(extent(shape, strides), 1)

        def allocate() -> numpy.ndarray:
            base = numpy.empty(size, dtype)
            return numpy.lib.stride_tricks.as_strided(base, shape, byte_strides, writeable=True)

        return allocate

    @staticmethod
    def stream(device: int) -> int:
        return 0

    def asarray(self, x: Any) -> numpy.ndarray:
        return numpy.asarray(x)


ADAPTER = NumpyAdapter()
