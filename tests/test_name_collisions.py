"""User functions may use any name the generated kernel uses internally (k, n, a, i, rem, ...)."""
from __future__ import annotations

import numpy as np
import pytest

import jiter_magic
from jiter_magic.compilers.nvrtc import NvrtcCompiler

NAMES = ["k", "a", "n", "i", "u", "j", "r", "it", "rem", "idx", "row", "args", "v0", "r0", "o1", "compute_t",
         "index_t", "Args", "tile0", "out_offset", "start"]


@pytest.mark.parametrize("name", NAMES)
def test_entry_and_helper_names_do_not_collide_on_cpu(name):
    code = (f"template <typename T> T {name}_helper(T v) {{ return v * 2; }}\n"
            f"template <typename T> T {name}(T x, T y, T alpha) {{ return {name}_helper(x) + alpha * y; }}")
    fn = jiter_magic.create_jit_fn(code, alpha=0.5)
    x, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    np.testing.assert_array_equal(fn(x, y), 2 * x + 0.5 * y)
    np.testing.assert_array_equal(fn(x.T, 1.0), 2 * x.T + 0.5)  # strided path


@pytest.mark.parametrize("name", ["k", "a", "n", "i", "rem", "tile0", "s0", "batch"])
@pytest.mark.parametrize("path,ndim", [("contiguous", 1), ("strided", 3)])
def test_entry_names_do_not_collide_on_cuda(name, path, ndim):
    fn = jiter_magic.create_jit_fn(f"template <typename T> T {name}(T x, T y) {{ return x * y; }}")
    source = fn.source("float16", "float32", backend="cuda", path=path, ndim=ndim)
    result = NvrtcCompiler("sm_90").compile(source, name)
    assert result.binary.startswith(b"\x7fELF")
