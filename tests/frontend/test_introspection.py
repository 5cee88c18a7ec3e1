"""What a notebook user sees of a jitted function without reading the code: its signature
(`fn?`, Shift+Tab, `help(fn)`), its docstring, keyword completion, and the compiler's warnings."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.interactiveshell import InteractiveShell

from jiter_magic import create_jit_fn, create_multi_output_jit_fn

AXPBY = "template <typename T> T intro_axpby(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"


def test_the_signature_names_inputs_then_keyword_extras_with_defaults_then_out():
    fn = create_jit_fn(AXPBY, alpha=1.0, beta=0)
    assert str(inspect.signature(fn)) == "(x, y, /, *, alpha=1.0, beta=0, out=None)"
    assert fn.__name__ == "intro_axpby"
    two = create_multi_output_jit_fn("template <typename T> void intro_two(T x, T& s, T& d) { s = x; d = -x; }", 2)
    assert str(inspect.signature(two)) == "(x, /, *, out=None)"
    bound = inspect.signature(fn).bind(np.ones(2), np.ones(2), alpha=3.0)  # what a call may pass
    assert bound.arguments["alpha"] == 3.0
    with pytest.raises(TypeError):
        inspect.signature(fn).bind(np.ones(2), np.ones(2), gamma=1.0)


def test_cpp_names_that_are_python_keywords_fall_back_to_the_generic_signature():
    fn = create_jit_fn("template <typename T> T intro_kw(T in, T from) { return in + from; }")
    assert str(inspect.signature(fn)) == "(*args, out=None, **kwargs)"
    np.testing.assert_array_equal(fn(np.ones(2), np.ones(2)), np.full(2, 2.0))


def test_the_docstring_is_built_from_the_code_string():
    fn = create_jit_fn("// scaled sum\n" + AXPBY, alpha=1.0, beta=0.5)
    doc = fn.__doc__
    assert doc.startswith("Jitted elementwise function intro_axpby (jiter_magic), from the C++ functor below.\n")
    assert "Inputs: x, y (" in doc
    assert "Keyword arguments (scalars, defaults given at creation): alpha=1.0, beta=0.5." in doc
    assert "Returns one array; out= writes into preallocated arrays instead." in doc
    assert doc.endswith("C++ source:\n\n    // scaled sum\n    " + AXPBY)
    two = create_multi_output_jit_fn("template <typename T> void intro_pair(T x, T& s, T& d) { s = x; d = -x; }", 2)
    assert "Returns a tuple of 2 arrays (s, d)" in two.__doc__
    assert inspect.getdoc(fn) == doc  # what help(fn) and fn? print


def test_ipython_completes_the_keyword_extras_of_a_call():
    shell = InteractiveShell.instance()
    shell.user_ns["intro_axpby"] = create_jit_fn(AXPBY, alpha=1.0, beta=0.5)
    shell.user_ns["xs"] = np.ones(2)
    try:
        with provisionalcompleter():
            offered = [c.text for c in shell.Completer.completions("intro_axpby(xs, xs, al", 22)]
        assert "alpha=" in offered
        with provisionalcompleter():
            offered = [c.text for c in shell.Completer.completions("intro_axpby(xs, xs, o", 21)]
        assert "out=" in offered
    finally:
        shell.user_ns.pop("intro_axpby")
        shell.user_ns.pop("xs")


@pytest.mark.slow
@pytest.mark.parametrize("text,expected", [
    ("%%jiterator my_kernel --", ["--backend", "--dtype", "--help", "--no-panel", "--outputs", "--quiet", "--reduce", "--scan"]),
    ("%%jiterator my_kernel alpha=1.0 --b", ["--backend"]),
    ("%%jiterator my_kernel --backend ", ["auto", "cpu", "cuda"]),
    ("%%jiterator my_kernel --dtype bf", ["bfloat16"]),
    ("%%jiterator intro_", ["intro_axpby"]),  # jitted functions of the notebook, to define again
    ("%%jiterator ", ["intro_axpby"]),
])
def test_the_magic_line_completes_its_options_values_and_function_names(text, expected):
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jiter_magic")
    shell.user_ns["intro_axpby"] = create_jit_fn(AXPBY, alpha=1.0, beta=0.5)
    shell.user_ns["intro_not_jitted"] = 3
    try:
        with provisionalcompleter():
            offered = [c.text for c in shell.Completer.completions(text, len(text))]
        assert offered == expected
        with provisionalcompleter():  # other lines complete as before: Python names
            assert "intro_not_jitted" in [c.text for c in shell.Completer.completions("x = intro_n", 11)]
    finally:
        shell.run_line_magic("unload_ext", "jiter_magic")
        shell.user_ns.pop("intro_axpby")
        shell.user_ns.pop("intro_not_jitted")
    with provisionalcompleter():  # unloaded: the matcher is gone
        assert "--quiet" not in [c.text for c in shell.Completer.completions("%%jiterator k --", 16)]


WARNED = "template <typename T> T intro_warned(T x) {\n  int unused = 1;\n  unsigned u = 2; int s = -1;\n" \
         "  return s < u ? x : x;\n}"
CHILD = f"""
import numpy as np, jiter_magic
fn = jiter_magic.create_jit_fn({WARNED!r})
fn(np.ones(2))
print(fn.specializations[-1].cache_event)
print(fn.warnings[0])
"""


@pytest.mark.slow
def test_compiler_warnings_are_kept_at_the_users_lines_also_from_the_disk_cache(tmp_path):
    env = {**os.environ, "JITER_MAGIC_CACHE_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    first, second = (run.stdout.split("\n", 1) for run in runs)
    assert (first[0], second[0]) == ("compiled", "disk")
    assert first[1] == second[1]  # the same words, though the second process compiled nothing
    assert "line 2, column 7: warning: unused variable ‘unused’ [-Wunused-variable]\n    2 |   int unused = 1;\n" \
           "      |       ^" in first[1]
    assert "line 4, column 12: warning: comparison of integer expressions of different signedness" in first[1]


def test_a_clean_functor_has_no_warnings():
    fn = create_jit_fn("template <typename T> T intro_clean(T x) { return x + T(1); }")
    for dtype in (np.float32, np.int8, np.complex64, np.bool_):
        fn(np.ones(3, dtype))
    assert fn.warnings == []
    assert all(s.log == "" for s in fn.specializations)


def test_shift_tab_shows_one_signature_and_the_function_still_compiles_whole():
    """IPython's inspector (what Shift+Tab and `fn?` show) gives the function's own signature and no
    second, generic "Call signature" from the class's `__call__`; after that, torch.compile still
    traces a call as one operator without a graph break."""
    from IPython.core.oinspect import Inspector

    torch = pytest.importorskip("torch")
    fn = create_jit_fn("template <typename T> T shift_tab(T x, T y, T alpha) { return -x + alpha * y; }", alpha=1.0)
    info = Inspector(theme_name="nocolor").info(fn, "my_kernel")
    assert info["definition"] == "my_kernel(x, y, /, *, alpha=1.0, out=None)"
    assert info["call_def"] is None
    assert "alpha" in info["docstring"]
    with pytest.raises(ValueError, match="invalid method signature"):
        inspect.signature(fn.__call__)
    x, y = torch.randn(3), torch.randn(3)
    compiled = torch.compile(lambda a, b: fn(a, b, alpha=2.0), backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, y), -x + 2.0 * y)
