"""What every integration of reductions and scans (Dask, DTensor, torch operators) asks of a call
the same way, whatever the kind, written once: `dtype=` as a name, the kind's planned result
(planning/reduce_result.py or planning/scan_plan.py, pure functions of dtypes and shapes, so
that a call is refused before any data moves), its results' shape and dtypes, the refusal of
numbers as inputs, and the results in the form the kind's eager call returns them.
"""
from __future__ import annotations

import numbers
from typing import Any

from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.reduce_result import ReductionResult, reduction_result
from jiter_magic.planning.scan_plan import ScanResult, scan_result
from jiter_magic.runtime.reduce_call import ValuesIndices, check_input_count, number_input


def requested_dtype(options: dict[str, Any]) -> str | None:
    """`dtype=` as a name (None where the call leaves it out)."""
    return None if options["dtype"] is None else dtype_name(options["dtype"])


def planned(function: Any, options: dict[str, Any], dtypes: list[str], shapes: list[tuple[int, ...]],
            rules: str) -> Any:
    """The call's `ReductionResult` or `ScanResult`, as the eager call plans it (and refuses it)."""
    requested, indexed = requested_dtype(options), function.binding.indexed
    if function.operation == "scan":
        return scan_result(dtypes, shapes, rules, options["dim"], requested, function.identity, indexed)
    return reduction_result(dtypes, shapes, rules, options["dim"], options["keepdim"], requested, function.identity,
                            indexed)


def result_shape(plan: ReductionResult | ScanResult) -> tuple[int, ...]:
    """The shape of each result: a reduction's with `keepdim=` applied, a scan's the inputs'."""
    return plan.out_shape if isinstance(plan, ReductionResult) else plan.shape


def result_dtypes(function: Any, plan: ReductionResult | ScanResult) -> list[str]:
    """Each result's dtype: values and int64 indices, or the plan's dtype for every output."""
    return [plan.dtype, "int64"] if function.binding.indexed else [plan.dtype] * function.num_outputs


def as_results(function: Any, found: tuple | list) -> Any:
    """The results as the eager call gives them: `ValuesIndices`, one array, or a tuple of them (of
    one array too, for a scan of several values that returns one: `outputs=`)."""
    if function.binding.indexed:
        return ValuesIndices(*found)
    return found[0] if len(found) == 1 and not function.binding.tupled else tuple(found)


def check_array_inputs(function: Any, args: tuple) -> None:
    """As many inputs as the function takes, none of them a number (the eager call's errors)."""
    check_input_count(function.binding, args)
    for x in args:
        if isinstance(x, numbers.Number):
            raise number_input(function.name, x)
