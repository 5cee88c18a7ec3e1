"""A traced call's numbers (extras and Python-number inputs) travel into its torch operator as
0-d tensors, graph inputs.

A Python float that a compiled function takes as an argument reaches the traced call as a
symbolic float (Dynamo turns float arguments into tensors and reads them with `.item()`). An
operator argument of schema type `Scalar` cannot take one: Inductor's pass that turns such
floats back into tensor arithmetic does not know a custom operator, so it specializes the float,
a guard on its value, and every new value recompiles the graph (the eighth hits torch's
recompile limit and the function falls back to eager). A 0-d tensor argument is a graph input
like any other: one graph serves every value. So each number becomes a 0-d tensor of the kind a
Python number travels as (bool, int64, float64, complex128), made in the graph, and the
operator's kernel reads it back as the Python number the eager call takes. An input's kind is
part of the operator's pattern (a letter: b, i, f, c; t for a tensor), as it decides promotion.
A 1-element tensor given as an extra, which the eager call `.item()`s, is passed as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from jiter_magic.errors import DTypeError
from jiter_magic.planning.values import scalar_value

_KIND_OF_NUMBER = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128,
                   torch.SymBool: torch.bool, torch.SymInt: torch.int64, torch.SymFloat: torch.float64}
LETTERS = {torch.bool: "b", torch.int64: "i", torch.float64: "f", torch.complex128: "c"}
STAND_INS = {"b": True, "i": 0, "f": 0.0, "c": 0j}  # a number of each kind, for promotion


@dataclass(frozen=True)
class GraphNumber:
    """A Python-number input of a traced call: the 0-d tensor its operator takes, and its kind."""

    tensor: torch.Tensor
    letter: str


def _kind_of_tensor(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.bool:
        return torch.bool
    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return torch.int64


def _number_tensor(value: Any, name: str, anchor: torch.Tensor) -> torch.Tensor:
    """`value` as a 0-d tensor on the CPU (the kernel reads it without waiting for a GPU), made
    from `anchor`, a tensor input, so that it is of the same kind (fake, functional) as the inputs."""
    kind = _KIND_OF_NUMBER.get(type(value))
    if kind is None:  # a NumPy scalar, say: as the eager call takes it
        value = scalar_value(value, name)
        kind = _KIND_OF_NUMBER[type(value)]
    elif type(value) is int:
        scalar_value(value, name)  # an int beyond int64_t raises ScalarOverflowError, as eagerly
    if kind == torch.float64:
        # `1.0 * value` (exact, -0.0 and NaN included) rather than a tensor filled with it: the
        # pass that turns a symbolic float back into a tensor knows a product, not a fill.
        return anchor.new_ones((), dtype=kind, device="cpu") * value
    return anchor.new_full((), value, dtype=kind, device="cpu")


def extra_as_graph_input(value: Any, name: str, anchor: torch.Tensor) -> torch.Tensor:
    """An extra's value as the 0-d tensor its operator takes; refused as the eager call refuses it."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad and torch.is_grad_enabled():
            scalar_value(value, name)  # raises GradientError, with the eager call's message
        if value.numel() != 1:
            raise DTypeError(f"argument {name!r} must be a bool, int, float or complex (or a 1-element array), "
                             f"got a tensor of shape {tuple(value.shape)}")
        return value.detach().reshape(()).to(_kind_of_tensor(value.dtype))
    return _number_tensor(value, name, anchor)


def extras_as_graph_inputs(function: Any, kwargs: dict, anchor: torch.Tensor) -> list[torch.Tensor]:
    """A call's extras (its keywords over the function's defaults) in the map's order, as 0-d tensors."""
    values = {**function.kwargs, **kwargs}
    return [extra_as_graph_input(values[extra], extra, anchor) for extra in function.binding.extra_names]


def input_as_graph_input(value: Any, name: str, anchor: torch.Tensor) -> torch.Tensor | GraphNumber:
    """An input as its operator takes it: a tensor as it is, a number as a `GraphNumber`."""
    if isinstance(value, (torch.Tensor, GraphNumber)):
        return value
    tensor = _number_tensor(value, name, anchor)
    return GraphNumber(tensor, LETTERS[tensor.dtype])


def as_python_number(value: Any) -> Any:
    """What the operator's kernel got for a number, as the Python number the eager call takes."""
    return value.item() if isinstance(value, torch.Tensor) else value
