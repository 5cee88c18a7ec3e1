"""Reductions of Dask arrays: lazy results folded by `dask.array.reduction`, checked against NumPy.

Values are checked on the threaded scheduler and on a two-process LocalCluster (tests/integrations/conftest.py), where the
reduction travels pickled and is rebuilt in each worker (which finds its kernels in the disk
cache that tests/conftest.py sets up). Chunks are uneven on purpose: a mean must divide by the
whole count, not a block's.
"""
from __future__ import annotations

import numpy
import pytest

from jiter_magic import (
    ArgumentTypeError,
    BindError,
    DeviceError,
    DimensionError,
    DTypeError,
    InvalidArgumentError,
    ReductionFunction,
    ShapeError,
    UnknownKwargError,
    create_reduction_fn,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MAX = "template <typename T> T larger(T a, T b) { return a > b ? a : b; }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
ROOT = "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n"
MUL = "template <typename T> T mul(T x, T y, T a) { return a * x * y; }\n"

SUM_SQ = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
AVERAGE = create_reduction_fn(ADD + MEAN, 0, combine="add", finalize="mean")
NORM = create_reduction_fn(SQ + ADD + ROOT, 0, map="sq", combine="add", finalize="root")
AMAX = create_reduction_fn(MAX, float("-inf"), combine="larger")
DOT = create_reduction_fn(MUL + ADD, 0, combine="add", a=1.0)


def grid(shape=(7, 9, 5), dtype="float64", start=1):
    return (numpy.arange(start, start + numpy.prod(shape)).reshape(shape) % 13).astype(dtype)


UNEVEN = ((3, 1, 3), (2, 4, 3), (5,))


def assert_close(value, expected, dtype=None) -> None:
    assert value.dtype == (expected.dtype if dtype is None else dtype)
    assert value.shape == expected.shape
    numpy.testing.assert_allclose(value, expected, rtol=1e-6)


@pytest.mark.parametrize("dim", [None, 1, -1, (0, 2), (2, 0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sums_means_and_norms_over_uneven_chunks(compute, dim, keepdim):
    values = grid()
    x = da.from_array(values, chunks=UNEVEN)
    axis = tuple(dim) if isinstance(dim, tuple) else dim
    lazies = [SUM_SQ(x, dim=dim, keepdim=keepdim), AVERAGE(x, dim=dim, keepdim=keepdim),
              NORM(x, dim=dim, keepdim=keepdim), AMAX(x, dim=dim, keepdim=keepdim)]
    expected = [(values ** 2).sum(axis=axis, keepdims=keepdim), values.mean(axis=axis, keepdims=keepdim),
                numpy.sqrt((values ** 2).sum(axis=axis, keepdims=keepdim)), values.max(axis=axis, keepdims=keepdim)]
    for lazy, want in zip(lazies, expected):
        assert isinstance(lazy, da.Array)
        assert (lazy.dtype, lazy.shape) == (want.dtype, want.shape)
    for value, want in zip(compute(*lazies), expected):
        assert_close(value, want)


def test_dtypes_follow_the_eager_call(compute):
    ints = grid(dtype="int32")
    halves = grid(dtype="float16") / 4
    x, h = da.from_array(ints, chunks=(2, 5, 2)), da.from_array(halves, chunks=(4, 3, 5))
    lazies = [SUM_SQ(x, dim=1), AVERAGE(x, dim=(0, 1), dtype="float64"), AVERAGE(h, dim=0),
              SUM_SQ(h, dim=2, dtype=numpy.float32), AMAX(x, dim=0, dtype="int16")]
    eager = [SUM_SQ(ints, dim=1), AVERAGE(ints, dim=(0, 1), dtype="float64"), AVERAGE(halves, dim=0),
             SUM_SQ(halves, dim=2, dtype=numpy.float32), AMAX(ints, dim=0, dtype="int16")]
    assert [lazy.dtype for lazy in lazies] == [numpy.int64, numpy.float64, numpy.float16, numpy.float32, numpy.int16]
    for value, want in zip(compute(*lazies), eager):
        assert value.dtype == want.dtype
        numpy.testing.assert_allclose(value, want, rtol=2e-3)  # float16 partials are summed in float32
    assert compute(SUM_SQ(x, dim=1))[0].tolist() == (ints.astype("int64") ** 2).sum(1).tolist()


def test_two_inputs_broadcast_with_numpy_arrays_and_extras(compute):
    values, row = grid(), numpy.linspace(-1.0, 1.0, 5)
    x = da.from_array(values, chunks=UNEVEN)
    y = da.from_array(row, chunks=2)  # chunked unlike x's last dim
    lazies = [DOT(x, y, dim=-1), DOT(x, row, dim=(0, 2), a=2.5), DOT(y, x, keepdim=True)]
    expected = [(values * row).sum(-1), 2.5 * (values * row).sum((0, 2)), (values * row).sum(keepdims=True)]
    for value, want in zip(compute(*lazies), expected):
        assert_close(value, want)


def test_a_full_mean_of_one_chunk_and_of_an_empty_dim():
    values = grid((4, 6))
    assert_close(AVERAGE(da.from_array(values, chunks=-1)).compute(scheduler="sync"), numpy.array(values.mean()))
    empty = numpy.zeros((0, 3))
    result = SUM_SQ(da.from_array(empty, chunks=(1, 2)), dim=0).compute(scheduler="sync")
    assert_close(result, numpy.zeros(3))


def test_nothing_runs_or_compiles_before_compute():
    fresh = create_reduction_fn(SQ + ADD + MEAN, 0, map="sq", combine="add", finalize="mean")
    read = []

    def noted(block):
        read.append(block.shape)
        return block

    values = grid((6, 8))
    x = da.from_array(values, chunks=(3, 4)).map_blocks(noted, meta=values[:0, :0])
    lazy = fresh(x, dim=1)
    assert read == [] and fresh.specializations == []
    numpy.testing.assert_allclose(lazy.compute(scheduler="sync"), (values ** 2).mean(1))
    assert len(read) == x.npartitions
    assert fresh.specializations == []  # the blocks ran its pieces (reduce_parts.py), not it


def test_the_graph_is_a_tree_of_partials():
    x = da.from_array(grid((64, 4)), chunks=(2, 4))
    lazy = AVERAGE(x, dim=0)
    assert lazy.npartitions == 1
    assert len(lazy.dask.layers) > 3  # the blocks, a combine level at least, the aggregate
    assert lazy.name.startswith("add-")
    assert lazy.name == AVERAGE(x, dim=0).name  # deterministic
    assert lazy.name != AVERAGE(x, dim=0, keepdim=True).name


def test_bad_arguments_are_refused_at_call_time():
    x = da.from_array(grid(), chunks=UNEVEN)
    with pytest.raises(InvalidArgumentError, match="immutable.*da.store"):
        SUM_SQ(x, out=grid())
    with pytest.raises(DimensionError, match=r"dim 3 is out of range for a 3-d input"):
        SUM_SQ(x, dim=3)
    with pytest.raises(InvalidArgumentError, match="appears twice"):
        SUM_SQ(x, dim=(1, -2))
    with pytest.raises(UnknownKwargError, match="b is not declared"):
        DOT(x, x, b=1.0)
    with pytest.raises(BindError, match=r"mul takes 2 input array\(s\)"):
        DOT(x)
    with pytest.raises(ArgumentTypeError, match="the inputs of a reduction are arrays, got the number 2.0"):
        DOT(x, 2.0)
    with pytest.raises(ShapeError, match="cannot be broadcast together"):
        DOT(x, grid((4,)))
    with pytest.raises(DTypeError):
        SUM_SQ(x.astype("complex64"))
    with pytest.raises(DTypeError, match="not an integer, but this call accumulates in int64"):
        create_reduction_fn(ADD, 0.5, combine="add")(x.astype("int32"))
    torch = pytest.importorskip("torch")
    with pytest.raises(DeviceError, match=r"tensor\.numpy\(\)"):
        DOT(x, torch.ones(5, dtype=torch.float64))
    unknown = x[x[:, 0, 0] > 3]  # unknown chunk sizes along dim 0
    with pytest.raises(InvalidArgumentError, match="compute_chunk_sizes"):
        AVERAGE(unknown, dim=0)
    kept = unknown.compute_chunk_sizes()
    numpy.testing.assert_allclose(AVERAGE(kept, dim=0).compute(scheduler="sync"), kept.compute().mean(0))
    assert isinstance(SUM_SQ, ReductionFunction)

