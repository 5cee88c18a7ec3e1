"""User functions may use any name the generated kernel uses internally (k, n, a, i, rem, ...)."""
from __future__ import annotations

import numpy as np
import pytest

import jiter_magic
from jiter_magic.compilers.nvrtc import NvrtcCompiler

NAMES = ["k", "a", "n", "i", "u", "j", "r", "it", "rem", "idx", "row", "args", "v0", "r0", "o1", "compute_t",
         "index_t", "Args", "tile0", "out_offset", "start"]


@pytest.mark.slow
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


# Macros named like what the generated kernel uses (its locals, the Args members, the prelude's
# storage types and helpers): the kernel after the user's code must never be reached by them.
MACROS = ["n", "in0", "in1", "out0", "extra0", "scalar1", "sizes", "strides0", "a", "i", "k", "v", "vec", "x", "y", "z",
          "half", "bfloat16", "to_float", "to_half", "real", "complex", "compute_t", "index_t", "Args", "tile0", "rem"]


def _macro_code(macro: str) -> str:
    return (f"#define {macro} 3\n"
            "template <typename T> T macro_kernel(T x_, T y_, T alpha) { return x_ * alpha + y_; }")


@pytest.mark.slow
@pytest.mark.parametrize("macro", MACROS)
def test_user_macros_named_like_generated_names_compile_and_run_on_cpu(macro):
    fn = jiter_magic.create_jit_fn(_macro_code(macro), alpha=2.0)
    x, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    np.testing.assert_array_equal(fn(x, y), 2 * x + y)  # contiguous rows broadcast: the host rows loop
    np.testing.assert_array_equal(fn(x.ravel(), x.ravel()), 3 * x.ravel())  # the flat host loop
    out = fn(x.astype(np.float16), 1.5)  # a scalar input and half conversions
    np.testing.assert_array_equal(out, (2 * x + 1.5).astype(np.float16))
    assert out.dtype == np.float16


def _cuda_sources(fn) -> dict[str, str]:
    import torch

    square = torch.rand(64, 64)
    return {
        "contiguous": fn.source("float16", "bfloat16", backend="cuda"),
        "strided-int32": fn.source("float32", "float16", backend="cuda", path="strided", ndim=3),
        "tiled": fn.source(square.T, square, backend="cuda"),
        "rows": fn.source(torch.rand(300, 1), torch.rand(1, 300), backend="cuda"),
        "complex": fn.source("complex64", "float32", backend="cuda", path="strided", ndim=2),
    }


@pytest.mark.slow
@pytest.mark.parametrize("macro", MACROS)
def test_user_macros_named_like_generated_names_compile_with_nvrtc(macro):
    fn = jiter_magic.create_jit_fn(_macro_code(macro), alpha=2.0)
    for path, source in _cuda_sources(fn).items():
        result = NvrtcCompiler("sm_90").compile(source, f"macro_{path}")
        assert result.binary.startswith(b"\x7fELF"), path


def test_a_macro_named_like_an_unprefixed_name_would_break_the_kernel():
    """The check above can fail: the same macro breaks code that uses the bare name after it."""
    source = _macro_code("sizes") + "\nint use_it() { int sizes[2] = {0, 0}; return sizes[0]; }\n"
    fn = jiter_magic.create_jit_fn(_macro_code("sizes"), alpha=2.0)
    broken = fn.source("float32", "float32", backend="cuda").replace(_macro_code("sizes"), source)
    with pytest.raises(jiter_magic.CompileError):
        NvrtcCompiler("sm_90").compile(broken, "macro_broken")
