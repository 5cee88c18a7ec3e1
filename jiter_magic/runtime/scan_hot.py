"""The hot path of scan calls: a call keyed like one planned before runs in C, as a reduction's does.

A call of plain arrays of one library, with no keyword values of the map, is keyed
by the adapter's fast key of its inputs and its `dim`, `reverse`, `exclusive` and `dtype`; once
the general path (reduce_call.py's `call`, with scan_call.py's plan) has planned such a call, it
leaves a hot path under that key (reduce_hot.py's `keep_hot`), so that a later call only allocates
its results, writes the pointers and launches: the C call path's `HotPlan` for one launch, and for
the two of a look-back scan (its flags zeroed, then its tiles) or of split columns (the segments'
folds, then their scans) a Python function as a grid reduction's; into given `out=` torch tensors,
keyed with them, a Python function too (reduce_hot.py's `keep_hot_out`). The general path costs
tens of microseconds of host time a call, which a GPU spends idle before a long row's kernel
starts. Options of other types (a bool or a NumPy int as `dim`) take the general path.
"""
from __future__ import annotations

from typing import Any

from jiter_magic.runtime import reduce_hot
from jiter_magic.runtime.reduce_calls import ReductionCalls


def options_key(options: dict[str, Any]) -> tuple | None:
    """`dim`, `reverse`, `exclusive` and `dtype` as part of a hot key, or None where they take the
    general path (a bool is not keyed as the int it equals: the general path refuses `dim=True`)."""
    dim, reverse, exclusive = options["dim"], options["reverse"], options["exclusive"]
    if type(dim) is not int or type(reverse) is not bool or type(exclusive) is not bool:
        return None
    return dim, reverse, exclusive, options["dtype"]


def hot_call(calls: ReductionCalls, args: tuple, options: dict[str, Any]) -> Any:
    """The result of a call run by its C hot path, or None where the call takes the general path."""
    if not calls.hot or len(args) != calls.binding.num_inputs:
        return None
    return reduce_hot.hot_run(calls, args, options_key(options))
