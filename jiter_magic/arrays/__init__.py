"""Adapters from user arrays to what the call path needs, one small module a library.

`adapter_for` picks an adapter from the object's type, with a per-type memo for the hot
path; `coerce` brings foreign arrays (CUDA array interface, DLPack, buffer protocol) to
CuPy or NumPy without copying. Each adapter module imports its library, so it is loaded
only when an array of that library is first seen.

Some arrays are not read by the kernels but run a call their own way (`DelegatingAdapter`):
DTensors on their local shards (torch_dtensor.py), Dask arrays chunk by chunk (dask.py),
and tensors being traced through the function's torch operator (integrations/traced.py).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from jiter_magic.arrays.base import ArrayAdapter
from jiter_magic.errors import DTypeError

BY_TYPE: dict[type, ArrayAdapter | None] = {}

# Tensor subclasses whose calls go through the function's torch operator, so that they trace
# (by qualified name: importing them costs more than the check).
_TRACED = frozenset({"torch._subclasses.fake_tensor.FakeTensor",
                     "torch._subclasses.functional_tensor.FunctionalTensor"})
_DTENSOR = frozenset({"torch.distributed.tensor.DTensor",  # its __module__ since torch 2.5
                      "torch.distributed.tensor._api.DTensor", "torch.distributed._tensor.api.DTensor"})


# Adapters by module: the library adapters here, and the delegating adapters of integrations/, which
# sit above the call path and are imported only when one of their arrays is first seen.
_MODULES = {
    "torch": f"{__name__}.torch", "numpy": f"{__name__}.numpy", "cupy": f"{__name__}.cupy",
    "traced": "jiter_magic.integrations.traced", "torch_dtensor": "jiter_magic.integrations.torch_dtensor",
    "dask": "jiter_magic.integrations.dask",
}


def _load(name: str) -> ArrayAdapter:
    return import_module(_MODULES[name]).ADAPTER


def _torch_adapter(kind: type) -> ArrayAdapter:
    names = {f"{c.__module__}.{c.__qualname__}" for c in kind.__mro__}
    if names & _DTENSOR:
        return _load("torch_dtensor")
    if names & _TRACED:
        return _load("traced")
    return _load("torch")


def adapter_for(x: object) -> ArrayAdapter | None:
    """The adapter for an array object, or None for something that is not an array; for arrays
    that run a call their own way, a `DelegatingAdapter` (its `delegates` is True)."""
    kind = type(x)
    try:
        return BY_TYPE[kind]
    except KeyError:
        pass
    # The library of the type or of a base class: subclasses of torch.Tensor or numpy.ndarray count.
    modules = {c.__module__.split(".")[0] for c in kind.__mro__}
    adapter: ArrayAdapter | None
    if "torch" in modules and hasattr(x, "data_ptr"):
        adapter = _torch_adapter(kind)
    elif "dask" in modules and hasattr(x, "chunks") and hasattr(x, "dask"):
        adapter = _load("dask")
    elif "cupy" in modules and hasattr(x, "data"):
        adapter = _load("cupy")
    elif "numpy" in modules and hasattr(x, "ctypes") and hasattr(x, "strides"):  # ndarray and subclasses
        adapter = _load("numpy")
    else:
        adapter = None
    BY_TYPE[kind] = adapter
    return adapter


def coerce(x: Any) -> tuple[object, ArrayAdapter]:
    """Bring a foreign array (CUDA array interface, DLPack, buffer protocol) to CuPy or NumPy, zero-copy."""
    if hasattr(x, "__cuda_array_interface__"):
        import cupy

        return cupy.asarray(x), _load("cupy")
    if hasattr(x, "__dlpack_device__"):
        device_type = x.__dlpack_device__()[0]
        if device_type in (2, 13):  # kDLCUDA, kDLCUDAManaged
            import cupy

            return cupy.from_dlpack(x), _load("cupy")
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
        import numpy

        return numpy.asarray(x), _load("numpy")
    if _is_buffer(x):  # bytes, bytearray, array.array, memoryview: read in the buffer's own format
        import numpy

        return numpy.asarray(memoryview(x)), _load("numpy")
    raise DTypeError(
        f"expected a torch tensor, a CuPy or NumPy array (or an object with __cuda_array_interface__, "
        f"__dlpack__ or the buffer protocol) or a Python number, got {type(x).__name__}"
    )


def _is_buffer(x: Any) -> bool:
    try:
        memoryview(x)
    except TypeError:
        return False
    return True
