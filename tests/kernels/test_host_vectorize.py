"""The CPU backend's contiguous loop must be vectorized by the host compiler (issue: check it does)."""
from __future__ import annotations

import subprocess

import pytest

import jiter_magic
from jiter_magic.compilers.cxx import CxxCompiler


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_contiguous_host_loop_is_vectorized(tmp_path, dtype):
    compiler = CxxCompiler()
    version = subprocess.run([compiler.cxx, "--version"], capture_output=True, text=True).stdout
    if "clang" in version.lower():
        pytest.skip("the vectorization report flag used here is GCC's")
    fn = jiter_magic.create_jit_fn("template <typename T> T fused(T a, T x, T y, T z) { return a * x * y + z; }")
    source = tmp_path / "kernel.cpp"
    source.write_text(fn.source(dtype, dtype, dtype, dtype, backend="cpu"))
    command = compiler.command(str(source), str(tmp_path / "k.so"), (*compiler.options(), "-fopt-info-vec-optimized"))
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "loop vectorized" in result.stderr, result.stderr


def test_openmp_and_native_flags_are_used():
    options = CxxCompiler().options()
    assert "-O3" in options and "-fopenmp" in options
