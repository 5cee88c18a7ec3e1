"""Scans of Dask arrays: each block carries the state of the blocks before it along the scanned dim;
results are checked against the eager call on the NumPy array, on several chunkings (uneven, one
chunk, empty chunks), on the threaded scheduler and a two-process LocalCluster (conftest.py)."""
from __future__ import annotations

import numpy
import pytest
from scans.scan_functions import ADD, cummax, cumsum, ema, linear, linear_h, logcumsumexp

from jiter_magic import (
    ArgumentTypeError,
    BindError,
    DimensionError,
    InvalidArgumentError,
    UnknownKwargError,
    ValuesIndices,
    create_scan_fn,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
SCALED = "template <typename T> T scaled(T x, T y, T a) { return a * x * y; }\n"
running_mean = create_scan_fn(ADD + MEAN, 0, combine="add", finalize="mean")
dot = create_scan_fn(SCALED + ADD, 0, map="scaled", combine="add", a=1.0)

CHUNKINGS = [((3, 1, 3), (2, 0, 4, 3)), ((7,), (9,)), ((1,) * 7, (5, 4)), ((0, 7), (4, 0, 5, 0))]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


def grid(shape=(7, 9), dtype="float64"):
    return numpy.random.default_rng(7).standard_normal(shape).astype(dtype)


def assert_like(value, expected, rtol=1e-10) -> None:
    """The eager call's dtype and shape; values within rounding (the states are grouped otherwise)."""
    assert (value.dtype, value.shape) == (expected.dtype, expected.shape), (value.dtype, value.shape, expected.dtype)
    numpy.testing.assert_allclose(value, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_one_value_scans_match_the_eager_call(compute, chunks, reverse, exclusive):
    values = grid()
    x = da.from_array(values, chunks=chunks)
    calls = [(fn, dim) for fn in (cumsum, running_mean, logcumsumexp) for dim in (0, 1, -1)]
    lazies = [fn(x, dim=dim, reverse=reverse, exclusive=exclusive) for fn, dim in calls]
    for lazy in lazies:
        assert isinstance(lazy, da.Array) and lazy.dtype == numpy.float64 and lazy.chunks == x.chunks
    for value, (fn, dim) in zip(compute(*lazies), calls):
        assert_like(value, fn(values, dim=dim, reverse=reverse, exclusive=exclusive))


def test_a_running_mean_divides_by_the_global_count(compute):
    ones = numpy.arange(1.0, 11.0)
    (value,) = compute(running_mean(da.from_array(ones, chunks=3), dim=0))
    assert value.tolist() == [(k + 2) / 2 for k in range(10)]  # the mean of 1..k+1, not of a block's elements
    (value,) = compute(running_mean(da.from_array(ones, chunks=3), dim=0, reverse=True))
    assert value.tolist() == [(k + 11) / 2 for k in range(10)]


@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_dtypes_follow_the_eager_call(compute, reverse, exclusive):
    ints, halves = (grid() * 10).astype("int32"), grid(dtype="float16")
    x, h = da.from_array(ints, chunks=(3, 4)), da.from_array(halves, chunks=(2, 5))
    options = {"reverse": reverse, "exclusive": exclusive}
    calls = [(cumsum, ints, x, {"dim": 1}), (cumsum, ints, x, {"dim": 0, "dtype": "float32"}),
             (running_mean, halves, h, {"dim": 1}), (cumsum, halves, h, {"dim": 0, "dtype": numpy.float64})]
    lazies = [fn(lazy, **kw, **options) for fn, _, lazy, kw in calls]
    assert [lazy.dtype for lazy in lazies] == [numpy.int64, numpy.float32, numpy.float16, numpy.float64]
    for value, (fn, eager, _, kw) in zip(compute(*lazies), calls):
        expected = fn(eager, **kw, **options)
        assert value.dtype == expected.dtype
        numpy.testing.assert_allclose(value.astype("float64"), expected.astype("float64"), rtol=2e-3, atol=2e-3)
    assert compute(lazies[0])[0].tolist() == cumsum(ints, dim=1, **options).tolist()  # integers: exact


def test_several_inputs_broadcast_with_numpy_arrays_and_extras(compute):
    values, row, column = grid((6, 8)), numpy.linspace(-1.0, 1.0, 8), numpy.linspace(0.5, 2.0, 6)[:, None]
    x = da.from_array(values, chunks=(4, 3))
    y = da.from_array(row, chunks=5)  # chunked unlike x's last dim
    calls = [((x, y), {"dim": 1}), ((x, row), {"dim": 0, "a": 2.5, "reverse": True}),
             ((y, x), {"dim": -1, "exclusive": True}), ((column, y), {"dim": 0}), ((x, column), {"dim": 1})]
    lazies = [dot(*inputs, **kw) for inputs, kw in calls]
    eager = [dot(*(i.compute() if isinstance(i, da.Array) else i for i in inputs), **kw) for inputs, kw in calls]
    for value, want in zip(compute(*lazies), eager):
        assert_like(value, want)


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_a_linear_recurrence_carries_both_values(compute, chunks, reverse, exclusive):
    """Both values carried between blocks, also where a call returns h alone (outputs=(1,))."""
    a, b = numpy.abs(grid()) * 0.2 + 0.8, grid()[::-1].copy()
    x, y = da.from_array(a, chunks=chunks), da.from_array(b, chunks=chunks)
    alone = linear_h(x, y, dim=0, reverse=reverse, exclusive=exclusive)
    assert type(alone) is tuple and len(alone) == 1 and alone[0].chunks == x.chunks
    lazies = [*linear(x, y, dim=1, reverse=reverse, exclusive=exclusive),
              *ema(y, dim=0, reverse=reverse, exclusive=exclusive, decay=0.7), *alone,
              *linear_h(x, y, dim=1, reverse=reverse, exclusive=exclusive)]
    expected = [*linear(a, b, dim=1, reverse=reverse, exclusive=exclusive),
                *ema(b, dim=0, reverse=reverse, exclusive=exclusive, decay=0.7),
                linear(a, b, dim=0, reverse=reverse, exclusive=exclusive)[1],
                linear(a, b, dim=1, reverse=reverse, exclusive=exclusive)[1]]
    for value, want in zip(compute(*lazies), expected):
        assert_like(value, want)


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_values_with_indices_count_over_the_whole_dim_ties_as_eager(compute, chunks, reverse, exclusive):
    values = numpy.round(grid() * 2) / 2  # many ties
    values[2, 3] = values[5, 7] = numpy.nan  # NaN wins and stays, as torch.cummax's
    x = da.from_array(values, chunks=chunks)
    found = [cummax(x, dim=dim, reverse=reverse, exclusive=exclusive) for dim in (0, 1)]
    assert all(isinstance(f, ValuesIndices) for f in found)
    computed = compute(*(array for f in found for array in f))
    for dim in (0, 1):
        want = cummax(values, dim=dim, reverse=reverse, exclusive=exclusive)
        numpy.testing.assert_array_equal(computed[2 * dim], want.values)
        assert computed[2 * dim + 1].dtype == numpy.int64
        numpy.testing.assert_array_equal(computed[2 * dim + 1], want.indices)


def test_empty_extents_and_0d_inputs():
    empty = numpy.zeros((0, 3))
    for chunks in ((1, 2), (0, 3)):
        value = cumsum(da.from_array(empty, chunks=chunks), dim=0).compute(scheduler="sync")
        assert_like(value, numpy.zeros((0, 3)))
    scalar = numpy.array(2.5)
    assert_like(running_mean(da.from_array(scalar), dim=0).compute(scheduler="sync"), numpy.array(2.5))
    found = cummax(da.from_array(scalar), dim=-1)
    assert found.indices.compute(scheduler="sync").tolist() == 0
    a, b = da.from_array(numpy.array(0.5)), da.from_array(scalar)  # a state's values: a tuple (of one for h alone)
    assert [x.compute(scheduler="sync").tolist() for x in linear(a, b, dim=0)] == [0.5, 2.5]
    (h,) = linear_h(a, b, dim=0)
    assert h.shape == () and h.compute(scheduler="sync").tolist() == 2.5


def test_errors_are_raised_at_call_time():
    x = da.from_array(grid(), chunks=(3, 4))
    with pytest.raises(InvalidArgumentError, match="out= is not supported with Dask arrays"):
        cumsum(x, dim=0, out=numpy.empty((7, 9)))
    with pytest.raises(DimensionError, match="out of range"):
        cumsum(x, dim=2)
    with pytest.raises(ArgumentTypeError, match="needs dim="):
        cumsum(x)
    with pytest.raises(BindError, match="input"):
        cumsum(x, x, dim=0)
    with pytest.raises(UnknownKwargError):
        dot(x, x, dim=0, b=2.0)
    with pytest.raises(ArgumentTypeError, match="reverse must be True or False"):
        cumsum(x, dim=0, reverse="yes")
    unknown = x[x[:, 0] > 0]  # boolean indexing: unknown sizes along dim 0
    with pytest.raises(InvalidArgumentError, match="unknown chunk sizes along the scanned dim"):
        cumsum(unknown, dim=0)
    kept = unknown.compute()
    assert_like(cumsum(unknown, dim=1).compute(scheduler="sync"), cumsum(kept, dim=1))


def test_nothing_runs_or_compiles_before_compute_and_names_are_deterministic():
    fresh = create_scan_fn(ADD + MEAN, 0, combine="add", finalize="mean")
    values = grid((6, 8))
    x = da.from_array(values, chunks=(3, 4))
    lazy = fresh(x, dim=1)
    assert fresh.specializations == []
    assert lazy.name == fresh(x, dim=1).name and lazy.name != fresh(x, dim=1, reverse=True).name
    assert_like(lazy.compute(scheduler="sync"), fresh(values, dim=1))


def check_chunk_library(xp) -> None:
    """Dask arrays of `xp` chunks (NumPy or CuPy): results keep `xp` as their meta and match the
    eager `xp` call (the carries run on the chunks' device), on the threaded scheduler."""
    to_host = getattr(xp, "asnumpy", numpy.asarray)
    values = xp.asarray(grid(dtype="float32"))
    a = xp.asarray(numpy.abs(grid()) * 0.2 + 0.8)
    x, y = da.from_array(values, chunks=(3, 4)), da.from_array(a, chunks=(2, 5))
    calls = [(cumsum, (values,), {"dim": 1, "reverse": True}), (running_mean, (values,), {"dim": 0}),
             (cummax, (values,), {"dim": 1, "exclusive": True}), (linear, (a, a), {"dim": 1})]
    lazies, expected = [], []
    for fn, inputs, kw in calls:
        lazy = fn(*(x if i is values else y for i in inputs), **kw)
        lazies += list(lazy) if isinstance(lazy, tuple) else [lazy]
        want = fn(*inputs, **kw)
        expected += list(want) if isinstance(want, tuple) else [want]
    for lazy in lazies:
        assert type(lazy._meta) is type(values)
    for value, want in zip(dask.compute(*lazies, scheduler="threads"), expected):
        assert type(value) is type(want) and value.dtype == want.dtype
        numpy.testing.assert_allclose(to_host(value), to_host(want), rtol=1e-5, atol=1e-5)


def test_numpy_chunks():
    check_chunk_library(numpy)


@pytest.mark.gpu
def test_cupy_chunks():
    check_chunk_library(pytest.importorskip("cupy"))
