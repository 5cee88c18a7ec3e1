"""`out=` calls of torch tensors on the hot path: the same results, the same refusals on every call
(partial overlap with an input or between outputs, shrunk storages, tensors requiring grad, wrong
counts), version counters bumped, and NumPy's read-only arrays still refused (its out= stays general)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.errors import BindError, GradientError, InvalidArgumentError, ShapeError, UnsupportedArrayError

AXPY = "template <typename T> T oh_axpy(T x, T y, T alpha) { return -x + alpha * y; }"
TWO = "template <typename T> void oh_two(T x, T y, T& s, T& d) { s = x + y; d = x - y; }"


def out_keys(function) -> list:
    """The plan keys of `out=` calls' hot path."""
    plans = function._calls.plans
    return [key for key in (*plans._old, *plans._young) if type(key) is tuple and key[:1] == ("out",)]


def test_out_calls_reach_the_hot_path_and_return_the_given_tensor():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = torch.tensor([1.0, -2.0, 3.5]), torch.tensor([4.0, 5.0, -6.0])
    out = torch.empty(3)
    before = f.call_counts
    for k in range(5):
        version = out._version
        result = f(x, y, out=out) if k % 2 else f(x, y, alpha=2.5, out=(out,))
        assert result is out and out._version == version + 1  # written, as an in-place op bumps it
        assert torch.equal(out, -x + (y if k % 2 else 2.5 * y))
    as_int = torch.empty(3, dtype=torch.int32)
    for _ in range(3):  # an int extra with int32 tensors: a plan of its own kind
        assert f(x.int(), y.int(), alpha=2, out=as_int).tolist() == [7, 12, -15]
    assert f.call_counts.general - before.general <= 4  # each kind: planned once, then stored under the out= key
    assert len(out_keys(f)) == 2


def test_partial_overlap_is_refused_on_the_hot_path_and_exact_aliasing_allowed():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    y = torch.ones(4)
    for _ in range(4):  # warm the plan of these layouts with separate memory
        first, second = torch.zeros(10), torch.zeros(10)
        f(first[0:4], y, out=second[2:6])
    base = torch.arange(10.0)
    before = f.call_counts
    for _ in range(2):
        with pytest.raises(ShapeError, match="partially overlaps an input"):
            f(base[0:4], y, out=base[2:6])
    assert f.call_counts.general == before.general  # refused by the hot path's own check
    assert base.tolist() == [float(v) for v in range(10)]  # refused before anything was written
    x = torch.arange(4.0)
    for _ in range(3):
        assert f(x, y, out=x) is x  # the output is the input itself: allowed, as in torch
    assert x.tolist() == [1.0, 0.0, -1.0, -2.0]  # x = 1 - x, three times over


def test_outputs_overlapping_each_other_are_refused_on_the_hot_path():
    g = jiter_magic.create_multi_output_jit_fn(TWO, 2)
    x, y = torch.arange(4.0), torch.ones(4)
    for _ in range(4):
        s, d = g(x, y, out=(torch.empty(8)[0:4], torch.empty(8)[2:6]))
        assert s.tolist() == [1.0, 2.0, 3.0, 4.0] and d.tolist() == [-1.0, 0.0, 1.0, 2.0]
    shared = torch.zeros(8)
    before = g.call_counts
    for _ in range(2):
        with pytest.raises(ShapeError, match="overlap each other"):
            g(x, y, out=(shared[0:4], shared[2:6]))
    assert shared.tolist() == [0.0] * 8
    assert g.call_counts.general == before.general  # refused by the hot path's own check


def test_a_shrunk_storage_under_an_out_view_is_refused_on_the_hot_path():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = torch.rand(32), torch.rand(32)
    base = torch.zeros(64)
    target = base[8:40]
    for _ in range(4):
        f(x, y, out=target)
    base.untyped_storage().resize_(100)  # 25 floats left: the view reaches float 40
    with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
        f(x, y, out=target)


def test_out_requiring_grad_and_wrong_counts_raise_as_on_the_general_path():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = torch.rand(3), torch.rand(3)
    for _ in range(3):
        f(x, y, out=torch.empty(3))
    needs_grad = torch.zeros(3, requires_grad=True)
    for _ in range(2):
        with pytest.raises(GradientError, match="out="):
            f(x, y, out=needs_grad)
        with pytest.raises(BindError, match="out= gives 2"):
            f(x, y, out=(torch.empty(3), torch.empty(3)))
        with pytest.raises(GradientError, match="out="):  # an input requiring grad, with out=
            f(x.clone().requires_grad_(), y, out=torch.empty(3))
    with torch.no_grad():
        assert torch.equal(f(x, y, out=needs_grad), -x + y)


def test_keyword_values_with_out_on_several_outputs():
    g = jiter_magic.create_multi_output_jit_fn(
        "template <typename T> void oh_scaled(T x, T y, T k, T& s, T& d) { s = x + k * y; d = x - k * y; }", 2, k=1.0)
    x, y = torch.arange(4.0), torch.ones(4)
    s, d = torch.empty(4), torch.empty(4)
    before = g.call_counts
    for k in (2.0, 3.0, 2.0, 3.0, 0.5):
        assert g(x, y, k=k, out=[s, d]) == (s, d)
        assert s.tolist() == (x + k).tolist() and d.tolist() == (x - k).tolist()
    assert g.call_counts.general - before.general <= 2


def test_numpy_out_stays_on_the_general_path_and_read_only_arrays_are_refused():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = np.linspace(0, 1, 5), np.linspace(2, 3, 5)
    writable = np.empty(5)
    for _ in range(3):
        assert f(x, y, out=writable) is writable
        np.testing.assert_array_equal(writable, -x + y)
    read_only = np.zeros(5)
    read_only.flags.writeable = False
    for _ in range(2):
        with pytest.raises(InvalidArgumentError, match="read-only"):
            f(x, y, out=read_only)
    assert read_only.tolist() == [0.0] * 5
    assert not out_keys(f)


def test_an_inference_tensor_as_out_is_refused_outside_inference_mode_as_torch_does():
    """Inside `torch.inference_mode()` an inference tensor takes `out=` (and plans the hot path);
    outside it torch refuses the in-place write, and so does every call here: the general path on
    the first, the hot path's own check after, the tensor left as it was."""
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    with torch.inference_mode():
        inference = torch.zeros(2)
        for _ in range(3):
            assert f(x, y, out=inference) is inference
        assert inference.tolist() == [2.0, 2.0] and len(out_keys(f)) == 1
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        torch.add(x, y, out=inference)  # torch's own refusal (which comes after it has written: 4, 6)
    with torch.inference_mode():
        inference.copy_(torch.tensor([2.0, 2.0]))
    before = f.call_counts
    for _ in range(3):
        with pytest.raises(GradientError, match="inference tensor outside inference mode") as raised:
            f(x, y, out=inference)
        assert isinstance(raised.value, RuntimeError)
    assert f.call_counts.general == before.general  # refused by the hot path's own check
    assert inference.tolist() == [2.0, 2.0]
    fresh = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    with pytest.raises(GradientError, match="inference tensor outside inference mode"):
        fresh(x, y, out=inference)  # the general path, before any plan
    assert inference.tolist() == [2.0, 2.0]
    normal = torch.zeros(2)  # a normal tensor takes out= in and out of inference mode
    with torch.inference_mode():
        assert f(x, y, out=normal).tolist() == [2.0, 2.0]
    assert f(x, y, alpha=2.0, out=normal).tolist() == [5.0, 6.0]
    assert f(x, inference).tolist() == [1.0, 0.0]  # reading one is allowed anywhere
