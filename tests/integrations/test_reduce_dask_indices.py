"""Reductions with indices of Dask arrays: a tree of (values, global indices) partials, exact.

Every lazy result is checked against the eager call on the whole NumPy array, and against torch
(max/min with a dim, argmax/argmin over everything) where torch has the reduction, on the
threaded scheduler and on a two-process LocalCluster (tests/integrations/conftest.py). Chunks
are uneven and cut the reduced dims on purpose: ties across blocks must pick what one call picks.
NumPy has no bfloat16 (no ml_dtypes here), so float16 stands for the reduced-precision floats.
"""
from __future__ import annotations

import numpy
import pytest

from jiter_magic import (
    DimensionError,
    InvalidArgumentError,
    ValuesIndices,
    create_multi_output_reduction_fn,
)
from jiter_magic.integrations.reduce_parts import global_indices

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
torch = pytest.importorskip("torch")

# NaN wins, then the larger (smaller) value, then on ties the smaller index: the first occurrence.
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")
KEEP_MIN = KEEP_MAX.replace("keep_max", "keep_min").replace("b > a", "b < a")
KEEP_LAST = KEEP_MAX.replace("keep_max", "keep_last").replace("ib < ia", "ib > ia")  # ties: the last occurrence
HALVED = "template <typename T> T halved(T value, int64_t n) { return value / T(2) + T(n); }\n"

MAX = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
MIN = create_multi_output_reduction_fn(KEEP_MIN, combine="keep_min")
LAST = create_multi_output_reduction_fn(KEEP_LAST, combine="keep_last")
MAX_HALVED = create_multi_output_reduction_fn(KEEP_MAX + HALVED, combine="keep_max", finalize="halved")
NEAREST = create_multi_output_reduction_fn(
    "template <typename T> T closeness(T p, T c) { return -(p - c) * (p - c); }\n" + KEEP_MAX,
    map="closeness", combine="keep_max")

SHAPE = (7, 9, 5)
CHUNKINGS = {
    "uneven": ((3, 1, 3), (2, 4, 3), (2, 3)),  # every dim cut, unevenly
    "reduced-only": ((7,), (1, 5, 3), (5,)),  # blocks along dim 1 alone
    "small": (2, 1, 2),  # 4 x 9 x 3 blocks: a tree of several levels for dim=None
    "whole": -1,  # one block: the tree is one aggregate
}


def ties(shape=SHAPE, dtype="float64", high=4, seed=0):
    """Few distinct values, so that every result has ties, many across blocks."""
    return numpy.random.default_rng(seed).integers(0, high, shape).astype(dtype)


def axis_of(dim):
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def assert_lazy_is_eager(lazy, eager):
    """Lazy arrays of the eager call's dtypes and shapes, computed together (the caller's scheduler)."""
    assert isinstance(lazy, ValuesIndices) and all(isinstance(part, da.Array) for part in lazy)
    for part, want in zip(lazy, eager):
        assert (part.dtype, part.shape) == (want.dtype, want.shape)


def assert_same(found, eager):
    values, indices = found
    assert values.dtype == eager.values.dtype and indices.dtype == numpy.int64
    assert values.shape == eager.values.shape and indices.shape == eager.indices.shape
    nan = values.dtype.kind == "f"
    assert numpy.array_equal(values, eager.values, equal_nan=nan), (values, eager.values)
    assert numpy.array_equal(indices, eager.indices), (indices, eager.indices)


def torch_reference(values, dim, keepdim, smallest):
    """torch.max/min(x, dim) for one dim, argmax/argmin and max/min for dim=None."""
    t = torch.from_numpy(values)
    if dim is None:
        index = torch.argmin(t) if smallest else torch.argmax(t)
        value = t.min() if smallest else t.max()
        shape = (1,) * t.ndim if keepdim else ()
        return value.reshape(shape).numpy(), index.reshape(shape).numpy()
    found = (torch.min if smallest else torch.max)(t, dim=dim, keepdim=keepdim)
    return found.values.numpy(), found.indices.numpy()


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), (2, 0, 1), (-1, 1)])
def test_values_and_indices_are_the_eager_calls_and_torchs(compute, chunking, dim):
    values = ties()
    x = da.from_array(values, chunks=CHUNKINGS[chunking])
    calls = [(fn, keepdim) for keepdim in (False, True) for fn in (MAX, MIN, LAST, MAX_HALVED)]
    lazies = [fn(x, dim=dim, keepdim=keepdim) for fn, keepdim in calls]
    eagers = [fn(values, dim=dim, keepdim=keepdim) for fn, keepdim in calls]
    for lazy, eager in zip(lazies, eagers):
        assert_lazy_is_eager(lazy, eager)
    found = compute(*[part for lazy in lazies for part in lazy])  # one graph, computed together
    for position, eager in enumerate(eagers):
        assert_same(found[2 * position:2 * position + 2], eager)
    if dim is None or isinstance(dim, int):
        for position, (fn, keepdim) in enumerate(calls):
            if fn in (MAX, MIN):
                want_values, want_indices = torch_reference(values, dim, keepdim, smallest=fn is MIN)
                assert numpy.array_equal(found[2 * position], want_values)
                assert numpy.array_equal(found[2 * position + 1], want_indices)


@pytest.mark.parametrize("dims", [(0, 2), (1, 2), (0, 1, 2)])
def test_tuple_dims_count_flat_indices_in_logical_order(compute, dims):
    values = ties((6, 5, 8), seed=3, high=3)
    x = da.from_array(values, chunks=(4, 2, 3))
    t = torch.from_numpy(values)
    kept = [d for d in range(3) if d not in dims]
    flat = t.permute(*kept, *dims).reshape(*[t.shape[d] for d in kept], -1)  # torch counts an index so
    want = flat.max(dim=-1)
    found = compute(*MAX(x, dim=dims))
    assert numpy.array_equal(found[0], want.values.numpy()) and numpy.array_equal(found[1], want.indices.numpy())


def test_ties_across_blocks_keep_the_first_or_the_last_occurrence(compute):
    same = numpy.full((3, 1000), 2.5)
    x = da.from_array(same, chunks=(2, 7))
    first, last, everything = MAX(x, dim=1), LAST(x, dim=1), LAST(x)
    found = compute(*first, *last, *everything)
    assert found[1].tolist() == [0, 0, 0] and found[3].tolist() == [999, 999, 999]
    assert int(found[5]) == same.size - 1
    for lazy, eager in ((found[0:2], MAX(same, dim=1)), (found[2:4], LAST(same, dim=1)), (found[4:6], LAST(same))):
        assert_same(lazy, eager)


def test_nan_wins_at_its_first_index_across_blocks(compute):
    values = numpy.array([[1.0, 4.0, 2.0, numpy.nan, 5.0, numpy.nan], [3.0, 3.0, 0.0, 1.0, 3.0, 2.0]])
    x = da.from_array(values, chunks=(1, (2, 3, 1)))
    found = compute(*MAX(x, dim=1), *MIN(x, dim=1), *MAX(x.T, dim=0), *MAX(x))
    assert numpy.isnan(found[0][0]) and found[0][1] == 3.0 and found[1].tolist() == [3, 0]
    assert found[3].tolist() == [3, 2]  # a NaN wins a min too, at its first index
    assert found[5].tolist() == [3, 0] and int(found[7]) == 3
    assert_same(found[0:2], MAX(values, dim=1))
    assert_same(found[2:4], MIN(values, dim=1))
    reference = torch.max(torch.from_numpy(values), dim=1)
    assert found[1].tolist() == reference.indices.tolist()


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "bool", "float16", "float32"])
def test_dtypes_are_the_eager_calls(compute, dtype):
    values = ties((10, 12), dtype=dtype, high=3, seed=5)
    if dtype.startswith("float"):
        values[numpy.random.default_rng(1).random(values.shape) < 0.1] = numpy.nan
    x = da.from_array(values, chunks=(3, 5))
    for dim in (None, 0, 1):
        lazies, eagers = (MAX(x, dim=dim), MIN(x, dim=dim)), (MAX(values, dim=dim), MIN(values, dim=dim))
        for lazy, eager in zip(lazies, eagers):
            assert_lazy_is_eager(lazy, eager)
            assert lazy.values.dtype == values.dtype  # values keep the inputs' dtype, as torch.max's
        found = compute(*lazies[0], *lazies[1])
        assert_same(found[0:2], eagers[0])
        assert_same(found[2:4], eagers[1])


def test_dtype_argument_and_a_finalize_with_the_whole_count(compute):
    values = ties((6, 10), dtype="int32", high=5)
    x = da.from_array(values, chunks=(4, 3))
    cases = [(MAX, {"dim": 1, "dtype": "int64"}), (MAX, {"dim": 0, "dtype": numpy.float16}),
             (MAX_HALVED, {"dim": 1, "dtype": "float64"}), (MAX_HALVED, {"dim": (0, 1)}),
             (MIN, {"dim": -1, "dtype": "int8", "keepdim": True})]
    lazies = [fn(x, **options) for fn, options in cases]
    eagers = [fn(values, **options) for fn, options in cases]
    for lazy, eager in zip(lazies, eagers):
        assert_lazy_is_eager(lazy, eager)
    found = compute(*[part for lazy in lazies for part in lazy])
    for position, eager in enumerate(eagers):
        assert_same(found[2 * position:2 * position + 2], eager)
    assert found[4].tolist() == (values.max(axis=1) / 2 + 10).tolist()  # a row's count, 10, not a block's 3
    assert int(found[6]) == values.max() // 2 + 60  # int32 halves, and the whole count


@pytest.mark.parametrize("dim", [1, 0, None, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_several_inputs_broadcast(compute, dim, keepdim):
    points = numpy.round(numpy.linspace(-2, 2, 41), 1)
    centres = numpy.array([[-1.0], [0.3], [1.9], [0.05]])  # 0.05: equally close to two points, a tie
    cases = [(da.from_array(points, chunks=10), centres),
             (da.from_array(points, chunks=7), da.from_array(centres, chunks=1)),
             (da.from_array(centres, chunks=(3, 1)), da.from_array(points, chunks=(5, 6, 30)))]
    lazies = [NEAREST(*args, dim=dim, keepdim=keepdim) for args in cases]
    eagers = [NEAREST(*[numpy.asarray(a) for a in args], dim=dim, keepdim=keepdim) for args in cases]
    for lazy, eager in zip(lazies, eagers):
        assert_lazy_is_eager(lazy, eager)
    found = compute(*[part for lazy in lazies for part in lazy])
    for position, eager in enumerate(eagers):
        assert_same(found[2 * position:2 * position + 2], eager)


def test_the_graph_is_a_tree_of_partials_with_no_rechunk():
    values = ties((64, 30))
    x = da.from_array(values, chunks=(4, 6))  # 16 x 5 blocks
    for dim in (None, 0, (0, 1)):
        lazy = MAX(x, dim=dim)
        for part in lazy:
            layers = dict(part.dask.layers)
            assert not any("rechunk" in name for name in layers)
            blocks = [name for name in layers if name.startswith("keep_max-block-")]
            assert len(blocks) == 1 and len(layers[blocks[0]]) == x.npartitions  # a partial a block
            assert any(name.startswith("keep_max-partial-") for name in layers)  # folds between, then one more
            assert any(name.startswith("keep_max-aggregate-") for name in layers)
        assert lazy.values.npartitions == (1 if dim != 0 else 5)
        assert_same(dask.compute(*lazy, scheduler="sync"), MAX(values, dim=dim))
    # The same lazy call is the same graph; keepdim makes another.
    assert MAX(x, dim=0).values.name == MAX(x, dim=0).values.name != MAX(x, dim=0, keepdim=True).values.name


def test_a_0d_input_and_nothing_compiled_before_compute():
    fresh = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    from jiter_magic.integrations.reduce_parts import tree_parts

    lazy = fresh(da.from_array(numpy.array(3.5)))
    kept = fresh(da.from_array(numpy.array(3.5)), dim=0, keepdim=True)
    parts = tree_parts(fresh)
    assert parts.partial.calls.loader.specializations == [] and parts.fold.calls.loader.specializations == []
    found, found_kept = dask.compute(*lazy, scheduler="sync"), dask.compute(*kept, scheduler="sync")
    assert fresh.specializations == []  # the blocks ran its tree parts, not it
    assert_same(found, fresh(numpy.array(3.5)))
    assert_same(found_kept, fresh(numpy.array(3.5), dim=0, keepdim=True))


def test_unknown_chunk_sizes_are_refused_along_the_reduced_dims_only():
    values = ties((8, 10), dtype="int32")
    x = da.from_array(values, chunks=(3, 4))
    unknown = x[x[:, 0] > 0]  # unknown sizes along dim 0
    with pytest.raises(InvalidArgumentError, match=r"unknown chunk sizes along the reduced dims.*compute_chunk_sizes"):
        MAX(unknown, dim=0)
    with pytest.raises(InvalidArgumentError, match="count each index over the whole reduced extent"):
        MAX(unknown)
    known = unknown.compute()
    assert_same(dask.compute(*MAX(unknown, dim=1), scheduler="sync"), MAX(known, dim=1))
    assert_same(dask.compute(*MAX(unknown.compute_chunk_sizes(), dim=0), scheduler="sync"), MAX(known, dim=0))


def test_errors_come_at_call_time():
    points, centres = numpy.linspace(-2, 2, 41), numpy.array([[-1.0], [0.3], [1.9]])
    with pytest.raises(DimensionError, match="no element to give"):
        NEAREST(da.zeros((0,), chunks=1), centres, dim=1)
    with pytest.raises(InvalidArgumentError, match="out= is not supported with Dask arrays"):
        NEAREST(da.from_array(points, chunks=10), centres, dim=1, out=(points, points))
    with pytest.raises(DimensionError, match="out of range"):
        MAX(da.from_array(points, chunks=10), dim=1)


def test_global_indices_place_a_blocks_local_indices():
    sizes, block, starts = (6, 5, 8), (2, 3, 4), (4, 1, 4)
    local = numpy.arange(2 * 3 * 4, dtype=numpy.int64).reshape(2, 1, 12)
    coordinates = numpy.unravel_index(local, block)
    want = numpy.ravel_multi_index(tuple(c + s for c, s in zip(coordinates, starts)), sizes)
    found = global_indices(local, block, starts, sizes)
    assert found.dtype == numpy.int64 and numpy.array_equal(found, want)
    assert global_indices(local, sizes, (0, 0, 0), sizes) is local  # a block of the whole extent


@pytest.mark.parametrize("chunks", [((3,), (2, 0, 2)), ((3,), (0, 4)), ((3,), (4, 0)), ((1, 2), (1, 0, 0, 3))])
def test_an_empty_chunk_along_the_reduced_dim_holds_no_element(chunks):
    """A chunk of size 0 along the reduced dim (the extent itself is not empty) gives nothing to the
    fold, as the eager call of the whole array says: the values and indices of torch.max."""
    fn = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    x = numpy.array([[1.0, 5.0, 5.0, 2.0], [7.0, 0.0, 1.0, 9.0], [4.0, 4.0, 4.0, 4.0]])
    found = fn(da.from_array(x, chunks=chunks), dim=1)
    values, indices = found.values.compute(), found.indices.compute()
    want = torch.from_numpy(x).max(dim=1)
    assert values.dtype == numpy.float64 and indices.dtype == numpy.int64
    numpy.testing.assert_array_equal(values, want.values.numpy())
    numpy.testing.assert_array_equal(indices, want.indices.numpy())
