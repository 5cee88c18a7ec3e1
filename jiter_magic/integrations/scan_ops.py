"""Scans as torch custom operators, so that torch.compile and torch.export see one operator
(torch_op_parts.py: what they share with reductions' operators).

A scan's operator is `torch.ops.jiter_magic.<name>_<digest>(x0, ..., k0, ..., dim, reverse,
exclusive, dtype)`: after the inputs and the extras, the scanned dim (normalized while tracing),
the flags and `dtype=` as a name. Its name is derived from what made the scan
(`ScanFunction.recipe`) and its backward (the callable pickled by reference,
`ScanFunction.backward_recipe`). Its autograd formula runs the user's backward callable
(arrays/scan_autograd.py's `ScanBackward`) on the inputs, the results and the gradients, with the
extras as the 0-d tensors the operator took; the jitted scans it calls are traced into operators
in turn.
"""
from __future__ import annotations

from functools import partial
from typing import Any

from torch._dynamo import assume_constant_result

from jiter_magic.arrays.scan_autograd import ScanBackward, no_backward
from jiter_magic.errors import GradientError
from jiter_magic.integrations import torch_op_parts as parts
from jiter_magic.integrations.kinds import requested_dtype
from jiter_magic.integrations.torch_ops import define_operator, registered_once
from jiter_magic.planning.scan_plan import scan_dim
from jiter_magic.runtime.scan_call import check_flag

# Part of every scan operator's name (as reduce_ops.SCHEMA): keeps their digests apart from the other kinds'.
SCHEMA = "scan-1"
OPTIONS = ["int dim", "bool reverse", "bool exclusive", "str? dtype"]


def scan_call(function: Any, inputs: tuple, options: dict[str, Any], kwargs: dict) -> Any:
    """`function(*inputs, dim=, reverse=, exclusive=, dtype=, out=, **kwargs)` as its torch operator
    (traceable by Dynamo)."""
    outs, tracked = parts.traced_checks(function, inputs, options, kwargs)
    if tracked and function.backward is None:
        raise no_backward(function.name)
    backward = function.backward_recipe
    if tracked and backward is None:
        raise GradientError(f"{function.name}: under torch.compile its backward {function.backward!r} names the "
                            "scan's operator, so it must be pickled by reference: define it with def at a module's "
                            "top level")
    dim = scan_dim(options["dim"], max(x.ndim for x in inputs))
    reverse, exclusive = check_flag(options["reverse"], "reverse"), check_flag(options["exclusive"], "exclusive")
    return parts.traced_result(function, inputs, outs, kwargs, scan_operator_name, backward,
                                  [dim, reverse, exclusive, requested_dtype(options)])


@assume_constant_result
def scan_operator_name(recipe: bytes, backward: bytes | None) -> str:
    """The operator of one scan, registered on first use (Dynamo records the name as a constant,
    as torch_ops.operator_name)."""
    return registered_once((SCHEMA, recipe, backward), lambda: parts.rebuilt(recipe, backward, "auto"), _register)


def register_scan_operators(function: Any) -> list[str]:
    """The operator of one scan, registered now."""
    return [scan_operator_name(function.recipe, function.backward_recipe)]


def _options(dim: int, reverse: bool, exclusive: bool, dtype: str | None) -> dict[str, Any]:
    return {"dim": dim, "reverse": reverse, "exclusive": exclusive, "dtype": dtype}


def _register(name: str, function: Any) -> None:
    define_operator(*parts.kind_operator(name, function, OPTIONS, _options, no_backward, partial(_formula, function)))


def _formula(function: Any, inputs: tuple, results: tuple, grads: tuple, extras: dict, options: tuple) -> Any:
    """The user's backward callable, given the scan's dim, reverse and exclusive."""
    return ScanBackward(function.name, function.backward, function.num_inputs, *options[:3])(
        *inputs, *results, *grads, **extras)
