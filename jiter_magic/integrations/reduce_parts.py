"""The pieces a reduction or a scan splits into when its elements are folded in pieces (Dask blocks,
DTensor shards), not in one call.

A tree folds each block into a partial result, then folds partial results together, then ends
the total once with the count of every element it holds. So a `ReductionFunction` gives three
pieces, each made of its own functors (a `ScanFunction` the same three as scans: its partial scan
of a block, the combine alone scanned along a stack of states, and the finalize; scan_parts.py):
- `partial`: its map and combine without the finalize (each block's partial result);
- `fold`: its combine alone, with no map (the partials are already accumulator values) and the
  same identity; for a reduction with indices it takes two inputs, the partials' values and their
  indices (`indices_given`), so that its combine compares the indices each element has in the
  whole reduced extent, as the eager call's does, never a position among the partials;
- `finalize`: an elementwise function calling its finalize on each value with its count, its
  second input (one number for a reduction, one an element for a scan; None where it has none).
`partial` and `fold` are reductions (scans) of bindings derived from the function's, run by the
same call path (runtime/reduce_call.py, runtime/scan_call.py) with kernels of their own;
`finalize` is a `JitFunction` of the function's code string and one generated entry point. They
are made once a function, on first use (in each Dask worker), and kept while the function lives.
`global_indices` turns the indices a block's partial gives (over the block) into indices over the
whole reduced extent, which `fold` of a reduction with indices compares (`placed_partial`: a
piece's partial with them); `ended` finalizes a total and casts it to the result's dtype, on
NumPy, CuPy or torch arrays alike.
"""
from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jiter_magic.frontend.parse import Functor
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.function import JitFunction
from jiter_magic.kernels.scan_family import SCAN
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.runtime import reduce_call, scan_call
from jiter_magic.runtime.reduce_call import ValuesIndices
from jiter_magic.runtime.reduce_calls import ReductionCalls
from jiter_magic.state import RUNTIME

State = tuple[Any, ...]  # a partial result in pieces: one array, the state's values, or values and int64 indices
FINALIZE_ENTRY = "jm_finalize_with_count"  # the generated entry point of `finalize` (reserved prefix)


# A derived call's options where it leaves them out (`out=` never: the pieces make their results).
_DEFAULT_OPTIONS = {"dim": None, "keepdim": False, "reverse": False, "exclusive": False, "dtype": None, "out": None}
_REDUCE_OPTIONS = ("dim", "keepdim", "dtype", "out")


class DerivedFunction:
    """A reduction (or a scan) of a derived binding, called as a `ReductionFunction` (a
    `ScanFunction`) is, without `out=`."""

    def __init__(self, binding: ReductionBinding, identity: object, defaults: dict[str, object],
                 scan: bool = False) -> None:
        self.calls = ReductionCalls(binding, SCAN) if scan else ReductionCalls(binding)
        self.identity = identity
        self.defaults = defaults
        self.run: Callable[..., Any] = scan_call.run if scan else reduce_call.run
        self.options = scan_call.OPTIONS if scan else _REDUCE_OPTIONS

    def __call__(self, *arrays: Any, **keywords: Any) -> Any:
        options = {name: keywords.pop(name, _DEFAULT_OPTIONS[name]) for name in self.options}
        return self.run(self.calls, self.identity, self.defaults, arrays, options, keywords)


@dataclass(frozen=True, slots=True)
class TreeParts:
    """A reduction's pieces for a tree (see the module docstring)."""

    partial: DerivedFunction
    fold: DerivedFunction  # a reduction's with indices: fold(values, indices) of partials whose indices are global
    finalize: JitFunction | None  # finalize(values, counts)


def finalize_code(code: str, finalize: Functor) -> str:
    """The code string with an elementwise entry point that finalizes one value with a count
    (its second input). The finalize gets the value's type as its template argument
    where it has one type parameter, as the reduction kernels call it (kernels/reduce_common.py)."""
    params = finalize.template_params
    typed = len(params) == 1 and not params[0].startswith(("int ", "bool "))
    call = f"{finalize.name}{'<T>' if typed else ''}(total, count)"
    return f"{code}\ntemplate <typename T> T {FINALIZE_ENTRY}(T total, int64_t count) {{ return (T){call}; }}\n"


class ReductionTrees:
    """Each reduction's `TreeParts`, made once and kept (weakly) while it lives: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.by_function: weakref.WeakKeyDictionary[Any, TreeParts] = weakref.WeakKeyDictionary()
        self.lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()

    def parts(self, function: Any) -> TreeParts:
        with self.lock:
            found = self.by_function.get(function)
            if found is None:
                found = self.by_function[function] = _made(function)
        return found


def _made(function: Any) -> TreeParts:
    binding = function.binding
    scan = function.operation == "scan"
    if scan:  # the pieces carry the whole state (scan_parts.piece_result drops the values a call does not return)
        binding = replace(binding, kept_values=None)
    partial = DerivedFunction(replace(binding, finalize=None), function.identity, function.kwargs, scan)
    # With indices a reduction's partial carries its element's index over the whole reduced extent,
    # which the fold must compare (a combine may break ties by it), not the partial's place among
    # the others. A scan's fold folds two states in order, whose indices scan_parts.py restores.
    fold = DerivedFunction(replace(binding, map=None, finalize=None, indices_given=binding.indexed and not scan),
                           function.identity, {}, scan)
    finalize = None
    if binding.finalize is not None:
        finalize = JitFunction(finalize_code(binding.code, binding.finalize), None, {})
    return TreeParts(partial, fold, finalize)


def tree_parts(function: Any) -> TreeParts:
    """The tree parts of a `ReductionFunction` or a `ScanFunction`."""
    return RUNTIME.part(ReductionTrees).parts(function)


def placed_partial(parts: TreeParts, pieces: tuple | list, planned: Any, starts: tuple[int, ...],
                   sizes: tuple[int, ...], kwargs: dict) -> ValuesIndices:
    """The partial of a reduction with indices on one piece (a block, a shard): values and indices
    over the whole reduced extent (`global_indices`; the piece starts at `starts`, `sizes` long,
    along each reduced dim), in the accumulator, the reduced dims kept as 1. A piece empty along
    a reduced dim holds no element: its indices are -1, which the fold passes over, as the
    kernels' own empty states."""
    if 0 in sizes:
        shape = tuple(1 if axis in planned.dims else n
                      for axis, n in enumerate(broadcast_shape([tuple(p.shape) for p in pieces])))
        return ValuesIndices(_full(pieces[0], shape, 0, planned.accumulate), _full(pieces[0], shape, -1, "int64"))
    found = parts.partial(*pieces, dim=planned.dims, keepdim=True, dtype=planned.accumulate, **kwargs)
    whole = tuple(planned.shape[axis] for axis in planned.dims)
    return ValuesIndices(found.values, global_indices(found.indices, sizes, starts, whole))


def _full(like: Any, shape: tuple[int, ...], value: int, dtype: str) -> Any:
    """An array of `shape` filled with `value`, of the library (and device) of `like`."""
    xp = module_of(like)
    if xp.__name__ == "torch":
        return xp.full(shape, value, dtype=getattr(xp, dtype), device=like.device)
    return xp.full(shape, value, dtype=dtype)


def global_indices(local: Any, block_sizes: tuple[int, ...], starts: tuple[int, ...], sizes: tuple[int, ...]) -> Any:
    """The flat indices over reduced dims of `sizes` of the elements a block's call indexed with
    `local`: flat indices over the block's own reduced sizes, `block_sizes`, whose block starts at
    `starts` along each reduced dim (all in logical order, the last dim innermost, as torch counts).
    Plain operators, so that NumPy and CuPy int64 arrays alike stay on their device, in int64."""
    if block_sizes == sizes:  # the block spans the whole reduced extent (no reduced dim, too): as it is
        return local
    rest, coordinates = local, []
    for size in reversed(block_sizes):  # unravel over the block's sizes, innermost first
        coordinates.append(rest % size)
        rest = rest // size
    total = 0
    for coordinate, start, size in zip(reversed(coordinates), starts, sizes):  # ravel over the whole sizes
        total = total * size + (coordinate + start)
    return total


def as_state(found: Any) -> State:
    """A call's result as a tuple of arrays (a single array as a tuple of one)."""
    return tuple(found) if isinstance(found, tuple) else (found,)


def module_of(array: Any) -> Any:
    """NumPy, CuPy or torch: the module of the array's type, whose functions keep it on its device."""
    return sys.modules[type(array).__module__.split(".")[0]]


def cast(values: Any, dtype: str) -> Any:
    """Values in the result's dtype (a NumPy or CuPy dtype name; torch's of the same name)."""
    if hasattr(values, "astype"):
        return values if values.dtype == dtype else values.astype(dtype)
    wanted = getattr(sys.modules["torch"], dtype)
    return values if values.dtype == wanted else values.to(wanted)


def ended(parts: TreeParts, total: Any, count: Any, dtype: str) -> Any:
    """Folded accumulator values finalized with the count of every element they hold (where the
    function has a finalize), in the result's dtype."""
    if parts.finalize is not None:
        total = parts.finalize(total, count)
    return cast(total, dtype)
