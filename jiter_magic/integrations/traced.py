"""Tensors being traced, and registering operators: where torch sees jitted functions, reductions
and scans alike, above each kind's operators (torch_ops.py, reduce_ops.py, scan_ops.py), so that
none of those imports another's.

A traced tensor (FakeTensor, FunctionalTensor) has no data for the call path to read, so the
adapters' registry (arrays/__init__.py) hands its calls here: an elementwise call becomes its
function's torch operator, a reduction its reduction operator, a scan its scan operator.
"""
from __future__ import annotations

from typing import Any

from jiter_magic.errors import InvalidArgumentError
from jiter_magic.integrations.reduce_ops import reduction_call, register_reduction_operators
from jiter_magic.integrations.scan_ops import register_scan_operators, scan_call
from jiter_magic.integrations.torch_ops import operator_call, register_function_operators
from jiter_magic.kernel_function import KernelFunction


def traced_elementwise(function: Any, args: tuple, options: dict, kwargs: dict) -> Any:
    """An elementwise call on traced tensors: its function's operator (torch_ops.py)."""
    return operator_call(function, args, options["out"], kwargs)


class TracedAdapter:
    """Tensors being traced (FakeTensor, FunctionalTensor): calls on them go to the operator."""

    library = "torch"
    delegates = True
    strategies = {"elementwise": traced_elementwise, "reduction": reduction_call, "scan": scan_call}


ADAPTER = TracedAdapter()


def register_operators(*functions: Any) -> list[str]:
    """The operators of `functions`, registered now (`jiter_magic.register_torch_operators`): with
    and without `out=`, and their backwards' operators."""
    names: list[str] = []
    for function in functions:
        if not isinstance(function, KernelFunction):
            raise InvalidArgumentError("register_torch_operators takes jitted functions (from create_jit_fn or "
                                       f"create_reduction_fn or create_scan_fn), got {type(function).__name__}")
        names += REGISTER[function.operation](function)
    return names


# Each kind's operators, by `KernelFunction.operation`.
REGISTER = {"elementwise": register_function_operators, "reduction": register_reduction_operators,
            "scan": register_scan_operators}
