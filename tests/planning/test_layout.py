"""layout: broadcasting, output strides, dimension order and coalescing, against torch's TensorIterator."""
from __future__ import annotations

import itertools
import random
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jiter_magic.errors import JiterError, ShapeError
from jiter_magic.planning.layout import (
    INT32_MAX,
    Layout,
    broadcast_shape,
    broadcast_strides,
    coalesce,
    contiguous_strides,
    dimension_order,
    plan_layout,
    transposed_operands,
)

HYPOTHESIS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- helpers


def plan_tensors(*tensors: torch.Tensor, **kw) -> Layout:
    return plan_layout([tuple(t.shape) for t in tensors], [tuple(t.stride()) for t in tensors], **kw)


def plan_arrays(*arrays: np.ndarray) -> Layout:
    return plan_layout([a.shape for a in arrays], [elements(a) for a in arrays])


def elements(a: np.ndarray) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


def non_unit(shape, strides):
    """Strides of the dimensions whose size is not 1 (a size-1 dimension's stride is arbitrary)."""
    return [s for n, s in zip(shape, strides) if n != 1]


def order_from_strides(shape, strides):
    """Axes of size > 1 innermost first, as a dense tensor's strides say."""
    return [axis for axis in sorted(range(len(shape)), key=lambda a: strides[a]) if shape[axis] != 1]


def reference_offsets(shape, out_strides, in_shapes, in_strides):
    """(output offsets..., input offsets...) of every element, iterating the broadcast shape directly."""
    seen = Counter()
    for index in itertools.product(*(range(n) for n in shape)):
        row = [sum(i * s for i, s in zip(index, strides)) for strides in out_strides]
        for in_shape, strides in zip(in_shapes, in_strides):
            pad = len(shape) - len(in_shape)
            row.append(sum(index[pad + k] * s for k, (n, s) in enumerate(zip(in_shape, strides)) if n != 1))
        seen[tuple(row)] += 1
    return seen


def loop_offsets(layout: Layout):
    """The same, iterating the coalesced loop nest (sizes and strides innermost first)."""
    seen = Counter()
    if layout.numel == 0:
        return seen
    for index in itertools.product(*(range(n) for n in layout.sizes)):
        seen[tuple(sum(i * s for i, s in zip(index, strides)) for strides in layout.strides)] += 1
    return seen


# --------------------------------------------------------------------------- broadcast_shape


@pytest.mark.parametrize(
    "shapes, expected",
    [
        ([(3, 4), (3, 4)], (3, 4)),
        ([(3, 1), (1, 4)], (3, 4)),
        ([(4,), (3, 4)], (3, 4)),
        ([(), (2, 3)], (2, 3)),
        ([(), ()], ()),
        ([(5, 1, 3), (4, 1), (1,)], (5, 4, 3)),
        ([(0,), (1,)], (0,)),
        ([(2, 0, 3), (1, 1, 3)], (2, 0, 3)),
        ([(), (0,)], (0,)),
        ([(0, 1), (1, 5)], (0, 5)),
        ([(7,)], (7,)),
        ([], ()),
    ],
)
def test_broadcast_shape(shapes, expected):
    assert broadcast_shape(shapes) == expected
    if shapes:
        assert broadcast_shape(shapes) == tuple(np.broadcast_shapes(*shapes))


@pytest.mark.parametrize("shapes", [[(2, 3), (4, 3)], [(0,), (3,)], [(3,), (4,)], [(2, 1), (8, 4, 3)], [(1, 2), (2,), (3,)]])
def test_broadcast_shape_errors(shapes):
    with pytest.raises(ShapeError) as info:
        broadcast_shape(shapes)
    assert isinstance(info.value, ValueError) and isinstance(info.value, JiterError)
    for shape in shapes:
        assert str(tuple(shape)) in str(info.value)
    with pytest.raises(ValueError):
        np.broadcast_shapes(*shapes)


@HYPOTHESIS
@given(st.lists(st.lists(st.integers(0, 3), max_size=4).map(tuple), min_size=1, max_size=4))
def test_broadcast_shape_matches_numpy(shapes):
    try:
        expected = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        with pytest.raises(ShapeError):
            broadcast_shape(shapes)
    else:
        assert broadcast_shape(shapes) == expected


# --------------------------------------------------------------------------- broadcast_strides, contiguous_strides


@pytest.mark.parametrize(
    "shape, strides, target, expected",
    [
        ((3, 4), (4, 1), (3, 4), (4, 1)),
        ((4,), (1,), (3, 4), (0, 1)),
        ((3, 1), (1, 1), (2, 3, 5), (0, 1, 0)),
        ((), (), (2, 2), (0, 0)),
        ((1, 1), (7, 7), (1, 1), (0, 0)),  # size-1 dims never move, whatever their stride
        ((4, 3), (-3, -1), (2, 4, 3), (0, -3, -1)),
        ((5,), (0,), (5,), (0,)),
    ],
)
def test_broadcast_strides(shape, strides, target, expected):
    assert broadcast_strides(shape, strides, target) == expected


def test_broadcast_strides_match_torch_expand():
    base = torch.randn(3, 1, 4)[:, :, ::2]  # (3, 1, 2), strides (4, 4, 2)
    target = (5, 3, 6, 2)
    expanded = base.expand(target)
    ours = broadcast_strides(tuple(base.shape), tuple(base.stride()), target)
    assert non_unit(target, ours) == non_unit(target, expanded.stride())
    assert ours == (0, 4, 0, 2)


@pytest.mark.parametrize(
    "shape, order, expected",
    [((2, 3, 4), [2, 1, 0], (12, 4, 1)), ((2, 3, 4), [0, 1, 2], (1, 2, 6)), ((2, 3, 4, 5), [1, 3, 2, 0], (60, 1, 15, 3)),
     ((2, 0, 3), [2, 1, 0], (3, 3, 1)), ((), [], ())],
)
def test_contiguous_strides(shape, order, expected):
    assert contiguous_strides(shape, order) == expected


# --------------------------------------------------------------------------- output strides vs torch.add


def _cl():
    return torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)


TORCH_CASES = {
    "contiguous": lambda: (torch.randn(4, 5), torch.randn(4, 5)),
    "transposed_first": lambda: (torch.randn(5, 4).t(), torch.randn(4, 5)),
    "transposed_second": lambda: (torch.randn(4, 5), torch.randn(5, 4).t()),
    "both_transposed": lambda: (torch.randn(5, 4).t(), torch.randn(5, 4).t()),
    "channels_last_both": lambda: (_cl(), _cl()),
    "channels_last_first": lambda: (_cl(), torch.randn(2, 3, 4, 5)),
    "channels_last_second": lambda: (torch.randn(2, 3, 4, 5), _cl()),
    "nchw_read_as_nhwc": lambda: (torch.randn(2, 4, 5, 3).permute(0, 3, 1, 2), torch.randn(2, 3, 4, 5)),
    "broadcast_col_row": lambda: (torch.randn(6, 1), torch.randn(1, 6)),
    "broadcast_row_col": lambda: (torch.randn(1, 6), torch.randn(6, 1)),
    "bias_over_matrix": lambda: (torch.randn(3, 7), torch.randn(7)),
    "bias_first": lambda: (torch.randn(7), torch.randn(3, 7)),
    "bias_over_transposed": lambda: (torch.randn(7), torch.randn(7, 3).t()),
    "expanded_stride0": lambda: (torch.randn(4, 1).expand(4, 5), torch.randn(1, 5).expand(4, 5)),
    "expanded_and_transposed": lambda: (torch.randn(1, 5).expand(4, 5), torch.randn(5, 4).t()),
    "sliced_steps": lambda: (torch.randn(8, 15)[::2, ::3], torch.randn(4, 5)),
    "sliced_transposed": lambda: (torch.randn(10, 8)[::2, ::2].t(), torch.randn(4, 5)[:, :]),
    "zero_dim_and_matrix": lambda: (torch.tensor(2.0), torch.randn(5, 4).t()),
    "zero_dim_both": lambda: (torch.tensor(2.0), torch.tensor(3.0)),
    "3d_permuted": lambda: (torch.randn(4, 2, 3).permute(1, 2, 0), torch.randn(3, 4, 2).permute(2, 0, 1)),
    "3d_broadcast_middle": lambda: (torch.randn(3, 1, 4), torch.randn(5, 1).expand(5, 4)[None]),
}


@pytest.mark.parametrize("case", list(TORCH_CASES), ids=list(TORCH_CASES))
def test_output_strides_and_order_match_torch(case):
    torch.manual_seed(0)
    a, b = TORCH_CASES[case]()
    result = torch.add(a, b)
    layout = plan_tensors(a, b)
    assert layout.shape == tuple(result.shape)
    assert layout.numel == result.numel()
    assert non_unit(layout.shape, layout.output_strides) == non_unit(result.shape, result.stride())
    shape = layout.shape
    operands = [broadcast_strides(tuple(t.shape), tuple(t.stride()), shape) for t in (a, b)]
    order = [axis for axis in dimension_order(shape, operands) if shape[axis] != 1]
    assert order == order_from_strides(tuple(result.shape), result.stride())
    assert sorted(dimension_order(shape, operands)) == list(range(len(shape)))


@pytest.mark.parametrize(
    "case, output_strides, sizes",
    [
        ("contiguous", (5, 1), (20,)),
        ("transposed_first", (1, 4), (4, 5)),
        ("both_transposed", (1, 4), (20,)),
        ("channels_last_both", (60, 1, 15, 3), (120,)),
        ("channels_last_second", (60, 20, 5, 1), (20, 3, 2)),
        ("broadcast_col_row", (6, 1), (6, 6)),
        ("bias_over_matrix", (7, 1), (7, 3)),
        ("zero_dim_both", (), ()),
    ],
)
def test_known_layouts(case, output_strides, sizes):
    torch.manual_seed(0)
    layout = plan_tensors(*TORCH_CASES[case]())
    assert layout.output_strides == output_strides
    assert layout.sizes == sizes
    assert layout.ndim == len(sizes)


def test_known_loop_strides():
    a, b = torch.randn(5, 4).t(), torch.randn(4, 5)
    layout = plan_tensors(a, b)
    # the transposed first input decides the order: its unit-stride axis 0 is innermost
    assert layout.strides == ((1, 4), (1, 4), (5, 1))
    bias = plan_tensors(torch.randn(3, 7), torch.randn(7))
    assert bias.strides == ((1, 7), (1, 7), (1, 0))
    assert bias.is_contiguous is False


def test_transposed_operands():
    """Inputs walking loop dimension 1 densely while every output walks dimension 0 so: the operands
    the CUDA tiled path and the host's blocked loop read through tiles."""
    a, b = torch.randn(5, 40).t(), torch.randn(40, 5)
    assert transposed_operands(plan_tensors(a, b), 1) == (2,)  # b: the output follows a
    assert transposed_operands(plan_tensors(b, a), 1) == (2,)
    assert transposed_operands(plan_tensors(a, b, b.flip(1)), 1) == (2, 3)  # a flipped row walks it too
    assert transposed_operands(plan_tensors(a, b, num_outputs=2), 2) == (3,)  # positions count the outputs
    assert transposed_operands(plan_tensors(b, b), 1) == ()  # one dense dimension
    assert transposed_operands(plan_tensors(torch.randn(40, 1), torch.randn(1, 5)), 1) == ()  # broadcast rows
    assert transposed_operands(plan_tensors(b[:, ::2], b[:, :3]), 1) == ()  # the output strides through its rows
    strided_out = plan_tensors(b, a, output_shapes=[(40, 5)], output_strides=[(10, 2)])
    assert transposed_operands(strided_out, 1) == ()  # the output does not walk dimension 0 densely
    nhwc = torch.randn(2, 8, 6, 7).permute(0, 2, 3, 1)
    layout = plan_tensors(nhwc, torch.randn(2, 6, 7, 8))
    assert layout.sizes == (42, 8, 2) and transposed_operands(layout, 1) == (2,)


def test_torch_keeps_strides_of_size1_dims_and_we_do_not():
    """torch keeps a size-1 input dim's (arbitrary) stride when the output dim is also 1, and it can tip
    the insertion sort; we treat every size-1 dim as broadcast (stride 0). Here we follow the only fully
    dimensioned input (b), torch does not: a tie-breaking difference, not a bug."""
    a = torch.as_strided(torch.randn(48), (4, 1, 1), (12, 4, 2))
    b = torch.as_strided(torch.randn(200), (4, 4, 3, 1), (1, 4, 16, 48))
    layout = plan_tensors(a, b)
    assert layout.output_strides == (1, 4, 16, 1)
    assert torch.add(a, b).stride() == (1, 12, 4, 12)
    a0 = torch.as_strided(a, (4, 1, 1), (12, 0, 0))  # the same input with zero strides on size-1 dims
    assert non_unit((4, 4, 3, 1), torch.add(a0, b).stride()) == [1, 4, 16]


# --------------------------------------------------------------------------- hypothesis: random torch layouts


@st.composite
def torch_operand(draw, target):
    """A CPU tensor broadcastable to `target`: maybe fewer dims, some 1s, permuted, sliced with steps, expanded."""
    keep = draw(st.sampled_from([len(target)] * 3 + list(range(len(target)))))  # usually all dims
    shape = [1 if draw(st.integers(0, 3)) == 0 else n for n in target[len(target) - keep:]]
    ndim = len(shape)
    perm = list(draw(st.permutations(range(ndim)))) if draw(st.integers(0, 2)) else list(range(ndim))
    steps = [draw(st.integers(1, 3)) for _ in shape] if draw(st.booleans()) else [1] * ndim
    stored = torch.randn([shape[p] * steps[p] for p in perm])  # memory order is `perm`
    view = stored[tuple(slice(None, None, steps[p]) for p in perm)].permute([perm.index(i) for i in range(ndim)])
    if draw(st.integers(0, 3)) == 0:  # expand some dims from size 1: stride 0
        narrow = [draw(st.booleans()) for _ in shape]
        view = view[tuple(slice(0, 1) if flag else slice(None) for flag in narrow)].expand(shape)
    assert list(view.shape) == shape
    return view


# shapes of 0-5 dims, sizes 0..4, mostly 2..4 so that most layouts are not trivially contiguous
TARGET_SHAPES = st.integers(0, 5).flatmap(
    lambda ndim: st.lists(st.one_of(st.integers(2, 4), st.integers(2, 4), st.integers(0, 4)), min_size=ndim, max_size=ndim))


def zero_size1_strides(t: torch.Tensor) -> torch.Tensor:
    """The same view with stride 0 on size-1 dims (see test_torch_keeps_strides_of_size1_dims_and_we_do_not)."""
    return t.as_strided(t.shape, [0 if n == 1 else s for n, s in zip(t.shape, t.stride())])


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_output_strides_match_torch_random(data):
    target = data.draw(TARGET_SHAPES, label="target")
    a = zero_size1_strides(data.draw(torch_operand(target), label="a"))
    b = zero_size1_strides(data.draw(torch_operand(target), label="b"))
    result = torch.add(a, b)
    layout = plan_tensors(a, b)
    assert layout.shape == tuple(result.shape)
    assert layout.numel == result.numel()
    if result.numel() == 0:
        return  # torch's strides for an empty output are arbitrary
    assert non_unit(layout.shape, layout.output_strides) == non_unit(result.shape, result.stride())


def random_view(rng, target) -> torch.Tensor:
    """The same kinds of views as torch_operand, from a seeded generator (many cheap cases, reproducible)."""
    keep = rng.choice([len(target)] * 3 + list(range(len(target))))
    shape = [1 if rng.random() < 0.25 else n for n in target[len(target) - keep:]]
    ndim = len(shape)
    perm = rng.sample(range(ndim), ndim) if rng.random() < 0.6 else list(range(ndim))
    steps = [rng.randint(1, 3) for _ in shape] if rng.random() < 0.5 else [1] * ndim
    stored = torch.empty([shape[p] * steps[p] for p in perm])
    view = stored[tuple(slice(None, None, steps[p]) for p in perm)].permute([perm.index(i) for i in range(ndim)])
    if rng.random() < 0.25:
        view = view[tuple(slice(0, 1) if rng.random() < 0.5 else slice(None) for _ in shape)].expand(shape)
    return zero_size1_strides(view)


def test_output_strides_match_torch_seeded():
    rng = random.Random(20240601)
    mismatches, compared = [], 0
    for _ in range(4000):
        target = [rng.choice([0, 1, 2, 3, 4, 2, 3, 4]) for _ in range(rng.randint(0, 5))]
        a, b = random_view(rng, target), random_view(rng, target)
        result = torch.add(a, b)
        layout = plan_tensors(a, b)
        assert layout.shape == tuple(result.shape)
        if result.numel() == 0:
            continue
        compared += 1
        if non_unit(layout.shape, layout.output_strides) != non_unit(result.shape, result.stride()):
            mismatches.append((tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), result.stride(), layout.output_strides))
    assert compared > 2500
    assert mismatches == []


@HYPOTHESIS
@given(st.data())
def test_output_is_dense(data):
    target = data.draw(st.lists(st.integers(1, 4), max_size=5), label="target")
    a = data.draw(torch_operand(target), label="a")
    b = data.draw(torch_operand(target), label="b")
    layout = plan_tensors(a, b)
    offsets = sorted(sum(i * s for i, s in zip(idx, layout.output_strides))
                     for idx in itertools.product(*(range(n) for n in layout.shape)))
    assert offsets == list(range(layout.numel))


# --------------------------------------------------------------------------- negative strides (NumPy views)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x[:, ::-1],
        lambda x: x[::2, ::-1],
        lambda x: x.reshape(-1)[::-1],
    ],
    ids=["reversed_inner", "stepped_rows_reversed_cols", "reversed_1d"],
)
def test_negative_strides_numpy_order(make):
    a = make(np.arange(24.0).reshape(4, 6))
    b = np.ones(a.shape)
    expected = tuple(s // 8 for s in np.add(a, b).strides)
    layout = plan_arrays(a, b)
    assert non_unit(layout.shape, layout.output_strides) == non_unit(a.shape, expected)
    assert loop_offsets(layout) == reference_offsets(
        layout.shape, [layout.output_strides], [a.shape, b.shape], [elements(a), elements(b)])


@pytest.mark.parametrize(
    "make",
    [lambda x: x[::-1], lambda x: x[::-1, ::2], lambda x: x[::-1, ::-1],
     lambda x: x.reshape(2, 3, 4)[::-1, ::-1, ::-1]],
    ids=["reversed_rows", "reversed_rows_stepped_cols", "reversed_both", "reversed_3d"],
)
def test_negative_strides_numpy_order_all_reversed(make):
    a = make(np.arange(24.0).reshape(4, 6))
    expected = tuple(s // 8 for s in np.negative(a).strides)
    layout = plan_arrays(a)
    assert layout.output_strides == expected


def test_negative_strides_fully_reversed_1d_coalesces():
    a = np.arange(10.0)[::-1]
    layout = plan_arrays(a)
    assert layout.sizes == (10,)
    assert layout.strides == ((1,), (-1,))
    assert layout.is_contiguous is False
    assert layout.needs_int64 is False


# --------------------------------------------------------------------------- coalescing


@pytest.mark.parametrize("shape", [(7,), (2, 3), (2, 3, 4), (1, 5, 1, 6), (2, 3, 4, 5, 2)])
def test_contiguous_coalesces_to_one_dim(shape):
    strides = tuple(contiguous_strides(shape, list(range(len(shape) - 1, -1, -1))))
    layout = plan_layout([shape, shape], [strides, strides])
    numel = int(np.prod(shape))
    assert layout.sizes == (numel,)
    assert layout.strides == ((1,), (1,), (1,))
    assert layout.is_contiguous is True
    assert layout.output_strides == strides
    assert layout.numel == numel


def test_coalesce_function():
    assert coalesce([4, 3], [[1, 4], [1, 4]]) == ((12,), ((1,), (1,)))
    assert coalesce([4, 3], [[1, 4], [1, 5]]) == ((4, 3), ((1, 4), (1, 5)))
    assert coalesce([1, 5, 1], [[0, 1, 0]]) == ((5,), ((1,),))
    assert coalesce([1, 1], [[3, 7], [0, 0]]) == ((), ((), ()))
    assert coalesce([], [[], []]) == ((), ((), ()))
    assert coalesce([3, 4, 5], [[1, 3, 12], [0, 0, 1]]) == ((12, 5), ((1, 12), (0, 1)))
    assert coalesce([2, 3], [[-1, -2]]) == ((6,), ((-1,),))


def test_zero_dim_inputs():
    layout = plan_layout([(), ()], [(), ()])
    assert layout.shape == ()
    assert layout.sizes == ()
    assert layout.strides == ((), (), ())
    assert layout.output_strides == ()
    assert layout.numel == 1
    assert layout.ndim == 0
    assert layout.is_contiguous is True
    mixed = plan_layout([(), (5,)], [(), (1,)])
    assert mixed.shape == (5,)
    assert mixed.sizes == (5,)
    assert mixed.strides == ((1,), (0,), (1,))
    assert mixed.is_contiguous is False  # the broadcast 0-dim input walks with stride 0


def test_empty_shapes():
    layout = plan_layout([(0, 3), (3,)], [(3, 1), (1,)])
    assert layout.shape == (0, 3)
    assert layout.numel == 0
    assert layout.output_strides == (3, 1)
    assert loop_offsets(layout) == Counter()


def test_is_contiguous():
    assert plan_tensors(torch.randn(4, 5), torch.randn(4, 5)).is_contiguous is True
    assert plan_tensors(torch.randn(5, 4).t(), torch.randn(5, 4).t()).is_contiguous is True
    assert plan_tensors(torch.randn(5, 4).t(), torch.randn(4, 5)).is_contiguous is False
    assert plan_tensors(torch.randn(8)[::2], torch.randn(4)).is_contiguous is False
    assert plan_tensors(torch.randn(1, 6), torch.randn(6, 1)).is_contiguous is False
    assert plan_tensors(torch.randn(6), torch.randn(6)).is_contiguous is True


# --------------------------------------------------------------------------- out= given


def test_given_output_strides_drive_the_order():
    layout = plan_layout([(4, 5), (4, 5)], [(5, 1), (5, 1)], output_shapes=[(4, 5)], output_strides=[(1, 4)])
    assert layout.sizes == (4, 5)
    assert layout.strides == ((1, 4), (5, 1), (5, 1))
    assert layout.shape == (4, 5)


def test_given_output_of_wrong_shape():
    with pytest.raises(ShapeError) as info:
        plan_layout([(4, 5)], [(5, 1)], output_shapes=[(5, 4)], output_strides=[(4, 1)])
    assert "(5, 4)" in str(info.value) and "(4, 5)" in str(info.value)


def test_multiple_outputs_share_the_dense_layout():
    layout = plan_layout([(5, 4)], [(1, 5)], num_outputs=3)
    assert layout.output_strides == (1, 5)
    assert layout.strides == ((1,), (1,), (1,), (1,))
    assert layout.sizes == (20,)


# --------------------------------------------------------------------------- loop nest == direct iteration


@st.composite
def raw_operand(draw, target):
    keep = draw(st.integers(0, len(target)))
    shape = tuple(n if draw(st.booleans()) else 1 for n in target[len(target) - keep:])
    strides = tuple(draw(st.integers(-30, 30)) for _ in shape)
    return shape, strides


@HYPOTHESIS
@given(st.data())
def test_loop_nest_visits_the_same_elements(data):
    target = tuple(data.draw(st.lists(st.integers(0, 4), max_size=5), label="target"))
    num_inputs = data.draw(st.integers(1, 3), label="num_inputs")
    inputs = [data.draw(raw_operand(target), label=f"in{i}") for i in range(num_inputs)]
    shapes, strides = [s for s, _ in inputs], [st_ for _, st_ in inputs]
    given_out = data.draw(st.booleans(), label="out=")
    shape = broadcast_shape(shapes)
    if given_out:
        out_strides = [tuple(data.draw(st.integers(-20, 20)) for _ in shape)]
        layout = plan_layout(shapes, strides, output_shapes=[shape], output_strides=out_strides)
    else:
        num_outputs = data.draw(st.integers(1, 2), label="num_outputs")
        layout = plan_layout(shapes, strides, num_outputs=num_outputs)
        out_strides = [layout.output_strides] * num_outputs
    assert layout.shape == shape
    assert layout.numel == int(np.prod(shape))
    assert len(layout.strides) == len(out_strides) + num_inputs
    assert all(len(s) == layout.ndim for s in layout.strides)
    assert all(n != 1 for n in layout.sizes)  # size-1 loops are always dropped
    assert loop_offsets(layout) == reference_offsets(shape, out_strides, shapes, strides)


@HYPOTHESIS
@given(st.data())
def test_loop_nest_visits_the_same_elements_torch_views(data):
    target = data.draw(st.lists(st.integers(1, 4), max_size=5), label="target")
    a = data.draw(torch_operand(target), label="a")
    b = data.draw(torch_operand(target), label="b")
    layout = plan_tensors(a, b)
    assert loop_offsets(layout) == reference_offsets(
        layout.shape, [layout.output_strides], [tuple(a.shape), tuple(b.shape)], [a.stride(), b.stride()])
    # coalescing never leaves more loops than dimensions of size > 1
    assert layout.ndim <= sum(1 for n in layout.shape if n > 1)


# --------------------------------------------------------------------------- index width


@pytest.mark.parametrize(
    "shapes, strides, expected",
    [
        ([(2**31,)], [(1,)], True),
        ([(2**16, 2**15)], [(2**15, 1)], True),
        ([(2**30,)], [(1,)], False),
        ([(2**20, 2**10), (1, 2**10)], [(2**10, 1), (0, 1)], False),
        ([(2, 3)], [(2**31, 1)], True),  # small numel, huge stride
        ([(3, 4)], [(2**30, 1)], True),  # extent 2 * 2**30 + 3
        ([(3,)], [(-(2**30),)], True),  # negative strides count by magnitude
        ([(2, 3)], [(2**30 - 3, 1)], False),  # extent exactly 2**30 - 1
    ],
)
def test_needs_int64(shapes, strides, expected):
    layout = plan_layout(shapes, strides)
    assert layout.needs_int64 is expected


def test_needs_int64_counts_given_output_strides():
    layout = plan_layout([(4, 3)], [(3, 1)], output_shapes=[(4, 3)], output_strides=[(2**30, 1)])
    assert layout.needs_int64 is True


@pytest.mark.parametrize("numel", [2**31 - 1, 2**31 - 100])
def test_needs_int64_headroom(numel):
    layout = plan_layout([(numel,)], [(1,)])
    assert layout.numel == numel <= INT32_MAX
    assert layout.needs_int64 is True


# ----------------------------------------------------------------------------- out= whose elements meet
def _brute_force_distinct(shape, strides):
    offsets = [sum(i * s for i, s in zip(index, strides)) for index in itertools.product(*(range(n) for n in shape))]
    return len(set(offsets)) == len(offsets)


@pytest.mark.parametrize("shape,strides,expected", [
    ((3, 2), (1, 1), False),  # rows overlap by one element
    ((3, 3), (2, 3), True),  # gaps interleave without meeting: only enumeration tells
    ((4, 5), (5, 1), True), ((4, 5), (1, 4), True), ((2, 3, 4), (1, 8, 2), True),  # dense in any order
    ((4, 5), (-5, -1), True), ((2, 2), (3, -2), True),  # NumPy's negative strides
    ((5, 1, 4), (4, 0, 1), True),  # a size-1 dimension's stride does not matter
    ((1000, 1000), (1, 1), False),  # fewer offsets than elements: known without enumerating
    ((4096, 4096), (4096, 4095), None),  # 16 M elements whose strides prove nothing: not enumerated
])
def test_distinct_elements(shape, strides, expected):
    from jiter_magic.planning.resolve import distinct_elements

    assert distinct_elements(shape, strides) is expected


def test_distinct_elements_agrees_with_brute_force():
    from jiter_magic.planning.resolve import distinct_elements

    rng = random.Random(7)
    for _ in range(2000):
        ndim = rng.randint(1, 3)
        shape = tuple(rng.randint(1, 4) for _ in range(ndim))
        strides = tuple(rng.randint(-6, 6) for _ in range(ndim))
        assert distinct_elements(shape, strides) is _brute_force_distinct(shape, strides), (shape, strides)


def test_an_out_whose_elements_meet_is_refused_and_left_untouched():
    import jiter_magic

    add = jiter_magic.create_jit_fn("template <typename T> T meet_add(T x, T y) { return x + y; }")
    base = np.zeros(8)
    out = np.lib.stride_tricks.as_strided(base, (3, 2), (8, 8))
    with pytest.raises(ShapeError, match=r"^out= has elements that refer to the same memory"):
        add(np.ones((3, 2)), 1.0, out=out)
    assert not base.any()
    interleaved = np.lib.stride_tricks.as_strided(np.zeros(12), (3, 3), (16, 24))  # distinct, with gaps
    add(np.ones((3, 3)), np.arange(9.0).reshape(3, 3), out=interleaved)
    np.testing.assert_array_equal(interleaved, np.arange(9.0).reshape(3, 3) + 1)
