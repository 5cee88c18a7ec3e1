"""A scan's mistakes get documented errors that say what was wrong and what was expected: a missing
or bad dim, a state of the wrong arity, a combine or map of the wrong signature, a bad out=, bad
flags, unknown keywords; and the API's objects (exports, pickling, compile, sources)."""
from __future__ import annotations

import pickle

import pytest
from scan_functions import ADD, AFFINE, KEEP_MAX, cummax, cumsum, linear

import jiter_magic
from jiter_magic import create_multi_output_scan_fn, create_scan_fn
from jiter_magic.errors import (
    ArgumentTypeError,
    BindError,
    DimensionError,
    DTypeError,
    ShapeError,
    UnknownKwargError,
)

torch = pytest.importorskip("torch")


def test_dim_is_required_and_checked():
    x = torch.ones(3, 4)
    with pytest.raises(ArgumentTypeError, match="needs dim="):
        cumsum(x)
    with pytest.raises(ArgumentTypeError, match="dim must be an int"):
        cumsum(x, dim=(0, 1))
    with pytest.raises(ArgumentTypeError, match="dim must be an int"):
        cumsum(x, dim=True)
    with pytest.raises(DimensionError, match=r"dim 2 is out of range for a 2-d input: expected a dim in \[-2, 1\]"):
        cumsum(x, dim=2)
    assert isinstance(DimensionError("x"), IndexError)


def test_flags_dtype_and_keywords():
    x = torch.ones(3, 4)
    with pytest.raises(ArgumentTypeError, match="reverse must be True or False"):
        cumsum(x, dim=0, reverse="False")
    with pytest.raises(ArgumentTypeError, match="exclusive must be True or False"):
        cumsum(x, dim=0, exclusive=1)
    with pytest.raises(UnknownKwargError):
        cumsum(x, dim=0, alpha=2)
    with pytest.raises(ArgumentTypeError, match="arrays"):
        cumsum(3.0, dim=0)


def test_out_of_the_wrong_shape_dtype_or_arity():
    x = torch.ones(3, 4)
    with pytest.raises(ShapeError, match=r"out= has shape \(4, 3\), but a scan.s result \(its inputs. broadcast shape\) has shape \(3, 4\)"):
        cumsum(x, dim=0, out=torch.empty(4, 3))
    with pytest.raises(DTypeError, match="out= has dtype float64, but the result is float32"):
        cumsum(x, dim=0, out=torch.empty(3, 4, dtype=torch.float64))
    with pytest.raises(ArgumentTypeError, match="out= takes a tuple of 2 arrays"):
        linear(x, x, dim=0, out=torch.empty(3, 4))
    with pytest.raises(ArgumentTypeError, match=r"\(values, indices\) pair"):
        cummax(x, dim=0, out=torch.empty(3, 4))
    with pytest.raises(DTypeError, match=r"out\[1\] has dtype float32, but the result is int64"):
        cummax(x, dim=0, out=(torch.empty(3, 4), torch.empty(3, 4)))


def test_state_arity_and_combine_signatures():
    with pytest.raises(ArgumentTypeError, match="identity must be a tuple of 2 numbers"):
        create_multi_output_scan_fn(AFFINE, 0, combine="affine")
    with pytest.raises(ArgumentTypeError, match="identity must be a tuple of 2 numbers"):
        create_multi_output_scan_fn(AFFINE, (1, 0, 0), combine="affine")
    with pytest.raises(BindError, match="create_multi_output_scan_fn"):
        create_scan_fn(AFFINE, 0, combine="affine")
    with pytest.raises(BindError, match="takes two states of 2 to 4 values"):
        create_multi_output_scan_fn(ADD, (0, 0), combine="add")
    five = "template <typename T> void f(" + ", ".join(f"T a{i}" for i in range(10)) + \
        ", " + ", ".join(f"T& r{i}" for i in range(5)) + ") {}\n"
    with pytest.raises(BindError, match="2 to 4 values"):
        create_multi_output_scan_fn(five, (0,) * 5, combine="f")
    with pytest.raises(BindError, match="names no function"):
        create_scan_fn(ADD, 0, combine="plus")
    with pytest.raises(BindError, match="writes the element's state through 2 references"):
        create_multi_output_scan_fn("template <typename T> T m(T x) { return x; }\n" + AFFINE, (1, 0), map="m",
                                    combine="affine")
    with pytest.raises(BindError, match="finalize= ends a single value"):
        create_multi_output_scan_fn(AFFINE + "template <typename T> T fin(T v, int64_t n) { return v; }\n", (1, 0),
                                    combine="affine", finalize="fin")


def test_a_wrong_identity_is_refused_at_the_call_that_cannot_hold_it():
    ints = create_scan_fn(ADD, 0.5, combine="add")
    with pytest.raises(DTypeError, match="not an integer"):
        ints(torch.ones(3, dtype=torch.int32), dim=0)


def test_exports_are_lazy_and_pickling_rebuilds():
    assert "ScanFunction" in dir(jiter_magic)
    assert isinstance(cumsum, jiter_magic.ScanFunction)
    assert cumsum.num_outputs == 1 and linear.num_outputs == 2 and cummax.num_outputs == 2
    again = pickle.loads(pickle.dumps(linear))
    a, b = torch.rand(2, 9), torch.rand(2, 9)
    for got, want in zip(again(a, b, dim=1), linear(a, b, dim=1)):
        assert torch.equal(got, want)
    assert linear.binding.input_names == ("a1", "b1")


def test_sources_compile_and_describe():
    text = cummax.source("float32", path="scan_columns", exclusive=True)
    assert "jm_pick" in text and "jm_by_columns" in text
    built = cumsum.compile("int32", backend="cpu")
    assert built.backend == "cpu" and built.describe().startswith("scan (int32) -> int64 accumulating int64")
    assert any(s.spec == built.spec for s in cumsum.specializations)
    again = create_multi_output_scan_fn(KEEP_MAX, combine="keep_max")
    assert again.identity == (0,)


def test_calls_keyed_like_one_before_take_the_hot_path_and_give_the_same():
    from jiter_magic.native import call_path

    if call_path.current().loaded_core() is None:
        pytest.skip("the C call path is not loaded")
    x, ints = torch.randn(5, 40), torch.randint(0, 9, (6, 30), dtype=torch.int32)
    a, b = torch.rand(3, 50), torch.randn(3, 50)
    cases = [(cumsum, (x,), {"dim": 1}), (cumsum, (x,), {"dim": 0, "reverse": True, "exclusive": True}),
             (cummax, (ints,), {"dim": -1}), (linear, (a, b), {"dim": 1}), (cumsum, (torch.tensor(2.5),), {"dim": 0})]
    for fn, inputs, options in cases:
        first = fn(*inputs, **options)
        hot = fn.call_counts.hot
        again = fn(*inputs, **options)
        assert fn.call_counts.hot == hot + 1, (fn.name, options)
        assert type(again) is type(first)
        for got, want in zip(again if isinstance(again, tuple) else (again,),
                             first if isinstance(first, tuple) else (first,)):
            assert got.shape == want.shape and got.dtype == want.dtype and torch.equal(got, want)
        assert again is not first
    y = x.numpy()
    np_first, np_again = cumsum(y, dim=1), cumsum(y, dim=1)
    assert (np_first == np_again).all() and np_again is not np_first
