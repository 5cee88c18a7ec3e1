"""Inspecting what a call would build, without a GPU: fn.source() from dtypes or from example arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.compilers.nvrtc import NvrtcCompiler
from jiter_magic.runtime.inspection import example_spec

CODE = "template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }"


def test_source_from_example_arrays_matches_source_from_dtypes():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    assert fn.source(torch.ones(4), torch.ones(4)) == fn.source("float32", "float32")
    assert fn.source(np.ones(3), np.ones(3), backend="cpu") == fn.source("float64", "float64", backend="cpu")


def test_source_from_arrays_follows_layout_promotion_and_kwargs():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    transposed = fn.source(torch.rand(64, 64).half(), torch.rand(64, 64).T)
    assert "__shared__ float jm_tile1[4160];" in transposed  # the tiled path, second input staged (64x64 vector tiles)
    assert "jm_to_float(" in transposed and "typedef float jm_compute_t;" in transposed
    strided = fn.source(np.ones((3, 4))[:, ::2], 2, backend="cpu", alpha=2)
    assert "int64_t jm_extra0;" in strided  # an int kwarg travels as int64_t
    assert "double jm_scalar1;" in strided  # the Python number, by value in the compute type
    assert "jm_a.jm_sizes[0]" in strided
    assert NvrtcCompiler("sm_90").compile(transposed, "k").binary.startswith(b"\x7fELF")


def test_source_rejects_wrong_arity_and_backend():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    with pytest.raises(TypeError):
        fn.source(torch.ones(3))
    with pytest.raises(ValueError):
        fn.source("float32", "float32", backend="metal")
    with pytest.raises(KeyError):
        fn.source(torch.ones(3), torch.ones(3), beta=2.0)


@pytest.mark.parametrize("make,broadcast", [
    (lambda: (torch.rand(1000, 1), torch.rand(1, 1000)), [0]),  # outer product
    (lambda: (torch.rand(64, 512), torch.rand(512)), []),  # bias along rows
    (lambda: (torch.rand(4, 6, 300).half(), torch.rand(6, 1)), [1]),  # 3-d, mixed dtypes
    (lambda: (torch.rand(7, 1001), torch.rand(1001).double()), []),  # odd rows: vector or scalar per row
    (lambda: (torch.rand(5, 3, 600)[:, 1], 2.0), []),  # a sliced view and a Python number
])
def test_rows_path_for_dense_or_broadcast_rows(make, broadcast):
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    args = make()
    spec = example_spec(fn._calls, args, "cuda", {})
    assert spec.path == "rows" and list(spec.params.row_broadcast) == broadcast
    source = fn.source(*args)
    assert "jm_inner" in source and "jm_vec<" in source
    assert NvrtcCompiler("sm_80").compile(source, "k").binary.startswith(b"\x7fELF")


def test_short_rows_stay_on_the_strided_path():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    assert example_spec(fn._calls, (torch.rand(1000, 8), torch.rand(1, 8)), "cuda", {}).path == "strided"
