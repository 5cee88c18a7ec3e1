"""Tab completion on a `%%jiterator` line: its options and their values, and the names of the
jitted functions already in the notebook (to define one again); and the options of a
`%jiterator_bench` line and the jitted function its CALL starts with (the rest of CALL is Python,
which IPython's own matchers complete).

An IPython matcher (API v2, IPython >= 8.6) that answers only on the first line of a
`%%jiterator` cell and then suppresses the others, which would offer Python builtins there.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any, cast

from IPython.core.completer import CompletionContext, SimpleCompletion, SimpleMatcherResult, context_matcher

MAGIC = "%%jiterator"
BENCH_OPTIONS = ("--against", "-n", "-w")  # each followed by a value
BENCH_LINE = re.compile(r"\s*(?:[A-Za-z_]\w*\s*=\s*)?%jiterator_bench\s")  # also `r = %jiterator_bench ...`
OPTIONS = ("--outputs", "--backend", "--dtype", "--reduce", "--scan", "--no-panel", "--quiet", "--help")
REDUCE_KEYS = ("identity=", "combine=", "map=", "finalize=", "dim=")  # a --reduce or --scan line's own keys
NAMES_A_FUNCTION = ("combine", "map", "finalize")  # keys whose values are the cell's function names
VALUES = {
    "--backend": ("auto", "cuda", "cpu"),
    "--dtype": ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
                "uint16", "uint32", "uint64", "bool", "complex64", "complex128"),
}


def jiterator_matcher(namespace: Callable[[], dict[str, Any]]) -> Callable[[CompletionContext], SimpleMatcherResult]:
    """A matcher completing `%%jiterator` lines; `namespace()` gives the user's variables."""

    @context_matcher()
    def complete_jiterator_line(context: CompletionContext) -> SimpleMatcherResult:
        completions = _complete(context, namespace)
        # IPython reads the other keys of its (total) TypedDict as optional, and so do its own matchers.
        return cast(SimpleMatcherResult, {"completions": completions, "suppress": bool(completions)})

    return complete_jiterator_line


def _complete(context: CompletionContext, namespace: Callable[[], dict[str, Any]]) -> list[SimpleCompletion]:
    lines = context.full_text.splitlines()
    bench = BENCH_LINE.match(lines[context.cursor_line]) if context.cursor_line < len(lines) else None
    if bench is not None:
        return _complete_bench(lines[context.cursor_line][bench.end() - 1:context.cursor_position], context, namespace)
    if context.cursor_line != 0 or not context.full_text.startswith(MAGIC + " "):
        return []
    before = context.full_text.splitlines()[0][:context.cursor_position] if context.full_text else ""
    words = before[len(MAGIC):].split()
    token = context.token
    previous = words[-2] if token and len(words) >= 2 else (words[-1] if words and not token else None)
    if previous in VALUES:
        return [SimpleCompletion(value, type="value") for value in VALUES[previous] if value.startswith(token)]
    if token.startswith("-"):
        return [SimpleCompletion(option, type="option") for option in OPTIONS if option.startswith(token)]
    naming = len(words) == (1 if token else 0)  # the NAME position, right after the magic
    if naming:
        return _jitted_names(namespace, token)
    if "--reduce" in words or "--scan" in words:
        return _complete_reduce(before, token, context.full_text)
    return []


def _complete_reduce(before: str, token: str, cell: str) -> list[SimpleCompletion]:
    """On a `--reduce` or `--scan` line: its keys (`identity=`, `combine=`, ...) not given yet, and after
    `combine=`, `map=` or `finalize=` the names of the functions the cell defines."""
    word = before.split()[-1] if before and not before[-1].isspace() else ""
    key, sep, _value = word.partition("=")
    if sep:
        if key not in NAMES_A_FUNCTION:
            return []
        names = dict.fromkeys(_FUNCTION_NAME.findall(cell.partition("\n")[2]))  # in order, once each
        return [SimpleCompletion(name, type="function") for name in names if name.startswith(token)]
    given = {w.partition("=")[0] + "=" for w in (before.split()[:-1] if word else before.split()) if "=" in w}
    return [SimpleCompletion(k, type="keyword") for k in REDUCE_KEYS if k.startswith(token) and k not in given]


# A C++ function definition's name, well enough for completion: the word before `(` that ends a
# declaration line's head (`T add(T a, T b) {`); the cell need not parse yet while it is typed.
_FUNCTION_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*\)\s*(?:const\s*)?\{")


def _jitted_names(namespace: Callable[[], dict[str, Any]], token: str) -> list[SimpleCompletion]:
    """The notebook's names bound to jitted functions that start with `token` (not IPython's `_1`)."""
    from jiter_magic.kernel_function import KernelFunction

    names = sorted(name for name, value in namespace().items()
                   if isinstance(value, KernelFunction) and name.startswith(token)
                   and not name.startswith("_"))
    return [SimpleCompletion(name, type="function") for name in names]


def _complete_bench(before: str, context: CompletionContext,
                    namespace: Callable[[], dict[str, Any]]) -> list[SimpleCompletion]:
    """Options of a `%jiterator_bench` line while the cursor is still before its CALL, and the jitted
    functions while it is on CALL's first word; `before` is the line after the magic's name, up to
    the cursor."""
    token = context.token
    try:
        tokens = shlex.split(before)  # a quoted --against "lambda x, y: ..." is one word
    except ValueError:  # the cursor is inside an open quote: an --against expression, Python's own
        return []
    typing = tokens[-1] if tokens and not before[-1].isspace() else ""  # the whole word at the cursor
    words = tokens[:-1] if typing else tokens
    expects_value = False
    for word in words:  # every earlier word must be an option or an option's value, else CALL has begun
        if expects_value:
            expects_value = False
        elif word in BENCH_OPTIONS:
            expects_value = True
        else:
            return []
    if expects_value:
        return []
    if token.startswith("-"):
        return [SimpleCompletion(option, type="option") for option in BENCH_OPTIONS if option.startswith(token)]
    if typing != token or not (token == "" or token.isidentifier()):  # `axpy(x`, `mod.fn`: Python's own
        return []
    return _jitted_names(namespace, token)
