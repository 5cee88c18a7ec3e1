"""Bind a reduction's code string: which function maps the elements, which combines, which finalizes.

A reduction names up to three functions of one code string: `combine(a, b)` (required: two
accumulator values to one), `map(inputs..., extras...)` (each element's inputs to an accumulator
value; by default the last function that is neither combine nor finalize, and none at all means
the element itself) and `finalize(result, count)` (optional: the result and how many elements it
holds, for means and norms). The map's parameters are bound as `create_jit_fn` binds its entry's:
kwargs name extras, the other value parameters are the array inputs in declaration order.

A reduction with indices (argmax, a max with its index) folds a value and the index of the
element it came from: its combine takes two of them and writes the one it keeps through two
references, `void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index)`.
A tree of such folds (Dask, integrations/reduce_parts.py) folds partial results whose indices are
already known: its derived binding has `indices_given`, and its kernels take each element's value
from their first input and its index from their second, with no map.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from jiter_magic.errors import ArgumentTypeError, BindError
from jiter_magic.frontend.bind import Binding, bind
from jiter_magic.frontend.parse import Functor, parse_definitions


@dataclass(frozen=True, slots=True)
class ReductionBinding:
    """The functions a reduction calls, and what its calls pass the map."""

    code: str
    combine: Functor
    map: Binding | None  # None: no map function, each element (of one input) is its own value
    finalize: Functor | None
    indexed: bool = False  # the combine folds (value, index) pairs: a result and its index
    indices_given: bool = False  # with indices: each element's index is input 1, not its position

    def __post_init__(self) -> None:
        # Only a tree's fold derives such a binding; a map would have no index input to pass on.
        if self.indices_given and (not self.indexed or self.map is not None):
            raise ValueError("indices_given needs a reduction with indices and no map")

    @property
    def input_names(self) -> tuple[str, ...]:
        if self.indices_given:
            return ("values", "indices")
        return self.map.input_names if self.map is not None else ("x",)

    @property
    def extra_names(self) -> tuple[str, ...]:
        return self.map.extra_names if self.map is not None else ()

    @property
    def num_inputs(self) -> int:
        return len(self.input_names)

    @property
    def outputs(self) -> int:
        """Arrays a call gives: the result, or the values and their indices."""
        return 2 if self.indexed else 1

    @property
    def tupled(self) -> bool:
        """A call gives a tuple of arrays however many it keeps (a scan's state of several values)."""
        return False

    @property
    def name(self) -> str:
        """How messages and generated file names call the reduction: its map, or its combine."""
        return self.map.functor.name if self.map is not None else self.combine.name


def named_function(functions: dict[str, Functor], name: object, role: str) -> Functor:
    """The function a `role=` argument names, or an error listing the defined ones."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{role}= must name a function of the code string (a str), "
                                f"got {type(name).__name__}: {name!r}")
    if name not in functions:
        names = list(functions)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise BindError(f"{role}={name!r} names no function of the code string; it defines {names}{hint}")
    return functions[name]


def check_arity(functor: Functor, role: str, expected: str) -> None:
    """A combine takes two accumulator values, a finalize the result and the count; both return one."""
    if not functor.returns_value or any(p.is_reference for p in functor.parameters):
        raise BindError(f"the {role} function must return its value: {functor.signature}")
    if len(functor.parameters) != 2:
        raise BindError(f"the {role} function must take two parameters ({expected}), "
                        f"{functor.name} takes {len(functor.parameters)}: {functor.signature}")


_INDEXED_COMBINE = "void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index)"


def is_indexed_combine(functor: Functor) -> bool:
    """The shape of a reduction with indices' combine: two (value, index) pairs in, the kept pair
    written through the last two parameters, which are references, and nothing returned."""
    return not functor.returns_value and [p.is_reference for p in functor.parameters] == [False] * 4 + [True] * 2


def chosen_map(functions: dict[str, Functor], map_name: str | None, combine: Functor, finalize: Functor | None,
               kwarg_names: list[str]) -> Functor | None:
    """The map function `map=` names, by default the last function that is neither combine nor
    finalize, or None where there is none (then no extras may be given)."""
    if map_name is None:
        taken = {combine.name} | ({finalize.name} if finalize is not None else set())
        candidates = [name for name in functions if name not in taken]
        map_name = candidates[-1] if candidates else None
    if map_name is None:
        if kwarg_names:
            raise BindError(f"keyword arguments {kwarg_names} need a map function to pass them to; "
                            "the code string has none besides combine and finalize")
        return None
    return named_function(functions, map_name, "map")


def check_value_map(map_fn: Functor) -> None:
    """A map of one value takes the element's inputs and the extras by value and returns it."""
    if not map_fn.returns_value or any(p.is_reference for p in map_fn.parameters):
        raise BindError(f"the map function must take each element's inputs (and the extras) by value and return "
                        f"the element's value, such as `T sq(T x) {{ return x * x; }}`; {map_fn.name} is: "
                        f"{map_fn.signature}")


def bind_reduction(code: str, map_name: str | None, combine: object, finalize: object,
                   kwarg_names: list[str], indexed: bool = False) -> ReductionBinding:
    """Find the named functions in `code` and bind the map's parameters; errors name what was wrong."""
    functions = {f.name: f for f in parse_definitions(code)}
    combine_fn = named_function(functions, combine, "combine")
    if not indexed:
        check_arity(combine_fn, "combine", "two accumulator values, such as `T add(T a, T b)`")
    elif not is_indexed_combine(combine_fn):
        raise BindError(f"the combine function of a reduction with indices takes two values and their indices "
                        f"and writes the one it keeps through two references, such as `{_INDEXED_COMBINE}`; "
                        f"{combine_fn.name} is: {combine_fn.signature}")
    finalize_fn = None
    if finalize is not None:
        finalize_fn = named_function(functions, finalize, "finalize")
        check_arity(finalize_fn, "finalize", "the result and the count, such as `T mean(T total, int64_t n)`")
    map_fn = chosen_map(functions, map_name, combine_fn, finalize_fn, kwarg_names)
    if map_fn is None:
        return ReductionBinding(code, combine_fn, None, finalize_fn, indexed)
    check_value_map(map_fn)
    mapped = bind(map_fn, list(kwarg_names), None)
    return ReductionBinding(code, combine_fn, mapped, finalize_fn, indexed)
