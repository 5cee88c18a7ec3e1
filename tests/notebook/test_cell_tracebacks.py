"""A mistake in a notebook cell's call shows the cell's line and the message, through a real
IPython shell's own traceback printing (`run_cell`), with none of jiter_magic's internal frames.

IPython never hides the frame an exception was raised in (`__tracebackhide__` spares the last
frame), so the one jiter_magic frame left is the entry point that re-raised it.
"""
from __future__ import annotations

import re

import pytest

pytest.importorskip("IPython")
pytest.importorskip("numpy")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SETUP = """\
import numpy as np
import jiter_magic
fn = jiter_magic.create_jit_fn("template <typename T> T axpy(T x, T y, T a) { return a * x + y; }", a=1.0)
x = np.ones(4, np.float32)
"""


@pytest.fixture
def shell(fresh_cache):
    ip = InteractiveShell.instance()
    before = set(ip.user_ns)
    assert ip.run_cell(SETUP).success
    yield ip
    for name in set(ip.user_ns) - before:  # what the test bound: later tests see the shell as it was
        ip.user_ns.pop(name, None)


def printed_traceback(shell, cell: str, capsys) -> tuple[BaseException, str]:
    capsys.readouterr()
    result = shell.run_cell(cell)
    assert result.error_in_exec is not None
    return result.error_in_exec, ANSI.sub("", capsys.readouterr().out)


@pytest.mark.parametrize("cell, kind, message", [
    ("y = x\nfn(x)", "BindError", "BindError: axpy takes 2 input(s) ['x', 'y'], got 1"),
    ("y = x\nfn(x, y, beta=1.0)", "UnknownKwargError",
     "UnknownKwargError: beta is not declared in function definition (declared: ['a'])"),
    ("y = np.ones(3, np.float32)\nfn(x, y)", "ShapeError",
     "ShapeError: input shapes (4,), (3,) cannot be broadcast together"),
    ("y = x\njiter_magic.create_jit_fn('int y = 2;')", "ParseError", "ParseError: the code string holds no C++"),
], ids=["missing-input", "undeclared-keyword", "shapes", "parse"])
def test_a_cell_mistake_shows_the_cell_line_and_the_message(shell, capsys, cell, kind, message):
    error, text = printed_traceback(shell, cell, capsys)
    assert type(error).__name__ == kind
    assert re.search(r"Cell In\[\d+\], line 2\n", text), text
    assert "----> 2 " in text  # the cell's own line, marked
    assert message in text
    assert "jiter_magic/runtime" not in text and "jiter_magic/frontend" not in text, text
    assert "jiter_magic/planning" not in text and "jiter_magic/arrays" not in text, text
    assert text.count("File /") <= 1  # at most the entry point's frame, after the cell's


def test_debug_shows_the_internal_frames_in_a_cell(shell, capsys, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_DEBUG", "1")
    error, text = printed_traceback(shell, "fn(x, x, beta=1.0)", capsys)
    assert type(error).__name__ == "UnknownKwargError"
    assert "jiter_magic/runtime/keywords.py" in text


REDUCE_CELL = ("template <typename T> T sq(T x) { return x * x; }\n"
               "template <typename T> T add(T a, T b) { return a + b; }\n")


@pytest.fixture
def loaded(shell):
    """The shell with the extension loaded: a mistake's traceback shows no jiter_magic frame at all."""
    shell.run_line_magic("load_ext", "jiter_magic")
    shell.run_cell_magic("jiterator", "sum_sq --reduce identity=0 dim=-1 --no-panel --quiet", REDUCE_CELL)
    yield shell
    shell.run_line_magic("unload_ext", "jiter_magic")
    assert shell.custom_exceptions == ()


@pytest.mark.parametrize("cell, kind, message", [
    ("y = x\nfn(x)", "BindError", "BindError: axpy takes 2 input(s) ['x', 'y'], got 1"),  # elementwise
    ("y = x\nsum_sq(x, dim=3)", "DimensionError", "dim"),  # a %%jiterator --reduce cell's reduction
    ("s = jiter_magic.create_reduction_fn(\"" + REDUCE_CELL.replace("\n", " ") + "\", 0, combine='add')\n"
     "s(x, dim=(0, 0))", "InvalidArgumentError", "dim"),  # a reduction of the API
    ("y = x\n%jiterator_bench fn(x)", "BindError", "BindError: axpy takes 2 input(s)"),  # a line magic's call
    ("def mine(v):\n    return fn(v)\nmine(x)", "BindError", "BindError: axpy takes 2 input(s)"),  # in a function
], ids=["elementwise", "cell-reduction", "reduction", "magic", "user-function"])
def test_with_the_extension_no_jiter_magic_frame_shows(loaded, capsys, cell, kind, message):
    error, text = printed_traceback(loaded, cell, capsys)
    assert type(error).__name__ == kind
    assert message in text, text
    assert "jiter_magic/" not in text and "site-packages/IPython" not in text, text
    assert "with_traceback" not in text and "raise error" not in text and "for_caller" not in text, text
    assert re.search(r"Cell In\[\d+\], line \d+", text), text
    assert text.count("File /") == 0, text


def test_with_the_extension_debug_still_shows_every_frame(loaded, capsys, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_DEBUG", "1")
    error, text = printed_traceback(loaded, "fn(x, x, beta=1.0)", capsys)
    assert type(error).__name__ == "UnknownKwargError" and "jiter_magic/runtime/keywords.py" in text
