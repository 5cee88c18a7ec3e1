"""A `%%jiterator` cell made into a jitted function and compiled at once (`_create`, `_compile`), from
the options of its line (`CellOptions`).

Every message speaks of the cell, not of a code string, at the line numbers the editor shows:
the code string is the cell behind one empty line standing for the magic line (`CELL_FIRST_LINE`).
A failure fails the cell with an error IPython renders as its message alone (`CellCompileError`,
`CellParseError`, `CellBindError`, `CellToolchainError`), without frames from inside jiter_magic.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from IPython.core.error import UsageError
from IPython.display import display

from jiter_magic.compilers.nvrtc_archs import default_arch
from jiter_magic.errors import BindError, CompileError, DTypeError, ParseError, ScalarOverflowError, ToolchainError
from jiter_magic.function import JitFunction
from jiter_magic.notebook import cell_combine
from jiter_magic.notebook.cell_combine import CellFunction, CombineOptions
from jiter_magic.runtime import notice as compile_notice
from jiter_magic.runtime.inspection import cuda_available


@dataclass(frozen=True, slots=True)
class CellOptions:
    """The `%%jiterator` line, parsed."""

    name: str
    kwargs: dict[str, object]
    outputs: int | None  # None: the single-output form
    backend: str
    dtypes: tuple[str, ...]  # one name (used for every input) or one per input; () means float32
    panel: bool
    quiet: bool = False  # no summary line after the cell
    combining: CombineOptions | None = None  # a `--reduce` or `--scan` cell, not an elementwise function


class _ShortTraceback:
    """Mixin: IPython renders the error as its message alone, without frames from inside jiter_magic."""

    label = "Error"

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31m{self.label}\x1b[0m: {self}"]


class CellCompileError(_ShortTraceback, CompileError):
    """The cell's functor did not compile; the message is the compiler log at the cell's line numbers."""

    label = "CompileError"


class CellParseError(_ShortTraceback, ParseError):
    label = "ParseError"


class CellBindError(_ShortTraceback, BindError):
    label = "BindError"


class CellToolchainError(_ShortTraceback, ToolchainError):
    label = "ToolchainError"


# What stands for the magic line in the code string: its line 1, so that the cell's lines keep the
# numbers the editor shows.
CELL_FIRST_LINE = "\n"


def _in_the_cell(message: str) -> str:
    return message.replace("of the code string", "of the cell")


def _create(cell: str, options: CellOptions) -> JitFunction | CellFunction:
    fn: JitFunction | CellFunction
    try:
        if options.combining is not None:
            fn = cell_combine.create(cell, options.combining, options.kwargs)
        else:  # what create_jit_fn (outputs None) or create_multi_output_jit_fn makes
            fn = JitFunction(cell, options.outputs, dict(options.kwargs))
    except ParseError as exc:
        raise CellParseError(_in_the_cell(str(exc))) from None
    except BindError as exc:
        raise CellBindError(_in_the_cell(str(exc))) from None
    fn.backend = options.backend
    return fn


def _compile(fn: JitFunction | CellFunction, options: CellOptions) -> None:
    """Build the default specialization now (a reduction's or scan's default kernel), its notice
    silenced (the summary line after the cell says what was built), its failures as the cell's: what
    a --dtype made the function refuse a UsageError naming it, a missing toolchain or a compile
    error the cell's own error (after the failed attempt's panel)."""
    dtypes = options.dtypes
    if len(dtypes) == 1:
        dtypes = dtypes * fn.num_inputs
    backend = None if options.backend == "auto" else options.backend
    if backend == "cuda" and not cuda_available():
        warnings.warn(f"%%jiterator {options.name} --backend cuda: no GPU found here, so the kernel is only compiled "
                      f"(for {default_arch()}, to check it); calling {options.name} needs CUDA inputs on a GPU",
                      RuntimeWarning, stacklevel=2)
    try:
        with compile_notice.silenced():
            fn.compile(*dtypes, backend=backend)
    except (DTypeError, BindError, ScalarOverflowError) as exc:
        if not options.dtypes:
            raise
        raise UsageError(f"--dtype {','.join(options.dtypes)}: {exc}") from None
    except ToolchainError as exc:
        raise CellToolchainError(str(exc)) from None
    except CompileError as exc:
        if options.panel:  # the failed attempt, readable and kept in the saved notebook; the error follows
            _show_failed(fn, options.name, exc.log, backend or ("cuda" if cuda_available() else "cpu"))
        raise CellCompileError(str(exc), exc.log, exc.source) from None


def _show_failed(fn: JitFunction | CellFunction, name: str, log: str, backend: str) -> None:
    from jiter_magic.notebook.panel_html import failed_html  # pygments: imported when a panel is shown, not at load

    display({"text/html": failed_html(name, fn.code, log, backend),
             "text/plain": f"{name}: the functor did not compile (the error below gives the compiler's log)"},
            raw=True)
