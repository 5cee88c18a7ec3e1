"""Complex division in generated kernels is c10::complex's (Smith's algorithm), so results match
torch's: a zero divisor gives inf (or nan for a zero part), large and small magnitudes keep their
precision, infs and nans come out as torch's do. Run on the host against torch's CPU result; the
CUDA prelude holds the same code (tests/golden/ pins it, NVRTC compiles it in test_codegen_nvrtc)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from jiter_magic import create_jit_fn, create_multi_output_jit_fn
from jiter_magic.codegen.prelude import prelude

DIVIDE = create_jit_fn("template <typename T> T cdiv(T x, T y) { return x / y; }")
INF, NAN = math.inf, math.nan
WITH_REAL = create_multi_output_jit_fn(
    "template <typename T> void with_real(T x, T& product, T& quotient, T& sum, T& difference, T& compound) {\n"
    "  using R = decltype(x.real());\n"
    "  product = x * R(2); quotient = x / R(2); sum = R(1) + x; difference = R(1) - x;\n"
    "  compound = x; compound *= R(2); compound /= R(4); compound += R(1); compound -= R(1);\n"
    "}", 5)
# (dividend, divisor), in groups: zero divisors, infs and nans, magnitudes near the limits.
CASES = [
    (1 + 2j, 0j), (1 + 2j, complex(0.0, -0.0)), (1 + 2j, complex(-0.0, 0.0)), (-1 - 2j, 0j), (0j, 0j),
    (2 + 0j, 0j), (-1 + 0j, 0j), (complex(0.0, 3.0), 0j),
    (complex(INF, 1), 1 + 1j), (1 + 1j, complex(INF, 1)), (complex(1, INF), 2 + 1j), (1 + 1j, complex(INF, INF)),
    (complex(NAN, 1), 1 + 1j), (1 + 1j, complex(NAN, 0)), (1 + 1j, complex(0, NAN)), (complex(INF, INF), 0j),
    (1e300 + 1e300j, 1e300 + 1e300j), (1 + 1j, 1e-300 + 1e-300j), (3 - 4j, 1e308 + 1e308j),
    (1e-310 + 1e-310j, 1e-310 + 1e-310j), (1e38 + 1e38j, 1e38 + 1e38j), (1e-40 + 1j, 1e-40 + 1e-41j),
    (3e38 + 3e38j, 1e-3 + 2e-3j), (5 + 7j, 2 - 3j), (1 + 0j, 0 + 1j), (-0.0 + 0j, 1 - 1j),
]


def _random_cases(dtype: torch.dtype, count: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Dividends and divisors over the dtype's whole range of magnitudes, either part the larger."""
    generator = np.random.default_rng(29)
    limit = 36 if dtype == torch.complex64 else 300
    parts = [generator.uniform(-1, 1, count) * 10.0 ** generator.uniform(-limit, limit, count) for _ in range(4)]
    dividends = torch.tensor(parts[0] + 1j * parts[1], dtype=dtype)
    divisors = torch.tensor(parts[2] + 1j * parts[3], dtype=dtype)
    return dividends, divisors


def _assert_same(result: torch.Tensor, expected: torch.Tensor) -> None:
    assert result.dtype == expected.dtype
    # Both run Smith's algorithm in the same order without contraction: the same values, bit for bit
    # where finite, and the same infs (with their signs) and nans.
    torch.testing.assert_close(torch.view_as_real(result), torch.view_as_real(expected), rtol=0, atol=0,
                               equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_division_matches_torch_at_zero_inf_nan_and_the_limits(dtype):
    x = torch.tensor([a for a, _ in CASES], dtype=dtype)
    y = torch.tensor([b for _, b in CASES], dtype=dtype)
    _assert_same(DIVIDE(x, y), x / y)
    assert DIVIDE(x[:1], y[:1]).tolist() == [complex(INF, INF)]  # (1+2j) / 0, which was nan+nanj


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_division_matches_torch_over_the_range_of_magnitudes(dtype):
    x, y = _random_cases(dtype)
    _assert_same(DIVIDE(x, y), x / y)


def test_real_operands_act_on_each_part_as_in_c10():
    """c10::complex with a real operand touches each part alone: an inf part times a real stays an
    inf (as a complex times (2+0j) it would make a nan), and a -0 imaginary part keeps its sign."""
    fn = WITH_REAL
    x = np.array([complex(INF, 1), complex(1, INF), complex(3, -0.0)], np.complex128)
    product, quotient, total, difference, compound = fn(x)
    assert product.dtype == quotient.dtype == compound.dtype == np.complex128
    np.testing.assert_array_equal(product, [complex(INF, 2), complex(2, INF), complex(6, -0.0)])
    np.testing.assert_array_equal(quotient, [complex(INF, 0.5), complex(0.5, INF), complex(1.5, -0.0)])
    np.testing.assert_array_equal(compound, quotient)
    np.testing.assert_array_equal(total, [complex(INF, 1), complex(2, INF), complex(4, -0.0)])
    np.testing.assert_array_equal(difference, [complex(-INF, -1), complex(0, -INF), complex(-2, 0.0)])
    for value in (product[2], quotient[2], compound[2], total[2]):
        assert math.copysign(1.0, value.imag) == -1.0


def test_host_and_cuda_preludes_share_the_division():
    host, cuda = prelude("host", True), prelude("cuda", True)
    division = "Smith's algorithm, as c10::complex"
    assert division in host and division in cuda
    assert host[host.index("namespace jm {\ntemplate"):] == cuda[cuda.index("namespace jm {\ntemplate"):]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_the_cuda_prelude_compiles_these_functors_with_nvrtc(dtype):
    """No GPU needed: NVRTC takes the same division and real-operand overloads (no ambiguity)."""
    pytest.importorskip("cupy")
    from jiter_magic.compilers.nvrtc import NvrtcCompiler

    compiler = NvrtcCompiler("sm_90")
    for fn, inputs in ((DIVIDE, (dtype, dtype)), (WITH_REAL, (dtype,))):
        assert compiler.compile(fn.source(*inputs, backend="cuda"), "jm_kernel").binary[:4] == b"\x7fELF"
