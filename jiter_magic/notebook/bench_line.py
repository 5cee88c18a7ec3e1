"""The `%jiterator_bench` line: its options, and the call it names, evaluated in the notebook.

Kept apart from magic.py, which declares the magic and its help: here the line becomes a
`benchmark` call (`run_bench_line`), and every mistake in it a UsageError saying what was
expected, while errors of the call itself stay the user's own.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Any

from IPython.core.error import UsageError
from IPython.utils.process import arg_split

from jiter_magic.kernel_function import KernelFunction
from jiter_magic.tools.benchmarking import benchmark
from jiter_magic.tools.results import BenchmarkResult


def run_bench_line(line: str, parser: Any, namespace: dict[str, Any]) -> BenchmarkResult:
    """Time the call the line names, on the notebook's names, with its options."""
    options = parse_bench_line(line, parser)
    fn, label, args, kwargs = _bench_call(options.call, namespace)
    reference = None
    if options.against is not None:
        reference = _evaluate(options.against, namespace, "--against")
        if not callable(reference):
            raise UsageError(f"--against {options.against}: expected a callable taking the same inputs, "
                             f"got {reference!r} (a {type(reference).__name__!r})")
    result = benchmark(fn, *args, reference=reference, warmup=options.warmup, repeat=options.repeat, **kwargs)
    if label != result.name:
        result = replace(result, name=f"{label} ({result.name})")
    return result


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """The `%jiterator_bench` line, parsed."""

    repeat: int
    warmup: int
    against: str | None  # an expression, its quotes removed
    call: str  # a Python call expression


def parse_bench_line(line: str, parser: Any) -> BenchOptions:
    """Parse `[-n REPEAT] [-w WARMUP] [--against EXPR] CALL` with the magic's argument parser; CALL
    is the rest of the line, as written."""
    try:
        argv = arg_split(line)  # quotes kept inside words, so CALL's string literals survive
    except ValueError as exc:  # an unbalanced quote
        raise UsageError(f"%jiterator_bench {line.strip()!r}: {exc}") from None
    args = parser.parse_args(argv)
    if args.repeat < 1:
        raise UsageError(f"-n {args.repeat}: at least one timed run")
    if args.warmup < 0:
        raise UsageError(f"-w {args.warmup}: the number of warm-up calls cannot be negative")
    call = " ".join(args.call).strip().rstrip(";").rstrip()  # a trailing ";" as after a statement
    if not call:
        raise UsageError("%jiterator_bench: give the call to time, after the options: %jiterator_bench axpy(x, y)")
    against = args.against
    if against is not None and len(against) >= 2 and against[0] == against[-1] and against[0] in "\"'":
        against = against[1:-1]
    return BenchOptions(args.repeat, args.warmup, against, call)


def _evaluate(text: str | ast.expr, namespace: dict[str, Any], what: str) -> Any:
    """An expression's value in the notebook's namespace (its errors are the user's, raised as they are)."""
    if isinstance(text, str):
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise UsageError(f"{what} {text!r}: not a Python expression ({exc.msg})") from None
    else:
        tree = ast.Expression(text)
    return eval(compile(tree, f"<%jiterator_bench {what}>", "eval"), namespace)


def _bench_call(text: str, namespace: dict[str, Any]) -> tuple[KernelFunction, str, list,
                                                                 dict[str, Any]]:
    """CALL's jitted function, its spelling, and its evaluated arguments (`*args` and `**kwargs` too)."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise UsageError(f"%jiterator_bench {text!r}: not a Python call expression ({exc.msg})") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise UsageError(f"%jiterator_bench {text!r}: expected a call such as axpy(x, y)")
    label = ast.unparse(call.func)
    fn = _evaluate(call.func, namespace, label)
    if not isinstance(fn, KernelFunction):  # benchmark() times either
        raise UsageError(f"%jiterator_bench: {label} is a {type(fn).__name__}, not a jitted function; "
                         "time one made by %%jiterator or jiter_magic.create_jit_fn")
    args: list = []
    for node in call.args:
        if isinstance(node, ast.Starred):
            args.extend(_evaluate(node.value, namespace, label))
        else:
            args.append(_evaluate(node, namespace, label))
    kwargs: dict[str, Any] = {}
    for keyword_node in call.keywords:
        value = _evaluate(keyword_node.value, namespace, label)
        if keyword_node.arg is None:
            kwargs.update(value)
        else:
            kwargs[keyword_node.arg] = value
    return fn, label, args, kwargs
