"""The host's blocked loop (kernels/host.py): transposed and permuted inputs through tiles.

Which calls take it (an input walking the second loop dimension densely while the outputs walk
the first, as the CUDA tiled path asks) and which do not, and its values against torch and NumPy
across shapes with partial edge tiles (1, 63, 65, odd sizes against 64-element tiles), 3-d and
4-d permutes, dtypes, several outputs, out= into transposed views, negative strides, empty
calls, inputs past the tile buffers' limit, and a fault raised inside a tile.
Jitted functions live at module level so a specialization compiles once for the whole module.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic import create_jit_fn, create_multi_output_jit_fn
from jiter_magic.kernels import describe
from jiter_magic.kernels.host import EDGE0, EDGE1, MIN_TILED_ROWS
from jiter_magic.runtime.inspection import example_spec

from reference import assert_matches, random_array, random_tensor, reference  # tests/ is on sys.path

FUSED = create_jit_fn("template <typename T> T blocked_fused(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }",
                      alpha=2, beta=-3)
SUM_DIFF = create_multi_output_jit_fn(
    "template <typename T> void blocked_sum_diff(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", num_outputs=2)
FOUR = create_jit_fn("template <typename T> T blocked_four(T a, T b, T c, T d) { return a + T(2) * b + T(3) * c - d; }")
DIFFERS = create_jit_fn("template <typename T> T blocked_differs(T x, T y) { return x != y; }")
THROWS = create_jit_fn('#include <stdexcept>\n'
                       'template <typename T> T blocked_throw(T x, T y) { if (x > T(2)) throw std::runtime_error("x is '
                       'too big"); return x + y; }')


def fused_ref(x, y, alpha, beta):
    return alpha * x + beta * y


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def spec_of(fn, *args, **kwargs):
    """The spec a call would run on the host (planned as the call plans it, nothing compiled)."""
    return example_spec(fn._calls, args, "cpu", kwargs)


def ran_spec(fn, *args, **kwargs):
    """A call's result and the spec it ran, for calls with out= (which `spec_of` cannot plan): the
    specialization the call added to `fn`, a function made for the test."""
    assert not fn.specializations
    result = fn(*args, **kwargs)
    assert len(fn.specializations) == 1
    return result, fn.specializations[0].spec


def transposed(shape, dtype, g) -> torch.Tensor:
    """A 2-d tensor of `shape` laid out column-major: the transpose of a contiguous one."""
    return random_tensor(shape[::-1], dtype, g).t()


def check_fused(x, y):
    result = FUSED(x, y)
    assert_matches(result, reference(fused_ref, x, y, extras={"alpha": 2, "beta": -3}))
    return result


# ----------------------------------------------------------------------------- which calls take it
def test_a_transposed_input_takes_the_blocked_loop_and_describe_names_it():
    g = gen(0)
    x, y = transposed((300, 200), "float32", g), random_tensor((300, 200), "float32", g)
    spec = spec_of(FUSED, x, y)
    # The output follows the first input's memory order, so the second is the one read across.
    assert spec.path == "blocked" and spec.ndim == 2 and spec.params.tiled_inputs == (1,)
    assert describe(spec).endswith(f"blocked 2-d, inputs [1] through {EDGE0}x{EDGE1} tiles in cache, int64 index")
    fn = create_jit_fn("template <typename T> T blocked_fresh(T x, T y) { return x - y; }")
    assert_matches(fn(x, y), x - y)
    assert [s.spec.path for s in fn.specializations] == ["blocked"]  # what ran, as a panel lists it
    assert "warning" not in fn.specializations[0].log
    assert "jm_tile1[" in fn.source(x, y, backend="cpu")


def test_the_cuda_path_of_the_same_call_is_still_the_tiled_one():
    g = gen(1)
    x, y = transposed((300, 200), "float32", g), random_tensor((300, 200), "float32", g)
    spec = example_spec(FUSED._calls, (x, y), "cuda", {})
    assert spec.path == "tiled" and spec.params.tiled_inputs == (1,)


@pytest.mark.parametrize("make,path", [
    (lambda g: (random_tensor((300, 200), "float32", g), random_tensor((300, 200), "float32", g)), "contiguous"),
    (lambda g: (transposed((300, 200), "float32", g), transposed((300, 200), "float32", g)), "contiguous"),
    (lambda g: (random_tensor((300, 1), "float32", g), random_tensor((1, 200), "float32", g)), "rows"),  # outer
    (lambda g: (random_tensor((300, 200), "float32", g), random_tensor((200,), "float32", g)), "rows"),  # bias
    (lambda g: (random_tensor((300, 1), "float32", g), transposed((300, 200), "float32", g)), "rows"),
    (lambda g: (random_tensor((300, 200), "float32", g)[:, ::2], random_tensor((300, 100), "float32", g)), "strided"),
    (lambda g: (random_tensor((4, 8, 5, 6), "float32", g).to(memory_format=torch.channels_last),
                random_tensor((4, 8, 5, 6), "float32", g).to(memory_format=torch.channels_last)), "contiguous"),
])
def test_calls_without_an_input_read_across_the_outputs_do_not(make, path):
    x, y = make(gen(2))
    assert spec_of(FUSED, x, y).path == path
    check_fused(x, y)


@pytest.mark.parametrize("rows,cols", [
    (63, 65), (64, 64), (65, 63), (1, 200), (200, 1), (3, 130), (130, 3), (17, 129), (129, 17), (2, 16), (16, 2),
    (15, 200), (200, 15), (EDGE0 + 1, EDGE1 - 1), (300, 257),  # the last: 77k elements, split over threads
])
def test_edge_tiles_and_the_rows_minimum(rows, cols):
    g = gen(rows * 1000 + cols)
    x, y = transposed((rows, cols), "float32", g), random_tensor((rows, cols), "float32", g)
    # Loop dimension 0 is the rows' axis (x's unit stride), dimension 1 the columns (y's).
    blocked = rows > 1 and cols >= MIN_TILED_ROWS
    assert (spec_of(FUSED, x, y).path == "blocked") == blocked
    check_fused(x, y)


# ----------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtypes", [
    ("float32", "float32"), ("float64", "float64"), ("int8", "int8"), ("float16", "float16"),
    ("complex64", "complex64"), ("bfloat16", "bfloat16"), ("int8", "float32"), ("float16", "complex64"),
    ("int64", "int32"),
])
def test_dtypes(dtypes):
    g = gen(3)
    x, y = random_tensor((70, 131), dtypes[0], g), transposed((70, 131), dtypes[1], g)
    assert spec_of(FUSED, x, y).params.tiled_inputs == (1,)
    result = check_fused(x, y)
    assert result.dtype == torch.result_type(x, y) and result.stride() == (131, 1)  # x's memory order


def test_bool_inputs_and_output():
    g = gen(4)
    x, y = transposed((77, 99), "bool", g), random_tensor((77, 99), "bool", g)
    assert spec_of(DIFFERS, x, y).path == "blocked"
    result = DIFFERS(x, y)
    assert result.dtype == torch.bool
    assert torch.equal(result, x != y)


def test_numpy_arrays():
    g = gen(5)
    x, y = random_array((90, 70), "float64", g), random_array((70, 90), "float64", g)
    assert spec_of(FUSED, x.T, y).path == "blocked"
    result = FUSED(x.T, y)
    assert isinstance(result, np.ndarray) and result.dtype == np.float64
    np.testing.assert_allclose(result, 2 * x.T - 3 * y, rtol=1e-15)


def test_a_python_scalar_between_arrays():
    g = gen(6)
    x, y = transposed((100, 80), "float32", g), random_tensor((100, 80), "float32", g)
    assert spec_of(FOUR, x, 1.5, y, 2).params.tiled_inputs == (2,)
    assert_matches(FOUR(x, 1.5, y, 2), x + 3.0 + 3 * y - 2)


# ----------------------------------------------------------------------------- 3-d and 4-d
@pytest.mark.parametrize("shape,perm", [
    ((5, 33, 70), (0, 2, 1)), ((5, 33, 70), (2, 1, 0)), ((5, 33, 70), (1, 2, 0)), ((5, 33, 70), (2, 0, 1)),
    ((3, 40, 17, 19), (0, 2, 3, 1)),  # NCHW read as NHWC
    ((3, 17, 19, 40), (0, 3, 1, 2)),  # NHWC read as NCHW
    ((2, 3, 65, 66), (0, 1, 3, 2)),  # batched transposes
    ((4, 5, 6, 70), (3, 1, 2, 0)),
])
def test_permuted_inputs(shape, perm):
    g = gen(7)
    x = random_tensor(shape, "float32", g).permute(perm)
    y = random_tensor(x.shape, "float32", g)  # contiguous in the permuted shape
    check_fused(y, x)
    check_fused(x, y)


def test_nchw_read_as_nhwc_is_blocked_with_batches():
    g = gen(8)
    x = random_tensor((3, 40, 17, 19), "float32", g).permute(0, 2, 3, 1)
    y = random_tensor(x.shape, "float32", g)
    spec = spec_of(FUSED, x, y)
    assert spec.path == "blocked" and spec.ndim == 3 and spec.params.tiled_inputs == (1,)
    check_fused(x, y)


def test_three_channels_into_an_nhwc_output():
    g = gen(9)
    x = random_tensor((2, 3, 50, 41), "float32", g)
    out = torch.empty(2, 50, 41, 3)
    fn = create_jit_fn("template <typename T> T blocked_channels(T x, T y) { return T(2) * x - T(3) * y; }")
    result, spec = ran_spec(fn, x.permute(0, 2, 3, 1), 1.0, out=out)
    assert spec.path == "blocked" and spec.ndim == 3 and spec.params.tiled_inputs == (0,)
    assert result is out and out.is_contiguous()
    assert_matches(out, 2 * x.permute(0, 2, 3, 1) - 3.0)


# ----------------------------------------------------------------------------- outputs
def test_several_outputs():
    g = gen(10)
    x, y = transposed((129, 67), "float64", g), random_tensor((129, 67), "float64", g)
    assert spec_of(SUM_DIFF, x, y).path == "blocked"
    assert_matches(SUM_DIFF(x, y), (x + y, x - y))


def test_out_into_transposed_views():
    g = gen(11)
    x, y = random_tensor((70, 90), "float32", g), random_tensor((70, 90), "float32", g)
    out = torch.empty(90, 70).t()
    fn = create_jit_fn("template <typename T> T blocked_into(T x, T y) { return T(2) * x - T(3) * y; }")
    result, spec = ran_spec(fn, x, y, out=out)
    assert spec.path == "blocked" and spec.params.tiled_inputs == (0, 1)  # both read across the output
    assert result is out and out.stride() == (1, 70)
    assert_matches(out, 2 * x - 3 * y)
    outs = (torch.empty(90, 70).t(), torch.empty(90, 70, dtype=torch.float64).t())
    fn2 = create_multi_output_jit_fn(
        "template <typename T> void blocked_into2(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", num_outputs=2)
    result, spec = ran_spec(fn2, x, y, out=outs)
    assert spec.path == "blocked" and spec.outputs == ("float32", "float64")
    assert result[0] is outs[0] and result[1] is outs[1]
    assert_matches(outs[0], x + y)
    assert_matches(outs[1], (x - y).double())


def test_outputs_in_different_orders_take_the_strided_loop():
    g = gen(12)
    x, y = random_tensor((70, 90), "float32", g), transposed((70, 90), "float32", g)
    outs = (torch.empty(90, 70).t(), torch.empty(70, 90))
    fn = create_multi_output_jit_fn(
        "template <typename T> void blocked_orders(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", num_outputs=2)
    assert ran_spec(fn, x, y, out=outs)[1].path == "strided"
    assert_matches(outs[0], x + y)
    assert_matches(outs[1], x - y)


# ----------------------------------------------------------------------------- strides and sizes
@pytest.mark.parametrize("flip", [(0,), (1,), (0, 1)])
def test_flipped_views(flip):
    g = gen(13)
    x, y = transposed((100, 75), "float32", g).flip(flip), random_tensor((100, 75), "float32", g)
    check_fused(y, x)
    check_fused(x, y)


def test_negative_strides_numpy():
    g = gen(14)
    x, y = random_array((80, 90), "float32", g), random_array((90, 80), "float32", g)
    for a, b in ((x.T[::-1], y), (x.T[:, ::-1], y[::-1]), (y, x[::-1, ::-1].T), (x.T[::-2], y[::2])):
        assert spec_of(FUSED, a, b).path == "blocked"
        np.testing.assert_allclose(FUSED(a, b), 2 * a - 3 * b, rtol=1e-6)


def test_stepped_views():
    g = gen(15)
    x, y = random_tensor((200, 300), "float32", g)[::2, 1::3], random_tensor((100, 100), "float32", g)
    check_fused(x.t(), y)
    check_fused(y, x.t())


@pytest.mark.parametrize("shape", [(0, 64), (64, 0), (3, 0, 70)])
def test_empty_calls(shape):
    before = len(FUSED.specializations)
    x = torch.empty(shape[::-1]).permute(*reversed(range(len(shape))))
    y = torch.empty(shape)
    result = FUSED(x, y)
    assert result.shape == shape and result.dtype == torch.float32
    assert len(FUSED.specializations) == before  # nothing to run, nothing compiled


def test_inputs_past_the_buffers_limit_are_read_in_place():
    g = gen(16)
    shape = (70, 90)
    wide = [random_tensor(shape, "complex128", g)] + [transposed(shape, "complex128", g) for _ in range(3)]
    # One complex128 tile buffer (64 x 65 x 16 bytes) fits a thread's 128 KiB; the other two inputs
    # read across the outputs are read from memory.
    assert spec_of(FOUR, *wide).params.tiled_inputs == (1,)
    narrow = [random_tensor(shape, "float32", g)] + [transposed(shape, "float32", g) for _ in range(3)]
    assert spec_of(FOUR, *narrow).params.tiled_inputs == (1, 2, 3)
    for args in (wide, narrow):
        assert_matches(FOUR(*args), args[0] + 2 * args[1] + 3 * args[2] - args[3])


def test_a_fault_inside_a_tile_raises_and_the_next_call_works():
    x, y = torch.ones(300, 200).t(), torch.ones(200, 300)
    x[150, 7] = 5
    assert spec_of(THROWS, x, y).path == "blocked"
    with pytest.raises(jiter_magic.KernelFaultError, match="blocked_throw: the functor threw a C.. exception: x is"):
        THROWS(x, y)
    x[150, 7] = 1
    assert_matches(THROWS(x, y), x + y)
