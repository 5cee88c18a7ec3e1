"""The hot path of reduction calls (runtime/reduce_hot.py): a call keyed like one planned before runs
as a C `HotPlan`, with the same results, dtypes and errors as the general path it skips. `out=`
calls of reductions and scans on torch tensors take a hot path of their own from their second call
(`keep_hot_out`): the given tensors back, versions bumped, and on every call the general path's
refusals (partial overlap with an input, an inference tensor outside inference mode, a shrunk
storage, the wrong form of out=); NumPy's out= stays general."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import threading

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.errors import ArgumentTypeError, DimensionError, GradientError, ShapeError, UnsupportedArrayError
from jiter_magic.native import call_path

HAS_HEADERS = os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h"))
pytestmark = pytest.mark.skipif(not HAS_HEADERS, reason="Python.h is not installed, so the C call path cannot be "
                                                         "built here (every call takes the general path)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMSQ = ("template <typename T> T sq(T x) { return x * x; }\n"
         "template <typename T> T add(T a, T b) { return a + b; }\n")
ADD = "template <typename T> T add(T a, T b) { return a + b; }"
AFFINE = ("template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b) "
          "{ a = a1 * a2; b = a2 * b1 + b2; }")
SCALED = ("template <typename T> T scaled(T x, T alpha) { return alpha * x; }\n"
          "template <typename T> T add(T a, T b) { return a + b; }\n")
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& v, int64_t& i) {\n"
            "  if (b > a || (b == a && ib < ia)) { v = b; i = ib; } else { v = a; i = ia; }\n}\n")


@pytest.fixture(scope="module", autouse=True)
def _c_call_path_loaded():
    assert call_path.wait(300) is not None


def hot_kinds(fn) -> set[str]:
    return {type(run).__name__ for run in fn._calls.hot.values()}


def test_a_second_call_runs_in_c_with_the_same_result_and_dtype():
    fn = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    x = torch.randn(64, 33)
    first = fn(x, dim=1)
    assert hot_kinds(fn) == {"HotPlan"}  # left by the general path's first call
    y = torch.randn(64, 33)
    again = fn(y, dim=1)  # another tensor of the same key: new data, the same plan
    torch.testing.assert_close(first, (x * x).sum(1))
    torch.testing.assert_close(again, (y * y).sum(1))
    assert again.dtype == torch.float32 and again.shape == (64,) and again.data_ptr() != first.data_ptr()
    assert len(fn._calls.hot) == 1


@pytest.mark.parametrize(("dim", "keepdim", "dtype"), [(None, False, None), (0, False, None), (1, True, None),
                                                       ((0, 2), False, torch.float64), (-1, True, torch.float64)])
def test_dims_keepdim_and_dtype_are_part_of_the_key(dim, keepdim, dtype):
    fn = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    x = torch.randn(6, 7, 8)
    expected = (x.double() * x.double()).sum(dim=dim, keepdim=keepdim)
    for _ in range(3):  # the general path, then the hot path twice
        got = fn(x, dim=dim, keepdim=keepdim, dtype=dtype)
        assert got.dtype == (dtype or torch.float32) and got.shape == expected.shape
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-4)
    other = fn(x, dim=0)  # another dim: another key, the general path, the right shape
    assert other.shape == (7, 8)


def test_numpy_arrays_take_the_hot_path_too():
    fn = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    for _ in range(2):
        got = fn(x, dim=1)
        assert isinstance(got, np.ndarray) and got.dtype == np.int64
        np.testing.assert_array_equal(got, (x.astype(np.int64) ** 2).sum(1))
    assert hot_kinds(fn) == {"HotPlan"}


def test_a_second_library_gets_its_own_hot_path():
    """NumPy arrays first, then torch tensors, in a fresh process (whose first calls never met the
    torch adapter): calls of both libraries become hot."""
    code = ("import numpy as np, torch, jiter_magic\n"
            "from jiter_magic.native import call_path\n"
            "call_path.wait(300)\n"
            f"fn = jiter_magic.create_reduction_fn({SUMSQ!r}, 0, map='sq', combine='add')\n"
            "x = np.arange(12.0).reshape(3, 4)\n"
            "a = [fn(x, dim=1).tolist() for _ in range(2)]\n"
            "t = torch.from_numpy(x.copy())\n"
            "b = [fn(t, dim=1).tolist() for _ in range(2)]\n"
            "print(a == b == [[14.0, 126.0, 366.0]] * 2, sorted(type(r).__name__ for r in fn._calls.hot.values()))\n")
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True ['HotPlan', 'HotPlan']"


def test_values_with_indices_come_back_as_values_indices():
    fn = jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, float("-inf"), combine="keep_max")
    x = torch.tensor([[1.0, 5.0, 5.0, 2.0], [7.0, 0.0, 7.0, 9.0]])
    for _ in range(3):
        got = fn(x, dim=1)
        assert type(got).__name__ == "ValuesIndices"
        torch.testing.assert_close(got.values, torch.tensor([5.0, 9.0]))
        assert got.indices.dtype == torch.int64 and got.indices.tolist() == [1, 3]
    assert len(fn._calls.hot) == 1


def test_extras_take_the_general_path_and_out_a_hot_path_of_its_own():
    fn = jiter_magic.create_reduction_fn(SCALED, 0, map="scaled", combine="add", alpha=2.0)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert fn(x, dim=1).tolist() == [12.0, 44.0, 76.0]  # the default alpha: a hot path is left
    assert fn(x, dim=1, alpha=3.0).tolist() == [18.0, 66.0, 114.0]  # a keyword value: general
    out = torch.empty(3)
    assert fn(x, dim=1, out=out) is out and out.tolist() == [12.0, 44.0, 76.0]
    assert fn(x, dim=1, alpha=3.0, out=out) is out and out.tolist() == [18.0, 66.0, 114.0]  # general
    assert fn(x, dim=1).tolist() == [12.0, 44.0, 76.0]
    assert len(fn._calls.hot) == 2  # without out=, and into out= (tests/runtime/test_fold_out_hot_path.py)


def test_errors_are_those_of_the_general_path_after_a_hot_path_exists():
    fn = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    x = torch.randn(4, 5)
    fn(x, dim=1)
    with pytest.raises(GradientError, match="has no backward"):
        fn(x.clone().requires_grad_(), dim=1)  # the key refuses inputs requiring grad
    with pytest.raises(ArgumentTypeError, match="got bool"):
        fn(x, dim=True)  # not keyed as dim=1
    with pytest.raises(DimensionError):
        fn(x, dim=2)
    base = torch.randn(64)
    view = base[8:40].view(4, 8)
    fn(view, dim=1)
    base.untyped_storage().resize_(100)  # 25 floats left: the view reaches float 40
    with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
        fn(view, dim=1)
    torch.testing.assert_close(fn(x, dim=1), (x * x).sum(1))


def test_calls_from_threads_share_the_hot_path():
    fn = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    inputs = [torch.full((32, 16), float(k)) for k in range(8)]
    fn(inputs[0], dim=1)
    failures: list[str] = []

    def work(k: int) -> None:
        for _ in range(200):
            got = fn(inputs[k], dim=1)
            if not torch.equal(got, torch.full((32,), 16.0 * k * k)):
                failures.append(f"thread {k}: {got[:3].tolist()}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_without_the_c_call_path_every_call_takes_the_general_path():
    code = ("import torch, jiter_magic\n"
            f"fn = jiter_magic.create_reduction_fn({SUMSQ!r}, 0, map='sq', combine='add')\n"
            "x = torch.arange(6.0).reshape(2, 3)\n"
            "print([fn(x, dim=1).tolist() for _ in range(3)], len(fn._calls.hot))\n")
    env = {**os.environ, "JITER_MAGIC_FAST_CALL": "0", "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[[5.0, 50.0], [5.0, 50.0], [5.0, 50.0]] 0"


def sum_of_squares():
    fn = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    return fn, lambda x: fn(x, dim=1, out=torch.empty(x.shape[0])), lambda x: (x * x).sum(1)


def kinds():
    """(name, function, a call with fresh out= arrays, torch's result) of each kind of fold."""
    sq = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    arg = jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, float("-inf"), combine="keep_max")
    cumsum = jiter_magic.create_scan_fn(ADD, 0, combine="add")
    linear = jiter_magic.create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine")

    def linear_reference(a: torch.Tensor, b: torch.Tensor) -> tuple:
        h, products, hs = torch.zeros(a.shape[0]), torch.ones(a.shape[0]), []
        for t in range(a.shape[1]):
            products, h = products * a[:, t], a[:, t] * h + b[:, t]
            hs.append((products.clone(), h.clone()))
        return torch.stack([p for p, _ in hs], 1), torch.stack([q for _, q in hs], 1)

    return [
        ("sum", sq, lambda x: sq(x, dim=1, out=torch.empty(x.shape[0])), lambda x: (x * x).sum(1)),
        ("argmax", arg, lambda x: arg(x, dim=1, out=(torch.empty(x.shape[0]), torch.empty(x.shape[0], dtype=torch.int64))),
         lambda x: tuple(torch.max(x, 1))),
        ("cumsum", cumsum, lambda x: cumsum(x, dim=1, out=torch.empty_like(x)), lambda x: torch.cumsum(x, 1)),
        ("linear", linear, lambda x: linear(x * 0.5, x, dim=1, out=(torch.empty_like(x), torch.empty_like(x))),
         lambda x: linear_reference(x * 0.5, x)),
    ]


@pytest.mark.parametrize("kind", range(4), ids=["sum", "argmax", "cumsum", "linear"])
def test_out_calls_run_hot_from_their_second_call_with_the_general_paths_results(kind):
    _name, fn, call, reference = kinds()[kind]
    torch.manual_seed(kind)
    before = fn.call_counts
    for _ in range(4):
        x = torch.rand(6, 33)
        got = call(x)
        want = reference(x)
        for value, expected in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert value.dtype == expected.dtype
            torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-5)
    counts = fn.call_counts
    assert (counts.general - before.general, counts.hot - before.hot) == (1, 3)


def test_the_given_tensors_come_back_written_with_their_versions_bumped():
    fn = jiter_magic.create_scan_fn(ADD, 0, combine="add")
    x = torch.arange(12.0).reshape(3, 4)
    out = torch.empty(3, 4)
    for _ in range(3):
        version = out._version
        assert fn(x, dim=1, out=out) is out and out._version == version + 1
        assert torch.equal(out, torch.cumsum(x, 1))
    arg = jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, float("-inf"), combine="keep_max")
    values, indices = torch.empty(3), torch.empty(3, dtype=torch.int64)
    for _ in range(3):
        got = arg(x, dim=1, out=(values, indices))
        assert got.values is values and got.indices is indices
        assert values.tolist() == [3.0, 7.0, 11.0] and indices.tolist() == [3, 3, 3]
    assert arg.call_counts.hot == 2


def test_partial_overlap_with_an_input_is_refused_on_the_hot_path_and_a_scan_in_place_allowed():
    fn = jiter_magic.create_scan_fn(ADD, 0, combine="add")
    for _ in range(3):  # warm the key of these layouts with separate memory
        fn(torch.zeros(40)[0:32].view(4, 8), dim=1, out=torch.zeros(40)[8:40].view(4, 8))
    base = torch.arange(40.0)
    before = fn.call_counts
    for _ in range(2):
        with pytest.raises(ShapeError, match="partially overlaps an input"):
            fn(base[0:32].view(4, 8), dim=1, out=base[8:40].view(4, 8))
    assert fn.call_counts.general == before.general  # refused by the hot path's own check
    assert base.tolist() == [float(v) for v in range(40)]  # refused before anything was written
    x = torch.arange(8.0).reshape(2, 4)
    fn(x.clone(), dim=1, out=torch.empty(2, 4))
    for _ in range(2):
        assert fn(x, dim=1, out=x) is x  # the output is the input itself: allowed, as torch.cumsum's out=
    assert x.tolist() == [[0.0, 1.0, 4.0, 10.0], [4.0, 13.0, 28.0, 50.0]]  # a cumsum of a cumsum


def test_the_form_of_out_is_checked_as_on_the_general_path_after_a_hot_path_exists():
    fn, call, _ = sum_of_squares()
    x = torch.rand(3, 5)
    for _ in range(3):
        call(x)
    with pytest.raises(ArgumentTypeError, match="out= must be a torch array"):
        fn(x, dim=1, out=(torch.empty(3),))  # one result: a tensor, not a tuple of one
    arg = jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, float("-inf"), combine="keep_max")
    pair = (torch.empty(3), torch.empty(3, dtype=torch.int64))
    for _ in range(3):
        arg(x, dim=1, out=pair)
    with pytest.raises(ArgumentTypeError, match=r"\(values, indices\) pair"):
        arg(x, dim=1, out=pair[0])
    with pytest.raises(ShapeError):
        fn(x, dim=1, out=torch.empty(4))  # another shape: another key, the general path's check
    needs_grad = torch.zeros(3, requires_grad=True)
    with pytest.raises(GradientError, match="out="):
        fn(x, dim=1, out=needs_grad)  # the key refuses it: torch's own refusal, from the general path


def test_an_inference_tensor_outside_inference_mode_and_a_shrunk_storage_are_refused_on_the_hot_path():
    fn = jiter_magic.create_scan_fn(ADD, 0, combine="add")
    x = torch.rand(2, 3)
    with torch.inference_mode():
        inference = torch.zeros(2, 3)
        for _ in range(3):
            assert fn(x, dim=1, out=inference) is inference
    before = fn.call_counts
    for _ in range(2):
        with pytest.raises(GradientError, match="inference tensor"):
            fn(x, dim=1, out=inference)
    assert fn.call_counts.general == before.general
    base = torch.zeros(16)
    target = base[4:10].view(2, 3)
    for _ in range(3):
        fn(x, dim=1, out=target)
    base.untyped_storage().resize_(32)  # 8 floats left: the view reaches float 10
    with pytest.raises(UnsupportedArrayError, match="holds only 32 bytes"):
        fn(x, dim=1, out=target)


def test_numpy_out_stays_on_the_general_path():
    fn = jiter_magic.create_scan_fn(ADD, 0, combine="add")
    x = np.arange(6.0).reshape(2, 3)
    out = np.empty((2, 3))
    for _ in range(3):
        assert fn(x, dim=1, out=out) is out
        np.testing.assert_array_equal(out, np.cumsum(x, 1))
    assert fn.call_counts.hot == 0
