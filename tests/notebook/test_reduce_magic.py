"""`%%jiterator NAME --reduce ...` through a real IPython shell: the reduction it binds, its options,
the compile at cell time, its errors and the completion of its line. The CPU backend (g++), no GPU."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

pytest.importorskip("IPython")
torch = pytest.importorskip("torch")

from IPython.core.completer import provisionalcompleter  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic.notebook.cell_combine import CellReduction  # noqa: E402
from jiter_magic.notebook.magic import JiteratorMagics  # noqa: E402

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
ROOT = "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n"
SCALED = "template <typename T> T scaled(T x, T scale) { return scale * x; }\n"
SHIFTED_EXP = "template <typename T> T shifted_exp(T x, T m) { return exp(x - m); }\n"
LOG = "template <typename T> T log_of(T total, int64_t n) { return log(total); }\n"


def test_a_reduce_cell_binds_a_reduction_with_the_one_combine_it_defines(shell, capsys):
    shell.run_cell_magic("jiterator", "sum_sq --reduce identity=0 --no-panel", SQ + ADD)
    fn = shell.user_ns["sum_sq"]
    assert isinstance(fn, jiter_magic.ReductionFunction) and isinstance(fn, CellReduction)
    assert fn.binding.combine.name == "add" and fn.binding.map.functor.name == "sq"
    assert fn.code == "\n" + SQ + ADD  # line 1 stands for the magic line, as in the editor
    assert len(fn.specializations) == 1 and fn.specializations[0].spec.inputs == ("float32",)
    assert re.fullmatch(r"sum_sq \(sq\): compiled in \d+\.\d\d s for the CPU, reduce \(float32\) -> float32, "
                        r"accumulating float32\n", capsys.readouterr().out)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    total = fn(x)
    assert total.dtype == torch.float32 and total.shape == ()
    torch.testing.assert_close(total, (x * x).sum())
    torch.testing.assert_close(fn(x, dim=1, keepdim=True), (x * x).sum(dim=1, keepdim=True))
    ints = np.arange(5, dtype=np.int32)
    assert fn(ints).dtype == np.int64 and int(fn(ints)) == 30  # torch.sum's dtypes: integers give int64


def test_dim_on_the_line_is_the_default_and_a_call_overrides_it(shell):
    shell.run_cell_magic("jiterator", "row_sq --reduce identity=0 dim=-1 --no-panel --quiet", SQ + ADD)
    fn = shell.user_ns["row_sq"]
    assert fn.default_dim == -1
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    torch.testing.assert_close(fn(x), (x * x).sum(dim=-1))
    torch.testing.assert_close(fn(x, dim=0), (x * x).sum(dim=0))
    full = fn(x, dim=None)  # None still means every dim
    assert full.shape == () and float(full) == 55.0 and full.dtype == torch.float64
    assert fn.specializations[0].spec.kept_ndim == 1  # the cell compiled the row kernel its dim needs
    shell.run_cell_magic("jiterator", "cols --reduce identity=0 dim=(0,1) --no-panel --quiet", SQ + ADD)
    assert shell.user_ns["cols"].default_dim == (0, 1)
    assert float(shell.user_ns["cols"](torch.ones(2, 3, 4)).sum()) == 24.0


def test_map_finalize_and_extras_are_named_on_the_line(shell):
    shell.run_cell_magic("jiterator", "norm --reduce identity=0 combine=add map=sq finalize=root --no-panel --quiet",
                         SQ + ADD + ROOT)
    x = torch.tensor([[3.0, 4.0], [6.0, 8.0]])
    torch.testing.assert_close(shell.user_ns["norm"](x, dim=1), torch.linalg.vector_norm(x, dim=1))
    shell.run_cell_magic("jiterator", "scaled_sum --reduce identity=0 scale=2.0 --no-panel --quiet", SCALED + ADD)
    fn = shell.user_ns["scaled_sum"]
    assert fn.kwargs == {"scale": 2.0} and fn.binding.map.functor.name == "scaled"
    y = np.arange(4, dtype=np.float64)
    assert float(fn(y)) == 12.0 and float(fn(y, scale=0.5)) == 3.0


def test_a_two_input_map_and_a_finalize_make_logsumexp(shell):
    shell.run_cell_magic("jiterator", "lse --reduce identity=0 combine=add finalize=log_of dim=-1 --no-panel --quiet",
                         SHIFTED_EXP + ADD + LOG)
    fn = shell.user_ns["lse"]
    assert fn.num_inputs == 2
    x = torch.tensor([[1000.0, 1000.5, 999.0], [-3.0, 0.0, 2.0]])
    m = x.amax(dim=-1, keepdim=True)
    torch.testing.assert_close(fn(x, m) + m.squeeze(-1), torch.logsumexp(x, dim=-1))


def test_dtype_compiles_the_cell_for_that_dtype(shell):
    shell.run_cell_magic("jiterator", "s64 --reduce identity=0 --dtype float64 --no-panel --quiet", SQ + ADD)
    spec = shell.user_ns["s64"].specializations[0].spec
    assert (spec.inputs, spec.output, spec.accumulate) == (("float64",), "float64", "float64")
    shell.run_cell_magic("jiterator", "si --reduce identity=0 --dtype int16 --no-panel --quiet", SQ + ADD)
    spec = shell.user_ns["si"].specializations[0].spec
    assert (spec.inputs, spec.output, spec.accumulate) == (("int16",), "int64", "int64")
    shell.run_cell_magic("jiterator", "sb --reduce identity=0 --dtype bfloat16 --no-panel --quiet", SQ + ADD)
    assert shell.user_ns["sb"].specializations[0].spec.accumulate == "float32"


KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = b > a || (b == a && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")


def test_outputs_2_gives_values_with_their_indices(shell, capsys):
    shell.run_cell_magic("jiterator", "argmax --reduce --outputs 2 dim=1 --no-panel", KEEP_MAX)
    assert re.fullmatch(r"argmax \(keep_max\): compiled in \d+\.\d\d s for the CPU, reduce \(float32\) -> "
                        r"\(float32, int64 index\), accumulating float32\n", capsys.readouterr().out)
    fn = shell.user_ns["argmax"]
    assert fn.num_outputs == 2 and fn.binding.indexed and fn.binding.combine.name == "keep_max"
    x = torch.tensor([[1.0, 7.0, 7.0], [9.0, 2.0, 9.0]])
    values, indices = fn(x)
    assert torch.equal(values, torch.tensor([7.0, 9.0])) and torch.equal(indices, torch.tensor([1, 0]))
    assert int(fn(x, dim=None).indices) == 3  # the flat index, as torch.argmax


def test_a_max_takes_inf_as_its_identity(shell):
    code = "template <typename T> T larger(T a, T b) { return a > b ? a : b; }\n"
    shell.run_cell_magic("jiterator", "amax --reduce identity=-inf dim=0 --no-panel --quiet", code)
    fn = shell.user_ns["amax"]
    assert fn.identity == -math.inf and fn.binding.map is None
    x = torch.tensor([[1.0, 7.0], [9.0, 2.0]])
    torch.testing.assert_close(fn(x), torch.tensor([9.0, 7.0]))


@pytest.mark.parametrize("line, code, expected", [
    ("s --reduce", SQ + ADD, "--reduce needs identity=VALUE"),
    ("s --reduce identity=0 --outputs 3", SQ + ADD, "--reduce --outputs 3: a reduction has one result, or with "
                                                    "--outputs 2"),
    ("s --reduce --outputs 2", SQ + ADD, "none of its functions ['sq', 'add'] takes two values with their indices"),
    ("s --reduce identity=0 --backend cpu", SQ + ADD, "--reduce --backend cpu: a reduction runs where its inputs live"),
    ("s --reduce identity=0", SHIFTED_EXP + ADD, "name the combine function with combine=NAME: several functions "
                                                 "could combine, ['shifted_exp', 'add']"),
    ("s --reduce identity=0", ROOT, "none of its functions ['root'] takes two values of one type"),
    ("s --reduce identity=0 dim=x", SQ + ADD, "'dim=x': dim must be an int, a tuple of ints"),
    ("s --reduce identity=0 dim=1.5", SQ + ADD, "'dim=1.5': dim must be an int"),
    ("s --reduce identity=0 combine=1", SQ + ADD, "'combine=1': combine= names a C++ function of the cell"),
    ("s --reduce identity=0 identity=1", SQ + ADD, "'identity=1': identity is given twice"),
    ("s --reduce identity=1j", SQ + ADD, "identity=1j: identity must be a Python number"),
    ("s --reduce identity=zero", SQ + ADD, "'identity=zero': the value of identity must be"),
    ("s combine=add", SQ + ADD, "'combine=add': combine= names the combine function of a reduction, and without "
                                "--reduce the line makes an elementwise function; for a reduction write "
                                "%%jiterator s --reduce identity=VALUE combine=add"),
    ("s map=sq identity=0", SQ + ADD, "for a reduction write %%jiterator s --reduce map=sq identity=0"),
    ("s --reduce identity=0 dim=(0,0)", SQ + ADD, "'dim=(0,0)': dim 0 is given twice; each dim is reduced once"),
    ("s --reduce identity=0 dim=(1,-70)", SQ + ADD, "'dim=(1,-70)': no array has a dim -70 (arrays have at most 64"),
    ("s --reduce identity=0 --dtype complex64", SQ + ADD, "--dtype complex64: reductions of complex64 are not supported"),
    ("s --reduce identity=0 --dtype float32,float32", SQ + ADD, "--dtype float32,float32: sq takes 1 input(s) ['x'], "
                                                                "got 2 dtypes"),
    ("s --reduce identity=0.5 --dtype int32", SQ + ADD, "--dtype int32: identity 0.5 is not an integer"),
    ("s --reduce identity=0 --dtype floaty", SQ + ADD, "--dtype floaty"),
])
def test_bad_reduce_lines_are_usage_errors_saying_why(shell, line, code, expected):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("jiterator", line + " --no-panel", code)
    assert expected in str(info.value)
    assert "s" not in shell.user_ns


def test_functions_the_line_names_wrong_are_bind_errors_of_the_cell(shell):
    with pytest.raises(jiter_magic.BindError) as info:
        shell.run_cell_magic("jiterator", "s --reduce identity=0 combine=plus --no-panel", SQ + ADD)
    assert str(info.value) == "combine='plus' names no function of the cell; it defines ['sq', 'add']"
    assert "Traceback" not in "\n".join(info.value._render_traceback_())
    with pytest.raises(jiter_magic.BindError, match="the finalize function must take two parameters"):
        shell.run_cell_magic("jiterator", "s --reduce identity=0 combine=add finalize=sq --no-panel", SQ + ADD)
    with pytest.raises(jiter_magic.BindError, match="gamma"):
        shell.run_cell_magic("jiterator", "s --reduce identity=0 gamma=1.0 --no-panel", SQ + ADD)


def test_a_compile_error_fails_the_cell_at_the_editors_line_numbers(shell, capsys):
    broken = "template <typename T> T sq(T x) {\n  return x +* 2;\n}\n" + ADD
    result = shell.run_cell("%%jiterator broken_sum --reduce identity=0\n" + broken)
    error = result.error_in_exec
    assert isinstance(error, jiter_magic.CompileError) and "broken_sum" not in shell.user_ns
    assert re.search(r"^line 3, column 13: error: ", str(error), re.M), str(error)  # the '*' on the editor's line 3
    shown = capsys.readouterr().out
    assert "broken_sum: the functor did not compile" in shown and "Traceback" not in shown


def test_the_panel_is_printed_unless_no_panel(shell, capsys):
    shell.run_cell_magic("jiterator", "norm --reduce identity=0 combine=add finalize=root dim=1", SQ + ADD + ROOT)
    shown = capsys.readouterr().out
    assert "ReductionFunction norm: combine add, map sq, finalize root" in shown  # the cell's name, not sq
    assert "inputs: x; identity: 0; kwargs: none; default dim: 1" in shown
    assert "#0 cpu: reduce (float32) -> float32 accumulating float32, host 1-d kept x 1-d reduced" in shown
    shell.run_cell_magic("jiterator", "norm --reduce identity=0 combine=add finalize=root --quiet --no-panel",
                         SQ + ADD + ROOT)
    assert capsys.readouterr().out == ""


def test_running_the_cell_again_rebinds_and_marks_the_earlier_panels(shell):
    pytest.importorskip("ipywidgets")
    from jiter_magic.notebook import widgets

    shell.run_cell_magic("jiterator", "s --reduce identity=0 --no-panel --quiet", SQ + ADD)
    first = shell.user_ns["s"]
    shown = widgets.panel(first)
    shell.run_cell_magic("jiterator", "s --reduce identity=0 dim=0 --no-panel --quiet", SQ + ADD)
    assert shell.user_ns["s"] is not first
    assert shown.header.value.startswith("<div><b>s</b> now names another function (its cell ran again)")
    shown.close()


def test_the_help_and_the_usage_name_reduce(shell):
    doc = JiteratorMagics.jiterator.__doc__
    assert "--reduce" in doc.splitlines()[0]
    assert "With --reduce the cell is a reduction" in doc and "%%jiterator sum_sq --reduce identity=0 dim=-1" in doc
    with pytest.raises(UsageError, match=r"a reduction: %%jiterator NAME --reduce identity=0"):
        shell.run_cell_magic("jiterator", "", SQ + ADD)


BODY = "\n" + SQ + ADD + ROOT


@pytest.mark.parametrize("text, expected", [
    ("%%jiterator s --re", ["--reduce"]),
    ("%%jiterator s --reduce ", ["combine=", "dim=", "finalize=", "identity=", "map="]),
    ("%%jiterator s --reduce identity=0 fi", ["finalize="]),
    ("%%jiterator s --reduce identity=0 ", ["combine=", "dim=", "finalize=", "map="]),
    ("%%jiterator s --reduce combine=", ["add", "root", "sq"]),  # the cell's own functions
    ("%%jiterator s --reduce finalize=r", ["root"]),
])
def test_the_reduce_line_completes_its_keys_and_the_cells_functions(shell, text, expected):
    with provisionalcompleter():
        offered = [c.text for c in shell.Completer.completions(text + BODY, len(text))]
    assert offered == expected


def test_a_pickled_cell_reduction_keeps_its_dim_and_every_option(shell):
    import pickle

    shell.run_cell_magic("jiterator", "rows_scaled --reduce identity=0 dim=1 scale=3.0 --no-panel --quiet",
                         SCALED + ADD)
    fn = shell.user_ns["rows_scaled"]
    fn.backend = "cpu"
    again = pickle.loads(pickle.dumps(fn))
    assert isinstance(again, CellReduction) and again.default_dim == 1 and again.backend == "cpu"
    assert again.kwargs == {"scale": 3.0}
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    torch.testing.assert_close(again(x), (3 * x).sum(1))
    assert pickle.loads(pickle.dumps(fn)) is again  # unchanged since: the same function again
    fn.default_dim = 0
    changed = pickle.loads(pickle.dumps(fn))
    torch.testing.assert_close(changed(x), (3 * x).sum(0))


def test_a_dim_beyond_any_array_compiles_and_the_call_says_what_was_wrong(shell):
    shell.run_cell_magic("jiterator", "far --reduce identity=0 dim=40 --no-panel --quiet", ADD)
    fn = shell.user_ns["far"]
    assert [s.spec.inputs for s in fn.specializations] == [("float32",)]  # compiled, no 41-d array made
    with pytest.raises(jiter_magic.DimensionError, match="40"):
        fn(torch.ones(2, 3))


def test_a_displayed_reduction_is_titled_by_the_name_the_cell_assigned(shell, capsys):
    """Issue 45: `sum_sq = create_reduction_fn(...)` then `sum_sq` shows sum_sq, not its map's C++ name."""
    shell.user_ns["code"] = SQ + ADD
    assert shell.run_cell("import jiter_magic\nsum_sq = jiter_magic.create_reduction_fn(code, 0, combine='add')\n"
                          "sum_sq").success
    assert "ReductionFunction sum_sq: combine add, map sq" in capsys.readouterr().out
