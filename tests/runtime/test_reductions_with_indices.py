"""Reductions with indices on the CPU against torch.max/min(x, dim) and argmax/argmin: values and
indices over dtypes, dims and layouts, NaN, ties (the first index wins, across threads too),
`out=` pairs, NumPy arrays, and the errors of bad functions and arguments."""
from __future__ import annotations

import numpy as np
import pytest

from jiter_magic import ValuesIndices, create_multi_output_reduction_fn
from jiter_magic.errors import (
    ArgumentTypeError,
    BindError,
    DimensionError,
    DTypeError,
    GradientError,
    ShapeError,
)

torch = pytest.importorskip("torch")

# NaN wins, as torch.max's does, then the larger value, then the smaller index (ties: the first).
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")
KEEP_MIN = KEEP_MAX.replace("keep_max", "keep_min").replace("b > a", "b < a")
MAX_WITH_INDEX = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
MIN_WITH_INDEX = create_multi_output_reduction_fn(KEEP_MIN, combine="keep_min")
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64,
          torch.uint8, torch.bool]


def sample(shape, dtype, seed=0, low=0, high=7):
    """Few distinct values, so that ties are common and the first index must win."""
    generator = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    return torch.randint(low, high, shape, generator=generator).to(dtype)


def flattened(x, dims):
    """`x` with the reduced dims moved last and flattened, as an index over them counts."""
    kept = [d for d in range(x.ndim) if d not in dims]
    return x.permute(*kept, *dims).reshape(*[x.shape[d] for d in kept], -1)


def check(result, values, indices):
    assert isinstance(result, ValuesIndices)
    assert result.values.dtype == values.dtype and result.indices.dtype == torch.int64
    assert result.values.shape == values.shape and result.indices.shape == indices.shape
    assert torch.equal(result.values, values) or torch.equal(result.values.isnan(), values.isnan())
    assert torch.equal(result.indices, indices)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_with_indices_as_torch(dtype, dim, keepdim):
    x = sample((6, 33, 70), dtype)
    check(MAX_WITH_INDEX(x, dim=dim, keepdim=keepdim), *torch.max(x, dim=dim, keepdim=keepdim))
    check(MIN_WITH_INDEX(x, dim=dim, keepdim=keepdim), *torch.min(x, dim=dim, keepdim=keepdim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16], ids=str)
def test_every_dim_gives_the_flat_index_as_argmax(dtype):
    x = sample((9, 40, 11), dtype)
    values, indices = MAX_WITH_INDEX(x)
    assert values.shape == () and int(indices) == int(torch.argmax(x)) and values == x.max()
    assert int(MIN_WITH_INDEX(x, dim=None).indices) == int(torch.argmin(x))


@pytest.mark.parametrize("dims", [(0, 2), (2, 0), (1, 2), (-1, 0)])
def test_several_dims_count_their_flat_index_in_logical_order(dims):
    x = sample((5, 8, 13), torch.float32, seed=3)
    normal = tuple(sorted(d % 3 for d in dims))
    flat = flattened(x, normal)
    check(MAX_WITH_INDEX(x, dim=dims), *flat.max(dim=-1))
    # The same on a transposed input, whose reduced dims a plain reduction would walk in memory order.
    t = x.transpose(0, 2)
    check(MAX_WITH_INDEX(t, dim=dims), *flattened(t, normal).max(dim=-1))


def test_nan_wins_at_its_first_index():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, 5.0, 1.0]])
    values, indices = MAX_WITH_INDEX(x, dim=1)
    assert torch.equal(indices, torch.tensor([1, 1])) and values[0].isnan() and values[1] == 5.0
    assert torch.equal(MIN_WITH_INDEX(x, dim=1).indices, torch.tensor([1, 3]))


def test_ties_across_threads_and_lanes_keep_the_first_index():
    # Few long rows split over the threads, and a row of one value: the first index still wins.
    x = sample((2, 300_001), torch.float32, high=3)
    check(MAX_WITH_INDEX(x, dim=1), *x.max(dim=1))
    same = torch.full((3, 100_000), 2.5)
    check(MAX_WITH_INDEX(same, dim=1), same.max(dim=1).values, torch.zeros(3, dtype=torch.int64))
    check(MAX_WITH_INDEX(same.t(), dim=0), same.max(dim=1).values, torch.zeros(3, dtype=torch.int64))
    whole = sample((700, 700), torch.int32, high=1000)
    assert int(MAX_WITH_INDEX(whole).indices) == int(torch.argmax(whole))


def test_non_contiguous_inputs_and_the_columns_loop():
    x = sample((300, 64), torch.float64, seed=5, high=50)
    check(MAX_WITH_INDEX(x, dim=0), *x.max(dim=0))  # over the leading dim: the columns loop
    check(MAX_WITH_INDEX(x.t(), dim=1), *x.t().max(dim=1))
    check(MAX_WITH_INDEX(x[::3, 1::2], dim=1), *x[::3, 1::2].max(dim=1))


def test_a_map_with_two_broadcast_inputs_finds_the_nearest_point():
    NEAREST = ("template <typename T> T distance(T point, T centre) { return -(point - centre) * (point - centre); }\n"
               + KEEP_MAX)
    nearest = create_multi_output_reduction_fn(NEAREST, map="distance", combine="keep_max")
    points = torch.linspace(-3, 3, 61, dtype=torch.float64)
    centres = torch.tensor([[-1.0], [0.5], [2.9]], dtype=torch.float64)
    check(nearest(points, centres, dim=1), *(-(points - centres) ** 2).max(dim=1))


def test_a_finalize_applies_to_the_value():
    SCALE = "template <typename T> T halved(T value, int64_t n) { return value / T(2); }\n"
    halved = create_multi_output_reduction_fn(KEEP_MAX + SCALE, combine="keep_max", finalize="halved")
    x = sample((4, 9), torch.float32, high=20)
    values, indices = halved(x, dim=1)
    expected = x.max(dim=1)
    assert torch.equal(values, expected.values / 2) and torch.equal(indices, expected.indices)


def test_out_pairs_dtype_and_numpy():
    x = sample((8, 50), torch.float32, high=100)
    values, indices = torch.empty(8, 2)[:, 0], torch.empty(8, dtype=torch.int64)
    result = MAX_WITH_INDEX(x, dim=1, out=(values, indices))
    assert result.values is values and result.indices is indices
    check(result, *x.max(dim=1))
    with pytest.raises(ArgumentTypeError, match=r"\(values, indices\) pair"):
        MAX_WITH_INDEX(x, dim=1, out=values)
    with pytest.raises(DTypeError, match=r"out\[1\] has dtype float32, but the result is int64"):
        MAX_WITH_INDEX(x, dim=1, out=(values, torch.empty(8)))
    with pytest.raises(ShapeError, match=r"out\[0\] has shape \(7,\)"):
        MAX_WITH_INDEX(x, dim=1, out=(torch.empty(7), indices))
    widened = MAX_WITH_INDEX(x.to(torch.int32), dim=1, dtype=torch.int64)
    assert widened.values.dtype == torch.int64 and torch.equal(widened.indices, x.max(dim=1).indices)
    a = np.array([[3, 9, 9, 1], [4, 4, 0, 2]], dtype=np.int16)
    found = MAX_WITH_INDEX(a, dim=1)
    assert found.values.dtype == np.int16 and found.indices.dtype == np.int64
    assert found.values.tolist() == [9, 4] and found.indices.tolist() == [1, 0]


def test_results_are_identical_across_calls():
    x = sample((3, 1_000_003), torch.float32, high=4)
    first = MAX_WITH_INDEX(x, dim=1)
    for _ in range(3):
        again = MAX_WITH_INDEX(x, dim=1)
        assert torch.equal(again.values, first.values) and torch.equal(again.indices, first.indices)


def test_errors_name_what_was_wrong():
    with pytest.raises(DimensionError, match=r"no element to give: expected reduced dims of non-zero size"):
        MAX_WITH_INDEX(torch.zeros(3, 0), dim=1)
    empty_rows = MAX_WITH_INDEX(torch.zeros(0, 3), dim=1)  # no rows, each of 3 elements: empty results
    assert empty_rows.values.shape == (0,) and empty_rows.indices.dtype == torch.int64
    with pytest.raises(BindError, match=r"writes the one it keeps through two references"):
        create_multi_output_reduction_fn("template <typename T> T add(T a, T b) { return a + b; }", combine="add")
    with pytest.raises(BindError, match=r"gives 2 outputs"):
        create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max", num_outputs=3)
    with pytest.raises(BindError, match=r"combine='keep' names no function.*did you mean 'keep_max'"):
        create_multi_output_reduction_fn(KEEP_MAX, combine="keep")
    assert MAX_WITH_INDEX.num_outputs == 2 and "int64 index" in MAX_WITH_INDEX.spec().describe()
    with pytest.raises(GradientError, match=r"keep_max has no backward.*a functor of the inputs at each result's index"):
        MAX_WITH_INDEX(torch.ones(2, 3, requires_grad=True), dim=1)


def test_pickled_and_lazy_on_dask_arrays():
    import pickle

    again = pickle.loads(pickle.dumps(MAX_WITH_INDEX))
    assert again.num_outputs == 2
    check(again(torch.tensor([[1.0, 3.0, 3.0]]), dim=1), torch.tensor([3.0]), torch.tensor([1]))
    da = pytest.importorskip("dask.array")
    ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    lazy = MAX_WITH_INDEX(da.from_array(ties, chunks=1), dim=1)  # the reduced dim in three chunks
    assert lazy.indices.compute(scheduler="sync").tolist() == [1, 0]


def test_the_backward_reaches_the_element_each_result_was_taken_from():
    keep_max = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max").def_backward(
        "template <typename T> void max_bwd(T x, T value, T g, T& gx) { gx = g; }")
    for shape, dim, keepdim in (((4, 7), 1, False), ((4, 7), 0, True), ((3, 4, 5), (0, 2), False),
                                ((3, 4, 5), None, False)):
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        values, indices = keep_max(x, dim=dim, keepdim=keepdim)
        assert values.grad_fn is not None and not indices.requires_grad and indices.dtype == torch.int64
        weights = torch.randn_like(values)
        (values * weights).sum().backward()
        twin = x.detach().clone().requires_grad_()
        expected = twin.max() if dim is None else twin.amax(dim=dim, keepdim=keepdim)  # no ties in randn
        (expected * weights).sum().backward()
        torch.testing.assert_close(x.grad, twin.grad)
        assert int((x.grad != 0).sum()) == values.numel()  # one element a result
    assert torch.autograd.gradcheck(lambda t: keep_max(t, dim=1).values,
                                    (torch.randn(3, 5, dtype=torch.float64, requires_grad=True),))


def test_a_backward_of_a_map_with_two_broadcast_inputs():
    nearest = create_multi_output_reduction_fn(
        "template <typename T> T closeness(T p, T c) { return -(p - c) * (p - c); }\n" + KEEP_MAX,
        map="closeness", combine="keep_max").def_backward(
        "template <typename T> void closeness_bwd(T p, T c, T value, T g, T& gp, T& gc) "
        "{ gp = -2 * (p - c) * g; gc = 2 * (p - c) * g; }")
    points = torch.randn(10, dtype=torch.float64, requires_grad=True)
    centres = torch.randn(3, 1, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, c: nearest(p, c, dim=1).values, (points, centres))
    values, _ = nearest(points, centres.detach(), dim=1)
    values.sum().backward()
    assert points.grad.shape == (10,) and int((points.grad != 0).sum()) <= 3


# The fold of a tree's partials (integrations/reduce_parts.py): a reduction of (values, indices)
# pairs whose indices are given as a second input, the element's position playing no part.
KEEP_LAST = KEEP_MAX.replace("keep_max", "keep_last").replace("ib < ia", "ib > ia")
LAST_WITH_INDEX = create_multi_output_reduction_fn(KEEP_LAST, combine="keep_last")


def given_fold(function):
    from jiter_magic.integrations.reduce_parts import tree_parts

    return tree_parts(function).fold


def expected_pick(values, indices, dim, last=False):
    """The pair a max picks along `dim`: NaN first, then the larger value, ties by the given index."""
    order = torch.where(values.isnan(), torch.inf, values) if values.is_floating_point() else values.to(torch.float64)
    best = order.amax(dim=dim, keepdim=True)
    candidates = torch.where(order == best, indices, -1 if last else torch.iinfo(torch.int64).max)
    picked = candidates.amax(dim=dim) if last else candidates.amin(dim=dim)
    position = (indices == picked.unsqueeze(dim)).to(torch.int64).argmax(dim=dim, keepdim=True)
    return values.gather(dim, position).squeeze(dim), picked


@pytest.mark.parametrize(("shape", "dim"), [((6, 40), 1), ((300, 64), 0), ((2, 20_000), 1), ((5, 3, 9), (0, 2))])
@pytest.mark.parametrize("last", [False, True])
def test_a_fold_with_given_indices_compares_them_not_positions(shape, dim, last):
    # Ties everywhere, and indices given in an order unlike the positions (reversed, spread out): a
    # fold by position would pick other elements. The shapes take the row, columns and split-row loops.
    values = sample(shape, torch.float32, seed=7, high=3)
    values[values == 1] = float("nan")
    indices = (values.numel() - torch.arange(values.numel())).reshape(shape) * 3
    fold = given_fold(LAST_WITH_INDEX if last else MAX_WITH_INDEX)
    found = fold(values, indices, dim=dim, keepdim=False, dtype=None)
    flat_dims = dim if isinstance(dim, tuple) else (dim,)
    want_values, want_indices = expected_pick(flattened(values, flat_dims), flattened(indices, flat_dims), -1, last)
    check(found, want_values, want_indices)


def test_a_fold_with_given_indices_keeps_the_accumulator_or_casts_to_the_result():
    fold = given_fold(MAX_WITH_INDEX)
    values = torch.tensor([[1.5, 7.25, 7.25], [3.0, -2.0, 3.0]])  # float32 partials of float16 elements
    indices = torch.tensor([[10, 4, 2], [0, 8, 1]])
    found = fold(values, indices, dim=1, keepdim=True, dtype=torch.float16)
    assert found.values.dtype == torch.float16 and found.values.shape == (2, 1)
    assert found.values.flatten().tolist() == [7.25, 3.0] and found.indices.flatten().tolist() == [2, 0]
    ints = fold(values.to(torch.int64), indices, dim=1, keepdim=False, dtype=torch.int8)
    assert ints.values.dtype == torch.int8 and ints.indices.tolist() == [2, 0]
    assert fold.calls.binding.input_names == ("values", "indices")
    assert "indices given" in fold.calls.loader.specializations[0].spec.describe()
    with pytest.raises(BindError, match=r"takes 2 input array\(s\) \['values', 'indices'\]"):
        fold(values, dim=1, keepdim=False, dtype=None)


def test_given_indices_need_a_reduction_with_indices_and_no_map():
    from dataclasses import replace

    binding = MAX_WITH_INDEX.binding
    assert replace(binding, indices_given=True).num_inputs == 2
    with pytest.raises(ValueError, match="indices_given"):
        replace(binding, indexed=False, indices_given=True)
    nearest = create_multi_output_reduction_fn(
        "template <typename T> T closeness(T p, T c) { return -(p - c) * (p - c); }\n" + KEEP_MAX,
        map="closeness", combine="keep_max")
    with pytest.raises(ValueError, match="no map"):
        replace(nearest.binding, indices_given=True)
