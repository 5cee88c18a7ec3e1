"""The `%%jiterator` line read into `CellOptions`: its usage, its key=value literals, its dtypes, and
the options of an elementwise, a `--reduce` or a `--scan` cell, each refused with what was wrong and expected.
(argparse itself, the flags and their help, stays with the magic in magic.py.)"""
from __future__ import annotations

import argparse
import ast
import keyword
import math
from collections.abc import Container

from IPython.core.error import UsageError

from jiter_magic.notebook.cell_build import CellOptions
from jiter_magic.notebook.cell_combine import ROLE_KEYS, split_params
from jiter_magic.notebook.names import refusal

CELL_USAGE = ("NAME [key=value ...] [--outputs N] [--backend auto|cuda|cpu] [--dtype DTYPE] [--reduce | --scan] "
              "[--no-panel] [--quiet]")
NEEDS_A_NAME = ("%%jiterator needs the name of the function to make, then optional key=value defaults of "
                f"its extra arguments and flags: %%jiterator {CELL_USAGE}; for example: "
                "%%jiterator my_kernel alpha=1.0; a reduction: %%jiterator NAME --reduce identity=0; a scan: "
                "%%jiterator NAME --scan identity=0 dim=-1 (see %%jiterator? for more)")

# Names a value may use besides Python literals: floats that have no literal spelling.
_SPECIAL_FLOATS = {"inf": math.inf, "-inf": -math.inf, "+inf": math.inf, "nan": math.nan}


def parse_literal(token: str) -> tuple[str, bool | int | float | complex]:
    """`key=value` -> (key, value); the value must be a bool, int, float or complex literal."""
    key, sep, text = token.partition("=")
    if not sep:
        raise UsageError(f"{token!r}: expected key=value, the default of an extra argument (such as {token}=1.0), "
                         "or a flag starting with --")
    if not key.isidentifier() or keyword.iskeyword(key):
        raise UsageError(f"{token!r}: {key!r} is not a valid argument name")
    if text.strip().lower() in _SPECIAL_FLOATS:
        return key, _SPECIAL_FLOATS[text.strip().lower()]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if not isinstance(value, (bool, int, float, complex)):
        raise UsageError(f"{token!r}: the value of {key} must be a bool, int, float or complex literal "
                         "(write key=value without spaces)")
    return key, value


def dtype_list(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    names = tuple(part.strip() for part in text.split(","))
    if not all(names):
        raise UsageError(f"--dtype {text!r}: expected a dtype name or a comma-separated list of them")
    return names


def cell_options(args: argparse.Namespace, ipython_names: Container[str] = frozenset()) -> CellOptions:
    """The options of a parsed `%%jiterator` line; NAME must be a name the function may be bound to
    (notebook/names.py), `ipython_names` the shell's own."""
    refused = refusal(args.name, ipython_names)
    if refused is not None:
        raise UsageError(refused)
    if args.outputs is not None and not 1 <= args.outputs <= 8:
        raise UsageError(f"--outputs {args.outputs}: a functor has 1 to 8 outputs")
    dtypes = dtype_list(args.dtype)
    if args.reduce and args.scan:
        raise UsageError("--reduce --scan: a cell makes one function, a reduction (--reduce, as torch.sum) or a "
                         "scan (--scan, as torch.cumsum); give one of them")
    if args.reduce or args.scan:
        return _combining_options(args, dtypes)
    kwargs: dict[str, object] = {}
    for token in args.params:
        key, value = _elementwise_literal(token, args)
        if key in kwargs:
            raise UsageError(f"{token!r}: {key} is given twice")
        kwargs[key] = value
    return CellOptions(args.name, kwargs, args.outputs, args.backend or "auto", dtypes, args.panel, args.quiet)


def _elementwise_literal(token: str, args: argparse.Namespace) -> tuple[str, bool | int | float | complex]:
    """An extra's default; `combine=add` without --reduce or --scan says that one is missing."""
    key, _sep, text = token.partition("=")
    if key in ROLE_KEYS and text.isidentifier():
        line = " ".join([args.name, "--reduce", *(["identity=VALUE"] if not any(
            p.startswith("identity=") for p in args.params) else []), *args.params])
        raise UsageError(f"{token!r}: {key}= names the {key} function of a reduction, and without --reduce "
                         f"the line makes an elementwise function; for a reduction write %%jiterator {line} "
                         "(for a scan, --scan in place of --reduce)")
    return parse_literal(token)


def _combining_options(args: argparse.Namespace, dtypes: tuple[str, ...]) -> CellOptions:
    """A `--reduce` or `--scan` line: the function's keys apart from the map's extras; options that
    do not apply to these kinds refused, saying why."""
    kind = "reduce" if args.reduce else "scan"
    most = 2 if args.reduce else 4
    if args.outputs is not None and not 1 <= args.outputs <= most:
        if args.reduce:
            raise UsageError(f"--reduce --outputs {args.outputs}: a reduction has one result, or with --outputs 2 "
                             "its values and their indices (as torch.max(x, dim) gives)")
        raise UsageError(f"--scan --outputs {args.outputs}: a scan has one result, or with --outputs 2 its values "
                         "and their indices (as torch.cummax gives), or with --outputs 2 to 4 each value of a "
                         "state of that many values (a linear recurrence's two)")
    if args.backend is not None:
        what = "a reduction" if args.reduce else "a scan"
        raise UsageError(f"--{kind} --backend {args.backend}: {what} runs where its inputs live (NumPy and "
                         "CPU tensors on the CPU, CUDA tensors and CuPy arrays on the GPU); drop --backend")
    combining, extras = split_params(kind, args.params, parse_literal, args.outputs or 1)
    return CellOptions(args.name, extras, None, "auto", dtypes, args.panel, args.quiet, combining)
