"""Where the host time of one small CUDA call goes: each step of the hot path timed alone.

Guides work on the per-call overhead (bench_gpu.py's host_us rows); prints microseconds.
Works with both layouts of the package: the plan cache `f._dispatch.plans` (a MemoryCache;
launcher(values, geometry, grid, stream)) and the older `f._fast_plans` dict
(launcher(values, geometry, stream)); the first line says which one it found.
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


def cached_plans(f) -> tuple[str, list]:
    """The plans `f` holds after a call, and which plan cache held them."""
    dispatch = getattr(f, "_dispatch", None)
    cache = getattr(dispatch, "plans", None)
    if cache is not None:
        if hasattr(cache, "values") and not isinstance(cache, dict):  # MemoryCache
            return "f._dispatch.plans", cache.values()
        if isinstance(cache, dict):
            return "f._dispatch.plans", list(cache.values())
    fast = getattr(f, "_fast_plans", None)
    if fast is not None:
        if fast or not isinstance(getattr(f, "_plans", None), dict):
            return "f._fast_plans", list(fast.values())
        return "f._plans", list(f._plans.values())  # the general path's plans (not torch arrays)
    raise SystemExit("profile_host.py: found neither f._dispatch.plans nor f._fast_plans on the jitted function")


def main() -> None:
    f = jiter_magic.create_jit_fn("template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }", alpha=1.0)
    ref = torch.cuda.jiterator._create_jit_fn("template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }",
                                               alpha=1.0)
    a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    out = torch.empty_like(a)
    f(a, b)
    where, plans = cached_plans(f)
    plan = next((p for p in plans if getattr(p, "launcher", None) is not None), None)
    if plan is None:
        raise SystemExit(f"profile_host.py: no plan with a launcher in {where} after one call")
    launcher = plan.launcher
    numel = plan.numel if hasattr(plan, "numel") else plan.layout.numel
    extras = [1.0]
    tail = [numel, *extras] if plan.flatten is None else list(plan.flatten(numel, extras, ()))
    values = [out.data_ptr(), a.data_ptr(), b.data_ptr(), *tail]
    geometry = tuple(plan.geometry)
    stream = torch._C._cuda_getCurrentRawStream(0)
    grid = getattr(plan, "grid", None)
    if grid is not None:  # the launcher takes the grid from its plan
        def pack_and_launch():
            launcher(values, geometry, grid, stream)
    else:  # the launcher computes the grid itself
        def pack_and_launch():
            launcher(values, geometry, stream)
    print(f"# jiter_magic {getattr(jiter_magic, '__version__', '?')} from {os.path.dirname(jiter_magic.__file__)}; "
          f"plans in {where}; launcher {'(values, geometry, grid, stream)' if grid is not None else '(values, geometry, stream)'}",
          flush=True)
    rows = {
        "jiter_magic call": lambda: f(a, b),
        "jiter_magic call out=": lambda: f(a, b, out=out),
        "torch jiterator call": lambda: ref(a, b),
        "torch.add": lambda: torch.add(b, a, alpha=1.0),
        "describe 2 tensors": lambda: [(x.dtype, x.shape, x.stride(), x.data_ptr(), x.get_device()) for x in (a, b)],
        "allocate output": plan.allocators[0],
        "raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "pack + launch": pack_and_launch,
        "pack only": lambda: launcher.pack_into(launcher.buffer, 0, *values, *geometry),
        "launchKernel only": lambda: launcher.launch(launcher.function, 1, 1, 1, 128, 1, 1, 0, stream,
                                                     launcher.params_address, 0),
    }
    try:  # the restructured tree's hot-path key of a call (absent before it)
        from jiter_magic.arrays import BY_TYPE

        adapter = BY_TYPE.get(type(a))
        if adapter is not None and hasattr(adapter, "fast_key_for"):  # bound once a function since 2026-12-01
            key_of = adapter.fast_key_for(2)
            rows["adapter fast_key"] = lambda: key_of((a, b))
        elif adapter is not None and hasattr(adapter, "fast_key"):
            rows["adapter fast_key"] = lambda: adapter.fast_key((a, b))
    except ImportError:
        pass
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
