"""The Python signature and docstring of a jitted function, built from its code string.

So that `fn?`, Shift+Tab, `help(fn)` and IPython's keyword completion show what a call takes:
the inputs by name (positional only: a call passes arrays in order), then each extra as a
keyword with its default, then `out=`.
"""
from __future__ import annotations

import keyword
from typing import TYPE_CHECKING, Any

from jiter_magic.frontend.bind import Binding

if TYPE_CHECKING:
    import inspect


class LazySignature:
    """`__signature__` made on first use (`inspect` costs a new process 10 ms to import, and
    only help and completion ask). The owner holds `binding` and `kwargs`; on the class itself it
    is None, so that `inspect.signature(JitFunction)` reads the class's own."""

    def __get__(self, owner: Any, owner_type: type | None = None) -> inspect.Signature | None:
        if owner is None:
            return None
        found = signature_of(owner.binding, owner.kwargs)
        owner.__dict__["__signature__"] = found  # later reads find it there, before this descriptor
        # IPython's Shift+Tab shows this signature and, for a callable object, a second "Call
        # signature" read off its class's `__call__` (the generic `(*args, out=None, **kwargs)`).
        # A `__call__` of each object's own would carry the right one, but Dynamo cannot trace it;
        # an empty signature on the class's makes `inspect.signature(fn.__call__)` refuse (a
        # method without `self`), and IPython then shows the one signature above.
        vars(type(owner))["__call__"].__signature__ = type(found)()
        return found


def signature_of(binding: Binding, kwargs: dict[str, object]) -> inspect.Signature:
    """`(x, y, /, *, alpha=1.0, out=None)`; the generic `(*args, out=None, **kwargs)` when a C++
    parameter name is no Python name (`in`, `from`, ...)."""
    import inspect

    Parameter = inspect.Parameter
    names = (*binding.input_names, *binding.extra_names)
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        return inspect.Signature([Parameter("args", Parameter.VAR_POSITIONAL),
                                  Parameter("out", Parameter.KEYWORD_ONLY, default=None),
                                  Parameter("kwargs", Parameter.VAR_KEYWORD)])
    parameters = [Parameter(name, Parameter.POSITIONAL_ONLY) for name in binding.input_names]
    parameters += [Parameter(name, Parameter.KEYWORD_ONLY, default=kwargs[name]) for name in binding.extra_names]
    parameters.append(Parameter("out", Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(parameters)


def docstring_of(binding: Binding, kwargs: dict[str, object]) -> str:
    """What the function computes and takes, then its C++ source."""
    functor = binding.functor
    inputs = ", ".join(binding.input_names)
    outputs = binding.num_outputs
    lines = [
        f"Jitted elementwise function {functor.name} (jiter_magic), from the C++ functor below.",
        "",
        f"Inputs: {inputs} (arrays of one library, torch, NumPy or CuPy, broadcast together, or Python "
        "numbers).",
    ]
    if binding.extra_names:
        extras = ", ".join(f"{name}={kwargs[name]!r}" for name in binding.extra_names)
        lines.append(f"Keyword arguments (scalars, defaults given at creation): {extras}.")
    returned = "one array" if outputs == 1 else f"a tuple of {outputs} arrays ({', '.join(binding.output_names)})"
    lines += [
        f"Returns {returned}; out= writes into preallocated arrays instead.",
        "",
        "C++ source:",
        "",
        *("    " + line for line in functor.code.strip("\n").splitlines()),
    ]
    return "\n".join(lines)
