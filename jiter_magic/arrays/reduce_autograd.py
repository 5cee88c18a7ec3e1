"""Autograd for reductions on torch tensors: the gradient a user gives with `fn.def_backward`.

A reduction's backward is an elementwise functor of each input element, the result and the
incoming gradient: `bwd(inputs..., result, grad, [extras by name], T& grad_input...)`. So the
call computes its result on detached inputs, then hands it to the elementwise functions'
autograd Function (torch_autograd.py) with the result appended to the call's arguments; its
backward reshapes the result and the gradient to the inputs' rank (each reduced dim kept as
size 1, which broadcasts against the inputs), runs the jitted backward, and sums each input's
gradient over the dims the call broadcast it along, cast to the input's dtype, as elementwise
gradients are. Second-order gradients are refused there too.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from jiter_magic.arrays.torch_autograd import out_with_grad, with_gradient
from jiter_magic.errors import GradientError
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.planning.reduce_layout import normalize_dims, reduced_shape


class KeptDimsBackward:
    """The jitted backward as the elementwise autograd Function calls it: its last two array
    arguments, the result and the gradient, come reshaped with the reduced dims kept as 1."""

    def __init__(self, backward: Any, kept_shape: tuple[int, ...]) -> None:
        self.backward = backward
        self.kept_shape = kept_shape

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        *inputs, result, grad = args
        return self.backward(*inputs, result.reshape(self.kept_shape), grad.reshape(self.kept_shape), **kwargs)


def requires_grad(args: tuple) -> bool:
    """Whether autograd tracks any input of this call (cheap for arrays that have no such flag)."""
    return any(getattr(x, "requires_grad", False) for x in args) and torch.is_grad_enabled()


def tracked_call(name: str, compute: Callable[[tuple], Any], args: tuple, options: dict[str, Any],
                 kwargs: dict[str, object], backward: Any) -> Any:
    """`compute(args)` on the inputs detached, its result tracked by autograd through `backward`.
    `options` are the call's dim, keepdim, dtype and out; `kwargs` the map's extras by name (the
    defaults and the call's overrides), which the backward takes by name too."""
    needing = [x for x in args if isinstance(x, torch.Tensor) and x.requires_grad]
    if options["out"] is not None:
        raise out_with_grad()
    result = compute(tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in args))
    if not (result.is_floating_point() or result.is_complex()):
        raise GradientError(f"{name}: its result is {str(result.dtype).removeprefix('torch.')}, which cannot carry a "
                            "gradient (autograd supports floating-point results); pass a floating dtype= or call it "
                            "under torch.no_grad()")
    shape = broadcast_shape([tuple(x.shape) for x in args])
    kept = reduced_shape(shape, normalize_dims(options["dim"], len(shape)), True)
    return with_gradient(name, needing, [result], KeptDimsBackward(backward, kept), (*args, result), kwargs)[0]
