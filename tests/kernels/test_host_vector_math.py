"""The CPU backend's math functions run as SIMD loops through glibc's vector math library, within
its documented 4 ulp of the exact result and with the scalar functions' special values."""
from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess

import mpmath
import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.compilers.cxx import CxxCompiler, toolchain_facts

# name -> (arity, the domain the inputs are drawn from, an exact reference for mpmath)
UNARY = {
    "sin": ((-1e4, 1e4), mpmath.sin), "cos": ((-1e4, 1e4), mpmath.cos), "tan": ((-10, 10), mpmath.tan),
    "exp": ((-80, 80), mpmath.exp), "log": ((1e-30, 1e30), mpmath.log), "log2": ((1e-30, 1e30), lambda v: mpmath.log(v, 2)),
    "log10": ((1e-30, 1e30), mpmath.log10), "log1p": ((-0.99, 100), mpmath.log1p),
    "expm1": ((-20, 20), mpmath.expm1), "exp2": ((-120, 120), lambda v: mpmath.power(2, v)),
    "exp10": ((-35, 35), lambda v: mpmath.power(10, v)), "sinh": ((-80, 80), mpmath.sinh),
    "cosh": ((-80, 80), mpmath.cosh), "tanh": ((-10, 10), mpmath.tanh), "asin": ((-1, 1), mpmath.asin),
    "acos": ((-1, 1), mpmath.acos), "atan": ((-100, 100), mpmath.atan), "asinh": ((-1e5, 1e5), mpmath.asinh),
    "acosh": ((1, 1e5), mpmath.acosh), "atanh": ((-0.999, 0.999), mpmath.atanh), "cbrt": ((-1e6, 1e6), lambda v: mpmath.sign(v) * mpmath.cbrt(abs(v))),
    "erf": ((-5, 5), mpmath.erf), "erfc": ((-5, 9), mpmath.erfc),
}
BINARY = {"pow": ((0.01, 10), (-20, 20), mpmath.power), "atan2": ((-10, 10), (-10, 10), mpmath.atan2),
          "hypot": ((-1e3, 1e3), (-1e3, 1e3), mpmath.hypot)}
LOG_SPACED = {"log", "log2", "log10"}
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-310, -1e-310, 1.0, -1.0, 1e30, -1e30, 0.5]
ULP_BOUND = 4.5  # glibc's 4 ulp from the correctly rounded result, measured from the exact one


def _vector_math() -> bool:
    return bool(toolchain_facts(CxxCompiler().cxx)["vector_math"])


needs_vector_math = pytest.mark.skipif(not _vector_math(), reason="the host compiler does not link libmvec here")


def _functor(names: list[str], arity: int) -> str:
    params = "T x" if arity == 1 else "T x, T y"
    outs = ", ".join(f"T& {name}_out" for name in names)
    args = "x" if arity == 1 else "x, y"
    body = " ".join(f"{name}_out = {name}({args});" for name in names)
    return f"template <typename T> void maths({params}, {outs}) {{ {body} }}"


def _inputs(domain: tuple[float, float], dtype, n: int, rng, log_spaced: bool) -> np.ndarray:
    low, high = domain
    if log_spaced:
        values = np.exp(rng.uniform(math.log(low), math.log(high), n))
    else:
        values = rng.uniform(low, high, n)
    values = values.astype(dtype)
    values[:: n // len(SPECIALS)][: len(SPECIALS)] = np.array(SPECIALS).astype(dtype)  # among ordinary lanes
    return values


def _exact(reference, *columns: np.ndarray) -> np.ndarray:
    with mpmath.workdps(40):
        out = []
        for values in zip(*columns):
            if not all(math.isfinite(v) for v in values):
                out.append(math.nan)
                continue
            try:
                found = reference(*(mpmath.mpf(float(v)) for v in values))
            except (ValueError, ZeroDivisionError):
                out.append(math.nan)
                continue
            out.append(float(found.real) if isinstance(found, mpmath.mpc) and found.imag == 0 else
                       (math.nan if isinstance(found, mpmath.mpc) else float(found)))
        return np.array(out, dtype=np.float64)


def _check(name: str, got: np.ndarray, columns: list[np.ndarray], reference, dtype) -> None:
    exact = _exact(reference, *columns)
    finite = np.isfinite(exact) & (np.abs(exact) < np.finfo(dtype).max) & (np.abs(exact) > np.finfo(dtype).tiny)
    spacing = np.abs(np.spacing(exact[finite].astype(dtype))).astype(np.float64)
    error = np.abs(got[finite].astype(np.float64) - exact[finite]) / spacing
    assert finite.sum() > len(got) // 2, name
    assert error.max() <= ULP_BOUND, f"{name}({dtype.__name__}): {error.max():.2f} ulp at {columns[0][finite][error.argmax()]}"
    # Special values (inf, nan, zeros, subnormal inputs, overflow) as the scalar libm function gives them.
    scalar = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
                          "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power"}.get(name, name),
                     None)
    if scalar is None:  # erf, erfc, exp10: the math module's scalar functions
        scalar = np.vectorize({"erf": math.erf, "erfc": math.erfc, "exp10": lambda v: float(np.power(10.0, v))}[name], otypes=[float])
    with np.errstate(all="ignore"):
        expected = np.asarray(scalar(*(c.astype(np.float64) for c in columns))).astype(dtype)
    special = ~finite
    both_nan = np.isnan(got[special]) & np.isnan(expected[special])
    close = np.isclose(got[special], expected[special], rtol=1e-5, atol=0) & (np.signbit(got[special]) ==
                                                                                np.signbit(expected[special]))
    assert (both_nan | close).all(), (name, columns[0][special], got[special], expected[special])


@needs_vector_math
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_math_is_within_four_ulp_with_scalar_special_values(dtype):
    rng = np.random.default_rng(7)
    names = list(UNARY)
    fn = jiter_magic.create_multi_output_jit_fn(_functor(names, 1), num_outputs=len(names))
    n = 4096 if dtype is np.float32 else 1024
    for name in names:
        domain, reference = UNARY[name]
        x = _inputs(domain, dtype, n, rng, name in LOG_SPACED)
        outputs = fn(x)
        got = outputs[names.index(name)]
        assert got.dtype == dtype
        _check(name, got, [x], reference, dtype)


@needs_vector_math
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_math_is_within_four_ulp_with_scalar_special_values(dtype):
    rng = np.random.default_rng(8)
    names = list(BINARY)
    fn = jiter_magic.create_multi_output_jit_fn(_functor(names, 2), num_outputs=len(names))
    n = 4096 if dtype is np.float32 else 1024
    for name in names:
        xdomain, ydomain, reference = BINARY[name]
        x = _inputs(xdomain, dtype, n, rng, False)
        y = _inputs(ydomain, dtype, n, np.random.default_rng(9), False)
        got = fn(x, y)[names.index(name)]
        assert got.dtype == dtype
        _check(name, got, [x, y], reference, dtype)


@needs_vector_math
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_math_heavy_loop_calls_the_vector_functions(tmp_path, dtype):
    """The library of a math-heavy functor imports libmvec's vector sin/exp/erf/tanh (the loop
    was vectorized with them), for half types too (their conversions vectorize)."""
    if shutil.which("nm") is None:
        pytest.skip("binutils' nm is needed to list the library's symbols")
    compiler = CxxCompiler()
    if dtype == "float16" and not _native_defines(compiler, "__AVX512F__"):
        # Measured with GCC 12: -march=skylake-avx512 vectorizes this loop with libmvec, haswell and
        # znver3 (AVX2) keep it scalar, its IEEE half conversions judged too costly.
        pytest.skip("GCC vectorizes float16's conversions in this loop only with AVX-512, which this CPU lacks")
    fn = jiter_magic.create_jit_fn(
        "template <typename T> T heavy(T x, T y) { return sin(x)*exp(-y*y) + erf(x*y)/(T(1)+tanh(x)); }")
    source, library = tmp_path / "kernel.cpp", tmp_path / "kernel.so"
    source.write_text(fn.source(dtype, dtype, backend="cpu"))
    subprocess.run(compiler.command(str(source), str(library), compiler.options()), check=True, capture_output=True)
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True,
                             check=True).stdout
    suffix = "f" if dtype != "float64" else ""
    for name in ("sin", "exp", "erf", "tanh"):
        assert f"v_{name}{suffix}@" in symbols and "_ZGV" in symbols, (name, symbols)


def _native_defines(compiler: CxxCompiler, macro: str) -> bool:
    """Whether the host compiler defines `macro` for this machine's CPU (-march=native)."""
    done = subprocess.run([compiler.cxx, "-march=native", "-dM", "-E", "-x", "c++", os.devnull], capture_output=True,
                          text=True, check=False)
    return f"#define {macro} " in done.stdout


def test_the_probe_finds_libmvec_where_glibc_has_it():
    """On x86-64 Linux with glibc 2.22 or later and GCC, the toolchain probe must find the vector
    math library (a broken probe would silently give scalar loops)."""
    libc, version = platform.libc_ver()
    compiler = CxxCompiler()
    is_gcc = "clang" not in subprocess.run([compiler.cxx, "--version"], capture_output=True, text=True).stdout.lower()
    if platform.machine() != "x86_64" or libc != "glibc" or not is_gcc:
        pytest.skip("libmvec is used on x86-64 glibc with GCC only")
    if tuple(int(p) for p in version.split(".")[:2]) < (2, 22):
        pytest.skip("glibc before 2.22 has no libmvec")
    assert _vector_math()
    options = compiler.options()
    assert "-lmvec" in options and "-DJM_VECTOR_MATH" in options
    command = compiler.command("k.cpp", "k.so", options)
    assert command.index("-lmvec") > command.index("k.cpp")  # after the source: kept by --as-needed


@needs_vector_math
def test_math_heavy_row_is_as_close_to_exact_as_torch_on_every_layout():
    """Each function within 4 ulp (torch's SLEEF ones within 1) leaves a whole expression within
    twice torch eager's largest error from the exact result; and a strided view and a transposed
    one give the contiguous loop's values."""
    fn = jiter_magic.create_jit_fn(
        "template <typename T> T heavy(T x, T y) { return sin(x)*exp(-y*y) + erf(x*y)/(T(1)+tanh(x)); }")
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(512, 512, generator=generator) * 5 - 2  # 1 + tanh(x) far from 0
    y = torch.randn(512, 512, generator=generator)

    def heavy(a, b):
        return torch.sin(a) * torch.exp(-b * b) + torch.erf(a * b) / (1 + torch.tanh(a))

    exact = heavy(x.double(), y.double())
    got = fn(x, y)
    assert got.dtype == torch.float32
    ours, torchs = ((v.double() - exact).abs().max().item() for v in (got, heavy(x, y)))
    assert ours <= 2 * torchs, (ours, torchs)
    torch.testing.assert_close(got, heavy(x, y), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fn(x[:, ::2], y[:, ::2]), got[:, ::2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fn(x.t(), y.t()), got.t(), rtol=1e-5, atol=1e-5)
