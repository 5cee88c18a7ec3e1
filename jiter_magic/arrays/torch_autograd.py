"""Autograd for jitted functions on torch tensors: the gradient a user gives as another functor.

A call whose tensors require grad computes its results as usual, then hands them to one of two
`torch.autograd.Function`s so that they carry a grad_fn:
- `_WithBackward` (after `fn.def_backward(code)`): its backward calls the jitted backward on the
  call's inputs, extras and the outputs' gradients, then reduces each input's gradient over the
  dimensions the call broadcast it along (`sum_to_size`) and casts it to the input's dtype;
  inputs that do not require grad get None. It is differentiable once: under
  `create_graph=True` the gradients it returns carry a grad_fn whose backward raises
  `GradientError`, so a second-order gradient is refused wherever it would be needed, never a
  gradient that autograd silently treats as a constant.
- `_Refusing`: a backward that raises, as torch does for an operator without a formula.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from jiter_magic.errors import GradientError


class _Refusing(torch.autograd.Function):
    """Gives results a grad_fn whose backward raises `error`: a gradient is never silently missing.
    The tensors before the last `count` are what the results depend on."""

    @staticmethod
    def forward(ctx: Any, error: GradientError, count: int, *tensors: torch.Tensor) -> Any:
        ctx.error = error
        results = tensors[len(tensors) - count:]
        return results[0] if count == 1 else results

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise ctx.error


def no_second_order(name: str) -> GradientError:
    return GradientError(f"{name}'s backward (def_backward) is differentiable once: a second-order gradient "
                         "through it (create_graph=True, then a gradient of that gradient) is not supported")


def out_with_grad() -> GradientError:
    """What a call with `out=` raises while autograd tracks one of its arrays, as torch's own ops do."""
    return GradientError("functions with out=... arguments don't support automatic differentiation, "
                         "but one of the arguments requires grad; call it under torch.no_grad()")


def no_backward(name: str) -> GradientError:
    """What a backward through a function without `def_backward` raises (eager or compiled)."""
    return GradientError.no_backward(name, "a functor taking the inputs, the extras and one gradient an output, "
                                           "writing one gradient an input")


class _WithBackward(torch.autograd.Function):
    """Results whose backward is the jitted gradient (see the module's docstring)."""

    @staticmethod
    def forward(ctx: Any, name: str, backward: Any, args: tuple, kwargs: dict, positions: tuple[int, ...],
                count: int, *tensors: torch.Tensor) -> Any:
        results = tensors[len(tensors) - count:]
        ctx.name, ctx.backward, ctx.kwargs, ctx.positions, ctx.count = name, backward, kwargs, positions, count
        # Tensors through save_for_backward (autograd refuses a backward through values changed in
        # place since), Python numbers as they are.
        ctx.tensor_slots = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        ctx.others = [None if isinstance(a, torch.Tensor) else a for a in args]
        ctx.result_shapes = [(r.shape, r.dtype, r.device) for r in results]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_slots))
        return results[0] if count == 1 else results

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        args = list(ctx.others)
        saved = ctx.saved_tensors
        for slot, tensor in zip(ctx.tensor_slots, saved):
            args[slot] = tensor.detach()
        grads = tuple(torch.zeros(shape, dtype=dtype, device=device) if g is None else g
                      for g, (shape, dtype, device) in zip(grads, ctx.result_shapes))
        with torch.no_grad():
            computed = ctx.backward(*args, *grads, **ctx.kwargs)
        if not isinstance(computed, tuple):
            computed = (computed,)
        with torch.no_grad():
            reduced = [None if computed[position] is None else input_gradient(args[position], computed[position])
                       for position in ctx.positions]  # a scan's backward may give None for an input
        if torch.is_grad_enabled():  # create_graph=True: these gradients may be differentiated again
            tracked = [t for t in (*saved, *grads) if isinstance(t, torch.Tensor) and t.requires_grad]
            given = [r for r in reduced if r is not None]
            if tracked and given:
                refused = _Refusing.apply(no_second_order(ctx.name), len(given), *tracked, *given)
                each = iter([refused] if len(given) == 1 else refused)
                reduced = [None if r is None else next(each) for r in reduced]
        return (None, None, None, None, None, None, *reduced, *([None] * ctx.count))


def input_gradient(given: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The jitted backward's gradient of one input, summed over the dimensions the call broadcast
    that input along and cast to its dtype (as torch's own elementwise gradients are)."""
    if grad.shape != given.shape:
        grad = grad.sum_to_size(given.shape)
    return grad.to(given.dtype)


def with_gradient(name: str, needing: list, results: list, backward: Any, args: tuple, kwargs: dict) -> list:
    """`results` tracked by autograd: through `backward` when given, else with a backward that raises."""
    if backward is None:
        wrapped = _Refusing.apply(no_backward(name), len(results), *needing, *results)
    else:
        wanted = {id(t) for t in needing}
        positions = tuple(i for i, a in enumerate(args) if id(a) in wanted)
        wrapped = _WithBackward.apply(name, backward, args, kwargs, positions, len(results),
                                      *(args[i] for i in positions), *results)
    return [wrapped] if len(results) == 1 else list(wrapped)


def tracked_results(name: str, compute: Callable[[tuple], Any], args: tuple, out: Any) -> tuple[Any, list, list]:
    """A reduction's or scan's call whose inputs autograd tracks: `compute(args)` run on the inputs
    detached, refused where no gradient can flow (`out=`, a result that is not floating). Gives the
    result as `compute` gave it, its arrays, and the inputs that need a gradient."""
    needing = [x for x in args if isinstance(x, torch.Tensor) and x.requires_grad]
    if out is not None:
        raise out_with_grad()
    result = compute(tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in args))
    results = list(result) if isinstance(result, tuple) else [result]  # (values, indices), a state's values
    if not (results[0].is_floating_point() or results[0].is_complex()):
        raise GradientError(f"{name}: its result is {str(results[0].dtype).removeprefix('torch.')}, which cannot "
                            "carry a gradient (autograd supports floating-point results); pass a floating dtype= or "
                            "call it under torch.no_grad()")
    return result, results, needing
