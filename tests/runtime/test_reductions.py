"""Reductions on the CPU against torch's: sum, sum of squares, amax, a norm and a mean, over dims,
dtypes and layouts; `out=`, `dtype=`, NumPy arrays, empty inputs, determinism and bad arguments."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import jiter_magic
from jiter_magic import create_reduction_fn
from jiter_magic.errors import (
    ArgumentTypeError,
    BindError,
    DimensionError,
    DTypeError,
    InvalidArgumentError,
    ScalarOverflowError,
    ShapeError,
    UnknownKwargError,
)

torch = pytest.importorskip("torch")

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MAX = "template <typename T> T larger(T a, T b) { return (a != a || a > b) ? a : b; }\n"
ROOT = "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"

SUM = create_reduction_fn(ADD, 0, combine="add")
SUMSQ = create_reduction_fn(SQ + ADD, identity=0, map="sq", combine="add")
AMAX = create_reduction_fn(MAX, float("-inf"), combine="larger")
NORM = create_reduction_fn(SQ + ADD + ROOT, 0, combine="add", finalize="root")
AVERAGE = create_reduction_fn(ADD + MEAN, 0, combine="add", finalize="mean")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool,
          torch.uint8]
DIMS = [None, 1, -1, (0, 2), (2, -3)]
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-12}


def sample(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 50, shape, generator=generator).to(dtype)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def check(result, expected):
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    assert result.shape == expected.shape, (result.shape, expected.shape)
    if expected.dtype.is_floating_point:
        tol = TOLERANCE[expected.dtype]
        torch.testing.assert_close(result.double(), expected.double(), rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(result, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_as_torch_sum(dtype, dim, keepdim):
    x = sample((3, 5, 7), dtype)
    if dim is None and keepdim:
        check(SUM(x, keepdim=True), x.sum(dim=(0, 1, 2), keepdim=True))
        return
    expected = x.sum() if dim is None else x.sum(dim=dim, keepdim=keepdim)
    check(SUM(x, dim=dim, keepdim=keepdim), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sum_of_squares(dtype):
    x = sample((4, 33), dtype)
    wide = x.to(torch.int64) if not dtype.is_floating_point else x.double()
    expected = (wide * wide).sum(1).to(torch.int64 if not dtype.is_floating_point else dtype)
    check(SUMSQ(x, dim=1), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)], ids=str)
def test_amax(dtype, dim):
    x = sample((6, 9), dtype)
    expected = x.amax(dim=() if dim is None else dim)
    result = AMAX(x, dim=dim)
    check(result, expected if dtype.is_floating_point else expected.to(torch.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2)], ids=str)
def test_norm_and_mean(dtype, dim):
    x = sample((5, 4, 6), dtype)
    check(NORM(x, dim=dim), torch.linalg.vector_norm(x, 2, dim=dim))
    check(AVERAGE(x, dim=dim), x.mean() if dim is None else x.mean(dim=dim))


def layouts():
    base = sample((6, 8, 10), torch.float32, seed=3)
    return {
        "transposed": base.transpose(0, 2),
        "sliced": base[:, ::2, 1::3],
        "permuted": base.permute(1, 2, 0),
        "broadcast": sample((1, 8, 1), torch.float32).expand(6, 8, 10),
        "negative": base.flip(1),
    }


@pytest.mark.parametrize("name", ["transposed", "sliced", "permuted", "broadcast", "negative"])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), 1], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_non_contiguous_and_broadcast_inputs(name, dim, keepdim):
    x = layouts()[name]
    if dim is None:
        check(SUMSQ(x), (x * x).sum())
        check(AMAX(x), x.amax())
        return
    check(SUMSQ(x, dim=dim, keepdim=keepdim), (x * x).sum(dim=dim, keepdim=keepdim))
    check(AMAX(x, dim=dim, keepdim=keepdim), x.amax(dim=dim, keepdim=keepdim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16], ids=str)
def test_empty_reductions_give_the_identity_finalized_with_count_zero(dtype):
    x = sample((4, 0, 3), dtype)
    check(SUM(x, dim=1), x.sum(1))
    check(SUM(x), x.sum())
    if dtype.is_floating_point:
        check(AVERAGE(x, dim=1), x.mean(1))  # 0 / 0: nan, as torch's mean
        assert torch.equal(AMAX(x, dim=1), torch.full((4, 3), float("-inf"), dtype=dtype))
    assert SUM(x, dim=2).shape == (4, 0)  # no output elements: nothing to launch


def test_zero_dim_input():
    x = torch.tensor(3.5)
    check(SUMSQ(x), torch.tensor(12.25))
    check(SUMSQ(x, dim=0), torch.tensor(12.25))
    check(SUMSQ(x, dim=-1, keepdim=True), torch.tensor(12.25))


def test_two_inputs_broadcast_and_an_extra():
    dot = create_reduction_fn("template <typename T> T scaled(T x, T y, T alpha) { return alpha * x * y; }\n" + ADD,
                              0, combine="add", alpha=1.0)
    x, y = sample((5, 7), torch.float32), sample((7,), torch.float32, seed=1)
    check(dot(x, y, dim=1), (x * y).sum(1))
    check(dot(x, y, dim=0, alpha=2.0), (2 * x * y).sum(0))


def test_long_rows_split_over_threads_and_many_rows():
    # Few long rows: each row's extent is split over the threads; many short rows: whole rows a thread.
    long_rows = sample((2, 300_001), torch.float64)
    check(SUM(long_rows, dim=1), long_rows.sum(1))
    check(SUM(long_rows), long_rows.sum())
    many = sample((5000, 13), torch.float64)
    check(SUM(many, dim=1), many.sum(1))
    check(SUM(many, dim=0), many.sum(0))


def test_results_are_bit_identical_across_calls():
    for x in (sample((3, 1_000_003), torch.float32), sample((1000, 999), torch.float32).t()):
        first = SUMSQ(x, dim=1)
        for _ in range(5):
            assert torch.equal(SUMSQ(x, dim=1), first)
        total = SUMSQ(x)
        assert all(torch.equal(SUMSQ(x), total) for _ in range(5))


def test_out_and_dtype():
    x = sample((4, 6), torch.int32)
    out = torch.empty(4, dtype=torch.int64)
    assert SUM(x, dim=1, out=out) is out
    check(out, x.sum(1))
    check(SUM(x, dim=1, dtype=torch.float64), x.sum(1, dtype=torch.float64))
    check(SUM(x, dim=1, dtype="int32"), x.sum(1, dtype=torch.int32))
    half = sample((4, 6), torch.float16)
    check(SUM(half, dim=0, dtype=torch.float32), half.sum(0, dtype=torch.float32))
    out32 = torch.empty(6, dtype=torch.float32)
    SUM(half, dim=0, dtype=torch.float32, out=out32)
    check(out32, half.sum(0, dtype=torch.float32))
    strided = torch.zeros(4, 2)[:, 0]
    SUM(x.float(), dim=1, out=strided)
    check(strided, x.float().sum(1))
    kept = torch.empty(4, 1, dtype=torch.int64)
    SUM(x, dim=1, keepdim=True, out=kept)
    check(kept, x.sum(1, keepdim=True))


def test_numpy_arrays():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    result = SUMSQ(x, dim=(0, 2))
    assert isinstance(result, np.ndarray) and result.dtype == np.float32
    np.testing.assert_allclose(result, (x * x).sum(axis=(0, 2)))
    ints = np.arange(10, dtype=np.int16)[::3]
    assert SUM(ints).dtype == np.int64 and int(SUM(ints)) == int(ints.sum())
    out = np.empty(3, dtype=np.float32)
    assert SUMSQ(x, dim=(0, 2), out=out) is out


def test_more_than_2_to_the_31_elements_use_64_bit_indices():
    # A broadcast view: 2**31 + 5 elements read from one byte of memory.
    x = torch.ones(1, dtype=torch.uint8).expand(2**31 + 5)
    assert SUM(x).item() == 2**31 + 5


def test_errors_name_what_was_wrong_and_what_was_expected():
    x = sample((3, 4), torch.float32)
    with pytest.raises(DimensionError, match=r"dim 2 is out of range for a 2-d input: expected a dim in \[-2, 1\]"):
        SUM(x, dim=2)
    with pytest.raises(InvalidArgumentError, match="appears twice"):
        SUM(x, dim=(1, -1))
    with pytest.raises(ShapeError, match=r"out= has shape \(4,\), but .* has shape \(3,\)"):
        SUM(x, dim=1, out=torch.empty(4))
    with pytest.raises(DTypeError, match="out= has dtype float64, but the result is float32"):
        SUM(x, dim=1, out=torch.empty(3, dtype=torch.float64))
    with pytest.raises(BindError, match=r"takes 1 input array\(s\) \['x'\], got 2"):
        SUM(x, x)
    with pytest.raises(ArgumentTypeError, match="the inputs of a reduction are arrays"):
        SUM(3.0)
    with pytest.raises(UnknownKwargError, match="axis is not declared"):
        SUM(x, axis=1)
    with pytest.raises(DTypeError, match="not an integer, but this call accumulates in int64"):
        create_reduction_fn(ADD, 0.5, combine="add")(x.int())
    with pytest.raises(ScalarOverflowError):
        create_reduction_fn(ADD, 2**63, combine="add")(x.int())
    with pytest.raises(ArgumentTypeError, match="out= must be a torch array"):
        SUM(x, dim=1, out=np.empty(3, np.float32))
    assert isinstance(jiter_magic.DimensionError("x"), IndexError)


def test_an_input_requiring_grad_is_refused_without_a_backward():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(jiter_magic.GradientError, match=r"has no backward.*def_backward\(code_string\)"):
        SUM(x)
    with torch.no_grad():
        assert SUM(x).item() == 3


def test_kernels_are_built_once_and_listed():
    fn = create_reduction_fn(SQ + ADD, 0, combine="add")
    x = sample((3, 4), torch.float32)
    fn(x, dim=1)
    fn(x, dim=1)
    assert len(fn.specializations) == 1
    assert "reduce (float32) -> float32 accumulating float32, host" in fn.specializations[0].describe()
    assert "jm_fold" in fn.source("float32")


def test_kernels_come_from_the_pool_then_the_disk_cache_for_a_new_function(fresh_cache):
    code = SQ + ADD + "// a code string of this test's own\n"
    x = sample((3, 4), torch.float32)
    first = create_reduction_fn(code, 0, combine="add")
    first(x, dim=1)
    assert first.specializations[0].cache_event == "compiled"
    again = create_reduction_fn(code, 0, combine="add")  # while `first` lives, its loaded kernel serves
    check(again(x, dim=1), (x * x).sum(1))
    assert again.specializations[0].cache_event == "memory"
    key = first.specializations[0].cache_key
    del first, again
    gc.collect()
    jiter_magic.clear_cache(disk=False)  # the pool's recent kernels too
    third = create_reduction_fn(code, 0, combine="add")
    check(third(x, dim=1), (x * x).sum(1))
    assert third.specializations[0].cache_event == "disk" and third.specializations[0].cache_key == key


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_sums_over_the_leading_dims_take_the_columns_loop(dtype):
    x = sample((300, 4, 70), dtype)
    fn = create_reduction_fn(SQ + ADD + "// columns\n", 0, combine="add")
    wide = x.double() if dtype.is_floating_point else x.long()
    result_dtype = dtype if dtype.is_floating_point else torch.int64
    check(fn(x, dim=0), (wide * wide).sum(0).to(result_dtype))
    assert fn.specializations[-1].spec.path == "host_columns"
    check(fn(x, dim=(0, 1), keepdim=True), (wide * wide).sum((0, 1), keepdim=True).to(result_dtype))
    out = torch.zeros(4, 70, 2, dtype=result_dtype)[..., 1]  # a strided out=
    fn(x, dim=0, out=out)
    check(out, (wide * wide).sum(0).to(result_dtype))
    if dtype.is_floating_point:
        check(AVERAGE(x, dim=0), x.mean(0))
        check(AVERAGE(x[:0], dim=0), x[:0].mean(0))  # empty: nan, as torch


def test_plans_are_remembered_by_what_decides_them():
    fn = create_reduction_fn(ADD + "// plans\n", 0, combine="add")
    x = sample((6, 5), torch.float32)
    for _ in range(3):
        check(fn(x, dim=1), x.sum(1))
    check(fn(x, dim=[1]), x.sum(1))  # a list of dims plans as its tuple
    assert len(fn._calls.plans) == 2
    check(fn(x.t(), dim=1), x.t().sum(1))  # other strides: another plan
    check(fn(x, dim=0), x.sum(0))
    assert len(fn._calls.plans) == 4
    with pytest.raises(ShapeError):  # a remembered plan never skips the checks of another call
        fn(x, dim=1, out=torch.empty(5))
