"""Reductions as torch custom operators, so that torch.compile and torch.export see one operator.

As torch_ops.py does for elementwise functions, a traced call of a `ReductionFunction` becomes
`torch.ops.jiter_magic.<name>_<digest>(x0, ..., k0, ..., dims, keepdim, dtype)`: the inputs, the
map's extras as 0-d tensors (torch_extras.py says why), the reduced dims (normalized while
tracing), keepdim and `dtype=` as a name. It is registered once a process, under a name derived
from what made the function (`ReductionFunction.recipe`) and its backward's code:
- its CPU and CUDA kernels are the eager call;
- its fake implementation gives the result's shape and dtype from planning/reduce_result.py, the
  pure functions the call's own planning uses, dense as the eager call allocates it;
- its autograd formula runs the jitted backward (`fn.def_backward`) through the backward's own
  elementwise operator, on the inputs, the result and the gradient with the reduced dims kept
  as 1, and reduces each gradient as the eager backward does.
A traced call checks its arguments as the eager call does (a call on inputs requiring grad of a
reduction without backward, `out=` under autograd), and writes `out=` by copying the result. A
reduction with indices is an operator of two results (values, int64 indices), with no autograd
formula (it has no backward yet).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo import assume_constant_result

from jiter_magic.arrays.reduce_autograd import KeptDimsBackward
from jiter_magic.arrays.torch import DTYPE_OF
from jiter_magic.arrays.torch_autograd import input_gradient
from jiter_magic.errors import GradientError
from jiter_magic.integrations import torch_op_parts as parts
from jiter_magic.integrations.torch_extras import extra_as_graph_input
from jiter_magic.integrations.torch_ops import NAMESPACE, define_operator, operator_call, operator_name, registered_once
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.planning.reduce_layout import normalize_dims, reduced_shape
from jiter_magic.planning.reduce_result import reduction_result
from jiter_magic.runtime.keywords import check_kwarg_names
from jiter_magic.runtime.reduce_call import ValuesIndices, check_input_count, no_backward

# Part of every reduction operator's name (as torch_ops.SCHEMA_VERSION), and what keeps their
# digests apart from elementwise operators'.
SCHEMA = "reduction-1"


def reduction_call(function: Any, inputs: tuple, options: dict[str, Any], kwargs: dict) -> Any:
    """`function(*inputs, dim=, keepdim=, dtype=, out=, **kwargs)` as its torch operator (traceable by Dynamo)."""
    name = function.name
    indexed = function.binding.indexed
    check_input_count(function.binding, inputs)
    check_kwarg_names(kwargs, function.kwargs)
    outs = parts.out_tensors(function, options["out"])
    tracked = parts.traced_tracked(function, inputs, outs)
    if tracked and function.backward is None:
        raise no_backward(name, indexed)
    if tracked and indexed:
        raise GradientError(f"{name}: gradients of a reduction with indices under torch.compile are not supported "
                            "yet (its eager call has them); call it outside the compiled region, or under "
                            "torch.no_grad()")
    dims = normalize_dims(options["dim"], max(x.ndim for x in inputs))
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    values = {**function.kwargs, **kwargs}
    extras = [extra_as_graph_input(values[extra], extra, inputs[0]) for extra in function.binding.extra_names]
    backward = None if function.backward is None else function.backward.recipe
    operator = getattr(getattr(torch.ops, NAMESPACE), reduction_operator_name(function.recipe, backward))
    result = operator(*inputs, *extras, list(dims), bool(options["keepdim"]), requested)
    written = parts.write_out(outs, tuple(result) if indexed else (result,))
    return ValuesIndices(*written) if indexed else written[0]


@assume_constant_result
def reduction_operator_name(recipe: bytes, backward: bytes | None) -> str:
    """The operator of one reduction, registered on first use (Dynamo records the name as a
    constant, as torch_ops.operator_name)."""
    name = registered_once((SCHEMA, recipe, backward), lambda: parts.rebuilt(recipe, backward, "auto"), _register)
    if backward is not None:
        # The backward's operator too, now, as torch_ops.operator_name registers it: a compiled
        # backward loaded from torch's caches names it without tracing the call that registers it.
        # It takes tensors alone (inputs, result, gradient), so its variant takes numbers only
        # where the reduction has extras, which it takes too.
        operator_name(backward, None, "auto", False, bool(parts.made_of(recipe)[5]))
    return name


def register_reduction_operators(function: Any) -> list[str]:
    """The operator of one reduction, and its backward's, registered now."""
    backward = None if function.backward is None else function.backward.recipe
    return [reduction_operator_name(function.recipe, backward)]


def schema(name: str, num_inputs: int, num_extras: int, indexed: bool = False) -> str:
    """The inputs, the extras as 0-d tensors, the normalized reduced dims, keepdim and dtype= by name;
    one result, or values and indices."""
    return parts.operator_schema(name, num_inputs, num_extras, ["int[] dims", "bool keepdim", "str? dtype"],
                                 2 if indexed else 1)


def _register(name: str, function: Any) -> None:
    extras, indexed = len(function.binding.extra_names), function.binding.indexed
    # Extras are read on the host when the kernel runs (torch_ops.define_operator). With indices, no
    # backward yet: a traced call on inputs requiring grad is refused before the operator.
    define_operator(name, schema(name, function.num_inputs, extras, indexed), _kernel(function), _fake(function),
                    None if indexed else _autograd(function), bool(extras))


def _split(function: Any, args: tuple) -> tuple[tuple, tuple, list[int], bool, str | None]:
    """The operator's arguments: inputs, extras, dims, keepdim, dtype."""
    inputs, extras, (dims, keepdim, dtype) = parts.split(function, args)
    return inputs, extras, dims, keepdim, dtype


def _kernel(function: Any) -> Callable[..., Any]:
    """The eager call on the real tensors."""
    def run(*args: Any) -> Any:
        inputs, extras, dims, keepdim, dtype = _split(function, args)
        options = {"dim": tuple(dims), "keepdim": keepdim, "dtype": dtype, "out": None}
        result = function.eager(inputs, options, parts.extras_of(function, extras))
        return tuple(result) if function.binding.indexed else result  # an operator returns plain tuples

    return run


def _fake(function: Any) -> Callable[..., Any]:
    """The result as the eager call allocates it: dense, of the planned shape and dtype."""
    def result(*args: Any) -> Any:
        inputs, _, dims, keepdim, dtype = _split(function, args)
        parts.one_device(inputs)
        planned = reduction_result([parts.described(x).dtype for x in inputs], [tuple(x.shape) for x in inputs],
                                   "torch", list(dims), keepdim, dtype, function.identity, function.binding.indexed)
        values = inputs[0].new_empty(planned.out_shape, dtype=DTYPE_OF[planned.dtype])
        if function.binding.indexed:
            return values, inputs[0].new_empty(planned.out_shape, dtype=torch.int64)
        return values

    return result


def _autograd(function: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The operator's backward and setup_context (see the module docstring)."""
    count, names = function.num_inputs, function.binding.extra_names

    def remember(ctx: Any, inputs: tuple, output: Any) -> None:  # torch.library names the parameters
        arrays, extras, dims, _, _ = _split(function, inputs)
        ctx.save_for_backward(*arrays, *extras, output)
        shape = broadcast_shape([tuple(x.shape) for x in arrays])
        ctx.kept = reduced_shape(shape, tuple(dims), True)

    def backward(ctx: Any, grad: Any) -> tuple:
        gradient = function.backward
        if gradient is None:
            raise no_backward(function.name)
        saved = ctx.saved_tensors
        inputs, result = saved[:count], saved[-1]
        traced = KeptDimsBackward(lambda *args, **kw: operator_call(gradient, args, None, kw), ctx.kept)
        computed = traced(*inputs, result, grad, **dict(zip(names, saved[count:-1])))
        if not isinstance(computed, tuple):
            computed = (computed,)
        grads = [input_gradient(inputs[i], computed[i]) if ctx.needs_input_grad[i] else None for i in range(count)]
        return (*grads, *([None] * len(names)), None, None, None)

    return backward, remember
