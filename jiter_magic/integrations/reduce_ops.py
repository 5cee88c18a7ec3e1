"""Reductions as torch custom operators, so that torch.compile and torch.export see one operator
(torch_op_parts.py: what they share with scans' operators).

A reduction's operator is `torch.ops.jiter_magic.<name>_<digest>(x0, ..., k0, ..., dims, keepdim,
dtype)`: after the inputs and the extras, the reduced dims (normalized while tracing), keepdim and
`dtype=` as a name. Its name is derived from what made the function (`ReductionFunction.recipe`)
and its backward's code. Its autograd formula runs the jitted backward (`fn.def_backward`)
through the backward's own elementwise operator, on the inputs, the result and the gradient with
the reduced dims kept as 1, and reduces each gradient as the eager backward does. A traced call
refuses, as the eager call does, a call on inputs requiring grad of a reduction without backward.
A reduction with indices is an operator of two results (values, int64 indices), with no autograd
formula (it has no backward yet).
"""
from __future__ import annotations

from functools import partial
from typing import Any

from torch._dynamo import assume_constant_result

from jiter_magic.arrays.reduce_autograd import KeptDimsBackward
from jiter_magic.errors import GradientError
from jiter_magic.integrations import torch_op_parts as parts
from jiter_magic.integrations.kinds import requested_dtype
from jiter_magic.integrations.torch_ops import define_operator, operator_call, operator_name, registered_once
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.planning.reduce_layout import normalize_dims, reduced_shape
from jiter_magic.planning.reduce_result import check_flag
from jiter_magic.runtime.reduce_call import no_backward

# Part of every reduction operator's name (as torch_ops.SCHEMA_VERSION), and what keeps their
# digests apart from elementwise operators'.
SCHEMA = "reduction-1"
OPTIONS = ["int[] dims", "bool keepdim", "str? dtype"]


def reduction_call(function: Any, inputs: tuple, options: dict[str, Any], kwargs: dict) -> Any:
    """`function(*inputs, dim=, keepdim=, dtype=, out=, **kwargs)` as its torch operator (traceable by Dynamo)."""
    name, indexed = function.name, function.binding.indexed
    outs, tracked = parts.traced_checks(function, inputs, options, kwargs)
    if tracked and function.backward is None:
        raise no_backward(name, indexed)
    if tracked and indexed:
        raise GradientError(f"{name}: gradients of a reduction with indices under torch.compile are not supported "
                            "yet (its eager call has them); call it outside the compiled region, or under "
                            "torch.no_grad()")
    dims = normalize_dims(options["dim"], max(x.ndim for x in inputs))
    backward = None if function.backward is None else function.backward.recipe
    return parts.traced_result(function, inputs, outs, kwargs, reduction_operator_name, backward,
                                  [list(dims), check_flag(options["keepdim"], "keepdim"), requested_dtype(options)])


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


def _options(dims: list[int], keepdim: bool, dtype: str | None) -> dict[str, Any]:
    return {"dim": tuple(dims), "keepdim": keepdim, "dtype": dtype}


def _register(name: str, function: Any) -> None:
    # With indices, no backward yet: a traced call on inputs requiring grad is refused before the operator.
    formula = None if function.binding.indexed else partial(_formula, function)
    define_operator(*parts.kind_operator(name, function, OPTIONS, _options, no_backward, formula))


def _formula(function: Any, inputs: tuple, results: tuple, grads: tuple, extras: dict, options: tuple) -> Any:
    """The jitted backward through its own operator, given the gradient with the reduced dims kept as 1."""
    kept = reduced_shape(broadcast_shape([tuple(x.shape) for x in inputs]), tuple(options[0]), True)
    traced = KeptDimsBackward(lambda *args, **kw: operator_call(function.backward, args, None, kw), kept)
    return traced(*inputs, *results, *grads, **extras)
