"""Bind the entry function's parameters to inputs, extra arguments and outputs, by name.

torch's jiterator ignores the C++ parameter list and passes extra arguments in kwargs
order, so a reordered kwargs dict silently computes the wrong thing. Here each kwarg must
name a parameter; the other value parameters are the array inputs, in declaration order,
and non-const reference parameters are the outputs of the multi-output form.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.errors import BindError
from jiter_magic.frontend.parse import Functor

INPUT, EXTRA, OUTPUT = "input", "extra", "output"
RESERVED = frozenset({"out"})


class Binding(NamedTuple):
    functor: Functor
    roles: tuple[tuple[str, int], ...]  # for each parameter in order: (role, index within role)
    input_names: tuple[str, ...]
    extra_names: tuple[str, ...]  # in declaration order
    output_names: tuple[str, ...]
    returns_value: bool  # the single output is the return value

    @property
    def name(self) -> str:
        """The function's name: its entry functor's."""
        return self.functor.name

    @property
    def code(self) -> str:
        """The user's code string."""
        return self.functor.code

    @property
    def num_inputs(self) -> int:
        return len(self.input_names)

    @property
    def num_outputs(self) -> int:
        return len(self.output_names) if not self.returns_value else 1


def bind(functor: Functor, kwarg_names: list[str], num_outputs: int | None) -> Binding:
    """Assign roles to parameters; `num_outputs=None` is the single-output form of create_jit_fn."""
    names = [p.name for p in functor.parameters]
    listing = functor.signature
    for kw in kwarg_names:
        if kw in RESERVED:
            raise BindError(f"'{kw}' is reserved for the output arrays of a call; "
                            f"rename that parameter of {functor.name}")
        if kw not in names:
            raise BindError(
                f"keyword argument {kw!r} names no parameter of the entry function; "
                f"its parameters are {names} ({listing})"
            )
    refs = [p.name for p in functor.parameters if p.is_reference]
    for kw in kwarg_names:
        if kw in refs:
            raise BindError(f"keyword argument {kw!r} names an output (a reference parameter) of {listing}")
    if num_outputs is None:
        if functor.returns_value:
            if refs:
                raise BindError(
                    f"{functor.name} returns a value and also takes reference outputs {refs}; "
                    "use create_multi_output_jit_fn for functions that write outputs through references"
                )
            returns_value = True
        elif len(refs) == 1:
            returns_value = False
        else:
            raise BindError(
                f"the entry function must return a value (it is declared '{functor.return_type}'): {listing}"
            )
    else:
        if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 1:
            raise BindError(f"num_outputs must be a positive int, got {num_outputs!r}")
        if len(refs) != num_outputs:
            raise BindError(
                f"num_outputs={num_outputs}, but {functor.name} declares {len(refs)} reference output "
                f"parameter(s) {refs}; outputs are written through non-const references such as 'T& out0'"
            )
        returns_value = False
    roles: list[tuple[str, int]] = []
    inputs: list[str] = []
    extras: list[str] = []
    outputs: list[str] = []
    for p in functor.parameters:
        if p.is_reference:
            roles.append((OUTPUT, len(outputs)))
            outputs.append(p.name)
        elif p.name in kwarg_names:
            roles.append((EXTRA, len(extras)))
            extras.append(p.name)
        else:
            roles.append((INPUT, len(inputs)))
            inputs.append(p.name)
    if not inputs:
        raise BindError(f"{listing} has no input parameter left once the keyword arguments are bound")
    return Binding(functor, tuple(roles), tuple(inputs), tuple(extras), tuple(outputs), returns_value)
