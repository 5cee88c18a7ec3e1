"""Where the host time of one small CUDA call goes: each step of the hot path timed alone.

Guides work on the per-call overhead (bench_gpu.py's host_us rows); prints microseconds.
"""
from __future__ import annotations

import ctypes
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402


def per_call_us(fn, n: int = 20000) -> float:
    for _ in range(1000):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def main() -> None:
    f = jiter_magic.create_jit_fn("template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }", alpha=1.0)
    ref = torch.cuda.jiterator._create_jit_fn("template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }",
                                               alpha=1.0)
    a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    out = torch.empty_like(a)
    f(a, b)
    plan = next(iter(f._fast_plans.values()))
    launcher = plan.launcher
    values = [out.data_ptr(), a.data_ptr(), b.data_ptr(), 1024, 1.0]
    stream = torch._C._cuda_getCurrentRawStream(0)
    rows = {
        "jiter_magic call": lambda: f(a, b),
        "jiter_magic call out=": lambda: f(a, b, out=out),
        "torch jiterator call": lambda: ref(a, b),
        "torch.add": lambda: torch.add(b, a, alpha=1.0),
        "describe 2 tensors": lambda: [(x.dtype, x.shape, x.stride(), x.data_ptr(), x.get_device()) for x in (a, b)],
        "allocate output": plan.allocators[0],
        "raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "pack + launch": lambda: launcher(values, (), stream),
        "pack only": lambda: launcher.pack_into(launcher.buffer, 0, *values),
        "launchKernel only": lambda: launcher.launch(launcher.function, 1, 1, 1, 128, 1, 1, 0, stream,
                                                     launcher.params_address, 0),
    }
    libcuda = ctypes.CDLL("libcuda.so.1")
    raw = libcuda.cuLaunchKernel
    raw.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    raw.restype = ctypes.c_int
    rows["cuLaunchKernel via ctypes"] = lambda: raw(launcher.function, 1, 1, 1, 128, 1, 1, 0, stream,
                                                    launcher.params_address, None)
    for name, fn in rows.items():
        print(f"{name:28s} {per_call_us(fn):7.2f} us", flush=True)


if __name__ == "__main__":
    main()
