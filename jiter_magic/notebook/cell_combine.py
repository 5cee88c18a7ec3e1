"""A `%%jiterator NAME --reduce ...` or `--scan ...` cell: its options, the reduction or scan it
makes, and the compile at cell time; both kinds are built on a combine, and share this one path.

The cell is C++ functions, as for `create_reduction_fn` or `create_scan_fn`; the line names the
identity, and may name the combine, map and finalize functions and a default `dim`. A missing
`combine=` is found when the cell defines exactly one function that could be one (two parameters
of one type, returning a value; with `--outputs`, the multi-output forms), so that a plain sum cell
needs no more than its identity. The function then compiles at once for the `--dtype` given
(float32 by default), so that a broken functor fails the cell that holds it, as an elementwise
cell does.
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
from jiter_magic.frontend.scan import is_state_combine
from jiter_magic.kernel_function import KernelFunction
from jiter_magic.reduction import ReductionFunction
from jiter_magic.reduction import rebuild as rebuild_reduction
from jiter_magic.runtime.unpickled import UnpickledFunctions
from jiter_magic.scan import ScanFunction
from jiter_magic.scan import rebuild as rebuild_scan
from jiter_magic.state import RUNTIME

# Of the keys a `--reduce` or `--scan` line gives to the function (identity, these, and dim to the
# calls), those whose value names a function of the cell; every other key=value is a default of one
# of the map's extra arguments, as on an elementwise line.
ROLE_KEYS = ("combine", "map", "finalize")

# Stands for "no dim given to this call": a reduction's `fn(x, dim=None)` must still reduce every dim.
_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class CombineOptions:
    """The `--reduce` or `--scan` part of a `%%jiterator` line, parsed."""

    kind: str  # 'reduce' or 'scan'
    identity: object  # a number, a tuple of them (a scan's state of several values), or None (with indices)
    combine: str | None  # None: the one function of the cell that can combine
    map: str | None
    finalize: str | None
    dim: object = _UNSET  # the calls' default dim; _UNSET: a reduction reduces every dim, a scan needs one
    outputs: int = 1  # `--outputs N`: values with indices (both kinds) or a scan's state of N values

    @property
    def has_dim(self) -> bool:
        return self.dim is not _UNSET

    @property
    def multi(self) -> bool:
        return self.outputs > 1


class CellDefaults(KernelFunction):
    """What a cell's function adds to its kind: the cell's `dim=` for calls that give none
    (`fn(x, dim=...)`, a reduction's `dim=None` included, overrides it), kept when pickled."""

    default_dim: object = None

    def __call__(self, *inputs: object, dim: object = _UNSET, **options: Any) -> Any:
        return super().__call__(*inputs, dim=self.default_dim if dim is _UNSET else dim, **options)

    def __reduce__(self) -> tuple:
        """Pickled with its default dim, so that a worker's copy folds along the same dims."""
        return _unpickle_cell, (type(self), self.default_dim, *self._pickled_state())

    def _now(self) -> bytes:
        return pickle.dumps((super()._now(), self.default_dim))

    @classmethod
    def rebuilt(cls, state: tuple) -> CellDefaults:
        """The cell's function made again from its kind's pickled state, by its kind's `rebuild`."""
        fn = cls.rebuild(*state, kind=cls)
        assert isinstance(fn, cls)
        return fn

    rebuild: Any  # the kind's rebuild(*state, kind=...)


class CellReduction(CellDefaults, ReductionFunction):
    """A reduction made by a `%%jiterator --reduce` cell."""

    rebuild = staticmethod(rebuild_reduction)


class CellScan(CellDefaults, ScanFunction):
    """A scan made by a `%%jiterator --scan` cell."""

    rebuild = staticmethod(rebuild_scan)


CellFunction = CellReduction | CellScan  # what a `--reduce` or `--scan` cell binds


def _unpickle_cell(kind: type[CellDefaults], default_dim: object, *state: Any) -> CellDefaults:
    """A cell's function rebuilt from its pickled state (reused while unchanged, as any function's)."""
    def make() -> CellDefaults:
        fn = kind.rebuilt(state)
        fn.default_dim = default_dim
        return fn

    return RUNTIME.part(UnpickledFunctions).reuse_or_make(pickle.dumps((kind.__name__, default_dim, state)), make,
                                                          kind._now)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_dim(text: str, kind: str = "reduce") -> object:
    """`dim=1`, `dim=-1`, `dim=(0,1)`, `dim=0,1` or `dim=None` (a reduction's): an int, a tuple of
    ints or None; a scan's one int."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = text
    if isinstance(value, list):
        value = tuple(value)
    if kind == "scan" and not _is_int(value):
        raise UsageError(f"'dim={text}': a scan runs along one dim: dim must be an int, such as dim=-1")
    ints = isinstance(value, tuple) and all(_is_int(d) for d in value)
    if not (value is None or ints or _is_int(value)):
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


def parse_identity(token: str, literal) -> object:
    """`identity=0`, `identity=-inf`, or a scan's state of several values `identity=(1,0)`: each
    value a literal as `literal` parses an extra's default."""
    text = token.partition("=")[2]
    if not (text.startswith("(") and text.endswith(")")):
        return literal(token)[1]
    parts = [part.strip() for part in text[1:-1].split(",")]
    if parts and not parts[-1]:  # `(0,)`
        parts.pop()
    if not parts or not all(parts):
        raise UsageError(f"{token!r}: expected identity=(VALUE,VALUE,...), one number a value of the state")
    return tuple(literal(f"identity={part}")[1] for part in parts)


_NEEDS_IDENTITY = {
    "reduce": "identity=0 for a sum, identity=1 for a product, identity=-inf for a max",
    "scan": "identity=0 for a cumsum, identity=-inf for a running max or a logcumsumexp, identity=(1,0) for "
            "a linear recurrence with --outputs 2",
}


def split_params(kind: str, tokens: list[str], literal, outputs: int = 1) -> tuple[CombineOptions, dict[str, object]]:
    """The line's key=value tokens as the function's options and the map's extras (`literal`
    parses an extra's default, as on an elementwise line). With `outputs` > 1 the identity is
    optional where no element is compared with it (values with their indices)."""
    found: dict[str, object] = {}
    extras: dict[str, object] = {}
    for token in tokens:
        key, _sep, text = token.partition("=")
        if key in found or key in extras:
            raise UsageError(f"{token!r}: {key} is given twice")
        if key in ROLE_KEYS and _sep:
            found[key] = parse_role(key, text)
        elif key == "dim" and _sep:
            found[key] = parse_dim(text, kind)
        elif key == "identity" and _sep:
            found[key] = parse_identity(token, literal)
        else:
            name, value = literal(token)
            extras[name] = value
    if "identity" not in found and outputs > 1:
        found["identity"] = 0 if kind == "reduce" else None  # a scan's binding says what its state needs
    if "identity" not in found:
        raise UsageError(f"%%jiterator NAME --{kind} needs identity=VALUE, the value combine leaves every value "
                         f"unchanged with: {_NEEDS_IDENTITY[kind]}")
    return CombineOptions(kind, found["identity"], found.get("combine"), found.get("map"),  # type: ignore[arg-type]
                          found.get("finalize"), found.get("dim", _UNSET), outputs), extras  # type: ignore[arg-type]


def _could_combine(functor: Functor, options: CombineOptions) -> bool:
    """Two parameters of one type, by value, and a value returned: `T add(T a, T b)`; with indices,
    two values and their indices in and the kept pair out through two references:
    `void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index)`; a scan's state of
    N values: two states in, the new one out through N references."""
    params = functor.parameters
    if options.multi:
        return (options.outputs == 2 and is_indexed_combine(functor)) or \
            (options.kind == "scan" and is_state_combine(functor) == options.outputs)
    return (functor.returns_value and len(params) == 2 and not any(p.is_reference for p in params)
            and params[0].type == params[1].type)


def default_combine(code: str, options: CombineOptions, extras: Container[str] = ()) -> str:
    """The function combine= names, or the one function of the cell that can combine (not the map
    or finalize named, nor one taking an extra of the line: that is the map); several or none: a
    UsageError listing them, asking for combine=NAME."""
    if options.combine is not None:
        return options.combine
    functions = parse_definitions(code)
    taken = {options.map, options.finalize}
    candidates = [f.name for f in functions if _could_combine(f, options) and f.name not in taken
                  and not any(p.name in extras for p in f.parameters)]
    if len(candidates) == 1:
        return candidates[0]
    defined = [f.name for f in functions]
    shape = "takes two values of one type and returns one"
    if options.multi:
        indexed = "takes two values with their indices and writes the kept pair through two references"
        state = f"takes two states of {options.outputs} values and writes the new one through {options.outputs} " \
                "references"
        shape = indexed if options.kind == "reduce" else state if options.outputs != 2 else f"{indexed}, or {state}"
    why = f"several functions could combine, {candidates}" if candidates else \
        f"none of its functions {defined} {shape}"
    raise UsageError(f"%%jiterator --{options.kind}: name the combine function with combine=NAME: {why}")


def create(code: str, options: CombineOptions, extras: dict[str, object]) -> CellFunction:
    """The cell's reduction or scan; errors as an elementwise cell's (ParseError, BindError) or
    UsageErrors for what the line got wrong."""
    combine = default_combine(code, options, extras)
    fn: CellFunction
    try:
        if options.kind == "reduce":
            fn = CellReduction(code, options.identity, options.map, combine, options.finalize, extras,
                               indexed=options.multi)
        else:
            fn = CellScan(code, options.identity, options.map, combine, options.finalize, extras, options.multi)
    except ArgumentTypeError as exc:  # the identity is no real number (1j, True is fine), or not the state's size
        said = "no identity= given" if options.identity is None else f"identity={options.identity!r}"
        raise UsageError(f"{said}: {exc}") from None
    if fn.num_outputs != options.outputs:
        raise UsageError(f"--{options.kind} --outputs {options.outputs}: {fn.name} gives {fn.num_outputs} result(s); "
                         f"write --outputs {fn.num_outputs}")
    if options.has_dim:
        fn.default_dim = options.dim
    return fn
