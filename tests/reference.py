"""A reference evaluator for jiter_magic tests, and random test data.

The reference takes the functor's semantics written as a Python function over torch
tensors, applies the promotion rules of the inputs' library (torch's for torch tensors,
NumPy's NEP 50 rules for NumPy arrays), evaluates the function in the compute dtype
(half and bfloat16 in float32, as torch's opmath and jiter_magic do), then casts to
the result dtype, broadcasts to the result shape, and returns the inputs' library.

Integer arithmetic in torch wraps modulo 2**bits like the C++ conversion back to a
narrow type does, so `+`, `-` and `*` agree exactly; integer division does not
(C++ truncates, torch floors) and is not used by the tests.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

# The twelve dtypes every backend supports, in torch's order.
DTYPES = (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
)
NAMES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.float32: "float32", torch.float64: "float64", torch.complex64: "complex64",
    torch.complex128: "complex128",
}
BY_NAME = {name: d for d, name in NAMES.items()}
# NumPy has no bfloat16: the eleven others.
NUMPY_DTYPES = tuple(d for d in DTYPES if d is not torch.bfloat16)

TOLERANCES = {
    torch.float16: {"atol": 1e-2, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2},
}


# ----------------------------------------------------------------------------- dtypes
def torch_dtype(d) -> torch.dtype:
    """A torch dtype from a torch dtype, a NumPy dtype (or type) or a dtype name."""
    if isinstance(d, torch.dtype):
        return d
    if isinstance(d, str):
        return BY_NAME[d]
    return BY_NAME[np.dtype(d).name]


def numpy_dtype(d) -> np.dtype:
    return np.dtype(NAMES[torch_dtype(d)])


def name(d) -> str:
    return NAMES[torch_dtype(d)]


def compute_dtype(d) -> torch.dtype:
    """The dtype the functor runs in: half and bfloat16 compute in float32."""
    d = torch_dtype(d)
    return torch.float32 if d in (torch.float16, torch.bfloat16) else d


def tolerance(d) -> dict:
    """atol/rtol for comparing results of dtype `d` (torch's defaults except half and bfloat16)."""
    return dict(TOLERANCES.get(torch_dtype(d), {}))


def _is_numpy(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def result_type(*inputs) -> torch.dtype:
    """The promoted dtype of a call's inputs: torch's rules for tensors, NEP 50 for NumPy arrays.

    Python numbers are weak scalars in both; 0-dim torch tensors rank below dimensioned ones.
    """
    arrays = [x for x in inputs if not isinstance(x, numbers.Number)]
    if not arrays:
        raise ValueError("no array input")
    if all(isinstance(x, torch.Tensor) for x in arrays):
        if len(inputs) == 2:
            return torch.result_type(*inputs)
        return elementwise_dtypes(*inputs, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
    if all(_is_numpy(x) for x in arrays):
        return torch_dtype(np.result_type(*inputs))
    raise TypeError("mixed torch and NumPy inputs")


# ----------------------------------------------------------------------------- evaluation
def _as_compute_tensor(x, compute: torch.dtype) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to(compute)
    if _is_numpy(x):
        return torch.from_numpy(np.array(x)).to(compute)  # np.array copies: negative strides are fine
    if isinstance(x, numbers.Number):
        # As C++ converts a bool/int64/double/complex<double> value to T.
        if isinstance(x, complex) and not compute.is_complex:
            x = x.real
        python_type = (torch.bool if isinstance(x, bool) else torch.int64 if isinstance(x, numbers.Integral)
                       else torch.float64 if isinstance(x, numbers.Real) else torch.complex128)
        return torch.tensor(x, dtype=python_type).to(compute)
    raise TypeError(f"unsupported input {type(x).__name__}")


def _shape(x) -> tuple:
    return () if isinstance(x, numbers.Number) else tuple(x.shape)


def reference(
    fn: Callable,
    *inputs,
    extras: dict | None = None,
    num_outputs: int | None = None,
    out_dtypes: Sequence | None = None,
    cast_extras: bool = True,
):
    """Expected result(s) of a jitted call.

    `fn(*inputs, **extras)` gets the inputs as torch tensors of the compute dtype and, when
    `cast_extras`, the extras as 0-dim tensors of the compute dtype (what a `T alpha` parameter
    sees); otherwise the extras as given (for `bool flag`-style parameters). A bool compute dtype
    is evaluated in int64 (0/1) and converted back, as C++ promotes bool arithmetic to int. It returns one
    tensor, or a tuple of `num_outputs` tensors. The result has the inputs' library (torch or
    NumPy), the promoted dtype (or `out_dtypes`) and the broadcast shape.
    """
    extras = dict(extras or {})
    common = result_type(*inputs)
    compute = compute_dtype(common)
    # C++ does arithmetic on bool in int and converts the result back (non-zero -> true).
    evaluation = torch.int64 if compute is torch.bool else compute
    args = [_as_compute_tensor(x, compute).to(evaluation) for x in inputs]
    if cast_extras:
        extras = {k: _as_compute_tensor(v, compute).to(evaluation) for k, v in extras.items()}
    value = fn(*args, **extras)
    values = tuple(value) if num_outputs is not None else (value,)
    count = len(values)
    targets = [torch_dtype(d) for d in out_dtypes] if out_dtypes is not None else [common] * count
    shape = torch.broadcast_shapes(*(_shape(x) for x in inputs))
    as_numpy = any(_is_numpy(x) for x in inputs)
    results = []
    for v, target in zip(values, targets):
        v = torch.as_tensor(v)
        if v.dtype != compute:
            v = v.to(compute)
        if v.is_complex() and not target.is_complex:
            v = v.real
        v = torch.broadcast_to(v.to(target), shape).contiguous()
        results.append(v.numpy() if as_numpy else v)
    if num_outputs is None:
        return results[0]
    return tuple(results)


def assert_matches(result, expected, *, atol: float | None = None, rtol: float | None = None) -> None:
    """Same library, dtype and shape as `expected`, values equal within the dtype's tolerance."""
    if isinstance(expected, tuple):
        assert isinstance(result, tuple), f"expected a tuple of {len(expected)} outputs, got {type(result).__name__}"
        assert len(result) == len(expected)
        for r, e in zip(result, expected):
            assert_matches(r, e, atol=atol, rtol=rtol)
        return
    if isinstance(expected, np.ndarray):
        assert isinstance(result, np.ndarray), f"expected a NumPy array, got {type(result).__name__}"
        assert result.dtype == expected.dtype, f"dtype {result.dtype} != expected {expected.dtype}"
        assert result.shape == expected.shape, f"shape {result.shape} != expected {expected.shape}"
        result_t, expected_t = torch.from_numpy(np.array(result)), torch.from_numpy(np.array(expected))
    else:
        assert isinstance(result, torch.Tensor), f"expected a torch tensor, got {type(result).__name__}"
        assert result.dtype == expected.dtype, f"dtype {result.dtype} != expected {expected.dtype}"
        assert result.shape == expected.shape, f"shape {tuple(result.shape)} != expected {tuple(expected.shape)}"
        assert result.device == expected.device
        result_t, expected_t = result, expected
    tol = tolerance(expected_t.dtype)
    if atol is not None:
        tol = {"atol": atol, "rtol": rtol if rtol is not None else 0.0}
    torch.testing.assert_close(result_t, expected_t, equal_nan=True, check_stride=False, **tol)


# ----------------------------------------------------------------------------- random data
def random_tensor(shape, dtype, generator: torch.Generator | None = None, device=None) -> torch.Tensor:
    """Random non-zero values of `dtype` (a torch dtype, NumPy dtype or name).

    bool: random True/False; signed ints in [-4, -1] U [1, 4], unsigned ints in [1, 8]
    (so sums and products of a few stay in range); floats with magnitude in [0.5, 4) and
    random sign (never zero, safe to divide by); complex with non-zero real and imaginary parts.
    Drawn on the CPU from `generator` (so CPU and CUDA runs see the same values), then moved to `device`.
    """
    if device is not None:
        return random_tensor(shape, dtype, generator).to(device)
    dtype = torch_dtype(dtype)
    shape = tuple(shape)
    g = generator
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype is torch.uint8:
        return torch.randint(1, 9, shape, generator=g).to(dtype)
    if not dtype.is_floating_point and not dtype.is_complex:
        magnitude = torch.randint(1, 5, shape, generator=g)
        sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
        return (magnitude * sign).to(dtype)

    def real(part_shape):
        magnitude = torch.rand(part_shape, generator=g, dtype=torch.float64) * 3.5 + 0.5
        sign = torch.randint(0, 2, part_shape, generator=g) * 2 - 1
        return magnitude * sign

    if dtype.is_complex:
        return torch.complex(real(shape), real(shape)).to(dtype)
    return real(shape).to(dtype)


def random_array(shape, dtype, generator: torch.Generator | None = None) -> np.ndarray:
    """`random_tensor` as a NumPy array (no bfloat16)."""
    return random_tensor(shape, dtype, generator).numpy()
