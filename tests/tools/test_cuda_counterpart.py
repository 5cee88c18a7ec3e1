"""The CUDA counterpart of a host specialization (what the panel's PTX and SASS of a CPU
specialization compile): the same dtypes and scalar kinds on a CUDA path; NVRTC, no GPU."""
from __future__ import annotations

import numpy as np
import pytest

import jiter_magic
from jiter_magic.kernels import CUDA_PATHS
from jiter_magic.kernels.render import render
from jiter_magic.runtime.compiled_code import compiled_text
from jiter_magic.runtime.inspection import cuda_counterpart

CODE = "template <typename T>\nT cp_blend(T x, T y, T w) {\n  return x + w * (y - x);\n}"


@pytest.fixture(scope="module")
def host_specs():
    """Host specs of real calls: contiguous with a Python scalar, rows, strided, blocked."""
    fn = jiter_magic.create_jit_fn(CODE, w=0.5)
    x = np.ones((3, 4), np.float32)
    fn(x, 10.0)
    fn(x, np.ones(4, np.float32))
    fn(np.ones((3, 5), np.float32).T[::2], np.ones((3, 3), np.float32))
    fn(np.ones((64, 64), np.float32).T, np.ones((64, 64), np.float32))
    assert [s.spec.path for s in fn.specializations] == ["contiguous", "rows", "strided", "blocked"]
    return fn, [s.spec for s in fn.specializations]


def test_each_host_path_has_a_cuda_path_of_the_same_call(host_specs):
    _fn, specs = host_specs
    counterparts = [cuda_counterpart(spec) for spec in specs]
    assert [c.path for c in counterparts] == ["contiguous", "rows", "strided", "strided"]
    assert {c.path for c in counterparts} <= {p.name for p in CUDA_PATHS}
    for spec, cuda in zip(specs, counterparts):
        assert (cuda.inputs, cuda.scalar_inputs, cuda.outputs, cuda.compute, cuda.extras) == (
            spec.inputs, spec.scalar_inputs, spec.outputs, spec.compute, spec.extras)
        assert cuda.index64 is False and spec.index64 is True
    assert counterparts[0].params.vec == 4  # CUDA's 16-byte vectors of float32
    assert counterparts[1].params == specs[1].params and counterparts[2].ndim == specs[2].ndim == 2


def test_each_counterpart_compiles_to_ptx_without_a_gpu(host_specs):
    fn, specs = host_specs
    for spec in specs:
        source = render(fn.binding, cuda_counterpart(spec), "cuda")
        try:
            ptx = compiled_text("ptx", source, "cuda", "sm_80", fn.code)
        except jiter_magic.ToolchainError as exc:
            pytest.skip(f"no NVRTC here: {exc}")
        assert ".target sm_80" in ptx and ".visible .entry jm_kernel" in ptx
        assert "// line 3: return x + w * (y - x);" in ptx
