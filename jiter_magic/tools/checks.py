"""The arguments of `benchmark` and `sweep`, checked before anything is timed.

Timing takes seconds; an argument of the wrong type found only when it is first used (a
`reference=5` called after the function's samples, a `make_inputs` returning one array that
`tuple()` splits into numbers) wastes them and then names the wrong thing. So each argument is
checked first, and an error names it and what it must be: `ArgumentTypeError` (a `TypeError`)
for a wrong type, `InvalidArgumentError` (a `ValueError`) for a wrong value.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

from jiter_magic.errors import ArgumentTypeError, InvalidArgumentError

_ARRAY_PROTOCOLS = ("__cuda_array_interface__", "__dlpack__", "__array_interface__", "__array__")


def _kind(value: object) -> str:
    return type(value).__name__


def check_callable(what: str, name: str, value: object, none_allowed: bool = False) -> None:
    if value is None and none_allowed:
        return
    if not callable(value):
        expected = "a callable or None" if none_allowed else "a callable"
        raise ArgumentTypeError(f"{what}: {name} must be {expected}, got {_kind(value)} {value!r:.60}")


def check_counts(what: str, warmup: object, repeat: object) -> None:
    """`warmup` an int >= 0, `repeat` an int >= 1 (bools refused: `repeat=True` is a slip)."""
    for name, value, least in (("warmup", warmup, 0), ("repeat", repeat, 1)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArgumentTypeError(f"{what}: {name} must be an int, got {_kind(value)}")
        if value < least:
            raise InvalidArgumentError(f"{what}: {name} must be at least {least}, got {value}")


def check_benchmark(fn: object, reference: object, warmup: object, repeat: object) -> None:
    check_callable("benchmark", "fn (the function timed)", fn)
    check_callable("benchmark", "reference", reference, none_allowed=True)
    check_counts("benchmark", warmup, repeat)


def checked_sizes(sizes: object) -> tuple[int, ...]:
    """`sweep`'s sizes: an iterable of at least one int >= 1 (elements)."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
        raise ArgumentTypeError(f"sweep: sizes must be an iterable of ints (elements), got {_kind(sizes)}")
    checked = []
    for size in sizes:
        if not isinstance(size, numbers.Integral) or isinstance(size, bool):
            raise ArgumentTypeError(f"sweep: each size must be an int (elements), got {_kind(size)} {size!r:.40}")
        if size < 1:
            raise InvalidArgumentError(f"sweep: each size must be at least 1 element, got {size}")
        checked.append(int(size))
    if not checked:
        raise InvalidArgumentError("sweep needs at least one size")
    return tuple(checked)


def check_sweep(fn: object, make_inputs: object, reference: object, benchmark_kwargs: dict[str, Any]) -> None:
    """Everything `sweep` is given, before the first size's inputs are made; the counts too."""
    check_callable("sweep", "fn (the function timed)", fn)
    check_callable("sweep", "make_inputs", make_inputs)
    check_callable("sweep", "reference", reference, none_allowed=True)
    # A count not given takes benchmark's default, which is valid: the least valid value stands in.
    check_counts("sweep", benchmark_kwargs.get("warmup", 0), benchmark_kwargs.get("repeat", 1))


def _is_array(value: object) -> bool:
    from jiter_magic.arrays import adapter_for

    return adapter_for(value) is not None or any(hasattr(value, name) for name in _ARRAY_PROTOCOLS)


def inputs_made(made: object, size: int) -> tuple:
    """What `make_inputs(size)` returned, as the call's inputs: a tuple or list is the inputs, one
    array is the one input (never split into its elements)."""
    if isinstance(made, (tuple, list)):
        return tuple(made)
    if _is_array(made):
        return (made,)
    raise ArgumentTypeError(
        f"sweep: make_inputs({size}) must return the call's inputs as a tuple or list (or one array, "
        f"the one input), got {_kind(made)}")
