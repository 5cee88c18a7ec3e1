"""IPython magics: `%%jiterator` turns a cell into a jitted callable, `%jiterator_cache` shows the cache,
`%jiterator_bench` times a call.

Thin on purpose: parse the magic line, call the public API, display the panel. The cell
compiles at once for one dtype, so a broken functor fails the cell that holds it, not a later
cell that happens to call it. Lines are counted as the notebook editor counts them: the
magic line is line 1, so the code string given to the API is the cell behind one empty line,
and every message (parse errors, compiler errors and warnings) and the panel's line numbers
agree with the editor's. After the cell, one line says what was built, where and how fast.
"""
from __future__ import annotations

import argparse
import textwrap
from collections.abc import Container

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, kwds, magic_arguments
from IPython.display import display
from IPython.utils.process import arg_split

from jiter_magic.cache.disk import clear_caches
from jiter_magic.cache.disk import stats as cache_stats
from jiter_magic.errors import BindError, ParseError
from jiter_magic.function import JitFunction
from jiter_magic.kernel_function import KernelFunction
from jiter_magic.notebook import tracebacks
from jiter_magic.notebook.bench_line import run_bench_line
from jiter_magic.notebook.cell_build import (
    CELL_FIRST_LINE,
    CellBindError,
    CellOptions,
    CellParseError,
    _compile,
    _create,
    _in_the_cell,
)
from jiter_magic.notebook.cell_line import CELL_USAGE, NEEDS_A_NAME, cell_options
from jiter_magic.notebook.completion import jiterator_matcher
from jiter_magic.notebook.panel_html import human_size
from jiter_magic.notebook.report import format_cache_stats, summary
from jiter_magic.tools.results import BenchmarkResult

BACKWARD_NEEDS_A_NAME = ("%%jiterator_backward needs the name of a function jitted earlier (by %%jiterator or "
                         "create_jit_fn), and the backward functor as the cell: %%jiterator_backward NAME; for "
                         "example: %%jiterator_backward axpy, then a cell body such as template <typename T> "
                         "void axpy_bwd(T x, T y, T alpha, T g, T& gx, T& gy) { gx = alpha * g; gy = g; } "
                         "(see %%jiterator_backward? for more)")

@magics_class
class JiteratorMagics(Magics):
    """The `%%jiterator` cell magic and the `%jiterator_cache` and `%jiterator_bench` line magics."""

    @magic_arguments("%jiterator")  # shown as `%%jiterator` in the usage line
    @kwds(usage=f"%(prog)s {CELL_USAGE}")  # argparse would put NAME last, after every option
    @argument("name", metavar="NAME",
              help="Python name to bind the jitted callable to (no keyword, builtin, dunder or IPython name)")
    @argument("params", nargs="*", metavar="key=value",
              help="extra scalar arguments and their defaults (Python literals: 1, 2.5, True, 1+2j)")
    @argument("--outputs", type=int, default=None, metavar="N",
              help="the functor writes N outputs through reference parameters (multi-output form)")
    @argument("--backend", choices=("auto", "cuda", "cpu"), default=None,
              help="where the callable runs; 'auto' (the default) follows the inputs' device")
    @argument("--reduce", action="store_true",
              help="make a reduction (create_reduction_fn): identity=VALUE is required; combine=, map=, "
                   "finalize= name the cell's functions, dim= the calls' default dim")
    @argument("--scan", action="store_true",
              help="make a scan (create_scan_fn; with --outputs N create_multi_output_scan_fn): the keys of "
                   "--reduce, identity=(1,0) for a state of several values, dim= one int")
    @argument("--dtype", default=None, metavar="DTYPE",
              help="input dtype(s) to compile for when the cell runs: one name for every input, "
                   "or a comma-separated list, one per input (default float32)")
    @argument("--no-panel", dest="panel", action="store_false",
              help="do not display the inspection panel under the cell")
    @argument("--quiet", action="store_true",
              help="do not print the line saying what was built, where and how fast")
    @cell_magic
    def jiterator(self, line: str, cell: str) -> None:
        """Jit the cell's C++ functor and bind it to NAME in the notebook.

        The cell holds one or more C++ template functions; the last one is the entry point.
        Every key=value names an extra scalar parameter of the entry function and gives its
        default; a call may override it: NAME(x, y, key=2.0). The cell compiles at once for
        float32 inputs (or --dtype) so that errors show where they are written, at the line
        numbers the editor shows (the magic line is line 1), and one line says what was built.

        With --reduce the cell is a reduction (create_reduction_fn, called as torch.sum:
        NAME(x, dim=1, keepdim=False, dtype=None, out=None)). identity=VALUE is required;
        combine=NAME defaults to the one function of the cell taking two values of one type,
        map=NAME to the last other function, finalize=NAME to none; dim=1 or dim=(0,1) is the
        calls' default dim (a call's dim= overrides it); other key=value give the map's extras.
        With --reduce --outputs 2 it gives values with their indices (argmax, as torch.max(x, dim);
        create_multi_output_reduction_fn): the combine takes two values with their indices and
        writes the kept pair through two references, and identity= is optional.
        With --scan the cell is a scan (create_scan_fn, called as torch.cumsum:
        NAME(x, dim=1, reverse=False, exclusive=False, dtype=None, out=None)), its keys those of
        --reduce; dim= is one int, the calls' default dim (a scan needs one: without it each call
        gives dim=). With --scan --outputs N (create_multi_output_scan_fn) the combine writes a
        state of N = 2 to 4 values through references, identity=(1,0) gives one number a value
        (a linear recurrence), or with --outputs 2 it keeps values with their indices as
        torch.cummax does. Reductions and scans run where their inputs live, so --backend does
        not apply.

        Example:

            %%jiterator axpby alpha=1.0 beta=0.0
            template <typename T> T axpby(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }

            %%jiterator sum_sq --reduce identity=0 dim=-1
            template <typename T> T sq(T x) { return x * x; }
            template <typename T> T add(T a, T b) { return a + b; }

            %%jiterator cumsum --scan identity=0 dim=-1
            template <typename T> T add(T a, T b) { return a + b; }
        """
        assert self.shell is not None, "a magic runs inside an IPython shell"
        options = parse_cell_line(line, self.shell.user_ns_hidden)
        fn = _create(CELL_FIRST_LINE + cell, options)
        _compile(fn, options)
        previous = self.shell.user_ns.get(options.name)
        if isinstance(previous, KernelFunction) and previous is not fn:
            from jiter_magic.notebook import widgets

            widgets.rebound(previous, options.name)  # its panels say the name now points elsewhere
        self.shell.push({options.name: fn})
        if not options.quiet:
            print(summary(fn, options.name))
        if options.panel:  # the one panel of every kind, titled by the cell's NAME, not the C++ function's (`sum_sq`)
            from jiter_magic.notebook import widgets

            display(widgets.mimebundle(fn, name=options.name), raw=True)

    @magic_arguments("%jiterator_backward")  # shown as `%%jiterator_backward` in the usage line
    @argument("name", help="the notebook name of a function jitted earlier")
    @cell_magic
    def jiterator_backward(self, line: str, cell: str) -> None:
        """Give a jitted function its gradient for torch autograd: the cell is the backward functor.

        It takes the function's inputs, then its extras (by name), then one gradient an output,
        and writes one gradient an input through references; it compiles at once (float32), and
        the function's results then carry a grad_fn (see `JitFunction.def_backward`).

        Example:

            %%jiterator_backward axpy
            template <typename T> void axpy_bwd(T x, T y, T alpha, T g, T& gx, T& gy) { gx = alpha * g; gy = g; }
        """
        try:
            name = self.jiterator_backward.parser.parse_argstring(line).name
        except UsageError as exc:  # argparse's own words say only that NAME is required
            if "arguments are required" in str(exc):
                raise UsageError(BACKWARD_NEEDS_A_NAME) from None
            raise
        assert self.shell is not None, "a magic runs inside an IPython shell"
        fn = self.shell.user_ns.get(name)
        if not isinstance(fn, JitFunction):
            found = "is not defined" if name not in self.shell.user_ns else f"is a {type(fn).__name__}"
            raise UsageError(f"%%jiterator_backward {name}: {name} {found}; name a function made by %%jiterator "
                             "or create_jit_fn first")
        previous = fn.backward
        try:
            fn.def_backward(CELL_FIRST_LINE + cell)
        except ParseError as exc:
            raise CellParseError(_in_the_cell(str(exc))) from None
        except BindError as exc:
            raise CellBindError(_in_the_cell(str(exc))) from None
        backward = fn.backward
        assert backward is not None
        try:
            _compile(backward, CellOptions(name=f"{name} backward", kwargs={}, outputs=backward.num_outputs,
                                           backend=backward.backend, dtypes=(), panel=False, quiet=True))
        except Exception:
            fn.def_backward(None if previous is None else previous.code)  # as before the cell
            raise
        print(f"{name}: backward {backward.name} defined ({summary(backward, backward.name).split(': ', 1)[1]})")

    @magic_arguments()
    @argument("--clear", action="store_true", help="delete every cached kernel on disk and reset the counters")
    @line_magic
    def jiterator_cache(self, line: str) -> None:
        """Show jiter_magic's kernel cache: where it lives, its entries and size, hits and compiles."""
        args = self.jiterator_cache.parser.parse_argstring(line)
        if args.clear:
            before = cache_stats()
            clear_caches(memory=True, disk=True)
            print(f"cleared {before['entries']} entries ({human_size(before['bytes'])}) from {before['root']}")
            return
        print(format_cache_stats(cache_stats()))

    @magic_arguments()
    @kwds(usage="%(prog)s [-n REPEAT] [-w WARMUP] [--against EXPR] CALL")  # argparse would write CALL as '...'
    @argument("-n", dest="repeat", type=int, default=25, metavar="REPEAT",
              help="timed runs; their median is reported (default 25)")
    @argument("-w", dest="warmup", type=int, default=3, metavar="WARMUP",
              help="untimed calls before them (default 3)")
    @argument("--against", default=None, metavar="EXPR",
              help="a reference callable taking the same inputs, quoted if it has spaces: "
                   "--against \"lambda x, y: 2*x + y\"")
    @argument("call", nargs=argparse.REMAINDER, metavar="CALL",
              help="the call to time, after the options: a jitted function called on names of the notebook")
    @line_magic
    def jiterator_bench(self, line: str) -> BenchmarkResult:
        """Time a call of a jitted function and print its median time, GB/s and fraction of copy bandwidth.

        CUDA events time calls on CUDA inputs, the host clock calls on host inputs; a device copy of
        as many bytes is timed alongside, so the fraction says how near the memory's limit the call
        runs. With --against, the reference callable is timed on the same inputs too. Returns the
        result, so r = %jiterator_bench axpy(x, y) keeps it.

        Example:

            %jiterator_bench -n 50 --against "lambda x, y: x + 2.0 * y" axpy(x, y, alpha=2.0)
        """
        assert self.shell is not None, "a magic runs inside an IPython shell"
        result = run_bench_line(line, self.jiterator_bench.parser, self.shell.user_ns)
        print(result)
        return result


def _plain_help(function) -> None:
    """IPython puts the usage behind an reST '::' and indents it; `%%jiterator?` shows the docstring
    as plain text, so it should open with the usage line itself, flush left."""
    doc = function.__doc__
    if not doc:
        return
    if doc.startswith(_USAGE_PREFIX):
        usage, sep, rest = doc[len(_USAGE_PREFIX) - 2:].partition("\n\n")
        doc = textwrap.dedent(usage) + sep + rest
    function.__doc__ = doc.replace("::\n", ":\n")


_USAGE_PREFIX = "::\n\n  %"  # what IPython's MagicHelpFormatter writes in place of 'usage: '
for _magic in (JiteratorMagics.jiterator, JiteratorMagics.jiterator_backward, JiteratorMagics.jiterator_cache,
               JiteratorMagics.jiterator_bench):
    _plain_help(_magic)


def parse_cell_line(line: str, ipython_names: Container[str] = frozenset()) -> CellOptions:
    """Parse `NAME [key=value ...] [--outputs N] [--backend B] [--dtype D] [--no-panel]`; NAME must
    be a name the function may be bound to (notebook/names.py), `ipython_names` the shell's own."""
    try:
        argv = arg_split(line)
    except ValueError as exc:  # an unbalanced quote
        raise UsageError(f"%%jiterator {line.strip()!r}: {exc}") from None
    try:
        args = JiteratorMagics.jiterator.parser.parse_intermixed_args(argv)
    except UsageError as exc:
        # argparse's own words name NAME and, wrongly, the optional key=value as required
        if "arguments are required" in str(exc):
            raise UsageError(NEEDS_A_NAME) from None
        raise
    return cell_options(args, ipython_names)


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics, the completion of `%%jiterator` lines and the display of a call's
    mistakes under the cell's line (notebook/tracebacks.py) (`%load_ext jiter_magic`)."""
    ipython.register_magics(JiteratorMagics)
    tracebacks.install(ipython)
    completer = getattr(ipython, "Completer", None)
    if completer is not None:
        matchers = completer.custom_matchers
        matchers[:] = [m for m in matchers if getattr(m, "__name__", "") != "complete_jiterator_line"]
        matchers.append(jiterator_matcher(lambda: ipython.user_ns))


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove the magics, the completion and the mistakes' display again (`%unload_ext jiter_magic`)."""
    tracebacks.uninstall(ipython)
    manager = ipython.magics_manager
    manager.magics["cell"].pop("jiterator", None)
    manager.magics["cell"].pop("jiterator_backward", None)
    manager.magics["line"].pop("jiterator_cache", None)
    manager.magics["line"].pop("jiterator_bench", None)
    manager.registry.pop(JiteratorMagics.__name__, None)
    completer = getattr(ipython, "Completer", None)
    if completer is not None:
        completer.custom_matchers[:] = [m for m in completer.custom_matchers
                                        if getattr(m, "__name__", "") != "complete_jiterator_line"]
