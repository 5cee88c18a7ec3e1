"""Scans on the CPU against torch.cumsum, cumprod, cummax, cummin and logcumsumexp: dtypes, shapes
(empty, one element, 0-d), layouts (transposed, strided, broadcast), negative dims, reverse,
exclusive, dtype= and out=; a linear recurrence against a float64 loop; NumPy inputs; each kernel
shape (rows, columns, one long row split over the threads) and the same result on every run."""
from __future__ import annotations

import numpy as np
import pytest
from scan_functions import cummax, cummin, cumprod, cumsum, ema, linear, logcumsumexp

from jiter_magic import ValuesIndices, create_scan_fn

torch = pytest.importorskip("torch")


def close(got, want, rtol=1e-5, atol=1e-5):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.is_floating_point:
        torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, want)


def sample(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(-3 if dtype.is_signed else 0, 4, shape, generator=generator).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                   torch.int64, torch.uint8, torch.int8, torch.bool])
def test_cumsum_follows_torch_dtypes_and_values(dtype):
    x = sample((6, 37), dtype)
    tolerance = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
    close(cumsum(x, dim=1), torch.cumsum(x, 1), tolerance, tolerance)
    close(cumsum(x, dim=0), torch.cumsum(x, 0), tolerance, tolerance)


@pytest.mark.parametrize("shape", [(0,), (1,), (), (3, 0), (0, 4), (1, 1), (5, 1), (1, 9), (2, 3, 4, 5)])
@pytest.mark.parametrize("dim", [0, -1])
def test_shapes_empty_single_and_zero_d(shape, dim):
    x = sample(shape, torch.float32)
    close(cumsum(x, dim=dim), torch.cumsum(x, dim))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
def test_every_dim_of_a_3d_array_and_of_non_contiguous_views(dim):
    x = sample((5, 6, 70), torch.float64)
    for view in (x, x.transpose(0, 2), x[:, ::2, 1::3], x.permute(1, 2, 0)):
        close(cumsum(view, dim=dim), torch.cumsum(view, dim), 1e-12, 1e-12)


@pytest.mark.parametrize("dim", [0, -1])
def test_reverse_and_exclusive(dim):
    x = sample((9, 130), torch.float64)
    flipped = torch.flip(torch.cumsum(torch.flip(x, [dim]), dim), [dim])
    close(cumsum(x, dim=dim, reverse=True), flipped)
    shifted = torch.cumsum(x, dim) - x
    close(cumsum(x, dim=dim, exclusive=True), shifted)
    close(cumsum(x, dim=dim, exclusive=True, reverse=True), flipped - x)


def test_cumprod_logcumsumexp_and_special_values():
    x = sample((7, 50), torch.float64) * 0.3 + 1
    close(cumprod(x, dim=1), torch.cumprod(x, 1))
    y = sample((7, 300), torch.float32) * 10
    y[0, 3], y[1, :5], y[2, 7], y[3, 0] = float("-inf"), float("-inf"), float("inf"), float("nan")
    close(logcumsumexp(y, dim=1), torch.logcumsumexp(y, 1))
    close(logcumsumexp(y, dim=0), torch.logcumsumexp(y, 0))
    h = y.to(torch.bfloat16)
    close(logcumsumexp(h, dim=1), torch.logcumsumexp(h, 1), 2e-2, 2e-2)


@pytest.mark.parametrize(("fn", "reference"), [(cummax, torch.cummax), (cummin, torch.cummin)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16])
def test_cummax_and_cummin_values_and_indices(fn, reference, dtype):
    x = torch.randint(0, 5, (6, 200), generator=torch.Generator().manual_seed(1)).to(dtype)  # many ties
    if dtype.is_floating_point:
        x[2, 10], x[3, 0], x[3, 50] = float("nan"), float("nan"), float("nan")
    for dim in (1, 0):
        got, want = fn(x, dim=dim), reference(x, dim)
        assert isinstance(got, ValuesIndices)
        close(got.values, want.values)
        close(got.indices, want.indices)
    # Reversed: result i folds elements n-1 down to i; indices count in the array's order, so the
    # combine's rule (a larger index wins a tie) keeps the last of equal elements, not the first met.
    got = fn(x, dim=1, reverse=True)
    close(got.values, torch.flip(reference(torch.flip(x, [1]), 1).values, [1]))
    assert torch.equal(x.gather(1, got.indices).double(), got.values.double()) or dtype.is_floating_point
    for row in range(x.shape[0]):
        for i in (0, 57, 199):
            tail = x[row, i:].double()
            best = got.values[row, i].double()
            hits = torch.nonzero(tail.isnan() if best.isnan() else tail == best).flatten() + i
            assert got.indices[row, i] == hits.max()


def sequential(a, b, dim):
    """h[t] = a[t] * h[t-1] + b[t] along `dim`, in float64, one step at a time."""
    a, b = a.double().movedim(dim, -1), b.double().movedim(dim, -1)
    h, out = torch.zeros(a.shape[:-1], dtype=torch.float64), torch.empty(a.shape, dtype=torch.float64)
    for t in range(a.shape[-1]):
        h = a[..., t] * h + b[..., t]
        out[..., t] = h
    return out.movedim(-1, dim)


@pytest.mark.parametrize("dim", [-1, 0])
def test_linear_recurrence_matches_a_float64_loop(dim):
    generator = torch.Generator().manual_seed(3)
    a, b = torch.rand(8, 300, generator=generator) * 0.2 + 0.8, torch.randn(8, 300, generator=generator)
    products, h = linear(a, b, dim=dim)
    assert products.dtype == h.dtype == torch.float32
    torch.testing.assert_close(h.double(), sequential(a, b, dim), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(products.double(), torch.cumprod(a.double(), dim), rtol=1e-4, atol=1e-6)


def test_a_map_writing_the_state_with_extras():
    x = torch.randn(4, 100, dtype=torch.float64)
    for decay in (0.9, 0.5):
        _, h = ema(x, dim=1, decay=decay) if decay != 0.9 else ema(x, dim=1)
        torch.testing.assert_close(h, sequential(torch.full_like(x, decay), (1 - decay) * x, 1))


@pytest.mark.parametrize("shape", [(1 << 18,), (3, 1 << 17)])
def test_long_rows_split_over_the_threads_are_right_and_the_same_every_run(shape):
    x = sample(shape, torch.float64)
    first = cumsum(x, dim=-1)
    close(first, torch.cumsum(x, -1), 1e-9, 1e-9)
    assert torch.equal(first, cumsum(x, dim=-1))
    ints = sample(shape, torch.int32)
    close(cumsum(ints, dim=-1, exclusive=True), torch.cumsum(ints, -1) - ints)
    got = cummax(ints, dim=-1)
    want = torch.cummax(ints, -1)
    close(got.values, want.values)
    close(got.indices, want.indices)
    products, h = linear(torch.full(shape, 0.999), torch.ones(shape), dim=-1)
    torch.testing.assert_close(h[..., -5:].double(), sequential(torch.full(shape, 0.999), torch.ones(shape), -1)[..., -5:],
                               rtol=1e-4, atol=1e-3)


def test_dtype_and_out():
    x = sample((4, 33), torch.int32)
    close(cumsum(x, dim=1, dtype=torch.float64), torch.cumsum(x, 1, dtype=torch.float64))
    out = torch.empty(4, 33, dtype=torch.int64)
    assert cumsum(x, dim=1, out=out) is out
    close(out, torch.cumsum(x, 1))
    strided = torch.empty(33, 4, dtype=torch.int64).t()
    cumsum(x, dim=0, out=strided)
    close(strided, torch.cumsum(x, 0))
    values, indices = torch.empty(4, 33, dtype=torch.int32), torch.empty(4, 33, dtype=torch.int64)
    got = cummax(x, dim=1, out=(values, indices))
    assert got.values is values and got.indices is indices
    close(values, torch.cummax(x, 1).values)


def test_broadcast_inputs_promote_as_elementwise_calls():
    a, b = torch.rand(1, 40) * 0.5 + 0.5, torch.randn(6, 1, dtype=torch.float64)
    _, h = linear(a, b, dim=1)
    assert h.dtype == torch.float64 and h.shape == (6, 40)
    torch.testing.assert_close(h, sequential(a.expand(6, 40), b.expand(6, 40), 1))


def test_numpy_inputs():
    x = np.random.default_rng(0).standard_normal((5, 40))
    got = cumsum(x, dim=1)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    np.testing.assert_allclose(got, np.cumsum(x, axis=1))
    np.testing.assert_array_equal(cumsum(np.arange(10, dtype=np.int32), dim=0), np.cumsum(np.arange(10)))


def test_finalize_sees_the_count():
    mean = create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }\n"
                          "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n",
                          0, combine="add", finalize="mean")
    x = torch.randn(3, 20, dtype=torch.float64)
    torch.testing.assert_close(mean(x, dim=1), torch.cumsum(x, 1) / torch.arange(1, 21))


@pytest.mark.parametrize("exclusive", [False, True])
def test_many_rows_scanned_side_by_side_over_the_threads(exclusive):
    x = sample((37, 2000), torch.float64)  # 8 rows at a time on each thread, then the rest one by one
    want = torch.cumsum(x, 1) - (x if exclusive else 0)
    close(cumsum(x, dim=1, exclusive=exclusive), want, 1e-9, 1e-9)
    close(cumsum(x, dim=1, exclusive=exclusive, reverse=True), torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])
          - (x if exclusive else 0), 1e-9, 1e-9)
    ints = sample((37, 2000), torch.int32)
    got, want_max = cummax(ints, dim=1), torch.cummax(ints, 1)
    close(got.values, want_max.values)
    close(got.indices, want_max.indices)
    a, b = torch.rand(37, 2000, dtype=torch.float64) * 0.1 + 0.9, torch.randn(37, 2000, dtype=torch.float64)
    torch.testing.assert_close(linear(a, b, dim=1)[1], sequential(a, b, 1))


def test_out_may_be_the_input_itself_and_a_broadcast_input_scans_its_repeats():
    x = sample((40, 3000), torch.float64)
    want = torch.cumsum(x, 1)
    assert cumsum(x, dim=1, out=x) is x
    close(x, want, 1e-9, 1e-9)
    y = sample((1, 1 << 17), torch.float64)  # one long row: split over the threads, in place
    before = y.clone()
    assert cumsum(y, dim=1, reverse=True, out=y) is y
    close(y, torch.flip(torch.cumsum(torch.flip(before, [1]), 1), [1]), 1e-9, 1e-9)
    column = torch.arange(5, dtype=torch.float64).reshape(5, 1).expand(5, 10)
    close(cumsum(column, dim=1), torch.cumsum(column.contiguous(), 1))
