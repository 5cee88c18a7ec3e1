"""Scans as torch custom operators, so that torch.compile and torch.export see one operator.

As reduce_ops.py does for reductions, a traced call of a `ScanFunction` becomes
`torch.ops.jiter_magic.<name>_<digest>(x0, ..., k0, ..., dim, reverse, exclusive, dtype)`: the
inputs, the map's extras as 0-d tensors (torch_extras.py says why: one graph serves every value),
the scanned dim (normalized while tracing), the flags and `dtype=` as a name. It is registered
once a process, under a name derived from what made the scan (`ScanFunction.recipe`) and its
backward (the callable pickled by reference, `ScanFunction.backward_recipe`):
- its CPU and CUDA kernels are the eager call;
- its fake implementation gives the results' shape and dtype from planning/scan_plan.py, the pure
  functions the call's own planning uses, dense as the eager call allocates them;
- its autograd formula runs the user's backward callable (arrays/scan_autograd.py's
  `ScanBackward`) on the inputs, the results and the gradients, with the extras as the 0-d
  tensors the operator took; the jitted scans it calls are traced into operators in turn.
A traced call checks its arguments as the eager call does and writes `out=` by copying the results.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo import assume_constant_result

from jiter_magic.arrays.scan_autograd import ScanBackward, no_backward
from jiter_magic.arrays.torch import DTYPE_OF
from jiter_magic.arrays.torch_autograd import input_gradient
from jiter_magic.errors import GradientError
from jiter_magic.integrations import torch_op_parts as parts
from jiter_magic.integrations.torch_extras import extra_as_graph_input
from jiter_magic.integrations.torch_ops import NAMESPACE, define_operator, registered_once
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.scan_plan import scan_dim, scan_result
from jiter_magic.runtime.keywords import check_kwarg_names
from jiter_magic.runtime.reduce_call import ValuesIndices, check_input_count
from jiter_magic.runtime.scan_call import check_flag

# Part of every scan operator's name (as reduce_ops.SCHEMA): keeps their digests apart from the other kinds'.
SCHEMA = "scan-1"
OPTIONS = ["int dim", "bool reverse", "bool exclusive", "str? dtype"]


def scan_call(function: Any, inputs: tuple, options: dict[str, Any], kwargs: dict) -> Any:
    """`function(*inputs, dim=, reverse=, exclusive=, dtype=, out=, **kwargs)` as its torch operator
    (traceable by Dynamo)."""
    check_input_count(function.binding, inputs)
    check_kwarg_names(kwargs, function.kwargs)
    outs = parts.out_tensors(function, options["out"])
    tracked = parts.traced_tracked(function, inputs, outs)
    if tracked and function.backward is None:
        raise no_backward(function.name)
    backward = function.backward_recipe
    if tracked and backward is None:
        raise GradientError(f"{function.name}: under torch.compile its backward {function.backward!r} names the "
                            "scan's operator, so it must be pickled by reference: define it with def at a module's "
                            "top level")
    dim = scan_dim(options["dim"], max(x.ndim for x in inputs))
    reverse, exclusive = check_flag(options["reverse"], "reverse"), check_flag(options["exclusive"], "exclusive")
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    values = {**function.kwargs, **kwargs}
    extras = [extra_as_graph_input(values[extra], extra, inputs[0]) for extra in function.binding.extra_names]
    operator = getattr(getattr(torch.ops, NAMESPACE), scan_operator_name(function.recipe, backward))
    result = operator(*inputs, *extras, dim, reverse, exclusive, requested)
    written = parts.write_out(outs, tuple(result) if function.num_outputs > 1 else (result,))
    if function.binding.indexed:
        return ValuesIndices(*written)
    return written if function.num_outputs > 1 else written[0]


@assume_constant_result
def scan_operator_name(recipe: bytes, backward: bytes | None) -> str:
    """The operator of one scan, registered on first use (Dynamo records the name as a constant,
    as torch_ops.operator_name)."""
    return registered_once((SCHEMA, recipe, backward), lambda: parts.rebuilt(recipe, backward, "auto"), _register)


def register_scan_operators(function: Any) -> list[str]:
    """The operator of one scan, registered now."""
    return [scan_operator_name(function.recipe, function.backward_recipe)]


def _register(name: str, function: Any) -> None:
    extras = len(function.binding.extra_names)
    # Extras are read on the host when the kernel runs (torch_ops.define_operator).
    define_operator(name, parts.operator_schema(name, function.num_inputs, extras, OPTIONS, function.num_outputs),
                    _kernel(function), _fake(function), _autograd(function), bool(extras))


def _kernel(function: Any) -> Callable[..., Any]:
    """The eager call on the real tensors."""
    def run(*args: Any) -> Any:
        inputs, extras, (dim, reverse, exclusive, dtype) = parts.split(function, args)
        options = {"dim": dim, "reverse": reverse, "exclusive": exclusive, "dtype": dtype, "out": None}
        result = function.eager(inputs, options, parts.extras_of(function, extras))
        return tuple(result) if function.num_outputs > 1 else result  # an operator returns plain tuples

    return run


def _fake(function: Any) -> Callable[..., Any]:
    """The results as the eager call allocates them: dense, of the planned shape and dtype."""
    binding = function.binding

    def results(*args: Any) -> Any:
        inputs, _, (dim, _, _, dtype) = parts.split(function, args)
        parts.one_device(inputs)
        planned = scan_result([parts.described(x).dtype for x in inputs], [tuple(x.shape) for x in inputs], "torch",
                              dim, dtype, function.identity, binding.indexed)
        dtypes = [planned.dtype, "int64"] if binding.indexed else [planned.dtype] * binding.outputs
        made = tuple(inputs[0].new_empty(planned.shape, dtype=DTYPE_OF[d]) for d in dtypes)
        return made if len(made) > 1 else made[0]

    return results


def _autograd(function: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The operator's backward and setup_context (see the module docstring)."""
    count, names = function.num_inputs, function.binding.extra_names

    def remember(ctx: Any, inputs: tuple, output: Any) -> None:  # torch.library names the parameters
        arrays, extras, (dim, reverse, exclusive, _) = parts.split(function, inputs)
        results = tuple(output) if isinstance(output, (tuple, list)) else (output,)
        ctx.save_for_backward(*arrays, *extras, *results)
        ctx.options = (dim, reverse, exclusive)
        ctx.result_meta = [(r.shape, r.dtype, r.device) for r in results]

    def backward(ctx: Any, *grads: Any) -> tuple:
        if function.backward is None:
            raise no_backward(function.name)
        saved = ctx.saved_tensors
        inputs, extras, results = saved[:count], saved[count:count + len(names)], saved[count + len(names):]
        grads = tuple(torch.zeros(shape, dtype=dtype, device=device) if g is None else g
                      for g, (shape, dtype, device) in zip(grads, ctx.result_meta))
        computed = ScanBackward(function.name, function.backward, count, *ctx.options)(
            *inputs, *results, *grads, **dict(zip(names, extras)))
        gradients = [input_gradient(inputs[i], computed[i]) if ctx.needs_input_grad[i] and computed[i] is not None
                     else None for i in range(count)]
        return (*gradients, *([None] * len(names)), None, None, None, None)

    return backward, remember
