"""Calls with keyword extras (`fn(x, y, alpha=2.5)`, as torch's jiterator is called) on the hot path:
the same results as the general path, never a plan of other scalar kinds, signed zeros kept apart,
bounded memory, and the errors of the general path every time."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.errors import DTypeError, UnknownKwargError, UnsupportedArrayError
from jiter_magic.native import call_path as fast_call
from jiter_magic.runtime.plan import KWARGS_LIMIT

AXPY = "template <typename T> T kw_axpy(T x, T y, T alpha) { return -x + alpha * y; }"
SCALE = "template <typename T> T kw_scale(T x, T a) { return x * a; }"


def plan_of(function, *args):
    dispatcher = function._calls
    key = dispatcher._fast_key_function(type(args[0]))(args)
    return dispatcher.plans.get(key[0])


@pytest.mark.parametrize("make", [lambda v: torch.tensor(v, dtype=torch.float32),
                                  lambda v: np.asarray(v, dtype=np.float64)], ids=["torch", "numpy"])
def test_keyword_values_reach_the_hot_path_with_their_own_values(make):
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = make([1.0, -2.0, 3.5, 0.25]), make([4.0, 5.0, -6.0, 8.0])
    before = f.call_counts
    for _ in range(4):
        for alpha in (2.5, -3.0):
            result = f(x, y, alpha=alpha)
            expected = -x + alpha * y
            assert result.dtype == x.dtype
            assert (result == expected).all()
    # The first call plans (and binds the library's fast key), the second stores the plan under
    # that key; every later one, with any value, takes the hot path.
    assert f.call_counts.general - before.general <= 2
    assert f(x, y).tolist() == (-x + y).tolist()  # the defaults' own hot path is untouched
    if fast_call.status() == "loaded":
        plan = plan_of(f, x, y)
        assert type(plan.native_calls.by_values[(("alpha", 2.5),)]).__name__ == "HotPlan"
        assert type(plan.native_calls.by_values[(("alpha", -3.0),)]).__name__ == "HotPlan"


def test_values_of_other_kinds_keep_plans_of_their_own_beside_the_defaults():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([7, 8, 9], dtype=torch.int32)
    h = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float16)
    before = f.call_counts
    for _ in range(4):
        as_int = f(x, y, alpha=2)  # an int extra: another kind than the default float
        as_bool = f(x, y, alpha=True)
        assert as_int.tolist() == [13, 14, 15] and as_int.dtype == torch.int32
        assert as_bool.tolist() == [6, 6, 6] and as_bool.dtype == torch.int32
        assert f(x, y).tolist() == [6, 6, 6]  # the defaults' plan, untouched by the others
        assert f(x, y, alpha=3.0).tolist() == [20, 22, 24]
        assert f(x, y, alpha=1.5).tolist() == [6, 6, 6]  # T alpha: 1.5 becomes an int32 1, as in torch
        half = f(h, h, alpha=3)  # an int64 extra with float16 inputs: float16, as torch's jiterator gives
        assert half.dtype == torch.float16 and half.tolist() == [1.0, 3.0, 5.0]
    # Each kind planned once (and stored under the fast key on its second call), then hot.
    assert f.call_counts.general - before.general <= 8
    dispatcher, fast = f._calls, f._calls._fast_key_function(torch.Tensor)((x, y))[0]
    default_plan, int_plan = dispatcher.plans.get(fast), dispatcher.plans.get((fast, ("int64",)))
    assert default_plan is not None and int_plan is not None and default_plan is not int_plan
    assert default_plan.spec.extras == ("float64",) and int_plan.spec.extras == ("int64",)


def test_signed_zeros_are_told_apart():
    """Zeros key their hot paths by their bits (0.0 == -0.0 would hand one the other's packed
    value), so both signs, and complex values with a zero part (2+0j), run hot and stay apart."""
    f = jiter_magic.create_jit_fn(SCALE, a=1.0)
    x = torch.tensor([1.0, 2.0, -3.0])
    for _ in range(3):
        assert torch.signbit(f(x, a=0.0)).tolist() == [False, False, True]
        assert torch.signbit(f(x, a=-0.0)).tolist() == [True, True, False]
    keyword_extras = f._calls.keywords.for_hot_path
    assert keyword_extras({"a": 0.0}) == ([0.0], None, (("a", struct.pack("<d", 0.0)),))
    assert keyword_extras({"a": -0.0}) == ([-0.0], None, (("a", struct.pack("<d", -0.0)),))
    assert math.copysign(1.0, keyword_extras({"a": -0.0})[0][0]) == -1.0  # the value itself keeps its sign
    assert keyword_extras({"a": 1.0}) == ([1.0], None, (("a", 1.0),))
    before = f.call_counts
    for _ in range(3):
        assert torch.signbit(f(x, a=-0.0)).tolist() == [True, True, False]
        assert torch.signbit(f(x, a=0.0)).tolist() == [False, False, True]
    assert f.call_counts.general == before.general
    if fast_call.status() == "loaded":
        plan = f._calls.plans.get(f._calls._fast_key_function(torch.Tensor)((x,))[0])
        for key in ((("a", struct.pack("<d", 0.0)),), (("a", struct.pack("<d", -0.0)),)):
            assert type(plan.native_calls.by_values[key]).__name__ == "HotPlan"
    c = jiter_magic.create_jit_fn(SCALE, a=1j)
    def bits(*parts: float) -> tuple:
        return tuple(struct.pack("<d", p) for p in parts)

    assert c._calls.keywords.for_hot_path({"a": complex(-0.0, 1)})[2] == (("a", bits(-0.0, 1.0)),)
    assert c._calls.keywords.for_hot_path({"a": complex(2, 1)})[2] == (("a", complex(2, 1)),)
    assert c._calls.keywords.for_hot_path({"a": complex(2, 0)})[2] == (("a", bits(2.0, 0.0)),)
    xc = x.to(torch.complex64)
    references = {}
    for value in (complex(-0.0, 1), complex(0.0, 1)):  # each from a function that never saw the other
        fresh = jiter_magic.create_jit_fn(SCALE, a=1j)
        references[value.real.hex()] = torch.signbit(fresh(xc, a=value).real).tolist()
    assert references[(-0.0).hex()] != references[(0.0).hex()]
    for _ in range(3):
        for value in (complex(-0.0, 1), complex(0.0, 1)):
            assert torch.signbit(c(xc, a=value).real).tolist() == references[value.real.hex()]



def test_nans_of_either_sign_keep_their_own_hot_paths_beside_a_zero():
    """NaN != NaN, so a key that compared values would never find a NaN's plan, and one that held
    them as text would give -NaN the plan of +NaN: beside a zero, every float keys by its bits."""
    two = jiter_magic.create_jit_fn("template <typename T> T kw_two(T x, T a, T b) { return a * x + b; }",
                                    a=1.0, b=0.0)
    x = torch.tensor([1.0, 2.0])
    positive, negative = float("nan"), -float("nan")
    assert math.copysign(1.0, negative) == -1.0
    for _ in range(3):
        for b, sign in ((positive, False), (negative, True)):
            result = two(x, a=0.0, b=b)
            assert torch.isnan(result).all() and torch.signbit(result).tolist() == [sign, sign]
    keys = {two._calls.keywords.for_hot_path({"a": 0.0, "b": b})[2] for b in (positive, negative)}
    assert len(keys) == 2

def test_a_sweep_over_many_values_stays_correct_and_bounded():
    f = jiter_magic.create_jit_fn(SCALE, a=1.0)
    x = torch.arange(1, 9, dtype=torch.float64)
    before = f.call_counts
    for round_ in range(3):
        for k in range(1, 3 * KWARGS_LIMIT):
            a = k + 0.5
            assert torch.equal(f(x, a=a), x * a), (round_, a)
    assert f.call_counts.general - before.general <= 2
    plan = plan_of(f, x)
    assert len(plan.native_calls.seen_values) <= KWARGS_LIMIT and len(plan.native_calls.by_values) <= KWARGS_LIMIT
    for _ in range(3):  # a value used again and again after the sweep still gets its hot path
        assert torch.equal(f(x, a=7.25), x * 7.25)
    if fast_call.status() == "loaded":
        assert type(plan.native_calls.by_values[(("a", 7.25),)]).__name__ == "HotPlan"
        assert len(plan.native_calls.by_values) <= 2  # the sweep's values, each seen once a window, built none


def test_values_off_the_hot_path_still_run_and_bad_ones_still_raise():
    f = jiter_magic.create_jit_fn(SCALE, a=1.0)
    x = torch.tensor([1.0, 2.0])
    for _ in range(3):
        assert f(x, a=torch.tensor(3.0)).tolist() == [3.0, 6.0]  # a 1-element tensor, .item()-ed
        assert f(x, a=np.float32(0.5)).tolist() == [0.5, 1.0]
        with pytest.raises(UnknownKwargError):
            f(x, b=2.0)
        with pytest.raises(DTypeError):
            f(x, a="2")
        assert f(x, a=float("nan")).isnan().all()
    assert f(x, a=2.0).tolist() == [2.0, 4.0]
    keyword_extras = f._calls.keywords.for_hot_path
    assert keyword_extras({"a": torch.tensor(3.0)}) is None and keyword_extras({"a": np.float32(0.5)}) is None
    assert keyword_extras({"b": 2.0}) is None and keyword_extras({"a": 1 << 63}) is None
    assert keyword_extras({"a": 2}) == ([2], ("int64",), (("a", 2),))
    assert keyword_extras({"a": 2.0}) == ([2.0], None, (("a", 2.0),))


def test_a_view_whose_storage_shrank_is_refused_with_keyword_values_too():
    from jiter_magic.errors import UnsupportedArrayError

    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    base = torch.rand(64)
    view, other = base[8:40], torch.rand(32)
    for _ in range(4):
        f(view, other, alpha=2.0)
    base.untyped_storage().resize_(100)
    with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
        f(view, other, alpha=2.0)
    assert torch.equal(f(other, other, alpha=2.0), other)


def test_without_the_torch_c_module_no_hot_plan_skips_the_storage_check(monkeypatch):
    """Where the core C module is loaded but the torch one is not (its build failed or is still
    running), the torch key is read in Python and checks no storage: such plans never get a C hot
    plan, and a storage shrunk under a planned view is refused every time."""
    if fast_call.current().loaded_core() is None:
        pytest.skip("the C call path is not loaded here")
    from jiter_magic.arrays import adapter_for

    adapter = adapter_for(torch.zeros(1))  # the torch adapter as it is without its C module
    monkeypatch.setattr(adapter, "native", None)
    monkeypatch.setattr(adapter, "key_checks_storage", False)
    monkeypatch.setattr(adapter, "pointer", torch.Tensor.data_ptr)
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    base, other, target = torch.rand(64), torch.rand(32), torch.zeros(32)
    view = base[8:40]
    for _ in range(4):
        f(view, other)
        f(view, other, alpha=2.0)
        f(view, other, alpha=3.0, out=target)
    plan = plan_of(f, view, other)
    assert type(f._calls._fast_key_function(torch.Tensor)((view, other))[0]) is tuple
    assert plan.native_calls is None
    base.untyped_storage().resize_(100)  # 25 floats left: the view reaches float 40
    for call in (lambda: f(view, other), lambda: f(view, other, alpha=2.0),
                 lambda: f(view, other, alpha=3.0, out=target)):
        with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
            call()
