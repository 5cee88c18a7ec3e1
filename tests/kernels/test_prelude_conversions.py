"""The preludes' half/bfloat16 conversions: exact against NumPy/torch, on every compiler path."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
import torch

from jiter_magic.codegen.prelude import HOST_BASE, prelude
from jiter_magic.compilers.cxx import CxxCompiler
from jiter_magic.compilers.nvrtc import NvrtcCompiler

HARNESS = r'''
extern "C" void h2f(const unsigned short* in, float* out, long n) { for (long i = 0; i < n; ++i) { jm_half h; h.x = in[i]; out[i] = jm_to_float(h); } }
extern "C" void f2h(const float* in, unsigned short* out, long n) { for (long i = 0; i < n; ++i) out[i] = jm_to_half(in[i]).x; }
extern "C" void f2b(const float* in, unsigned short* out, long n) { for (long i = 0; i < n; ++i) out[i] = jm_to_bfloat16(in[i]).x; }
'''


def _probe_floats() -> np.ndarray:
    rng = np.random.default_rng(0)
    scales = (1e-8, 1e-6, 1e-4, 1.0, 1e3, 7e4)
    values = [rng.standard_normal(100_000).astype(np.float32) * np.float32(s) for s in scales]
    halves = np.arange(0, 0x7BFF, dtype=np.uint16).view(np.float16).astype(np.float64)
    midpoints = ((halves[:-1] + halves[1:]) / 2).astype(np.float32)  # ties: round to even
    edges = np.array([65504, 65519.99, 65520, 65536, np.inf, -np.inf, 2**-25, 2**-24 * 1.5, 2**-24 * 2.5], np.float32)
    return np.concatenate(values + [midpoints, -midpoints, edges])


@pytest.mark.parametrize("optimized", [False, True], ids=["-O2", "-O3 -march=native (vectorized)"])
def test_host_half_and_bfloat16_conversions_are_exact(tmp_path, optimized):
    source = tmp_path / "conv.cpp"
    source.write_text(HOST_BASE + HARNESS)
    library = tmp_path / "conv.so"
    flags = ["-O3", "-march=native", "-ffp-contract=off"] if optimized else []
    subprocess.run([CxxCompiler().cxx, "-O2", "-shared", "-fPIC", "-std=c++17", *flags, str(source), "-o", str(library)],
                   check=True)
    lib = ctypes.CDLL(str(library))
    for fn in (lib.h2f, lib.f2h, lib.f2b):
        fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long)
    bits = np.arange(65536, dtype=np.uint16)
    floats = np.empty(65536, np.float32)
    lib.h2f(bits.ctypes.data, floats.ctypes.data, 65536)
    expected = bits.view(np.float16).astype(np.float32)
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(floats.view(np.uint32)[finite], expected.view(np.uint32)[finite])
    assert np.isnan(floats[~finite]).all()
    probe = _probe_floats()
    halves = np.empty(len(probe), np.uint16)
    lib.f2h(probe.ctypes.data, halves.ctypes.data, len(probe))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(halves, probe.astype(np.float16).view(np.uint16))
    bfloats = np.empty(len(probe), np.uint16)
    lib.f2b(probe.ctypes.data, bfloats.ctypes.data, len(probe))
    np.testing.assert_array_equal(bfloats, torch.from_numpy(probe).bfloat16().view(torch.int16).numpy().view(np.uint16))


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_cuda_prelude_compiles_for_each_architecture(arch):
    source = prelude("cuda", True) + r'''
extern "C" __global__ void k(const float* x, jm_bfloat16* b, jm_half* h) {
  b[threadIdx.x] = jm_to_bfloat16(x[threadIdx.x]);
  h[threadIdx.x] = jm_to_half(jm_to_float(b[threadIdx.x]));
}
'''
    assert NvrtcCompiler(arch).compile(source, "k").binary.startswith(b"\x7fELF")
