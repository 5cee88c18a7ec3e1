"""Adapters from user arrays to what the planner needs, one small module a library.

Each adapter exposes the same functions: `describe(x) -> (dtype, shape, strides, ptr, device)`
with element strides and device -1 for the host, `empty(shape, strides, dtype, device, like)`,
`stream(device)` (the raw handle of the library's current stream) and `dtype_name(x)`.
`adapter_for` picks one from the object's type, with a per-type memo for the hot path.
"""
from __future__ import annotations

from types import ModuleType

from ..errors import DTypeError

_BY_TYPE: dict[type, ModuleType | None] = {}


def _load(name: str) -> ModuleType:
    from importlib import import_module

    return import_module(f"{__name__}.{name}")


def adapter_for(x: object) -> ModuleType | None:
    """The adapter module for an array object, or None for something that is not an array."""
    kind = type(x)
    try:
        return _BY_TYPE[kind]
    except KeyError:
        pass
    module = kind.__module__.split(".")[0]
    if module == "torch" and hasattr(x, "data_ptr"):
        adapter = _load("torch")
    elif module == "cupy" and hasattr(x, "data"):
        adapter = _load("cupy")
    elif module == "numpy" and hasattr(x, "ctypes") and hasattr(x, "strides"):  # ndarray and subclasses
        adapter = _load("numpy")
    else:
        adapter = None
    _BY_TYPE[kind] = adapter
    return adapter


def coerce(x: object) -> tuple[object, ModuleType]:
    """Bring a foreign array (CUDA array interface, DLPack, buffer protocol) to CuPy or NumPy, zero-copy."""
    if hasattr(x, "__cuda_array_interface__"):
        import cupy

        return cupy.asarray(x), _load("cupy")
    if hasattr(x, "__dlpack_device__"):
        device_type = x.__dlpack_device__()[0]
        if device_type in (2, 13):  # kDLCUDA, kDLCUDAManaged
            import cupy

            return cupy.from_dlpack(x), _load("cupy")
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__") or _is_buffer(x):
        import numpy

        return numpy.asarray(x), _load("numpy")
    raise DTypeError(
        f"expected a torch tensor, a CuPy or NumPy array (or an object with __cuda_array_interface__, "
        f"__dlpack__ or the buffer protocol) or a Python number, got {type(x).__name__}"
    )


def _is_buffer(x: object) -> bool:
    try:
        memoryview(x)
    except TypeError:
        return False
    return not isinstance(x, (bytes, bytearray, str))
