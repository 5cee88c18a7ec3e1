"""Where a benchmark's inputs live (one library, one device: they decide how calls are timed), and
the bytes an array holds or a call writes.

Importing this module imports no array library: the adapters are looked up when an input is seen.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from jiter_magic.errors import BindError, DeviceError, InvalidArgumentError, mixed_inputs


@dataclass(frozen=True, slots=True)
class Place:
    library: str  # 'torch', 'cupy' or 'numpy'
    device: int  # -1: the host


def _array(x: Any) -> tuple[Any, str] | None:
    """(the array, its library) for an array input, None for a Python or NumPy number; foreign arrays
    (CUDA array interface, DLPack, buffers) are seen through the CuPy or NumPy array they convert to."""
    from jiter_magic.arrays import adapter_for, coerce

    adapter = adapter_for(x)
    if adapter is None:
        if isinstance(x, numbers.Number):
            return None
        x, adapter = coerce(x)
    if adapter.delegates:
        raise InvalidArgumentError(
            f"benchmark times calls on arrays a kernel reads (torch tensors, NumPy or CuPy arrays), not on "
            f"{type(x).__name__}, which runs calls its own way (DTensor, Dask, traced tensors): time a local "
            "shard (x.to_local()) or a block, or time the whole computation yourself")
    return x, adapter.library


def _device_of(x: Any, library: str) -> int:
    if library == "torch":
        if x.device.type not in ("cpu", "cuda"):
            raise DeviceError(f"benchmark times CPU and CUDA arrays, got a tensor on {x.device}")
        return -1 if x.device.type == "cpu" else int(x.device.index)
    return int(x.device.id) if library == "cupy" else -1


def place_of(inputs: tuple) -> Place:
    """The one library and device of the array inputs (which decide how calls are timed)."""
    if not inputs:
        raise BindError("benchmark needs the inputs of a call, got none")
    place = None
    for x in inputs:
        found = _array(x)
        if found is None:
            continue
        array, library = found
        here = Place(library, _device_of(array, library))
        if place is None:
            place = here
        elif here != place:
            raise mixed_inputs((place.library, here.library), (place.device, here.device), "benchmark inputs")
    if place is None:
        raise BindError("benchmark needs at least one array input (its device decides the timing), "
                        "got only Python numbers")
    return place


def held_bytes(x: Any) -> int:
    """Bytes of the elements an array holds, each counted once: a stride-0 dimension (expand,
    broadcast_to) counts one element, so a broadcast input counts its own bytes; numbers count 0."""
    found = _array(x)
    if found is None:
        return 0
    array, library = found
    if library == "torch":
        shape, strides, itemsize = tuple(array.shape), tuple(array.stride()), array.element_size()
    else:
        shape, strides, itemsize = tuple(array.shape), tuple(array.strides), array.itemsize
    if 0 in shape:
        return 0
    return math.prod(n for n, s in zip(shape, strides) if s != 0) * itemsize


def output_bytes(result: Any) -> int:
    """Bytes written: each array of the call's result (or of `out=`)."""
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    return sum(held_bytes(o) for o in outputs if o is not None and not isinstance(o, numbers.Number))


def inputs_device_name(place: Place) -> str:
    if place.device < 0:
        return "CPU"
    if place.library == "torch":
        import torch

        return f"cuda:{place.device} {torch.cuda.get_device_name(place.device)}"
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(place.device)["name"]
    return f"cuda:{place.device} {name.decode() if isinstance(name, bytes) else name}"
