"""Which names `%%jiterator NAME` may bind a function to.

The magic pushes the function into the notebook's namespace, where a name that Python or IPython
itself uses would shadow it in every later cell: `%%jiterator __builtins__` breaks every name
lookup, `%%jiterator print` every print, `%%jiterator Out` the output history. So NAME must be a
Python identifier that is none of those; the rule is here, apart from the magic, so that it is
read and tested as one thing.
"""
from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Container

# IPython's own names in a notebook's namespace, those of a shell not running too (`user_ns_hidden`
# of the running shell adds any others): the history (In, Out, _ih, _oh, _dh), the shell, and the
# names IPython puts among the builtins while a cell runs (display, get_ipython, exit, quit).
IPYTHON_NAMES = frozenset({"In", "Out", "_ih", "_oh", "_dh", "get_ipython", "display", "exit", "quit", "open"})

# The output and input history's names: _, __, ___, _1, _i, _ii, _iii, _i1, ...
_HISTORY = re.compile(r"_+|_\d+|_i+|_i\d+")

EXPECTED = ("expected a Python identifier that is no keyword, builtin, dunder name or IPython name "
            "(In, Out, get_ipython, exit, quit, display, _, _1, _i, ...), e.g. my_kernel")


def refusal(name: str, ipython_names: Container[str] = frozenset()) -> str | None:
    """Why `%%jiterator` must not bind a function to `name`, or None when it may.
    `ipython_names`: the running shell's own names (its `user_ns_hidden`)."""
    if not name.isidentifier():
        why = "is not a Python identifier"
    elif keyword.iskeyword(name):
        why = "is a Python keyword"
    elif name in IPYTHON_NAMES or name in ipython_names or _HISTORY.fullmatch(name):
        why = "is one of IPython's own names; binding it would break the shell in every later cell"
    elif name.startswith("__") and name.endswith("__"):
        why = "is a dunder name, which Python itself uses (binding __builtins__ breaks every later cell)"
    elif hasattr(builtins, name):
        why = f"is a Python builtin; binding it would shadow {name} in every later cell"
    else:
        return None
    return f"%%jiterator {name}: {name!r} {why}; {EXPECTED}"


def bound_name(fn: object, namespace: dict[str, object] | None = None) -> str | None:
    """The notebook name `fn` is bound to (`sum_sq = create_reduction_fn(...)`, `%%jiterator sum_sq`),
    which a panel is titled by: the newest public name of `namespace` (by default the running
    IPython's) that holds `fn`; None outside IPython or where no public name holds it."""
    if namespace is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython is a notebook dependency
            return None
        shell = get_ipython()
        namespace = getattr(shell, "user_ns", None)
        if namespace is None:
            return None
    found = [name for name, value in list(namespace.items()) if value is fn and not name.startswith("_")]
    return found[-1] if found else None
