"""Bind a scan's code string: its combine, its map and finalize, and the size of its state.

A scan names its functions as a reduction does (frontend/reduction.py, whose finders it uses):
`combine` folds two states into one, `map` makes each element's state from its inputs and the
extras, `finalize(value, count)` ends each result. What a scan adds is a state of several values
(two to four), so that a linear recurrence `h[t] = a[t] * h[t-1] + b[t]` is a scan of `(a, b)`
pairs: its combine takes two states and writes the new one through references,
`template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b)`. Such a scan's map
writes the element's state through references too (`void m(T x, T& a, T& b)`); without a map
its inputs are the state's values, one array each; `outputs=` may keep some of them only (a
linear recurrence's `h` alone), the kernels still carrying the whole state. A scan with indices
(cummax) has the reduction with indices' combine, its index parameters declared as integers.
"""
from __future__ import annotations

from dataclasses import dataclass

from jiter_magic.errors import ArgumentTypeError, BindError, InvalidArgumentError
from jiter_magic.frontend.bind import bind
from jiter_magic.frontend.parse import Functor, parse_definitions
from jiter_magic.frontend.reduction import (
    ReductionBinding,
    check_arity,
    check_value_map,
    chosen_map,
    is_indexed_combine,
    named_function,
)

MAX_STATE = 4  # values a state holds at most
_STATE_COMBINE = "template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b)"
_INDEX_WORDS = ("int64_t", "long", "int", "jm_index_t", "size_t")
# create_multi_output_scan_fn's keyword naming the state values a call returns, so no extra of its map takes the name.
OUTPUTS = "outputs"


class ScanArrays:
    """The arrays a scan's call gives, as its binding and each of its specs count them (both records
    hold `state`, `indexed` and `kept_values`)."""

    __slots__ = ()
    state: int
    indexed: bool
    kept_values: tuple[int, ...] | None

    @property
    def outputs(self) -> int:
        """Each value of the state (or each kept one), or the values and their indices."""
        return 2 if self.indexed else self.state if self.kept_values is None else len(self.kept_values)

    @property
    def tupled(self) -> bool:
        """A call gives a tuple of arrays, one a value of the state (one kept value too)."""
        return self.state > 1


@dataclass(frozen=True, slots=True)
class ScanBinding(ScanArrays, ReductionBinding):
    """A reduction's binding with the size of the state each step carries (1 for a plain scan or
    a scan with indices, whose pair is a value and its index)."""

    state: int = 1
    kept_values: tuple[int, ...] | None = None  # the state values a call returns, by position (None: all of them)

    @property
    def input_names(self) -> tuple[str, ...]:
        if self.map is not None:
            return self.map.input_names
        if self.state > 1:  # the state's values themselves, named as the combine's first state names them
            return tuple(p.name for p in self.combine.parameters[:self.state])
        return ("x",)


def is_state_combine(functor: Functor) -> int:
    """The state size of a combine of several values (3k parameters, the last k references, no
    return value), else 0."""
    params = functor.parameters
    if functor.returns_value or len(params) % 3 or not 2 <= len(params) // 3 <= MAX_STATE:
        return 0
    k = len(params) // 3
    return k if [p.is_reference for p in params] == [False] * (2 * k) + [True] * k else 0


def _is_index_type(type_name: str) -> bool:
    words = type_name.replace("const", " ").split()
    return bool(words) and all(w in _INDEX_WORDS for w in words)


def _state_of(combine: Functor, multi: bool) -> tuple[int, bool]:
    """(state size, with indices) of a combine; an error naming the expected forms where it fits none."""
    if not multi:
        if is_state_combine(combine) or is_indexed_combine(combine):
            raise BindError(f"{combine.name} writes a state of several values (or a value and its index) through "
                            f"references: make its scan with create_multi_output_scan_fn; {combine.signature}")
        check_arity(combine, "combine", "two states, such as `T add(T a, T b)`; for a state of several values "
                    "or values with indices use create_multi_output_scan_fn")
        return 1, False
    params = combine.parameters
    if is_indexed_combine(combine) and _is_index_type(params[1].type) and _is_index_type(params[3].type):
        return 1, True
    state = is_state_combine(combine)
    if not state:
        raise BindError(f"the combine function of a multi-output scan takes two states of 2 to {MAX_STATE} values "
                        f"and writes the new one through as many references, such as `{_STATE_COMBINE}`, or two "
                        "values and their int64_t indices and writes the one it keeps, such as `void keep_max(T a, "
                        f"int64_t ia, T b, int64_t ib, T& value, int64_t& index)`; {combine.name} is: "
                        f"{combine.signature}")
    return state, False


def outputs_type_error(outputs: object, name: str) -> ArgumentTypeError:
    """What `outputs=` of the wrong type raises."""
    return ArgumentTypeError(f"outputs= is a tuple of the positions (ints) of the state values a call of {name} "
                             f"returns, such as outputs=(1,) for a linear recurrence's h alone; got {outputs!r}")


def _kept(outputs: object, state: int, indexed: bool, name: str) -> tuple[int, ...] | None:
    """`outputs=` checked against the state: the positions a call returns, None for all of them in order."""
    if indexed or state == 1:
        kind = "values and their indices" if indexed else "one value"
        raise BindError(f"outputs= picks the values a scan whose state holds several of them returns; the state of "
                        f"{name} holds {kind}, which a call returns whole: leave outputs= out")
    if not isinstance(outputs, (tuple, list)) or not all(type(k) is int for k in outputs):
        raise outputs_type_error(outputs, name)
    if not outputs or len(set(outputs)) != len(outputs) or not all(0 <= k < state for k in outputs):
        raise InvalidArgumentError(f"outputs= names each state value a call of {name} returns once, at least one, "
                                   f"by its position 0 to {state - 1} (the state holds {state} values); got "
                                   f"{tuple(outputs)!r}")
    kept = tuple(outputs)
    return None if kept == tuple(range(state)) else kept  # all of them in order: the scan as without outputs=


def bind_scan(code: str, map_name: str | None, combine: object, finalize: object, kwarg_names: list[str],
              multi: bool | tuple[int, ...] | list[int] = False) -> ScanBinding:
    """Find the named functions in `code` and bind the map's parameters; `multi`: the combine of a
    multi-output scan (a state of several values, or values with indices), True or the positions of
    the state values a call returns (`outputs=`)."""
    if OUTPUTS in kwarg_names and multi is not False:
        raise BindError(f"'{OUTPUTS}' is reserved for the state values a multi-output scan returns "
                        "(create_multi_output_scan_fn's outputs=), so no extra of such a scan's map takes that name: "
                        "rename that parameter of the map")
    functions = {f.name: f for f in parse_definitions(code)}
    combine_fn = named_function(functions, combine, "combine")
    state, indexed = _state_of(combine_fn, multi is not False)
    kept = None if isinstance(multi, bool) else _kept(multi, state, indexed, combine_fn.name)
    finalize_fn = None
    if finalize is not None:
        if state > 1:
            raise BindError(f"finalize= ends a single value; a scan whose state holds {state} values gives each of "
                            "them as it is (finalize in a map of the results instead)")
        finalize_fn = named_function(functions, finalize, "finalize")
        check_arity(finalize_fn, "finalize", "the value and the count of elements it holds, such as "
                    "`T mean(T total, int64_t n)`")
    map_fn = chosen_map(functions, map_name, combine_fn, finalize_fn, kwarg_names)
    if map_fn is None:
        return ScanBinding(code, combine_fn, None, finalize_fn, indexed, state=state, kept_values=kept)
    if state > 1:
        if map_fn.returns_value or sum(p.is_reference for p in map_fn.parameters) != state:
            raise BindError(f"the map of a scan whose state holds {state} values takes each element's inputs (and "
                            f"the extras) by value and writes the element's state through {state} references, "
                            f"such as `void m(T x, T& a, T& b)`; {map_fn.name} is: {map_fn.signature}")
        return ScanBinding(code, combine_fn, bind(map_fn, list(kwarg_names), state), finalize_fn, indexed,
                           state=state, kept_values=kept)
    check_value_map(map_fn)
    return ScanBinding(code, combine_fn, bind(map_fn, list(kwarg_names), None), finalize_fn, indexed, state=state,
                       kept_values=kept)
