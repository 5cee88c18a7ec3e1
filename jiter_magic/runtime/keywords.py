"""A function's extra arguments: their declared defaults and a call's keyword values over them.

A keyword call (`fn(x, y, alpha=2.0)`, as torch's jiterator is called) takes the hot path where its
values are Python numbers; `for_hot_path` says with which extras and under which key. Any other
keyword call goes through `of_call`, which checks and converts every value.
"""
from __future__ import annotations

import struct
from typing import cast

from jiter_magic.errors import UnknownKwargError
from jiter_magic.planning.values import INT64_RANGE, PY_SCALAR_KIND, scalar_kind, scalar_value

_DOUBLE = struct.Struct("<d")  # a float keyword value's bits, where == cannot key it (zeros, NaNs)


class KeywordExtras:
    """The extras of one function, in the entry function's order."""

    def __init__(self, names: tuple[str, ...], declared: dict[str, object]) -> None:
        self.names = names
        self.declared = declared
        self.defaults = [declared[n] for n in names]
        self.default_kinds = tuple(scalar_kind(v) for v in self.defaults)
        # Where a keyword's value goes among the extras, and the Python type its value must have
        # for the hot path (None: a default that is no plain Python number).
        self._position = {name: at for at, name in enumerate(names)}
        self._default_types = [type(v) if type(v) in PY_SCALAR_KIND else None for v in self.defaults]
        self.none_given: tuple[list, None, None] = (self.defaults, None, None)  # `for_hot_path` of {}

    def for_hot_path(self, kwargs: dict) -> tuple[list, tuple[str, ...] | None, tuple | None] | None:
        """For a call whose keyword values are Python numbers: its extras, their kinds where they
        differ from the defaults' (else None: the defaults' plans serve), and the key of a hot
        path packed with these values (zeros and NaNs keyed by their bits: 0.0 == -0.0 would
        hand one zero the other's packed value, and NaN != NaN would never find its own). None
        for any other call: the general path checks, converts and plans it."""
        extras = self.defaults.copy()
        position, types = self._position, self._default_types
        kinds: list[str] | None = None
        by_bits = False
        for name, value in kwargs.items():
            at = position.get(name)
            kind = type(value)
            if at is None or kind not in PY_SCALAR_KIND:
                return None
            if kind is not types[at]:
                if types[at] is None:  # a default of another type (a NumPy scalar): planned in general
                    return None
                if kinds is None:
                    kinds = list(self.default_kinds)
                kinds[at] = PY_SCALAR_KIND[kind]
            if kind is int:
                if not INT64_RANGE[0] <= cast(int, value) <= INT64_RANGE[1]:
                    return None
            elif kind is float:
                by_bits = by_bits or value == 0 or value != value
            elif kind is complex:
                number = cast(complex, value)
                by_bits = by_bits or number.real == 0 or number.imag == 0 or number != number
            extras[at] = value
        named = tuple((name, bits_of_floats(v)) for name, v in kwargs.items()) if by_bits else tuple(kwargs.items())
        return extras, None if kinds is None else tuple(kinds), named

    def of_call(self, kwargs: dict) -> tuple[list, tuple[str, ...]]:
        """The extra arguments of a call with keyword overrides, and their scalar kinds."""
        check_kwarg_names(kwargs, self.declared)
        values = {**self.declared, **kwargs}
        extras = [scalar_value(values[name], name) for name in self.names]
        return extras, tuple(scalar_kind(v) for v in extras)


def check_kwarg_names(given: dict, declared: dict, options: tuple[str, ...] = ()) -> None:
    """Refuse a keyword that names no extra argument, as torch's jiterator does (a KeyError); the
    error names the extras, then the call's `options` (a reduction's dim=, ...)."""
    for name in given:
        if name not in declared:
            raise UnknownKwargError.naming(name, [*declared, *options])


def bits_of_floats(value: object) -> object:
    """A keyword value as a hot path's key holds it where a zero or a NaN is about: a float, or
    each part of a complex, as its 8 bytes (== tells neither -0.0 from 0.0 nor one NaN's sign
    and payload from another's), anything else as itself."""
    if type(value) is float:
        return _DOUBLE.pack(value)
    if type(value) is complex:
        return _DOUBLE.pack(value.real), _DOUBLE.pack(value.imag)
    return value
