"""Reduction planning, pure: dims, the result's shape, coalescing, dtypes, the identity, the spec."""
from __future__ import annotations

import dataclasses

import pytest

from jiter_magic.errors import (
    ArgumentTypeError,
    DimensionError,
    DTypeError,
    InvalidArgumentError,
    ScalarOverflowError,
)
from jiter_magic.planning.reduce_layout import (
    dense_strides,
    normalize_dims,
    plan_reduction_layout,
    reduced_shape,
)
from jiter_magic.planning.reduce_spec import (
    HOST,
    ReductionSpec,
    accumulate_dtype,
    check_identity,
    identity_literal,
    result_dtype,
)


@pytest.mark.parametrize(("dim", "ndim", "expected"), [
    (None, 3, (0, 1, 2)), ((), 3, (0, 1, 2)), (1, 3, (1,)), (-1, 3, (2,)), (-3, 3, (0,)),
    ((2, 0), 3, (0, 2)), ([0, -1], 2, (0, 1)), (None, 0, ()), (0, 0, ()), (-1, 0, ()),
])
def test_normalize_dims(dim, ndim, expected):
    assert normalize_dims(dim, ndim) == expected


@pytest.mark.parametrize(("dim", "ndim"), [(3, 3), (-4, 3), ((0, 5), 3), (1, 0), (-2, 0)])
def test_dim_out_of_range_is_an_index_error_saying_the_range(dim, ndim):
    with pytest.raises(DimensionError, match=r"out of range .* expected a dim in \[") as info:
        normalize_dims(dim, ndim)
    assert isinstance(info.value, IndexError)


@pytest.mark.parametrize("dim", [(1, 1), (0, -3), (2, -1, 0)])
def test_duplicate_dim_is_refused(dim):
    with pytest.raises(InvalidArgumentError, match="appears twice"):
        normalize_dims(dim, 3)


@pytest.mark.parametrize("dim", [1.0, "0", True, (0, None)])
def test_dim_of_the_wrong_type(dim):
    with pytest.raises(ArgumentTypeError, match="dim must be an int"):
        normalize_dims(dim, 3)


def test_reduced_shape():
    assert reduced_shape((2, 3, 4), (1,), False) == (2, 4)
    assert reduced_shape((2, 3, 4), (1,), True) == (2, 1, 4)
    assert reduced_shape((2, 3, 4), (0, 1, 2), False) == ()
    assert reduced_shape((2, 3, 4), (0, 2), True) == (1, 3, 1)


def test_dense_rows_coalesce_to_one_dim_each():
    layout = plan_reduction_layout((4, 5, 6), [((4, 5, 6), (30, 6, 1))], (1, 2), False)
    assert layout.kept_sizes == (4,) and layout.reduced_sizes == (30,)
    assert layout.reduced_strides == ((1,),) and layout.kept_strides == ((1,), (30,))
    assert (layout.rows, layout.count, layout.out_shape) == (4, 30, (4,))
    assert layout.inner_reduced_dense


def test_leading_dims_reduced_keep_the_columns_dense():
    layout = plan_reduction_layout((8, 3, 5), [((8, 3, 5), (15, 5, 1))], (0,), True)
    assert layout.kept_sizes == (15,) and layout.kept_strides == ((1,), (1,))
    assert layout.reduced_sizes == (8,) and layout.reduced_strides == ((15,),)
    assert layout.out_shape == (1, 3, 5) and not layout.inner_reduced_dense


def test_transposed_input_walks_its_dense_dim_innermost():
    # A (6, 4) view of a row-major (4, 6) array: reducing everything walks memory in order.
    layout = plan_reduction_layout((6, 4), [((6, 4), (1, 6))], (0, 1), False)
    assert layout.reduced_sizes == (24,) and layout.reduced_strides == ((1,),)
    assert layout.kept_sizes == () and layout.rows == 1


def test_broadcast_inputs_read_with_stride_zero():
    layout = plan_reduction_layout((3, 4), [((4,), (1,)), ((3, 1), (1, 1))], (1,), False)
    assert layout.reduced_strides == ((1,), (0,))
    assert layout.kept_strides == ((1,), (0,), (1,))


def test_out_strides_are_used_for_the_kept_dims():
    layout = plan_reduction_layout((4, 5), [((4, 5), (5, 1))], (1,), False, out_strides=(3,))
    assert layout.kept_strides[0] == (3,)
    layout = plan_reduction_layout((4, 5), [((4, 5), (5, 1))], (1,), True, out_strides=(7, 1))
    assert layout.kept_strides[0] == (7,)


def test_empty_reduction_has_count_zero_and_empty_rows_none():
    layout = plan_reduction_layout((3, 0), [((3, 0), (0, 1))], (1,), False)
    assert (layout.rows, layout.count, layout.reduced_sizes) == (3, 0, (0,))
    layout = plan_reduction_layout((0, 3), [((0, 3), (3, 1))], (1,), False)
    assert (layout.rows, layout.count, layout.out_shape) == (0, 3, (0,))


def test_dense_strides():
    assert dense_strides((2, 3, 4)) == (12, 4, 1)
    assert dense_strides(()) == ()
    assert dense_strides((0, 3)) == (3, 1)


@pytest.mark.parametrize(("dtype", "result", "accumulate"), [
    ("bool", "int64", "int64"), ("uint8", "int64", "int64"), ("int8", "int64", "int64"),
    ("int32", "int64", "int64"), ("int64", "int64", "int64"), ("float16", "float16", "float32"),
    ("bfloat16", "bfloat16", "float32"), ("float32", "float32", "float32"), ("float64", "float64", "float64"),
])
def test_result_and_accumulator_as_torch_sum(dtype, result, accumulate):
    assert result_dtype(dtype, None) == result
    assert accumulate_dtype(result) == accumulate


def test_dtype_overrides_the_result_and_so_the_accumulator():
    assert result_dtype("int32", "float16") == "float16" and accumulate_dtype("float16") == "float32"
    assert result_dtype("float32", "float64") == "float64"
    assert result_dtype("float32", "int32") == "int32" and accumulate_dtype("int32") == "int64"
    with pytest.raises(DTypeError, match="not supported"):
        result_dtype("float32", "float8")


def test_complex_reductions_are_refused_clearly():
    with pytest.raises(DTypeError, match="complex64 are not supported yet"):
        result_dtype("complex64", None)


@pytest.mark.parametrize("value", [0, 1, -2.5, float("inf"), True, 10**20])
def test_identity_types_accepted(value):
    check_identity(value)


@pytest.mark.parametrize("value", ["0", None, 1j, [0], b"\0"])
def test_identity_of_the_wrong_type(value):
    with pytest.raises(ArgumentTypeError, match="identity must be a Python number"):
        check_identity(value)


def test_identity_literals():
    assert identity_literal(0, "float32") == "((jm_acc_t)(0.0))"
    assert identity_literal(float("-inf"), "float32") == "((jm_acc_t)(-jm_inf()))"
    assert identity_literal(float("nan"), "float64") == "((jm_acc_t)(jm_nan()))"
    assert identity_literal(1, "int64") == "((jm_acc_t)1LL)"
    assert identity_literal(float("-inf"), "int64") == "((jm_acc_t)(-9223372036854775807LL - 1))"
    assert identity_literal(float("inf"), "uint64") == "((jm_acc_t)18446744073709551615ULL)"
    assert identity_literal(2.0, "int64") == "((jm_acc_t)2LL)"
    assert identity_literal(True, "int64") == "((jm_acc_t)1LL)"


def test_identity_that_does_not_fit_the_accumulator():
    with pytest.raises(DTypeError, match="not an integer, but this call accumulates in int64"):
        identity_literal(0.5, "int64")
    with pytest.raises(DTypeError):
        identity_literal(float("nan"), "int64")
    with pytest.raises(ScalarOverflowError, match="does not fit the int64"):
        identity_literal(2**63, "int64")


def test_spec_is_a_frozen_hashable_record():
    spec = ReductionSpec(("float32",), "float32", "float32", (), "0", path=HOST, kept_ndim=1, reduced_ndim=1)
    assert spec == dataclasses.replace(spec) and hash(spec) == hash(dataclasses.replace(spec))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.path = "grid"  # type: ignore[misc]
    assert "reduce (float32) -> float32 accumulating float32, host" in spec.describe()
