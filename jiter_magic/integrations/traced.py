"""Tensors being traced, and registering operators: where torch sees jitted functions and
reductions alike, above each kind's operators (torch_ops.py, reduce_ops.py), so that neither of
those imports the other.

A traced tensor (FakeTensor, FunctionalTensor) has no data for the call path to read, so the
adapters' registry (arrays/__init__.py) hands its calls here: an elementwise call becomes its
function's torch operator, a reduction its reduction operator.
"""
from __future__ import annotations

from typing import Any

from jiter_magic.errors import InvalidArgumentError
from jiter_magic.integrations.reduce_ops import reduction_call, reduction_operator_name
from jiter_magic.integrations.torch_ops import operator_call, register_function_operators


class TracedAdapter:
    """Tensors being traced (FakeTensor, FunctionalTensor): calls on them go to the operator."""

    library = "torch"
    delegates = True

    def run_call(self, function: Any, args: tuple, out: Any, kwargs: dict) -> Any:
        return operator_call(function, args, out, kwargs)

    def run_reduction(self, function: Any, inputs: tuple, options: dict, kwargs: dict) -> Any:
        """A reduction's call on traced tensors: its own operator (reduce_ops.py)."""
        return reduction_call(function, inputs, options, kwargs)


ADAPTER = TracedAdapter()


def register_operators(*functions: Any) -> list[str]:
    """The operators of `functions`, registered now (`jiter_magic.register_torch_operators`): with
    and without `out=`, and their backwards' operators."""
    from jiter_magic.function import JitFunction
    from jiter_magic.reduction import ReductionFunction

    names: list[str] = []
    for function in functions:
        if isinstance(function, ReductionFunction):
            backward = None if function.backward is None else function.backward.recipe
            names.append(reduction_operator_name(function.recipe, backward))
        elif isinstance(function, JitFunction):
            names += register_function_operators(function)
        else:
            raise InvalidArgumentError("register_torch_operators takes jitted functions (from create_jit_fn or "
                                       f"create_reduction_fn), got {type(function).__name__}")
    return names
