"""Integer overflow on the CPU wraps as torch's does: the host compiler runs with -fwrapv, so signed
overflow is two's complement arithmetic rather than undefined behaviour -O3 folds away.

C++ computes an int8, int16, uint8 or uint16 expression in `int` (integer promotion) and only the
returned value is narrowed, so there an arithmetic result wraps as torch's does but a comparison of
an overflowed sum sees the unwrapped one: the one difference, kept and pinned here."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from jiter_magic import create_jit_fn

ADD_ONE = create_jit_fn("template <typename T> T add_one(T x) { return x + T(1); }")
SUB_ONE = create_jit_fn("template <typename T> T sub_one(T x) { return x - T(1); }")
MULTIPLY = create_jit_fn("template <typename T> T multiply(T x, T y) { return x * y; }")
# -O3 without -fwrapv folds this to `true` for int and wider types, whatever x is.
GROWS = create_jit_fn("template <typename T> T grows(T x) { return (x + T(1)) > x; }")

TORCH_INTEGERS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
# torch has no CPU arithmetic for these (add_stub is "not implemented"); NumPy's wraps the same way.
WIDE_UNSIGNED = [np.uint16, np.uint32, np.uint64]
PROMOTED = {torch.int8, torch.int16, torch.uint8, np.uint16}  # narrower than int: computed in int


def _limits(dtype) -> tuple[int, int]:
    info = torch.iinfo(dtype) if isinstance(dtype, torch.dtype) else np.iinfo(dtype)
    return int(info.min), int(info.max)


@pytest.mark.parametrize("dtype", TORCH_INTEGERS, ids=str)
def test_overflow_at_the_limits_wraps_as_torch_does(dtype):
    low, high = _limits(dtype)
    x = torch.tensor([high, low, 0, 1], dtype=dtype)
    for fn, expected in ((ADD_ONE, x + 1), (SUB_ONE, x - 1), (MULTIPLY, None)):
        result = fn(x, x) if fn is MULTIPLY else fn(x)
        expected = x * x if expected is None else expected
        assert result.dtype == dtype
        torch.testing.assert_close(result, expected, rtol=0, atol=0)
    assert ADD_ONE(torch.tensor([high], dtype=dtype)).item() == low  # max + 1 is min
    assert SUB_ONE(torch.tensor([low], dtype=dtype)).item() == high  # min - 1 is max
    doubled = MULTIPLY(x, torch.full_like(x, 2))
    torch.testing.assert_close(doubled, x * 2, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED, ids=lambda d: np.dtype(d).name)
def test_wide_unsigned_overflow_wraps_as_numpy_does(dtype):
    low, high = _limits(dtype)
    x = np.array([high, low, 1, high // 2 + 1], dtype=dtype)
    with np.errstate(over="ignore"):
        expected = [(x + dtype(1)), (x - dtype(1)), (x * x)]
    for fn, want in zip((ADD_ONE, SUB_ONE, MULTIPLY), expected, strict=True):
        result = fn(x, x) if fn is MULTIPLY else fn(x)
        assert result.dtype == dtype
        np.testing.assert_array_equal(result, want)
    assert ADD_ONE(np.array([high], dtype))[0] == 0


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_an_overflowed_sum_compared_with_its_operand_is_false_at_max_as_in_torch(dtype):
    low, high = _limits(dtype)
    x = torch.tensor([high, low, 0, high - 1], dtype=dtype)
    result = GROWS(x)
    assert result.dtype == dtype
    assert result.tolist() == ((x + 1) > x).to(dtype).tolist() == [0, 1, 1, 1]


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_an_unsigned_sum_compared_with_its_operand_wraps_as_in_numpy(dtype):
    x = np.array([np.iinfo(dtype).max, 0], dtype=dtype)
    assert GROWS(x).tolist() == ((x + dtype(1)) > x).astype(dtype).tolist() == [0, 1]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.uint8, np.uint16], ids=str)
def test_types_narrower_than_int_compare_the_promoted_sum_unlike_torch(dtype):
    """The documented difference: `(x + T(1)) > x` is computed in int, where max + 1 does not wrap."""
    _low, high = _limits(dtype)
    if isinstance(dtype, torch.dtype):
        x = torch.tensor([high, 0], dtype=dtype)
        assert ((x + 1) > x).tolist() == [False, True]  # torch compares the wrapped sum
        result = GROWS(x).tolist()
    else:
        result = GROWS(np.array([high, 0], dtype)).tolist()
    assert result == [1, 1]


def test_the_wrapping_option_is_part_of_the_cache_key():
    """Binaries built before -fwrapv (same source, other options) are never reused."""
    from jiter_magic.cache.entry import cache_key
    from jiter_magic.compilers.cxx import CxxCompiler

    compiler = CxxCompiler()
    options = compiler.options()
    assert "-fwrapv" in options
    without = tuple(o for o in options if o != "-fwrapv")
    assert cache_key("source", options, compiler.identity) != cache_key("source", without, compiler.identity)
