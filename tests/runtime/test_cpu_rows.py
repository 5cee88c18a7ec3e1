"""The host's row loops (kernels/host.py): rows with the steps 1 and 0, and strided rows.

Which calls take the rows loop (every operand walks the innermost dimension densely or not at
all: an outer product, a bias, an array times a 0-dim tensor), and the values of both row loops
where a thread's share of elements starts and ends inside a row: one long row (1-d), a few long
rows, many short ones, over the OpenMP threshold so that the share is split.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from jiter_magic import create_jit_fn, create_multi_output_jit_fn
from jiter_magic.kernels import describe
from jiter_magic.runtime.inspection import example_spec

from reference import assert_matches, random_array, random_tensor, reference  # tests/ is on sys.path

FUSED = create_jit_fn("template <typename T> T rows_fused(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }",
                      alpha=2, beta=-3)
SUM_DIFF = create_multi_output_jit_fn(
    "template <typename T> void rows_sum_diff(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", num_outputs=2)


def fused_ref(x, y, alpha, beta):
    return alpha * x + beta * y


def check_fused(x, y):
    result = FUSED(x, y)
    assert_matches(result, reference(fused_ref, x, y, extras={"alpha": 2, "beta": -3}))


def spec_of(*args):
    return example_spec(FUSED._calls, args, "cpu", {})


def test_an_outer_product_takes_the_rows_loop_and_describe_names_it():
    g = torch.Generator().manual_seed(0)
    x, y = random_tensor((300, 1), "float32", g), random_tensor((1, 200), "float32", g)
    spec = spec_of(x, y)
    assert spec.path == "rows" and spec.params.row_broadcast == (0,) and spec.params.vec == 1
    assert "rows 2-d, vec1, inputs [0] broadcast along rows" in describe(spec)
    source = FUSED.source(x, y, backend="cpu")
    assert "const float jm_c0 = jm_a.jm_in0[jm_o1];" in source  # loaded once a row
    assert "jm_a.jm_in1[jm_o2 + jm_j]" in source and "jm_a.jm_out0[jm_o0 + jm_j]" in source
    check_fused(x, y)


SIZES = [1, 2, 7, 100_003, 300_001]  # the last two: over the OpenMP threshold, so the share is split


@pytest.mark.parametrize("n", SIZES)
def test_one_long_row_times_a_0_dim_tensor(n):
    g = torch.Generator().manual_seed(n)
    x, y = random_tensor((n,), "float32", g), random_tensor((), "float32", g)
    if n > 1:
        assert spec_of(x, y).path == "rows" and spec_of(x, y).params.row_broadcast == (1,)
    check_fused(x, y)
    check_fused(y, x)


@pytest.mark.parametrize("n", SIZES)
def test_one_long_strided_row(n):
    g = torch.Generator().manual_seed(n)
    x, y = random_tensor((2 * n,), "float64", g)[::2], random_tensor((n,), "float64", g)
    if n > 1:
        assert spec_of(x, y).path == "strided" and spec_of(x, y).ndim == 1
    check_fused(x, y)
    flipped = random_array((3 * n,), "float32", g)[::-3]
    np.testing.assert_allclose(FUSED(flipped, 1.5), 2 * flipped - 4.5, rtol=1e-6)


@pytest.mark.parametrize("shape", [(3, 100_003), (100_003, 3), (5, 7), (257, 129), (2, 1, 70_001)])
def test_rows_split_inside_a_row(shape):
    g = torch.Generator().manual_seed(sum(shape))
    x = random_tensor(shape, "float32", g)
    bias = random_tensor(shape[-1:], "float32", g)
    column = random_tensor(shape[:-1] + (1,), "float32", g)
    assert spec_of(x, bias).path == "rows" and spec_of(x, column).path == "rows"
    check_fused(x, bias)
    check_fused(column, x)
    check_fused(column, bias)  # an outer product
    wide = random_tensor(shape[:-1] + (shape[-1] + 5,), "float32", g)[..., 2:-3]  # rows with gaps between them
    assert spec_of(wide, x).path == "rows"
    check_fused(wide, x)
    stepped = random_tensor(shape[:-1] + (2 * shape[-1],), "float32", g)[..., ::2]
    assert spec_of(stepped, x).path == "strided"
    check_fused(stepped, x)


@pytest.mark.parametrize("dtypes", [("int8", "int8"), ("float16", "float32"), ("complex64", "float64"), ("bool", "bool")])
def test_dtypes_and_several_outputs(dtypes):
    g = torch.Generator().manual_seed(7)
    x, y = random_tensor((70_001, 1), dtypes[0], g), random_tensor((1, 3), dtypes[1], g)
    assert example_spec(SUM_DIFF._calls, (x, y), "cpu", {}).path == "rows"
    if dtypes[0] != "bool":
        assert_matches(SUM_DIFF(x, y), reference(lambda a, b: (a + b, a - b), x, y, num_outputs=2))
    check_fused(x, y)


def test_out_into_a_view_with_gaps_between_rows():
    g = torch.Generator().manual_seed(8)
    x, y = random_tensor((4000, 30), "float32", g), random_tensor((30,), "float32", g)
    base = torch.zeros(4000, 40)
    out = base[:, 5:35]
    assert FUSED(x, y, out=out) is out
    assert_matches(out, 2 * x - 3 * y)
    assert torch.equal(base[:, :5], torch.zeros(4000, 5)) and torch.equal(base[:, 35:], torch.zeros(4000, 5))
