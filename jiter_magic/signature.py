"""The Python signature and docstring of a jitted function, built from its code string.

So that `fn?`, Shift+Tab, `help(fn)` and IPython's keyword completion show what a call takes:
the inputs by name (positional only: a call passes arrays in order), then each extra as a
keyword with its default, then `out=`.
"""
from __future__ import annotations

import inspect
import keyword

from .bind import Binding

_GENERIC = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                              inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None),
                              inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


def _python_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def signature_of(binding: Binding, kwargs: dict[str, object]) -> inspect.Signature:
    """`(x, y, /, *, alpha=1.0, out=None)`; the generic `(*args, out=None, **kwargs)` when a C++
    parameter name is no Python name (`in`, `from`, ...)."""
    names = (*binding.input_names, *binding.extra_names)
    if not all(_python_name(name) for name in names):
        return _GENERIC
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_ONLY) for name in binding.input_names]
    parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=kwargs[name])
                   for name in binding.extra_names]
    parameters.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
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
