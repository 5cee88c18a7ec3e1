"""The hot path of reduction calls (runtime/reduce_hot.py): a call keyed like one planned before runs
as a C `HotPlan`, with the same results, dtypes and errors as the general path it skips."""
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
from jiter_magic.errors import ArgumentTypeError, DimensionError, GradientError, UnsupportedArrayError
from jiter_magic.native import call_path

HAS_HEADERS = os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h"))
pytestmark = pytest.mark.skipif(not HAS_HEADERS, reason="Python.h is not installed, so the C call path cannot be "
                                                         "built here (every call takes the general path)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMSQ = ("template <typename T> T sq(T x) { return x * x; }\n"
         "template <typename T> T add(T a, T b) { return a + b; }\n")
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


def test_extras_and_out_take_the_general_path_and_stay_right():
    fn = jiter_magic.create_reduction_fn(SCALED, 0, map="scaled", combine="add", alpha=2.0)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert fn(x, dim=1).tolist() == [12.0, 44.0, 76.0]  # the default alpha: a hot path is left
    assert fn(x, dim=1, alpha=3.0).tolist() == [18.0, 66.0, 114.0]  # a keyword value: general
    out = torch.empty(3)
    assert fn(x, dim=1, out=out) is out and out.tolist() == [12.0, 44.0, 76.0]
    assert fn(x, dim=1).tolist() == [12.0, 44.0, 76.0]
    assert len(fn._calls.hot) == 1


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
