"""Scalar values on their way into a kernel: extra arguments and Python numbers given as inputs.

Each library's rules: torch wraps out-of-range integers and NumPy refuses them; floats past
float32 become infinities; extras travel as int64_t, double, bool or complex<double>, as
torch's jiterator passes them. `flattener` turns a call's scalars into the values the Args
struct packs.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

from jiter_magic.errors import DTypeError, GradientError, ScalarOverflowError
from jiter_magic.planning import dtypes as dt
from jiter_magic.planning.spec import KernelSpec

PY_SCALAR_KIND = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


def scalar_kind(value: object) -> str:
    kind = PY_SCALAR_KIND.get(type(value))
    return kind if kind is not None else dt.scalar_dtype(value)


def flattener(spec: KernelSpec, wrap: bool) -> Callable | None:
    """How to turn (numel, extras, items) into packed values; None for the common all-plain case."""
    simple = all(dt.DTYPES[k].kind != "c" for k in spec.extras) and not any(spec.scalar_inputs)
    if simple:
        return None

    def flatten(numel: int, extras: list, items: list) -> list:
        values = [numel]
        for value, kind in zip(extras, spec.extras):
            values.extend(_flatten(value, kind))
        for value, is_scalar in zip(items, spec.scalar_inputs):
            if is_scalar:
                values.extend(_flatten(value, spec.compute, wrap))
        return values

    return flatten


_FLOAT32_MAX = 3.4028235677973366e38  # halfway to the next binade: larger values round to inf


def _flatten(value: Any, dtype: str, wrap: bool = True) -> tuple:
    """A scalar as the struct module packs it for `dtype` (complex as two floats).

    Out-of-range integers wrap as torch's do (`wrap`), or raise OverflowError as NumPy's do;
    floats beyond float32 become infinities, as a cast gives.
    """
    kind = dt.DTYPES[dtype].kind
    if wrap and type(value) is int and not -(1 << 63) <= value < (1 << 64):  # torch refuses these for any dtype
        raise ScalarOverflowError(f"Python integer {value} out of bounds for {dtype}: it fits no 64-bit integer")
    if kind == "c":
        value = complex(value)
        parts = (value.real, value.imag)
        return tuple(_saturate(p) for p in parts) if dtype == "complex64" else parts
    if kind == "f":
        number = float(value.real if isinstance(value, complex) else value)
        return (_saturate(number) if dtype == "float32" else number,)
    if kind == "b":
        return (bool(value),)
    bits = dt.DTYPES[dtype].itemsize * 8
    number = int(value.real if isinstance(value, complex) else value)
    low, high = (0, (1 << bits) - 1) if kind == "u" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if low <= number <= high:
        return (number,)
    if not wrap or not -(1 << 63) <= number < (1 << 64):  # torch too refuses what no 64-bit integer holds
        raise ScalarOverflowError(f"Python integer {number} out of bounds for {dtype}")
    return (((number - low) % (1 << bits)) + low,)


def _saturate(number: float) -> float:
    if number > _FLOAT32_MAX:
        return float("inf")
    if number < -_FLOAT32_MAX:
        return float("-inf")
    return number


INT64_RANGE = (-(1 << 63), (1 << 63) - 1)  # what an int64_t extra holds


def scalar_value(value: Any, name: str) -> Any:
    """An extra argument as a Python scalar: 1-element tensors/arrays are `.item()`-ed, as torch does."""
    if type(value) not in PY_SCALAR_KIND and not isinstance(value, numbers.Number):
        size = 1
        for n in getattr(value, "shape", (2,)):
            size *= n
        if getattr(value, "requires_grad", False):
            import torch

            if torch.is_grad_enabled():
                raise GradientError(f"argument {name!r} requires grad, but extra arguments travel as plain "
                                    "numbers: no gradient could flow to it; pass a number, or call under "
                                    "torch.no_grad()")
        if not (hasattr(value, "item") and size == 1):
            raise DTypeError(f"argument {name!r} must be a bool, int, float or complex (or a 1-element array), "
                             f"got {type(value).__name__}")
        value = value.item()
    kind = scalar_kind(value)
    if kind == "int64" and not INT64_RANGE[0] <= int(value) <= INT64_RANGE[1]:
        raise ScalarOverflowError(f"argument {name!r} = {value} does not fit the int64_t it is passed as")
    return value
