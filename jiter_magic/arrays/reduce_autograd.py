"""Autograd for reductions on torch tensors: the gradient a user gives with `fn.def_backward`.

A reduction's backward is an elementwise functor of each input element, the result and the
incoming gradient: `bwd(inputs..., result, grad, [extras by name], T& grad_input...)`; of a
reduction with indices, of the one element each result was taken from alone (`SelectedBackward`:
every other element's gradient is 0, as torch.max's). So the call computes its result on detached
inputs, then hands it to the elementwise functions' autograd Function (torch_autograd.py) with
the result appended to the call's arguments; its backward reshapes the result and the gradient to
the inputs' rank (each reduced dim kept as size 1, which broadcasts against the inputs), runs the
jitted backward, and sums each input's gradient over the dims the call broadcast it along, cast
to the input's dtype, as elementwise gradients are. Second-order gradients are refused there too.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from jiter_magic.arrays.torch_autograd import tracked_results, with_gradient
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


class SelectedBackward:
    """The jitted backward of a reduction with indices: only the element each result was taken
    from gets a gradient. It runs the backward on those elements alone (each input's element at the
    result's index, the value, the value's gradient) and scatters what it gives into zeros of the
    broadcast shape; `_WithBackward` then sums each over the dims an input was broadcast along."""

    def __init__(self, backward: Any, shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
        self.backward = backward
        self.shape = shape
        self.kept = reduced_shape(shape, dims, True)  # the results' shape with the reduced dims as 1
        kept_axes = [axis for axis in range(len(shape)) if axis not in dims]
        # The reduced dims last, in their order: flattened, an element's position is its index.
        self.order = (*kept_axes, *dims)
        self.inverse = tuple(self.order.index(axis) for axis in range(len(shape)))
        self.rows = tuple(shape[axis] for axis in kept_axes)
        self.count = 1
        for axis in dims:
            self.count *= shape[axis]

    def _flat(self, x: torch.Tensor) -> torch.Tensor:
        """`x` (of the broadcast shape, or the results' kept one) with its reduced dims flattened last."""
        return x.permute(self.order).reshape(*self.rows, -1)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        *inputs, values, indices, grad, _index_grad = args
        where = self._flat(indices.reshape(self.kept))
        picked = [self._flat(x.expand(self.shape)).gather(-1, where) for x in inputs]
        computed = self.backward(*picked, self._flat(values.reshape(self.kept)), self._flat(grad.reshape(self.kept)),
                                 **kwargs)
        spread = []
        for gradient in computed if isinstance(computed, tuple) else (computed,):
            full = gradient.new_zeros((*self.rows, self.count)).scatter(-1, where, gradient)
            spread.append(full.reshape([self.shape[axis] for axis in self.order]).permute(self.inverse))
        return tuple(spread) if len(spread) > 1 else spread[0]


def requires_grad(args: tuple) -> bool:
    """Whether autograd tracks any input of this call (cheap for arrays that have no such flag)."""
    return any(getattr(x, "requires_grad", False) for x in args) and torch.is_grad_enabled()


def tracked_call(name: str, compute: Callable[[tuple], Any], args: tuple, options: dict[str, Any],
                 kwargs: dict[str, object], backward: Any) -> Any:
    """`compute(args)` on the inputs detached, its result tracked by autograd through `backward`.
    `options` are the call's dim, keepdim, dtype and out; `kwargs` the map's extras by name (the
    defaults and the call's overrides), which the backward takes by name too."""
    result, results, needing = tracked_results(name, compute, args, options["out"])
    shape = broadcast_shape([tuple(x.shape) for x in args])
    dims = normalize_dims(options["dim"], len(shape))
    if len(results) == 2:
        tracked = with_gradient(name, needing, results, SelectedBackward(backward, shape, dims), (*args, *results),
                                kwargs)
        return type(result)(*tracked)
    kept = reduced_shape(shape, dims, True)
    return with_gradient(name, needing, results, KeptDimsBackward(backward, kept), (*args, *results), kwargs)[0]
