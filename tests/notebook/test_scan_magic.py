"""`%%jiterator NAME --scan ...` through a real IPython shell: the scan it binds, its default dim,
`--outputs N` (values with indices, a state of several values), the compile at cell time, its
errors and pickling. The CPU backend (g++), no GPU."""
from __future__ import annotations

import pickle
import re

import numpy as np
import pytest

pytest.importorskip("IPython")
torch = pytest.importorskip("torch")

from IPython.core.completer import provisionalcompleter  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic.notebook.cell_combine import CellScan  # noqa: E402

ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
SCALED = "template <typename T> T scaled(T x, T scale) { return scale * x; }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool an = a != a, bn = b != b;\n"
            "  const bool take_b = bn ? (!an || ib > ia) : (!an && (b > a || (b == a && ib > ia)));\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")
AFFINE = ("template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b) {\n"
          "  a = a1 * a2; b = a2 * b1 + b2;\n}\n")
EMA = "template <typename T> void ema(T x, T decay, T& a, T& b) { a = decay; b = (T(1) - decay) * x; }\n"


def test_a_scan_cell_binds_a_cumsum_with_its_default_dim(shell, capsys):
    shell.run_cell_magic("jiterator", "cumsum --scan identity=0 dim=-1 --no-panel", ADD)
    fn = shell.user_ns["cumsum"]
    assert isinstance(fn, jiter_magic.ScanFunction) and isinstance(fn, CellScan)
    assert fn.default_dim == -1 and fn.binding.combine.name == "add" and fn.identity == (0,)
    assert fn.code == "\n" + ADD
    assert [s.spec.inputs for s in fn.specializations] == [("float32",)]  # compiled at cell time
    assert re.fullmatch(r"cumsum \(add\): compiled in \d+\.\d\d s for the CPU, scan \(float32\) -> float32, "
                        r"accumulating float32\n", capsys.readouterr().out)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert torch.equal(fn(x), torch.cumsum(x, -1)) and fn(x).dtype == torch.float32
    assert torch.equal(fn(x, dim=0), torch.cumsum(x, 0))  # a call's dim overrides the line's
    assert torch.equal(fn(x, reverse=True), torch.cumsum(x.flip(-1), -1).flip(-1))
    ints = np.arange(5, dtype=np.int32)
    assert fn(ints).dtype == np.int64 and fn(ints).tolist() == [0, 1, 3, 6, 10]  # torch.cumsum's dtypes


def test_without_dim_on_the_line_each_call_gives_one(shell):
    shell.run_cell_magic("jiterator", "running_mean --scan identity=0 finalize=mean scale=2.0 --no-panel --quiet",
                         SCALED + ADD + MEAN)
    fn = shell.user_ns["running_mean"]
    assert fn.kwargs == {"scale": 2.0} and fn.binding.map.functor.name == "scaled"
    x = torch.tensor([[1.0, 3.0, 5.0]])
    torch.testing.assert_close(fn(x, dim=1), torch.tensor([[2.0, 4.0, 6.0]]))
    torch.testing.assert_close(fn(x, dim=1, scale=1.0), torch.tensor([[1.0, 2.0, 3.0]]))
    with pytest.raises(jiter_magic.JiterError, match="dim"):
        fn(x)


def test_outputs_2_with_an_indexed_combine_is_a_cummax(shell, capsys):
    shell.run_cell_magic("jiterator", "cummax --scan --outputs 2 dim=1 --no-panel", KEEP_MAX)
    assert re.fullmatch(r"cummax \(keep_max\): compiled in \d+\.\d\d s for the CPU, scan \(float32\) -> "
                        r"\(float32, int64 index\), accumulating float32\n", capsys.readouterr().out)
    fn = shell.user_ns["cummax"]
    x = torch.tensor([[1.0, 7.0, 7.0, 2.0], [9.0, 2.0, 9.0, 10.0]])
    values, indices = fn(x)
    expected = torch.cummax(x, 1)
    assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)


def test_outputs_2_with_a_state_of_two_values_is_a_linear_recurrence(shell, capsys):
    shell.run_cell_magic("jiterator", "ema --scan --outputs 2 identity=(1,0) decay=0.5 dim=-1 --dtype float64 "
                         "--no-panel", EMA + AFFINE)
    assert "scan (float64) -> 2 x float64, accumulating float64" in capsys.readouterr().out
    fn = shell.user_ns["ema"]
    assert fn.identity == (1, 0) and fn.binding.state == 2 and fn.binding.combine.name == "affine"
    x = torch.tensor([[2.0, 4.0, 8.0]], dtype=torch.float64)
    _products, h = fn(x)
    assert h.tolist() == [[1.0, 2.5, 5.25]]  # h[t] = 0.5 h[t-1] + 0.5 x[t]
    _products, h = fn(x, decay=0.0)
    assert torch.equal(h, x)


@pytest.mark.parametrize("line, code, expected", [
    ("s --scan", ADD, "--scan needs identity=VALUE, the value combine leaves every value unchanged with: "
                      "identity=0 for a cumsum"),
    ("s --scan --reduce identity=0", ADD, "--reduce --scan: a cell makes one function"),
    ("s --scan identity=0 dim=(0,1)", ADD, "'dim=(0,1)': a scan runs along one dim: dim must be an int"),
    ("s --scan identity=0 dim=None", ADD, "'dim=None': a scan runs along one dim"),
    ("s --scan identity=0 dim=x", ADD, "'dim=x': a scan runs along one dim"),
    ("s --scan identity=0 dim=64", ADD, "'dim=64': no array has a dim 64 (arrays have at most 64 dims)"),
    ("s --scan identity=0 dim=-65", ADD, "'dim=-65': no array has a dim -65"),
    ("s --scan identity=0 --outputs 5", ADD, "--scan --outputs 5: a scan has one result, or with --outputs 2"),
    ("s --scan identity=0 --backend cpu", ADD, "--scan --backend cpu: a scan runs where its inputs live"),
    ("s --scan --outputs 2", AFFINE, "no identity= given: the state of affine holds 2 values: identity must be a "
                                     "tuple of 2 numbers"),
    ("s --scan --outputs 3 identity=(1,0,0)", AFFINE, "none of its functions ['affine'] takes two states of 3 values"),
    ("s --scan --outputs 2 identity=(1,)", AFFINE, "identity=(1,): the state of affine holds 2 values"),
    ("s --scan --outputs 2 identity=(1,,0)", AFFINE, "expected identity=(VALUE,VALUE,...)"),
    ("s --scan identity=0", AFFINE, "none of its functions ['affine'] takes two values of one type"),
    ("s --scan identity=0 --dtype complex64", ADD, "--dtype complex64"),
    ("s map=add", ADD, "for a reduction write %%jiterator s --reduce identity=VALUE map=add (for a scan, --scan in "
                       "place of --reduce)"),
])
def test_bad_scan_lines_are_usage_errors_saying_why(shell, line, code, expected):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("jiterator", line + " --no-panel", code)
    assert expected in str(info.value)
    assert "s" not in shell.user_ns


def test_a_compile_error_fails_the_scan_cell_at_the_editors_line_numbers(shell, capsys):
    result = shell.run_cell("%%jiterator broken --scan identity=0\ntemplate <typename T> T add(T a, T b) {\n"
                            "  return a +* b;\n}\n")
    error = result.error_in_exec
    assert isinstance(error, jiter_magic.CompileError) and "broken" not in shell.user_ns
    assert re.search(r"^line 3, ", str(error), re.M), str(error)
    assert "broken: the functor did not compile" in capsys.readouterr().out


def test_the_scan_cell_shows_the_panel_the_reduce_cell_shows(shell, capsys):
    shell.run_cell_magic("jiterator", "cumsum --scan identity=0 dim=1", ADD)
    shown = capsys.readouterr().out
    assert "cumsum: combine add, no map (the elements themselves)" in shown  # titled by the cell's name
    assert "default dim: 1" in shown and "#0 cpu: scan (float32) -> float32 accumulating float32" in shown


def test_a_pickled_cell_scan_keeps_its_dim_and_every_option(shell):
    shell.run_cell_magic("jiterator", "ema --scan --outputs 2 identity=(1,0) decay=0.25 dim=0 --no-panel --quiet",
                         EMA + AFFINE)
    fn = shell.user_ns["ema"]
    fn.backend = "cpu"
    again = pickle.loads(pickle.dumps(fn))
    assert isinstance(again, CellScan) and again.default_dim == 0 and again.backend == "cpu"
    assert again.kwargs == {"decay": 0.25} and again.identity == (1, 0) and again.num_outputs == 2
    x = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    torch.testing.assert_close(again(x)[1], fn(x, dim=0)[1])
    assert pickle.loads(pickle.dumps(fn)) is again  # unchanged since: the same function again
    fn.default_dim = 1
    changed = pickle.loads(pickle.dumps(fn))
    assert changed is not again and changed.default_dim == 1
    torch.testing.assert_close(changed(x)[1], fn(x, dim=1)[1])


def test_the_help_and_the_usage_name_scan(shell):
    doc = jiter_magic.notebook.magic.JiteratorMagics.jiterator.__doc__
    assert "[--reduce | --scan]" in doc.splitlines()[0]
    assert "With --scan the cell is a scan" in doc and "%%jiterator cumsum --scan identity=0 dim=-1" in doc
    with pytest.raises(UsageError, match=r"a scan: %%jiterator NAME --scan identity=0 dim=-1"):
        shell.run_cell_magic("jiterator", "", ADD)


@pytest.mark.parametrize("text, expected", [
    ("%%jiterator s --sc", ["--scan"]),
    ("%%jiterator s --scan identity=0 ", ["combine=", "dim=", "finalize=", "map="]),
    ("%%jiterator s --scan combine=", ["add", "mean"]),
])
def test_the_scan_line_completes_its_keys_and_the_cells_functions(shell, text, expected):
    with provisionalcompleter():
        offered = [c.text for c in shell.Completer.completions(text + "\n" + ADD + MEAN, len(text))]
    assert offered == expected
