"""A `%%jiterator NAME --reduce identity=VALUE ...` cell: its options, the reduction it makes, and
the compile at cell time.

The cell is C++ functions, as for `create_reduction_fn`; the line names the identity, and may name
the combine, map and finalize functions and a default `dim`. A missing `combine=` is found when the
cell defines exactly one function that could be one (two parameters of one type, returning a value),
so that a plain sum cell needs no more than its identity. The reduction then compiles at once for the
`--dtype` given (float32 by default), so that a broken functor fails the cell that holds it, as an
elementwise cell does.
"""
from __future__ import annotations

import ast
import pickle
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError

from jiter_magic.errors import ArgumentTypeError
from jiter_magic.frontend.parse import Functor, parse_definitions
from jiter_magic.frontend.reduction import is_indexed_combine
from jiter_magic.reduction import ReductionFunction, rebuild
from jiter_magic.runtime.unpickled import UnpickledFunctions
from jiter_magic.state import RUNTIME

# The keys a `--reduce` line gives to create_reduction_fn (and dim to the calls); every other
# key=value is a default of one of the map's extra arguments, as on an elementwise line.
REDUCE_KEYS = ("identity", "combine", "map", "finalize", "dim")
ROLE_KEYS = ("combine", "map", "finalize")  # keys whose value names a function of the cell

# Stands for "no dim given to this call": `fn(x, dim=None)` must still reduce every dim.
_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class ReduceOptions:
    """The `--reduce` part of a `%%jiterator` line, parsed."""

    identity: object
    combine: str | None  # None: the one function of the cell that can combine
    map: str | None
    finalize: str | None
    dim: object = _UNSET  # the calls' default dim; _UNSET: torch.sum's (every dim)
    indexed: bool = False  # `--outputs 2`: values with their indices (create_multi_output_reduction_fn)

    @property
    def has_dim(self) -> bool:
        return self.dim is not _UNSET


class CellReduction(ReductionFunction):
    """A reduction made by a `%%jiterator --reduce` cell: a `ReductionFunction` whose calls take
    the cell's `dim=` when they give none (`fn(x, dim=...)`, `dim=None` included, overrides it)."""

    default_dim: object = None

    def __call__(self, *inputs: object, dim: object = _UNSET, **options: Any) -> Any:
        return super().__call__(*inputs, dim=self.default_dim if dim is _UNSET else dim, **options)

    def __reduce__(self) -> tuple:
        """Pickled with its default dim, so that a worker's copy reduces the same dims."""
        return _unpickle_cell, (self.default_dim, *self._pickled_state())

    def _now(self) -> bytes:
        return pickle.dumps((super()._now(), self.default_dim))


def _unpickle_cell(default_dim: object, *state: Any) -> CellReduction:
    """A cell's reduction rebuilt from its pickled state (reused while unchanged, as any function's)."""
    def make() -> CellReduction:
        fn = rebuild(*state, kind=CellReduction)
        assert isinstance(fn, CellReduction)
        fn.default_dim = default_dim
        return fn

    return RUNTIME.part(UnpickledFunctions).reuse_or_make(pickle.dumps((default_dim, state)), make,
                                                          CellReduction._now)


def parse_dim(text: str) -> object:
    """`dim=1`, `dim=-1`, `dim=(0,1)`, `dim=0,1` or `dim=None`: an int, a tuple of ints or None."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = text
    if isinstance(value, list):
        value = tuple(value)
    ints = isinstance(value, tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in value)
    if not (value is None or ints or (isinstance(value, int) and not isinstance(value, bool))):
        raise UsageError(f"'dim={text}': dim must be an int, a tuple of ints such as (0,1), or None "
                         "(write it without spaces)")
    check_dims(text, value)
    return value


# The most dims an array has (NumPy's limit; torch's is lower): a dim beyond it fits no input.
MAX_NDIM = 64


def check_dims(text: str, value: object) -> None:
    """What the cell can tell of its default dim without an input (the range of a dim is checked
    against each call's input): a dim given twice, one that fits no array."""
    dims = value if isinstance(value, tuple) else () if value is None else (value,)
    repeated = sorted({d for d in dims if dims.count(d) > 1})
    if repeated:
        raise UsageError(f"'dim={text}': dim {repeated[0]} is given twice; each dim is reduced once")
    beyond = [d for d in dims if not -MAX_NDIM <= d < MAX_NDIM]
    if beyond:
        raise UsageError(f"'dim={text}': no array has a dim {beyond[0]} (arrays have at most {MAX_NDIM} dims): "
                         f"expected dims in [{-MAX_NDIM}, {MAX_NDIM - 1}], checked against each input's dims")


def parse_role(key: str, text: str) -> str:
    if not text.isidentifier():
        raise UsageError(f"'{key}={text}': {key}= names a C++ function of the cell, such as {key}=add")
    return text


def split_reduce_params(tokens: list[str], literal, indexed: bool = False) -> tuple[ReduceOptions, dict[str, object]]:
    """The line's key=value tokens as the reduction's options and the map's extras (`literal`
    parses an extra's default, as on an elementwise line). `indexed`: values with their indices,
    whose identity is optional (no element is compared with it)."""
    found: dict[str, object] = {}
    extras: dict[str, object] = {}
    for token in tokens:
        key, _sep, text = token.partition("=")
        if key in found or key in extras:
            raise UsageError(f"{token!r}: {key} is given twice")
        if key in ROLE_KEYS and _sep:
            found[key] = parse_role(key, text)
        elif key == "dim" and _sep:
            found[key] = parse_dim(text)
        elif key == "identity" and _sep:
            found[key] = literal(token)[1]
        else:
            name, value = literal(token)
            extras[name] = value
    if "identity" not in found and indexed:
        found["identity"] = 0
    if "identity" not in found:
        raise UsageError("%%jiterator NAME --reduce needs identity=VALUE, the value combine leaves every value "
                         "unchanged with: identity=0 for a sum, identity=1 for a product, identity=-inf for a max")
    return ReduceOptions(found["identity"], found.get("combine"), found.get("map"),  # type: ignore[arg-type]
                         found.get("finalize"), found.get("dim", _UNSET), indexed), extras  # type: ignore[arg-type]


def _could_combine(functor: Functor, indexed: bool) -> bool:
    """Two parameters of one type, by value, and a value returned: `T add(T a, T b)`; with indices,
    two values and their indices in and the kept pair out through two references:
    `void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index)`."""
    params = functor.parameters
    if indexed:
        return is_indexed_combine(functor)
    return (functor.returns_value and len(params) == 2 and not any(p.is_reference for p in params)
            and params[0].type == params[1].type)


def default_combine(code: str, reduce: ReduceOptions, extras: Container[str] = ()) -> str:
    """The function combine= names, or the one function of the cell that can combine (not the map
    or finalize named, nor one taking an extra of the line: that is the map); several or none: a
    UsageError listing them, asking for combine=NAME."""
    if reduce.combine is not None:
        return reduce.combine
    functions = parse_definitions(code)
    taken = {reduce.map, reduce.finalize}
    candidates = [f.name for f in functions if _could_combine(f, reduce.indexed) and f.name not in taken
                  and not any(p.name in extras for p in f.parameters)]
    if len(candidates) == 1:
        return candidates[0]
    defined = [f.name for f in functions]
    shape = ("takes two values with their indices and writes the kept pair through two references"
             if reduce.indexed else "takes two values of one type and returns one")
    why = f"several functions could combine, {candidates}" if candidates else \
        f"none of its functions {defined} {shape}"
    raise UsageError(f"%%jiterator --reduce: name the combine function with combine=NAME: {why}")


def create(code: str, reduce: ReduceOptions, extras: dict[str, object]) -> CellReduction:
    """The cell's reduction; errors as an elementwise cell's (ParseError, BindError) or UsageErrors
    for what the line got wrong."""
    combine = default_combine(code, reduce, extras)
    try:
        fn = CellReduction(code, reduce.identity, reduce.map, combine, reduce.finalize, extras,
                           indexed=reduce.indexed)
    except ArgumentTypeError as exc:  # the identity is no real number (1j, True is fine)
        raise UsageError(f"identity={reduce.identity!r}: {exc}") from None
    if reduce.has_dim:
        fn.default_dim = reduce.dim
    return fn
