"""Inspecting what a call would build, without a GPU: fn.source() from dtypes or from example arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.compilers.nvrtc import NvrtcCompiler

CODE = "template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }"


def test_source_from_example_arrays_matches_source_from_dtypes():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    assert fn.source(torch.ones(4), torch.ones(4)) == fn.source("float32", "float32")
    assert fn.source(np.ones(3), np.ones(3), backend="cpu") == fn.source("float64", "float64", backend="cpu")


def test_source_from_arrays_follows_layout_promotion_and_kwargs():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    transposed = fn.source(torch.rand(64, 64).half(), torch.rand(64, 64).T)
    assert "__shared__ float jm_tile1[32][33];" in transposed  # the tiled path, second input staged
    assert "jm::to_float(" in transposed and "typedef float jm_compute_t;" in transposed
    strided = fn.source(np.ones((3, 4))[:, ::2], 2, backend="cpu", alpha=2)
    assert "int64_t extra0;" in strided  # an int kwarg travels as int64_t
    assert "double scalar1;" in strided  # the Python number, by value in the compute type
    assert "jm_a.sizes[0]" in strided
    assert NvrtcCompiler("sm_90").compile(transposed, "k").binary.startswith(b"\x7fELF")


def test_source_rejects_wrong_arity_and_backend():
    fn = jiter_magic.create_jit_fn(CODE, alpha=1.0)
    with pytest.raises(TypeError):
        fn.source(torch.ones(3))
    with pytest.raises(ValueError):
        fn.source("float32", "float32", backend="metal")
    with pytest.raises(KeyError):
        fn.source(torch.ones(3), torch.ones(3), beta=2.0)
