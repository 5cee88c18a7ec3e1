"""Multi-output scans that return some of their state's values (`outputs=`, issue 46): each kept
value equals the whole scan's on every host path, reverse and exclusive, float32/float64/float16,
broadcast inputs; a tuple of one array for one; `out=`, the hot path, the spec and its source,
pickling, the refusals, a backward of h alone (gradcheck) and torch.compile."""
from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
from scan_functions import AFFINE, EMA, KEEP_MAX, linear
from scan_gradients import linear_h

from jiter_magic import (
    ArgumentTypeError,
    BindError,
    InvalidArgumentError,
    create_multi_output_scan_fn,
    create_scan_fn,
)
from jiter_magic.planning.scan_plan import CUDA_SCAN_PATHS, HOST_SCAN_PATHS

torch = pytest.importorskip("torch")

# Count, sum and sum of squares of a running window: a state of three values made by a map.
MOMENTS = ("template <typename T> void sums(T n1, T s1, T q1, T n2, T s2, T q2, T& n, T& s, T& q) {\n"
           "  n = n1 + n2; s = s1 + s2; q = q1 + q2;\n}\n"
           "template <typename T> void moments(T x, T w, T& n, T& s, T& q) { n = 1; s = w * x; q = x * x; }\n")
moments = create_multi_output_scan_fn(MOMENTS, (0, 0, 0), map="moments", combine="sums", w=1.0)
squares_and_counts = create_multi_output_scan_fn(MOMENTS, (0, 0, 0), map="moments", combine="sums", w=1.0,
                                                 outputs=(2, 0))
ema_h = create_multi_output_scan_fn(EMA, (1, 0), map="ema", combine="affine", decay=0.9, outputs=(1,))

# Shapes taking each host path: rows 8 at a time and the rest one by one, columns, one long row split
# over the threads (where there are two), and an empty scan.
SHAPES = [((37, 300), 1), ((3, 7), -1), ((300, 20), 0), ((2, 1 << 17), 1), ((4, 0), 1)]
FLAGS = list(itertools.product((False, True), (False, True)))


def pair(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    a = (torch.rand(shape, generator=generator) * 0.2 + 0.8).to(dtype)
    return a, torch.randn(shape, generator=generator).to(dtype)


@pytest.mark.parametrize(("shape", "dim"), SHAPES)
@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_h_alone_is_the_whole_scans_h(shape, dim, reverse, exclusive, dtype):
    a, b = pair(shape, dtype)
    found = linear_h(a, b, dim=dim, reverse=reverse, exclusive=exclusive)
    _, h = linear(a, b, dim=dim, reverse=reverse, exclusive=exclusive)
    assert type(found) is tuple and len(found) == 1
    assert found[0].dtype == h.dtype == dtype and torch.equal(found[0], h)  # the same state, the same order


@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_reordered_values_of_a_state_of_three_with_a_map_and_an_extra(reverse, exclusive):
    x = torch.randn(9, 50, dtype=torch.float64)
    for dim in (0, 1):
        n, s, q = moments(x, dim=dim, reverse=reverse, exclusive=exclusive, w=2.0)
        squares, counts = squares_and_counts(x, dim=dim, reverse=reverse, exclusive=exclusive, w=2.0)
        assert torch.equal(squares, q) and torch.equal(counts, n)
        (h,) = ema_h(x, dim=dim, reverse=reverse, exclusive=exclusive, decay=0.5)
        assert torch.equal(h, linear(torch.full_like(x, 0.5), 0.5 * x, dim=dim, reverse=reverse,
                                     exclusive=exclusive)[1])


def test_broadcast_inputs_numpy_arrays_and_the_hot_path():
    a, b = torch.rand(1, 40) * 0.5 + 0.5, torch.randn(6, 1, dtype=torch.float64)
    for _ in range(3):  # planned, then kept hot: the C path returns the same 1-tuple
        (h,) = linear_h(a, b, dim=1)
        assert h.dtype == torch.float64 and h.shape == (6, 40)
        assert torch.equal(h, linear(a, b, dim=1)[1])
    x, y = np.random.default_rng(0).random((5, 30)), np.random.default_rng(1).standard_normal((5, 30))
    (h,) = linear_h(x, y, dim=0, reverse=True)
    assert isinstance(h, np.ndarray)
    np.testing.assert_array_equal(h, linear(x, y, dim=0, reverse=True)[1])


def test_out_takes_as_many_arrays_as_are_kept():
    a, b = pair((4, 33), torch.float32)
    h = torch.empty(4, 33)
    found = linear_h(a, b, dim=1, out=(h,))
    assert type(found) is tuple and found[0] is h and torch.equal(h, linear(a, b, dim=1)[1])
    squares, counts = torch.empty(4, 33), torch.empty(33, 4).t()  # strided out= too
    squares_and_counts(a, dim=1, out=(squares, counts))
    n, _, q = moments(a, dim=1)
    assert torch.equal(squares, q) and torch.equal(counts, n)
    with pytest.raises(ArgumentTypeError, match="out= takes a tuple of 1 array, got"):
        linear_h(a, b, dim=1, out=h)
    with pytest.raises(ArgumentTypeError, match="out= takes a tuple of 1 array, got"):
        linear_h(a, b, dim=1, out=(h, h))


def test_the_spec_its_description_and_source():
    whole = linear.spec("float32", "float32", path="warp_scan")
    kept = linear_h.spec("float32", "float32", path="warp_scan")
    assert whole.kept_values is None and kept.kept_values == (1,) and kept != whole  # their cache keys differ
    assert kept.outputs == 1 and kept.state == 2
    assert "values (1,) of 2 x float32" in kept.describe() and "values" not in whole.describe()
    source = linear_h.source("float32", "float32", path="block_scan")
    assert "jm_out1" not in source and "jm_a.jm_out0[jm_p0] = jm_s.w;" in source
    # Every value kept, in order, is the scan without outputs=: the same spec and source.
    every = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(0, 1))
    for path in HOST_SCAN_PATHS + CUDA_SCAN_PATHS:
        assert every.source(path=path, exclusive=True) == linear.source(path=path, exclusive=True)
    assert every.spec() == linear.spec()


def test_pickling_keeps_the_outputs():
    again = pickle.loads(pickle.dumps(squares_and_counts))
    assert again.binding.kept_values == (2, 0) and again.num_outputs == 2
    x = torch.randn(3, 20)
    for got, want in zip(again(x, dim=1), squares_and_counts(x, dim=1)):
        assert torch.equal(got, want)


def test_refusals():
    with pytest.raises(InvalidArgumentError, match=r"by its position 0 to 1 \(the state holds 2 values\); got \(2,\)"):
        create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(2,))
    for wrong in ((), (1, 1), (-1,)):
        with pytest.raises(InvalidArgumentError, match="names each state value a call of affine returns once"):
            create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=wrong)
    for wrong in (1, "h", True, (1.0,), (True,)):
        with pytest.raises(ArgumentTypeError, match=r"outputs= is a tuple of the positions \(ints\)"):
            create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=wrong)
    with pytest.raises(BindError, match="the state of keep_max holds values and their indices"):
        create_multi_output_scan_fn(KEEP_MAX, float("-inf"), combine="keep_max", outputs=(0,))
    with pytest.raises(BindError, match=r"keyword arguments \['outputs'\] need a map function"):
        create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }", 0, combine="add", outputs=(0,))
    # A plain scan has no outputs=: its map may take an extra of that name (as before outputs= existed).
    scaled = create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }\n"
                            "template <typename T> T m(T x, T outputs) { return x * outputs; }", 0, "m",
                            combine="add", outputs=2.0)
    np.testing.assert_array_equal(scaled(np.arange(4.0), dim=0), [0.0, 2.0, 6.0, 12.0])
    np.testing.assert_array_equal(scaled(np.arange(4.0), dim=0, outputs=3.0), [0.0, 3.0, 9.0, 18.0])
    # A list is copied: changing it afterwards changes neither the function nor what it pickles as.
    chosen = [1]
    alone = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=chosen)
    chosen[0] = 0
    assert alone.binding.kept_values == (1,) and pickle.loads(pickle.dumps(alone)).binding.kept_values == (1,)
    # An extra of the map named `outputs` cannot be given: the keyword takes the value, then the name is refused.
    named = ("template <typename T> void m(T x, T outputs, T& a, T& b) { a = outputs; b = x; }\n" + AFFINE)
    with pytest.raises(ArgumentTypeError, match="outputs= is a tuple"):
        create_multi_output_scan_fn(named, (1, 0), map="m", combine="affine", outputs=0.5)
    from jiter_magic.scan import ScanFunction

    with pytest.raises(BindError, match="rename that parameter of the map"):
        ScanFunction(named, (1, 0), "m", "affine", None, {"outputs": 0.5}, True)


@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_gradcheck_of_h_alone_with_an_h_only_backward(reverse, exclusive):
    a = (torch.rand(1, 7, dtype=torch.float64) * 0.5 + 0.5).requires_grad_()  # broadcast along dim 0
    b = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: linear_h(a, b, dim=1, reverse=reverse, exclusive=exclusive),
                                    (a, b))
    # The same gradients as the whole scan's backward of h.
    (h,) = linear_h(a, b, dim=1, reverse=reverse, exclusive=exclusive)
    weights = torch.randn(3, 7, dtype=torch.float64)
    alone = torch.autograd.grad((h * weights).sum(), (a, b))
    from scan_gradients import linear as whole

    _, h_whole = whole(a, b, dim=1, reverse=reverse, exclusive=exclusive)
    for got, want in zip(alone, torch.autograd.grad((h_whole * weights).sum(), (a, b))):
        torch.testing.assert_close(got, want)


def test_torch_compile_fullgraph_and_its_gradient():
    from torch_compile_helpers import GraphRecorder, assert_compiled_gradients_are_eager

    a, b = pair((4, 9), torch.float32)
    recorder = GraphRecorder()
    found = torch.compile(lambda a, b: linear_h(a, b, dim=1), backend=recorder, fullgraph=True)(a, b)
    assert type(found) is tuple and len(found) == 1 and torch.equal(found[0], linear(a, b, dim=1)[1])
    assert len(recorder.graphs) == 1 and len(recorder.operators()) == 1
    out = torch.empty(4, 9)
    torch.compile(lambda a, b: linear_h(a, b, dim=1, out=(out,)), backend="aot_eager", fullgraph=True)(a, b)
    assert torch.equal(out, found[0])
    assert_compiled_gradients_are_eager(lambda a, b: linear_h(a, b, dim=1, reverse=True)[0].sin().sum(),
                                        pair((3, 6), torch.float64), "aot_eager")
