"""A scan in pieces along its dim (Dask blocks, DTensor shards): each piece's partial scan, its
total, and the carry of the pieces before it folded into it.

Each piece is scanned on its own by the function's partial (map and combine, no finalize, in the
accumulator's dtype; reduce_parts.py), in the scan's direction. A piece's total is its partial's
last state in that direction. The carry of a piece is the combine of the totals of the pieces
before it (after it, for `reverse=`), in order; the piece's result is then `combine(carry, partial)`
at every position, so the combine's `a` always holds the earlier elements (the later ones for
`reverse=`), as in one call. An exclusive scan is the inclusive one shifted by one position, the
carry (or the identity) first. The finalize runs last, with each element's count over the WHOLE
extent (a running mean divides by every element before it, not by a piece's), then the values
are cast to the result's dtype.

The combine of two states runs as the function's `fold` (its combine alone) scanned along a
stack of the two: the second position's result is their combine. A scan with indices keeps the
indices of the pieces global (each piece's partial adds its start along the dim): the fold sees
the two stacked positions in the pieces' order, so a combine breaking ties by index picks as the
whole call does, and the index it picks is looked up among the two.

Every piece is a NumPy, CuPy or torch array, so plain operators and the array's own module
(`stack`, `concatenate`, `where`) keep it on its device. A state is a tuple of arrays: one value,
the state's values, or values and their int64 indices. The pieces carry the whole state even
where the call returns some of its values (`outputs=`): a piece's results drop the others last.
"""
from __future__ import annotations

from typing import Any

from jiter_magic.integrations.reduce_parts import State, TreeParts, as_state, cast, module_of
from jiter_magic.planning.scan_plan import ScanResult


def _along(ndim: int, dim: int, index: slice) -> tuple[slice, ...]:
    return (slice(None),) * dim + (index,) + (slice(None),) * (ndim - dim - 1)


def piece_partial(parts: TreeParts, planned: ScanResult, reverse: bool, start: int, indexed: bool,
                  pieces: tuple, kwargs: dict) -> State:
    """A piece's partial scan (no finalize, in the accumulator), its indices made global by `start`."""
    found = as_state(parts.partial(*pieces, dim=planned.dim, reverse=reverse, dtype=planned.accumulate, **kwargs))
    if indexed and start:
        return (found[0], found[1] + start)
    return found


def total(partial: State, dim: int, reverse: bool) -> State | None:
    """A piece's whole state, the dim kept as 1 (None for an empty piece, which adds nothing)."""
    if partial[0].shape[dim] == 0:
        return None
    at = _along(partial[0].ndim, dim, slice(0, 1) if reverse else slice(-1, None))
    return tuple(p[at] for p in partial)


def combined(parts: TreeParts, a: State | None, b: State | None, planned: ScanResult, reverse: bool,
             indexed: bool) -> State | None:
    """`combine(a, b)` at every position (`a` broadcast to b's shape), `a` the earlier elements'
    state in the scan's direction; None (no elements) leaves the other as it is."""
    if a is None or b is None:
        return b if a is None else a
    xp = module_of(b[0])
    a = tuple(xp.broadcast_to(x, y.shape) for x, y in zip(a, b))
    ordered = (b, a) if reverse else (a, b)  # b's position in the stack, which the reversed fold ends at
    stacked = [xp.stack([first, second]) for first, second in zip(*ordered)]
    found = as_state(parts.fold(*(stacked[:1] if indexed else stacked), dim=0, reverse=reverse,
                                dtype=planned.accumulate))
    at = 0 if reverse else 1
    values = tuple(f[at] for f in found)
    if indexed:  # the fold picked position `at` (b) or the other (a): their global indices
        return (values[0], xp.where(values[1] == at, b[1], a[1]))
    return values


def _identity(parts: TreeParts, like: State, planned: ScanResult, indexed: bool) -> State:
    """The identity state in the shape of `like` (an exclusive fold's first result)."""
    xp = module_of(like[0])
    stacked = [xp.stack([x]) for x in (like[:1] if indexed else like)]
    found = as_state(parts.fold(*stacked, dim=0, exclusive=True, dtype=planned.accumulate))
    return tuple(f[0] for f in found)


def _shifted(parts: TreeParts, found: State, carry: State | None, planned: ScanResult, reverse: bool,
             indexed: bool) -> State:
    """The exclusive scan from the inclusive one: each position takes the state before it."""
    dim, ndim = planned.dim, found[0].ndim
    edge = total(found, dim, reverse)
    assert edge is not None  # an empty piece is never shifted
    first = carry if carry is not None else _identity(parts, edge, planned, indexed)
    rest = tuple(f[_along(ndim, dim, slice(1, None) if reverse else slice(None, -1))] for f in found)
    pairs = zip(rest, first) if reverse else zip(first, rest)
    return tuple(_concatenate(pair, dim) for pair in pairs)


def _concatenate(pair: tuple[Any, Any], dim: int) -> Any:
    xp = module_of(pair[0])
    return xp.cat(pair, dim) if xp.__name__ == "torch" else xp.concatenate(pair, axis=dim)


def piece_result(parts: TreeParts, planned: ScanResult, options: dict, indexed: bool, start: int,
                 carry: State | None, partial: State, kept: tuple[int, ...] | None = None) -> State:
    """A piece's results, starting at `start` along the dim: its partial with the carry folded
    in, shifted for an exclusive scan, finalized with global counts, in the result's dtype; of a
    state of several values, those at the positions `kept` (None: all of them)."""
    reverse, exclusive, dim = bool(options["reverse"]), bool(options["exclusive"]), planned.dim
    size = partial[0].shape[dim]
    found = partial if size == 0 else combined(parts, carry, partial, planned, reverse, indexed)
    assert found is not None
    if exclusive and size:
        found = _shifted(parts, found, carry, planned, reverse, indexed)
    values = found[0]
    if parts.finalize is not None and size:
        values = parts.finalize(values, _counts(values, dim, start, size, planned.shape[dim], reverse, exclusive))
    rest = found[1:] if indexed else tuple(cast(v, planned.dtype) for v in found[1:])  # int64 indices stay
    whole = (cast(values, planned.dtype), *rest)
    return whole if kept is None else tuple(whole[k] for k in kept)


def _counts(like: Any, dim: int, start: int, size: int, whole: int, reverse: bool, exclusive: bool) -> Any:
    """How many elements each result of the piece holds, int64, along the dim (broadcast over the others)."""
    xp = module_of(like)
    positions = (xp.arange(start, start + size, device=like.device) if xp.__name__ == "torch"
                 else xp.arange(start, start + size, dtype="int64"))
    counts = (whole - positions if reverse else positions + 1) - int(exclusive)
    return counts.reshape((1,) * dim + (size,) + (1,) * (like.ndim - dim - 1))
