"""`%%jiterator` and `%jiterator_cache` through a real IPython shell (`run_cell_magic`, `run_cell`).

The cells compile with the CPU backend (g++), so these tests need no GPU.
"""
from __future__ import annotations

import ast
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("IPython")
torch = pytest.importorskip("torch")

from IPython.core.error import UsageError  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic.notebook.cell_line import parse_literal  # noqa: E402
from jiter_magic.notebook.magic import JiteratorMagics, parse_cell_line  # noqa: E402

AXPBY = "template <typename T> T axpby(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"
BROKEN = """template <typename T>
T broken(T x) {
  return x +* 2;
}"""
SINCOS = """template <typename T>
void sincos2(T x, T& s, T& c) {
  s = ::sin(x);
  c = ::cos(x);
}"""


def test_cell_binds_the_callable_with_defaults(shell):
    shell.run_cell_magic("jiterator", "axpby alpha=2.0 beta=-1 --no-panel", AXPBY)
    fn = shell.user_ns["axpby"]
    assert isinstance(fn, jiter_magic.JitFunction)
    assert fn.name == "axpby" and fn.code == "\n" + AXPBY  # line 1 stands for the magic line, as in the editor
    assert fn.kwargs == {"alpha": 2.0, "beta": -1}
    assert type(fn.kwargs["beta"]) is int

    x, y = torch.arange(4, dtype=torch.float32), torch.ones(4)
    out = fn(x, y)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, 2.0 * x - y)
    torch.testing.assert_close(fn(x, y, alpha=0.5, beta=3.0), 0.5 * x + 3.0 * y)
    np.testing.assert_allclose(fn(np.arange(3.0), np.ones(3)), 2.0 * np.arange(3.0) - 1)


def test_cell_compiles_at_once_for_float32(shell):
    shell.run_cell_magic("jiterator", "f alpha=1.0 beta=0.0 --backend cpu --no-panel", AXPBY.replace("axpby", "f"))
    fn = shell.user_ns["f"]
    assert len(fn.specializations) == 1
    first = fn.specializations[0]
    assert first.backend == "cpu"
    assert first.spec.inputs == ("float32", "float32")
    assert first.cache_event == "compiled"
    assert jiter_magic.cache_stats()["compiles"] >= 1


def test_dtype_option_picks_the_compiled_specialization(shell):
    shell.run_cell_magic("jiterator", "axpby alpha=1 beta=1 --dtype float64 --backend cpu --no-panel", AXPBY)
    assert shell.user_ns["axpby"].specializations[0].spec.inputs == ("float64", "float64")
    shell.run_cell_magic("jiterator", "axpby alpha=1 beta=1 --dtype int32,float16 --backend cpu --no-panel", AXPBY)
    spec = shell.user_ns["axpby"].specializations[0].spec
    assert spec.inputs == ("int32", "float16") and spec.outputs == ("float16",)


def test_backend_option_sets_the_functions_backend(shell):
    shell.run_cell_magic("jiterator", "axpby alpha=1 beta=1 --backend cpu --no-panel", AXPBY)
    fn = shell.user_ns["axpby"]
    assert fn.backend == "cpu"
    assert fn.specializations[0].backend == "cpu"


def test_options_and_kwargs_may_be_intermixed(shell):
    options = parse_cell_line("g --outputs 2 a=1 --dtype float64 b=2.5 --no-panel c=True")
    assert (options.name, options.outputs, options.dtypes, options.panel) == ("g", 2, ("float64",), False)
    assert options.kwargs == {"a": 1, "b": 2.5, "c": True}
    assert parse_cell_line("g").kwargs == {} and parse_cell_line("g").backend == "auto"


def test_multi_output_cell(shell):
    shell.run_cell_magic("jiterator", "sincos2 --outputs 2 --no-panel", SINCOS)
    fn = shell.user_ns["sincos2"]
    assert fn.num_outputs == 2
    x = torch.linspace(-3, 3, 7)
    s, c = fn(x)
    torch.testing.assert_close(s, torch.sin(x))
    torch.testing.assert_close(c, torch.cos(x))


@pytest.mark.parametrize("token, key, value, kind", [
    ("a=1", "a", 1, int),
    ("a=-7", "a", -7, int),
    ("alpha=2.5e-3", "alpha", 2.5e-3, float),
    ("flag=True", "flag", True, bool),
    ("flag=False", "flag", False, bool),
    ("z=1+2j", "z", 1 + 2j, complex),
    ("z=-3j", "z", -3j, complex),
    ("big=inf", "big", math.inf, float),
    ("small=-inf", "small", -math.inf, float),
])
def test_literal_parser_accepts_numbers(token, key, value, kind):
    parsed_key, parsed = parse_literal(token)
    assert parsed_key == key and parsed == value and type(parsed) is kind


def test_literal_parser_reads_nan():
    key, value = parse_literal("x=nan")
    assert key == "x" and math.isnan(value)


@pytest.mark.parametrize("token", ["a=x", "a='s'", "a=[1]", "a=", "a=1.2.3", "=1", "1a=2", "class=1", "a",
                                   "a=__import__('os')"])
def test_literal_parser_rejects_with_the_token_named(token):
    with pytest.raises(UsageError) as info:
        parse_literal(token)
    assert repr(token) in str(info.value)


@pytest.mark.parametrize("line, named", [
    ("axpby alpha=oops beta=1", "alpha=oops"),
    ("axpby alpha=1 alpha=2", "alpha=2"),
    ("axpby --bogus", "--bogus"),
    ("axpby --backend gpu", "gpu"),
    ("axpby --outputs two", "two"),
    ("axpby --outputs 9", "--outputs 9"),
    ("2fast alpha=1", "2fast"),
    ("axpby alpha=1 beta=1 --dtype floaty", "floaty"),
    ("axpby alpha=1 beta=1 --dtype float32,,int8", "float32,,int8"),
    ("axpby alpha=1 beta=1 --dtype float32,float32,float32", "float32,float32,float32"),
    ("", "name"),
])
def test_bad_magic_arguments_are_usage_errors_naming_the_token(shell, line, named):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("jiterator", line, AXPBY)
    assert named in str(info.value)
    assert "axpby" not in shell.user_ns


@pytest.mark.parametrize("name, why", [
    ("__builtins__", "is a dunder name"),
    ("__name__", "is a dunder name"),
    ("print", "is a Python builtin; binding it would shadow print in every later cell"),
    ("len", "is a Python builtin"),
    ("ValueError", "is a Python builtin"),
    ("get_ipython", "is one of IPython's own names"),
    ("In", "is one of IPython's own names"),
    ("Out", "is one of IPython's own names"),
    ("exit", "is one of IPython's own names"),
    ("quit", "is one of IPython's own names"),
    ("display", "is one of IPython's own names"),
    ("_", "is one of IPython's own names"),
    ("__", "is one of IPython's own names"),
    ("_i", "is one of IPython's own names"),
    ("_7", "is one of IPython's own names"),
    ("_i12", "is one of IPython's own names"),
    ("class", "is a Python keyword"),
    ("lambda", "is a Python keyword"),
    ("2fast", "is not a Python identifier"),
])
def test_names_that_would_shadow_python_or_ipython_are_refused_and_the_shell_still_works(shell, name, why):
    before = dict(shell.user_ns)
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("jiterator", f"{name} alpha=1 beta=1 --no-panel", AXPBY)
    message = str(info.value)
    assert message.startswith(f"%%jiterator {name}: {name!r} {why}")
    assert "expected a Python identifier that is no keyword, builtin, dunder name or IPython name" in message
    assert shell.user_ns.get(name) is before.get(name)  # nothing was bound
    assert shell.user_ns.keys() == before.keys()
    # the next cells still run: builtins, the history and the shell are what they were
    result = shell.run_cell("after_refusal = len([1, 2]) + len(str(get_ipython() is not None))")
    assert result.success and shell.user_ns.pop("after_refusal") == 6


def test_names_near_the_refused_ones_are_fine():
    from jiter_magic.notebook.names import refusal

    for name in ("print_fn", "my_len", "In2", "_private", "__private", "match", "case", "type_", "i_", "_x1"):
        assert refusal(name) is None, name
    assert refusal("extra", {"extra"}) is not None  # a running shell's own names count too
    assert parse_cell_line("my_len").name == "my_len"


def test_compile_error_fails_the_cell_at_the_editors_line_numbers(shell, capsys):
    """The editor shows the magic line as line 1, so `return x +* 2;` is on line 4 there."""
    with pytest.raises(jiter_magic.CompileError) as info:
        shell.run_cell_magic("jiterator", "broken --no-panel", BROKEN)
    message = str(info.value)
    assert re.search(r"^line 4, column 13: error: ", message, re.M), message  # column 13: the '*'
    assert "\n    4 |   return x +* 2;\n      |             ^" in message  # the source line and the marker under '*'
    assert "broken" not in shell.user_ns
    rendered = "\n".join(info.value._render_traceback_())
    assert rendered.startswith("\x1b[0;31mCompileError")
    assert "line 4" in rendered and "Traceback" not in rendered and "magic.py" not in rendered

    result = shell.run_cell("%%jiterator broken --no-panel\n" + BROKEN)
    assert isinstance(result.error_in_exec, jiter_magic.CompileError)
    shown = capsys.readouterr().out
    assert "line 4" in shown and "error" in shown
    assert "Traceback" not in shown and "site-packages" not in shown and "jiter_magic/" not in shown


def test_code_without_a_function_is_a_parse_error(shell):
    with pytest.raises(jiter_magic.ParseError) as info:
        shell.run_cell_magic("jiterator", "f --no-panel", "int x = 3;")
    assert isinstance(info.value, ValueError)
    with pytest.raises(jiter_magic.ParseError, match=r"on line 3 of the cell"):  # the editor's numbers, the cell's words
        shell.run_cell_magic("jiterator", "f --no-panel", "// two lines\ntemplate <typename T> T f(T x) { return x; ")
    assert "Traceback" not in "\n".join(info.value._render_traceback_())


def test_kwarg_that_is_not_a_parameter_is_a_bind_error(shell):
    with pytest.raises(jiter_magic.BindError) as info:
        shell.run_cell_magic("jiterator", "axpby gamma=1.0 --no-panel", AXPBY)
    assert "gamma" in str(info.value)
    assert "ParseError" not in info.value._render_traceback_()[0]


def test_panel_is_displayed_unless_no_panel(shell, capsys):
    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --backend cpu", AXPBY)
    shown = capsys.readouterr().out
    assert "JitFunction axpby: template <typename T> T axpby(T x, T y, T alpha, T beta)" in shown
    assert "kwargs: alpha=1.0, beta=0.5" in shown and "backend: cpu" in shown
    assert "#0 cpu: (float32, float32) -> (float32)" in shown
    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel", AXPBY)
    assert capsys.readouterr().out == ("axpby: reused from memory (an equal function had it) for the CPU, "
                                       "(float32, float32) -> (float32)\n")  # the summary line only
    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel --quiet", AXPBY)
    assert capsys.readouterr().out == ""


def test_the_summary_line_says_what_was_built_where_and_how(shell, fresh_cache, capsys):
    code = AXPBY + "\n// summary test"
    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel --backend cpu --dtype float64", code)
    line = capsys.readouterr().out
    assert re.fullmatch(r"axpby: compiled in \d+\.\d\d s for the CPU, \(float64, float64\) -> \(float64\)\n", line), line
    from helpers import forget_loaded_kernels

    forget_loaded_kernels()  # the next cell finds the kernel on disk
    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel --backend cpu --dtype float64", code)
    assert capsys.readouterr().out == ("axpby: loaded from the disk cache for the CPU, "
                                       "(float64, float64) -> (float64)\n")
    warned = "template <typename T> T warned(T x) {\n  int unused = 1;\n  return x;\n}"
    shell.run_cell_magic("jiterator", "warned --no-panel --backend cpu", warned)
    line = capsys.readouterr().out
    assert line.endswith("; 1 compiler warning(s): see warned.warnings\n"), line
    (log,) = shell.user_ns.pop("warned").warnings
    assert "line 3, column 7: warning: unused variable ‘unused’ [-Wunused-variable]\n    3 |   int unused = 1;\n" \
           "      |       ^" in log  # the editor's line 3, and g++'s marker under the name


@pytest.mark.skipif(jiter_magic.runtime.inspection.cuda_available(), reason="the warning is for machines without a GPU")
def test_backend_cuda_without_a_gpu_warns_at_once(shell, capsys):
    with pytest.warns(RuntimeWarning, match=r"^%%jiterator axpby --backend cuda: no GPU found here, so the kernel is "
                                            r"only compiled \(for sm_\d+, to check it\)"):
        shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel --backend cuda", AXPBY)
    assert re.fullmatch(r"axpby: (compiled in \d+\.\d\d s|loaded from the disk cache) for CUDA sm_\d+ \(no GPU found: "
                        r"compiled only, to check it\), \(float32, float32\) -> \(float32\)\n", capsys.readouterr().out)


def test_running_a_cell_again_marks_the_earlier_functions_panels(shell):
    pytest.importorskip("ipywidgets")
    from jiter_magic.notebook import widgets

    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel --quiet", AXPBY)
    first = shell.user_ns["axpby"]
    shown = widgets.panel(first)
    assert "now names another function" not in shown.header.value
    shell.run_cell_magic("jiterator", "axpby alpha=2.0 beta=0.5 --no-panel --quiet", AXPBY)
    assert shell.user_ns["axpby"] is not first
    assert shown.header.value.startswith("<div><b>axpby</b> now names another function (its cell ran again)")
    shown.close()


def test_the_magic_help_is_plain_text(shell):
    doc = JiteratorMagics.jiterator.__doc__
    assert "::" not in doc and "`" not in doc
    assert "Example:\n" in doc and "%%jiterator axpby alpha=1.0 beta=0.0" in doc


@pytest.mark.parametrize("line", ["", "   ", "--quiet", "--backend cpu --no-panel"])
def test_a_line_without_a_name_says_what_the_magic_needs(shell, line):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("jiterator", line, AXPBY)
    message = str(info.value)
    assert message.startswith("%%jiterator needs the name of the function to make, then optional key=value")
    assert "%%jiterator NAME [key=value ...]" in message
    assert "for example: %%jiterator my_kernel alpha=1.0" in message
    assert "required" not in message  # not argparse's "required: name, key=value"


@pytest.mark.parametrize("line", ["", "   "])
def test_a_bare_backward_line_says_what_the_magic_needs_with_an_example(shell, line):
    shell.run_cell_magic("jiterator", "sq a=2.0 --no-panel --quiet",
                         "template <typename T> T sq(T x, T a) { return a * x * x; }")
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("jiterator_backward", line, "template <typename T> void b(T x, T a, T g, T& gx) { }")
    message = str(info.value)
    assert message.startswith("%%jiterator_backward needs the name of a function jitted earlier (by %%jiterator")
    assert "the backward functor as the cell: %%jiterator_backward NAME; for example: %%jiterator_backward axpy" in message
    assert "void axpy_bwd(T x, T y, T alpha, T g, T& gx, T& gy)" in message
    assert "required" not in message  # not argparse's "the following arguments are required: name"
    assert shell.user_ns["sq"].backward is None  # nothing was defined


def test_the_help_opens_with_the_usage_line(shell, capsys):
    usage = ("%%jiterator NAME [key=value ...] [--outputs N] [--backend auto|cuda|cpu] [--dtype DTYPE] "
             "[--reduce | --scan] [--no-panel] [--quiet]")
    assert shell.find_cell_magic("jiterator").__doc__.splitlines()[:3] == [
        usage, "", "Jit the cell's C++ functor and bind it to NAME in the notebook."]
    for kind, name, first in [("cell", "jiterator_backward", "%%jiterator_backward name"),
                              ("line", "jiterator_cache", "%jiterator_cache [--clear]"),
                              ("line", "jiterator_bench", "%jiterator_bench [-n REPEAT] [-w WARMUP] [--against EXPR] CALL")]:
        assert shell.magics_manager.magics[kind][name].__doc__.splitlines()[0] == first
    capsys.readouterr()
    shell.run_line_magic("pinfo", "%%jiterator")  # what `%%jiterator?` shows
    shown = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in capsys.readouterr().out.splitlines()]
    assert shown[0].strip() == "Docstring:"  # IPython's own heading
    assert shown[1] == usage


def test_cache_magic_reports_and_clears(shell, fresh_cache, capsys):
    # a code string no other test uses: its kernel is not already loaded in this process
    shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --no-panel", AXPBY + "\n// cache magic test")
    shell.run_line_magic("jiterator_cache", "")
    report = capsys.readouterr().out
    stats = jiter_magic.cache_stats()
    assert stats["entries"] >= 1
    assert f"root:         {fresh_cache}" in report
    assert f"entries:      {stats['entries']} (" in report
    assert f"compiles:     {stats['compiles']} (" in report

    shell.run_line_magic("jiterator_cache", "--clear")
    assert capsys.readouterr().out.startswith(f"cleared {stats['entries']} entries")
    after = jiter_magic.cache_stats()
    assert (after["entries"], after["bytes"], after["compiles"]) == (0, 0, 0)

    with pytest.raises(UsageError) as info:
        shell.run_line_magic("jiterator_cache", "--purge")
    assert "--purge" in str(info.value)


def test_help_is_the_argument_docstring(shell):
    doc = shell.find_cell_magic("jiterator").__doc__
    for option in ("%%jiterator", "--outputs N", "--backend", "--dtype DTYPE", "--no-panel", "key=value"):
        assert option in doc
    assert "--clear" in shell.find_line_magic("jiterator_cache").__doc__


def test_unload_removes_the_magics(shell):
    shell.run_line_magic("unload_ext", "jiter_magic")
    assert shell.find_cell_magic("jiterator") is None
    assert shell.find_line_magic("jiterator_cache") is None
    assert "JiteratorMagics" not in shell.magics_manager.registry
    shell.run_line_magic("load_ext", "jiter_magic")
    assert shell.find_cell_magic("jiterator") is not None
    assert isinstance(shell.magics_manager.registry["JiteratorMagics"], JiteratorMagics)


HEAVY = ("torch", "cupy", "numpy", "IPython", "ipywidgets", "pygments")


def _modules_loaded_by(statements: str) -> list[str]:
    code = f"import sys\n{statements}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return ast.literal_eval(out.stdout.strip())


def test_importing_the_package_imports_no_array_library_or_ipython():
    assert _modules_loaded_by("import jiter_magic") == []
    # Creating a function parses and binds only; the first call loads the library of its inputs.
    assert _modules_loaded_by("import jiter_magic\n"
                              "jiter_magic.create_jit_fn('template <typename T> T f(T x) { return x; }')") == []
    assert _modules_loaded_by("import numpy, jiter_magic\n"
                              "jiter_magic.create_jit_fn('template <typename T> T f(T x) { return x; }')"
                              "(numpy.ones(2))") == ["numpy"]


def test_the_import_check_sees_a_loaded_library():
    assert _modules_loaded_by("import numpy") == ["numpy"]


def test_cuda_backend_compiles_with_nvrtc_without_a_gpu(shell):
    """NVRTC compiles on any machine with CuPy and the CUDA headers; the panel then shows CUDA source."""
    try:
        shell.run_cell_magic("jiterator", "axpby alpha=1.0 beta=0.5 --backend cuda --no-panel", AXPBY)
    except jiter_magic.ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    fn = shell.user_ns["axpby"]
    assert fn.backend == "cuda"
    first = fn.specializations[0]
    assert first.backend == "cuda" and "__global__" in first.source and first.binary_size > 0


def test_a_failed_compile_with_the_panel_shows_the_attempt_then_fails(shell, capsys):
    from jiter_magic.notebook.panel_html import failed_html

    result = shell.run_cell("%%jiterator broken\n" + BROKEN)
    assert isinstance(result.error_in_exec, jiter_magic.CompileError) and "broken" not in shell.user_ns
    shown = capsys.readouterr().out
    attempt = shown.index("broken: the functor did not compile (the error below gives the compiler's log)")
    assert attempt < shown.index("line 4, column 13: error: ")  # the attempt first, then the error

    log = str(result.error_in_exec.log)
    assert "error: invalid type argument of unary" in log and "error: invalid type argument of unary" in shown
    markup = failed_html("broken", "\n" + BROKEN, log)
    assert markup.startswith('<div class="jiter-magic"><p><b>broken</b> did not compile (1 line named by the compiler')
    assert re.search(r'font-weight:bold;user-select:none">\s*>4</span>', markup)  # line 4 marked, as the editor counts
    assert not re.search(r">\s*>[0-35-9]</span>", markup)  # and no other line
    assert "invalid type argument" not in markup  # the log is shown once: in the error below the attempt
    assert shown.count("error: invalid type argument of unary") == log.count("error: invalid type argument of unary")


def test_the_backward_magic_gives_a_jitted_function_its_gradient(shell, capsys):
    torch = pytest.importorskip("torch")
    shell.run_cell_magic("jiterator", "sq a=2.0 --no-panel --quiet",
                         "template <typename T> T sq(T x, T a) { return a * x * x; }")
    shell.run_cell_magic("jiterator_backward", "sq",
                         "template <typename T> void sq_bwd(T x, T a, T g, T& gx) { gx = 2 * a * x * g; }")
    assert capsys.readouterr().out.startswith("sq: backward sq_bwd defined (compiled in ")
    x = torch.tensor([1.0, 3.0], requires_grad=True)
    shell.user_ns["sq"](x).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([4.0, 12.0]))

    with pytest.raises(jiter_magic.CompileError, match=r"line 4, column 10: error"):  # the editor's numbers
        shell.run_cell_magic("jiterator_backward", "sq", "template <typename T>\nvoid sq_bwd(T x, T a, T g, T& gx) "
                                                         "{\n gx = g +* 2; }")
    assert shell.user_ns["sq"].backward.code.endswith("gx = 2 * a * x * g; }")  # the earlier backward stays
    with pytest.raises(jiter_magic.BindError, match="^the backward of sq: num_outputs=1"):
        shell.run_cell_magic("jiterator_backward", "sq", "template <typename T> void b(T x, T a, T g) { }")
    with pytest.raises(UsageError, match=r"%%jiterator_backward nothing: nothing is not defined"):
        shell.run_cell_magic("jiterator_backward", "nothing", "template <typename T> void b(T x, T& y) { y = x; }")
    shell.user_ns["number"] = 3
    with pytest.raises(UsageError, match=r"number is a int; name a function made by %%jiterator"):
        shell.run_cell_magic("jiterator_backward", "number", "template <typename T> void b(T x, T& y) { y = x; }")
