"""What the torch operators of every kind share (torch_ops.py registers them): the operator's
schema, the function it stands for rebuilt, its extras, its inputs' device and dtypes, the
results' gradients; and what a reduction's operator shares with a scan's (reduce_ops.py and
scan_ops.py give what differs: their options, their checks under autograd, their gradient formula).

A reduction's or scan's operator takes its inputs (tensors only), its extras as 0-d tensors
(torch_extras.py), then the kind's options (normalized while tracing, `dtype=` as a name), and
writes no `out=`: a traced call checks its arguments as the eager call does and copies the
results into `out=`. Its kernels are the eager call; its fake gives the results' shapes and
dtypes from planning (kinds.py), the pure functions the call's own planning uses, dense as the
eager call allocates them.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import torch

from jiter_magic.arrays.torch import DTYPE_OF, NAME_OF
from jiter_magic.arrays.torch_autograd import input_gradient, out_with_grad
from jiter_magic.errors import ArgumentTypeError, DeviceError, DTypeError, ShapeError
from jiter_magic.integrations.kinds import as_results, planned, result_dtypes, result_shape
from jiter_magic.integrations.torch_extras import as_python_number, extras_as_graph_inputs
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.runtime.keywords import check_kwarg_names
from jiter_magic.runtime.reduce_call import check_input_count

NAMESPACE = "jiter_magic"
OptionsOf = Callable[..., dict[str, Any]]  # a kind's eager options (but `out=`) from its operator's
Autograd = tuple[Callable[..., Any], Callable[..., Any]]  # an operator's backward and setup_context
OperatorParts = tuple[str, str, Callable[..., Any], Callable[..., Any], Autograd | None, bool]  # define_operator's


def operator_named(name: str) -> Any:
    """The registered operator `torch.ops.jiter_magic.<name>`."""
    return getattr(getattr(torch.ops, NAMESPACE), name)


def made_of(recipe: bytes) -> tuple:
    """What a function's `recipe` says it is made of (its maker's arguments, in the maker's order)."""
    return pickle.loads(recipe)[1]  # noqa: S301 - our own bytes, made in this process


def rebuilt(recipe: bytes, backward: bytes | None, backend: str) -> Any:
    """The function that `recipe` (`fn.recipe` of any kind: its maker and what it is made of,
    pickled) stands for, with `backend` and the backward that `backward` (the backward's recipe)
    stands for. The maker comes by name with the bytes, so no integration imports a kind's module."""
    maker, made = pickle.loads(recipe)  # noqa: S301 - our own bytes, made in this process
    return maker(*made, backend=backend, backward=None if backward is None else made_of(backward)[0])


def operator_schema(name: str, num_inputs: int, num_extras: int, options: list[str], num_results: int) -> str:
    """An operator's schema: the inputs in the function's order, then its extras, all tensors
    (numbers as 0-d ones, torch_extras.py says why; positional, as torch.library's autograd wants
    tensors), then the kind's `options` as schema parameters; `num_results` tensors (none: `()`)."""
    params = [f"Tensor x{i}" for i in range(num_inputs)] + [f"Tensor k{i}" for i in range(num_extras)]
    returns = "Tensor" if num_results == 1 else f"({', '.join(['Tensor'] * num_results)})"
    return f"{name}({', '.join([*params, *options])}) -> {returns}"


def split(function: Any, args: tuple) -> tuple[tuple, tuple, tuple]:
    """A reduction's or scan's operator arguments: its inputs, its extras and the kind's options."""
    count, extras = function.num_inputs, len(function.binding.extra_names)
    return args[:count], args[count:count + extras], args[count + extras:]


def traced_tracked(function: Any, inputs: tuple, outs: list) -> bool:
    """Whether autograd tracks a traced call of a reduction or scan, its arguments checked as the
    eager call checks them: tensor inputs, no `out=` under autograd."""
    for x in inputs:
        if not isinstance(x, torch.Tensor):
            raise ArgumentTypeError(f"{function.name}: traced by torch, the inputs of a {function.operation} are "
                                    f"torch tensors, got {type(x).__name__}")
    tracked = torch.is_grad_enabled() and any(x.requires_grad for x in inputs)
    if outs and (tracked or (torch.is_grad_enabled() and any(o.requires_grad for o in outs))):
        raise out_with_grad()
    return tracked


def out_tensors(function: Any, out: Any) -> list:
    """`out=` of a traced reduction or scan as a list of tensors: none, or one a result."""
    if out is None:
        return []
    count = function.num_outputs
    if count == 1 and not function.binding.tupled:
        given = [out]
    elif isinstance(out, (tuple, list)) and len(out) == count:  # a tuple of one too: a scan returning one value
        given = list(out)
    else:
        what = "a (values, indices) pair" if function.binding.indexed else f"a tuple of {count}"
        raise ArgumentTypeError(f"{function.name} gives {count} results: out= takes {what} of tensors, got "
                                f"{type(out).__name__}")
    for tensor in given:
        if not isinstance(tensor, torch.Tensor):
            raise ArgumentTypeError(f"out= must be a torch tensor like the inputs, got {type(tensor).__name__}")
    return given


def write_out(outs: list, results: tuple) -> tuple:
    """The operator's results copied into `out=` (checked as the eager call checks it); the tensors
    the call returns."""
    for given, made in zip(outs, results):
        if given.shape != made.shape:
            raise ShapeError(f"out= has shape {tuple(given.shape)}, but the result has shape {tuple(made.shape)}")
        if given.dtype != made.dtype:
            names = [str(t.dtype).removeprefix("torch.") for t in (given, made)]
            raise DTypeError(f"out= has dtype {names[0]}, but the result is {names[1]}; pass dtype={names[0]} to "
                             f"compute into it, or an out= of dtype {names[1]}")
        given.copy_(made)
    return tuple(outs) if outs else results


def extras_of(function: Any, extras: tuple) -> dict:
    """The operator's extras by the function's names, keeping only those that differ from the
    defaults, so that a call with none goes through the hot path."""
    defaults = function.kwargs
    given = {extra: as_python_number(value) for extra, value in zip(function.binding.extra_names, extras)}
    return {n: v for n, v in given.items() if type(v) is not type(defaults[n]) or v != defaults[n]}


def one_device(tensors: list | tuple) -> torch.device:
    """The device the inputs of a traced call share (an operator's fake checks it as the call would)."""
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        raise DeviceError(f"inputs live on different devices ({', '.join(str(t.device) for t in tensors)}); "
                          "move them to one device")
    return device


def described(x: torch.Tensor) -> ArrayDesc:
    try:
        name = NAME_OF[x.dtype]
    except KeyError:
        raise DTypeError(f"torch dtype {x.dtype} is not supported by jiter_magic") from None
    return ArrayDesc(name, tuple(x.shape), tuple(x.stride()), 0)


def remember_results(ctx: Any, output: Any) -> tuple:
    """An operator's results as a tuple, their shapes, dtypes and devices kept for `filled`."""
    results = tuple(output) if isinstance(output, (tuple, list)) else (output,)
    ctx.result_meta = [(r.shape, r.dtype, r.device) for r in results]
    return results


def filled(ctx: Any, grads: tuple) -> tuple:
    """The results' gradients, zeros where autograd gives None (a result the loss does not use)."""
    return tuple(torch.zeros(shape, dtype=dtype, device=device) if g is None else g
                 for g, (shape, dtype, device) in zip(grads, ctx.result_meta))


def traced_checks(function: Any, inputs: tuple, options: dict[str, Any], kwargs: dict) -> tuple[list, bool]:
    """`out=` as a list of tensors, and whether autograd tracks the call, checked as the eager call checks them."""
    check_input_count(function.binding, inputs)
    check_kwarg_names(kwargs, function.kwargs)
    outs = out_tensors(function, options["out"])
    return outs, traced_tracked(function, inputs, outs)


def traced_result(function: Any, inputs: tuple, outs: list, kwargs: dict, operator_name: Callable[..., str],
                  backward: bytes | None, options: list) -> Any:
    """The call of the function's operator (`operator_name(recipe, backward)`, which registers it)
    on the inputs, the extras and the kind's `options`; its results copied into `out=` where given."""
    extras = extras_as_graph_inputs(function, kwargs, inputs[0])
    result = operator_named(operator_name(function.recipe, backward))(*inputs, *extras, *options)
    return as_results(function, write_out(outs, tuple(result) if function.num_outputs > 1 else (result,)))


def kind_operator(name: str, function: Any, schema_options: list[str], options_of: OptionsOf,
                  no_backward: Callable[[str], Exception], formula: Callable[..., Any] | None) -> OperatorParts:
    """A reduction's or scan's operator `name` as torch_ops.define_operator takes it: its schema
    (`schema_options` the kind's options), kernel and fake (`options_of` makes the eager call's
    options from the operator's), its autograd (`kind_autograd`; none without a `formula`) and
    whether it takes numbers (extras are read on the host when the kernel runs)."""
    extras = len(function.binding.extra_names)
    schema = operator_schema(name, function.num_inputs, extras, schema_options, function.num_outputs)
    autograd = None if formula is None else kind_autograd(function, no_backward, formula)
    return name, schema, _kind_kernel(function, options_of), _kind_fake(function, options_of), autograd, bool(extras)


def _kind_kernel(function: Any, options_of: OptionsOf) -> Callable[..., Any]:
    """The eager call on the real tensors."""
    def run(*args: Any) -> Any:
        inputs, extras, given = split(function, args)
        result = function.eager(inputs, {**options_of(*given), "out": None}, extras_of(function, extras))
        found = tuple(result) if isinstance(result, tuple) else (result,)
        return found if len(found) > 1 else found[0]  # an operator returns plain tuples, one result as itself

    return run


def _kind_fake(function: Any, options_of: OptionsOf) -> Callable[..., Any]:
    """The results as the eager call allocates them: dense, of the planned shape and dtypes."""
    def results(*args: Any) -> Any:
        inputs, _, given = split(function, args)
        one_device(inputs)
        plan = planned(function, options_of(*given), [described(x).dtype for x in inputs],
                       [tuple(x.shape) for x in inputs], "torch")
        made = tuple(inputs[0].new_empty(result_shape(plan), dtype=DTYPE_OF[d]) for d in result_dtypes(function, plan))
        return made if len(made) > 1 else made[0]

    return results


def kind_autograd(function: Any, no_backward: Callable[[str], Exception],
                  formula: Callable[..., Any]) -> Autograd:
    """A reduction's or scan's backward and setup_context: its inputs, extras and results saved;
    `formula(inputs, results, grads, extras, options)` (the kind's, given the results' gradients,
    zeros where autograd gives None) gives one gradient an input, reduced as the eager backward does."""
    count, names = function.num_inputs, function.binding.extra_names

    def remember(ctx: Any, inputs: tuple, output: Any) -> None:  # torch.library names the parameters
        arrays, extras, ctx.options = split(function, inputs)
        ctx.save_for_backward(*arrays, *extras, *remember_results(ctx, output))

    def backward(ctx: Any, *grads: Any) -> tuple:
        if function.backward is None:
            raise no_backward(function.name)
        saved = ctx.saved_tensors
        inputs, extras, results = saved[:count], saved[count:count + len(names)], saved[count + len(names):]
        computed = formula(inputs, results, filled(ctx, grads), dict(zip(names, extras)), ctx.options)
        computed = computed if isinstance(computed, tuple) else (computed,)
        gradients = [input_gradient(inputs[i], computed[i]) if ctx.needs_input_grad[i] and computed[i] is not None
                     else None for i in range(count)]
        return (*gradients, *([None] * (len(names) + len(ctx.options))))

    return backward, remember
