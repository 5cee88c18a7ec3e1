"""Autograd for scans on torch tensors: the gradient a user gives with `fn.def_backward(callable)`.

A scan's gradient is itself a scan (a cumsum's is the reversed cumsum of the incoming gradient),
so it cannot be one elementwise functor as a reduction's is: it is a Python callable, typically
written with jitted scans and torch ops, taking the inputs, the results and one gradient a result,
with the call's options and extras by keyword. A call computes its results on detached inputs
and hands them to the elementwise functions' autograd Function (torch_autograd.py), which calls
the backward through `ScanBackward` and sums each input's gradient over the dims the call
broadcast it along, cast to the input's dtype; second-order gradients are refused there.
torch.compile's scan operator (integrations/scan_ops.py) calls the same `ScanBackward`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from jiter_magic.arrays.torch_autograd import tracked_results, with_gradient
from jiter_magic.errors import GradientError
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.planning.scan_plan import scan_dim


def no_backward(name: str) -> GradientError:
    """What a scan without `def_backward` raises where autograd tracks an input."""
    return GradientError(f"{name} has no backward, and an input requires grad: give it one with "
                         f"{name}.def_backward(backward), a Python callable taking the inputs, the results and one "
                         "gradient a result (then dim=, reverse=, exclusive= and the extras by keyword) and "
                         "returning one gradient an input; or call it under torch.no_grad()")


class ScanBackward:
    """The user's backward as the autograd Function calls it: positional arrays (inputs, results,
    gradients), the extras by name; it adds the call's options and checks what comes back."""

    def __init__(self, name: str, backward: Callable[..., Any], num_inputs: int, dim: int, reverse: bool,
                 exclusive: bool) -> None:
        self.name, self.backward, self.num_inputs = name, backward, num_inputs
        self.options = {"dim": dim, "reverse": reverse, "exclusive": exclusive}

    def __call__(self, *args: Any, **extras: Any) -> tuple:
        computed = self.backward(*args, **self.options, **extras)
        grads = tuple(computed) if isinstance(computed, (tuple, list)) else (computed,)
        if len(grads) != self.num_inputs or not all(g is None or isinstance(g, torch.Tensor) for g in grads):
            one = ", or a single tensor" if self.num_inputs == 1 else ""
            raise GradientError(f"the backward of {self.name} must return one gradient an input "
                                f"({self.num_inputs}, each a tensor or None{one}), got "
                                f"{', '.join(type(g).__name__ for g in grads)}")
        return grads


def tracked_call(function: Any, compute: Callable[[tuple], Any], args: tuple, options: dict[str, Any],
                 kwargs: dict[str, object]) -> Any:
    """`compute(args)` on the inputs detached, its results tracked by autograd through the scan's
    backward. `options` are the call's dim, reverse, exclusive, dtype and out; `kwargs` the map's
    extras by name (the defaults and the call's overrides), which the backward takes by name too."""
    result, results, needing = tracked_results(function.name, compute, args, options["out"])
    dim = scan_dim(options["dim"], len(broadcast_shape([tuple(x.shape) for x in args])))
    backward = ScanBackward(function.name, function.backward, function.num_inputs, dim, bool(options["reverse"]),
                            bool(options["exclusive"]))
    tracked = with_gradient(function.name, needing, results, backward, (*args, *results), kwargs)
    if not isinstance(result, tuple):
        return tracked[0]
    return type(result)(*tracked) if hasattr(result, "_fields") else tuple(tracked)  # ValuesIndices, or a tuple
