"""Jitted functions on Dask arrays: lazy results computed block by block by Dask (arrays/dask.py).

Values are checked on the local threaded scheduler and on a two-process LocalCluster, where the
function travels pickled and is rebuilt in each worker (which finds its kernels in the disk cache
that tests/conftest.py sets up: the workers inherit JITER_MAGIC_CACHE_DIR).
"""
from __future__ import annotations

import numpy
import pytest

import jiter_magic as jm
from jiter_magic import DeviceError, InvalidArgumentError, JitFunction, ShapeError, UnknownKwargError

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

AXPY = "template <typename T> T axpy(T x, T y, T a) { return a * x + y; }"
TWO_OUTPUTS = "template <typename T> void sc(T x, T& s, T& c) { s = x + 1; c = x * 2; }"


@pytest.fixture(scope="module")
def axpy() -> JitFunction:
    return jm.create_jit_fn(AXPY, a=1.0)


@pytest.fixture(scope="module")
def sc() -> JitFunction:
    return jm.create_multi_output_jit_fn(TWO_OUTPUTS, 2)


def eager(function: JitFunction, *args, **kwargs):
    """The eager call on the computed inputs: what a lazy result must equal, values and dtype."""
    return function(*(a.compute(scheduler="sync") if isinstance(a, da.Array) else a for a in args), **kwargs)


def assert_same(value, expected) -> None:
    assert value.dtype == expected.dtype
    numpy.testing.assert_array_equal(value, expected)


def grid(shape=(6, 8), dtype="float64", start=0):
    return numpy.arange(start, start + numpy.prod(shape)).reshape(shape).astype(dtype)


@pytest.mark.slow
def test_same_chunks(compute, axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    y = da.from_array(grid(start=100) / 7, chunks=(3, 4))
    lazy = axpy(x, y, a=2.0)
    assert isinstance(lazy, da.Array)
    assert (lazy.dtype, lazy.shape, lazy.chunks) == (numpy.float64, (6, 8), ((3, 3), (4, 4)))
    (value,) = compute(lazy)
    assert_same(value, eager(axpy, x, y, a=2.0))


def test_different_chunkings_are_unified(compute, axpy):
    x = da.from_array(grid(), chunks=(2, 4))
    y = da.from_array(grid(start=5), chunks=(3, 8))
    lazy = axpy(x, y)
    assert lazy.chunks == ((2, 1, 1, 2), (4, 4))
    (value,) = compute(lazy)
    assert_same(value, eager(axpy, x, y))


def test_broadcasts_a_row(compute, axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    row = da.from_array(grid((8,), start=-4), chunks=4)
    ahead, behind = axpy(x, row), axpy(row, x)
    assert ahead.shape == behind.shape == (6, 8)
    assert ahead.chunks == behind.chunks == ((3, 3), (4, 4))
    values = compute(ahead, behind)
    assert_same(values[0], eager(axpy, x, row))
    assert_same(values[1], eager(axpy, row, x))


def test_broadcasts_a_column(compute, axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    column = da.from_array(grid((6, 1), start=10), chunks=(2, 1))
    row = da.from_array(grid((8,)), chunks=(4,))
    with_x, outer = axpy(x, column), axpy(column, row, a=3.0)  # outer: both inputs broadcast
    assert with_x.shape == outer.shape == (6, 8)
    assert with_x.chunks == ((2, 1, 1, 2), (4, 4))
    assert outer.chunks == ((2, 2, 2), (4, 4))
    values = compute(with_x, outer)
    assert_same(values[0], eager(axpy, x, column))
    assert_same(values[1], eager(axpy, column, row, a=3.0))


@pytest.mark.slow
def test_python_scalar_and_keyword_extra(compute, axpy):
    x = da.from_array(grid(dtype="float32"), chunks=(3, 4))
    lazy = axpy(x, 2.5, a=3.0)
    assert lazy.dtype == numpy.float32  # a Python number is weak, as in the eager call
    (value,) = compute(lazy)
    assert_same(value, eager(axpy, x, 2.5, a=3.0))


def test_numpy_array_mixed_in(compute, axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    y = grid(start=50)
    ahead, behind = axpy(x, y), axpy(y, x, a=0.5)
    assert ahead.chunks == behind.chunks == x.chunks
    values = compute(ahead, behind)
    assert_same(values[0], eager(axpy, x, y))
    assert_same(values[1], eager(axpy, y, x, a=0.5))


@pytest.mark.slow
def test_int_and_float_promote(compute, axpy):
    ints = da.from_array(grid(dtype="int32"), chunks=(3, 4))
    floats = da.from_array(grid(dtype="float32", start=1) / 3, chunks=(3, 4))
    mixed, with_number = axpy(ints, floats), axpy(ints, 0.25)
    expected = eager(axpy, ints, floats), eager(axpy, ints, 0.25)
    assert mixed.dtype == expected[0].dtype == numpy.float64
    assert with_number.dtype == expected[1].dtype
    values = compute(mixed, with_number)
    assert_same(values[0], expected[0])
    assert_same(values[1], expected[1])


def test_multi_output(compute, sc):
    x = da.from_array(grid(dtype="float32"), chunks=(3, 4))
    s, c = sc(x)
    for lazy in (s, c):
        assert isinstance(lazy, da.Array)
        assert (lazy.dtype, lazy.shape, lazy.chunks) == (numpy.float32, (6, 8), x.chunks)
    values = compute(s, c)
    for value, expected in zip(values, eager(sc, x)):
        assert_same(value, expected)


def test_multi_output_is_one_layer_and_one_call_a_block(sc, monkeypatch):
    x = da.from_array(grid(), chunks=(3, 4))
    s, c = sc(x)
    inputs = set(x.dask.layers)
    shared = (set(s.dask.layers) & set(c.dask.layers)) - inputs
    assert len(shared) == 1  # the layer computing both outputs
    assert set(s.dask.layers) - inputs - shared == {s.name}  # each output only picks its part
    assert set(c.dask.layers) - inputs - shared == {c.name}
    calls = []
    call = JitFunction.__call__

    def counted(self, *args, **kwargs):
        calls.append(self.name)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(JitFunction, "__call__", counted)
    dask.compute(s, c, scheduler="threads")
    assert calls == ["sc"] * x.npartitions


def test_results_chain(compute, axpy, sc):
    x = da.from_array(grid(), chunks=(3, 4))
    y = da.from_array(grid((8,), start=3), chunks=4)
    s, c = sc(x)
    chained = axpy(axpy(s, y), c, a=-1.0)
    assert chained.chunks == x.chunks
    (value,) = compute(chained)
    s_now, c_now = eager(sc, x)
    assert_same(value, axpy(axpy(s_now, y.compute()), c_now, a=-1.0))


def test_nothing_runs_before_compute(axpy):
    read = []

    def noted(block):
        read.append(block.shape)
        return block

    source = grid()
    x = da.from_array(source, chunks=(3, 4)).map_blocks(noted, meta=source[:0, :0])
    fresh = jm.create_jit_fn("template <typename T> T lazy_sum(T x, T y) { return x + 2 * y; }")
    chained = axpy(fresh(x, x), x, a=2.0)
    assert read == []
    assert fresh.specializations == []  # the dtype came from zero-size metas: no kernel compiled
    value = chained.compute(scheduler="threads")
    assert len(read) == x.npartitions  # each block of x read once, for all three uses
    assert len(fresh.specializations) == 1
    assert_same(value, 2 * (source + 2 * source) + source)


def test_out_is_refused(axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    with pytest.raises(InvalidArgumentError, match="immutable.*da.store"):
        axpy(x, x, out=x)
    with pytest.raises(InvalidArgumentError):
        axpy(grid(), x, out=grid())
    assert_same(axpy(x, x).compute(scheduler="threads"), eager(axpy, x, x))


def test_unknown_kwarg_raises_at_call_time(axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    with pytest.raises(UnknownKwargError, match="b is not declared"):
        axpy(x, x, b=2.0)
    with pytest.raises(UnknownKwargError):
        axpy(grid(), x, alpha=1)
    assert_same(axpy(x, x, a=4.0).compute(scheduler="threads"), eager(axpy, x, x, a=4.0))


def test_shape_mismatch_raises_at_call_time(axpy):
    x = da.from_array(grid(), chunks=(3, 4))
    with pytest.raises(ShapeError, match=r"\(6, 8\), \(5, 8\)"):
        axpy(x, da.ones((5, 8), chunks=(5, 4)))
    with pytest.raises(ShapeError):
        axpy(x, grid((7,)))
    assert_same(axpy(x, x).compute(scheduler="threads"), eager(axpy, x, x))


def test_torch_tensors_are_refused(axpy):
    torch = pytest.importorskip("torch")
    x = da.from_array(grid(), chunks=(3, 4))
    tensor = torch.ones(8, dtype=torch.float64)
    with pytest.raises(DeviceError, match=r"tensor\.numpy\(\)"):
        axpy(x, tensor)
    with pytest.raises(DeviceError, match=r"tensor\.numpy\(\)"):
        axpy(tensor, x)
    assert_same(axpy(x, tensor.numpy()).compute(scheduler="threads"), eager(axpy, x, tensor.numpy()))


def test_called_again_with_a_dask_array_first(axpy):
    """The hot path keys on the first input's type: a Dask array must still be handed to its adapter on later calls."""
    x = da.from_array(grid(), chunks=(3, 4))
    first, again = axpy(x, x), axpy(x, x)
    assert first.name == again.name
    assert_same(again.compute(scheduler="threads"), eager(axpy, x, x))


@pytest.mark.slow
def test_threads_share_one_function():
    """The threaded scheduler calls one function from many threads at once, the first calls of
    each dtype racing to plan and compile."""
    fresh = jm.create_jit_fn("template <typename T> T raced(T x, T y, T a) { return a * x - y * y; }", a=1.5)
    rng = numpy.random.default_rng(0)
    hosts = [((rng.standard_normal((64, 64)) * 10).astype(dtype), (rng.standard_normal(64) * 10).astype(dtype))
             for dtype in ("float32", "float64", "int32", "int64")]
    lazies = [fresh(da.from_array(x, chunks=8), da.from_array(y, chunks=8), a=a) for x, y in hosts for a in (1.5, 2.5)]
    values = dask.compute(*lazies, scheduler="threads", num_workers=8)
    expected = [fresh(x, y, a=a) for x, y in hosts for a in (1.5, 2.5)]
    for value, want in zip(values, expected):
        assert_same(value, want)
    assert len({s.spec for s in fresh.specializations}) == len(fresh.specializations)  # each built once


def check_chunk_library(xp) -> None:
    """Dask arrays of `xp` chunks (NumPy or CuPy): results keep `xp` as their meta and equal the
    eager `xp` call, on the local threaded scheduler."""
    axpy = jm.create_jit_fn(AXPY, a=1.0)
    sc = jm.create_multi_output_jit_fn(TWO_OUTPUTS, 2)
    to_host = getattr(xp, "asnumpy", numpy.asarray)
    x_array = xp.asarray(grid(dtype="float32"))
    y_array = xp.asarray(numpy.linspace(-1, 1, 8, dtype="float32"))
    x, y = da.from_array(x_array, chunks=(3, 4)), da.from_array(y_array, chunks=4)
    lazies = (axpy(x, y, a=2.0), axpy(x, y_array), *sc(x))
    expected = (axpy(x_array, y_array, a=2.0), axpy(x_array, y_array), *sc(x_array))
    for lazy, want in zip(lazies, expected):
        assert type(lazy._meta) is type(x_array)
        assert (lazy.dtype, lazy.shape, lazy.chunks) == (want.dtype, want.shape, x.chunks)
    values = dask.compute(*lazies, scheduler="threads")
    for value, want in zip(values, expected):
        assert type(value) is type(want)
        assert value.dtype == want.dtype
        numpy.testing.assert_array_equal(to_host(value), to_host(want))


def test_numpy_chunks():
    check_chunk_library(numpy)


@pytest.mark.gpu
def test_cupy_chunks():
    check_chunk_library(pytest.importorskip("cupy"))


def test_inspection_and_benchmark_say_what_they_take(axpy: JitFunction) -> None:
    x = da.ones(8, chunks=4)
    with pytest.raises(InvalidArgumentError, match=r"example inputs must be arrays a kernel reads .* pass a local "
                                                   r"shard \(x.to_local\(\)\), a block, or dtype names"):
        axpy.source(x, x)
    with pytest.raises(InvalidArgumentError, match=r"benchmark times calls on arrays a kernel reads .* not on Array"):
        axpy.benchmark(x, x)
    numpy.testing.assert_array_equal(axpy(x, x).compute(), numpy.full(8, 2.0))
