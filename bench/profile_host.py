"""Where the host time of one small CUDA call goes: each step of the hot path timed alone.

Guides work on the per-call overhead (bench_gpu.py's host_us rows); prints microseconds.
Works with both layouts of the package: the plan cache `f._calls.plans` (a MemoryCache;
launcher(values, geometry, grid, stream)) and the older `f._fast_plans` dict
(launcher(values, geometry, stream)); the first line says which one it found.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402


def _fast_call_module():
    """The C call path in any layout (native/call_path.py, native/loader.py, backends/ before), or None."""
    for module in ("jiter_magic.native.call_path", "jiter_magic.native.loader", "jiter_magic.backends.fast_call"):
        try:
            return importlib.import_module(module)
        except ImportError:
            continue
    return None


def per_call_us(fn, n: int = 20000, warm: int = 1000, repeats: int = 3) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def cached_plans(f) -> tuple[str, list]:
    """The plans `f` holds after a call, and which plan cache held them."""
    dispatch = getattr(f, "_calls", None) or getattr(f, "_dispatch", None)  # _dispatch before 2026-12-06
    cache = getattr(dispatch, "plans", None)
    if cache is not None:
        if hasattr(cache, "values") and not isinstance(cache, dict):  # MemoryCache
            return "f._calls.plans", cache.values()
        if isinstance(cache, dict):
            return "f._calls.plans", list(cache.values())
    fast = getattr(f, "_fast_plans", None)
    if fast is not None:
        if fast or not isinstance(getattr(f, "_plans", None), dict):
            return "f._fast_plans", list(fast.values())
        return "f._plans", list(f._plans.values())  # the general path's plans (not torch arrays)
    raise SystemExit("profile_host.py: found neither f._calls.plans nor f._fast_plans on the jitted function")


def main() -> None:
    f = jiter_magic.create_jit_fn("template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }", alpha=1.0)
    ref = torch.cuda.jiterator._create_jit_fn("template <typename T> T k(T x, T y, T alpha) { return -x + alpha * y; }",
                                               alpha=1.0)
    a, b = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    out = torch.empty_like(a)
    fast_call = _fast_call_module()
    if fast_call is not None:
        # The C call path built and loaded before the first call: since 2026-12-03 a process whose
        # first call finds it missing keeps the Python path (a builder process makes it for the next).
        fast_call.wait(300)
    f(a, b)
    f(a, b)
    f(a, b)  # the second hot call gives the plan its C hot path
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
    signature = "(values, geometry, grid, stream)" if grid is not None else "(values, geometry, stream)"
    print(f"# jiter_magic {getattr(jiter_magic, '__version__', '?')} from {os.path.dirname(jiter_magic.__file__)}; "
          f"plans in {where}; launcher {signature}", flush=True)
    # CuPy's launchKernel (the Python path's launch until 2026-12-02, now the driver's through ctypes), for
    # the cost of a bare launch
    from cupy.cuda import driver as cupy_driver
    cupy_launch = cupy_driver.launchKernel
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
        "launchKernel only (CuPy)": lambda: cupy_launch(launcher.function, 1, 1, 1, 128, 1, 1, 0, stream,
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
    calls = getattr(plan, "native_calls", None)  # the plan's C hot paths since 2026-12-03 (`plan.hot` before)
    hot = calls.default if calls is not None else getattr(plan, "hot", None)

    def set_hot(value: object) -> None:
        if calls is not None:
            calls.default = value
        else:
            plan.hot = value

    if hot is not None:
        pointers = [a.data_ptr(), b.data_ptr()]
        rows["C hot plan only"] = lambda: hot(pointers)
        native = launcher.native() if callable(launcher.native) else launcher.native  # a method before 2026-12-03
        packed = launcher.pack(*values, *geometry)
        rows["C launch only"] = lambda: native.launch(packed, grid, stream)

        def python_path() -> None:  # the same call with the plan's C hot path set aside
            set_hot(None)
            try:
                f(a, b)
            finally:
                set_hot(hot)
        rows["jiter_magic call, Python path"] = python_path
        current = getattr(fast_call, "current", None)  # native/call_path.py since 2026-12-03
        torch_module = current().torch if current else getattr(fast_call, "TORCH", None)  # the old one had torch_key()
        torch_key = torch_module.module.torch_key if torch_module and torch_module.module else \
            getattr(fast_call, "torch_key", lambda: None)()
        if torch_key is not None:
            rows["C key of 2 tensors"] = lambda: torch_key((a, b))
    rows["torch.empty_like"] = lambda: torch.empty_like(a)
    rows["Tensor.new_empty_strided"] = lambda: a.new_empty_strided((1024,), (1,))
    print(f"# C call path: {fast_call.status() if fast_call is not None else 'absent'}; torch module: "
          f"{fast_call.torch_status() if fast_call is not None else 'absent'}", flush=True)
    # Interleaved rounds, the best of each row kept: the host's speed drifts during a run.
    for fn in rows.values():
        per_call_us(fn, 2000)
    best = {name: float("inf") for name in rows}
    for _ in range(5):
        for name, fn in rows.items():
            best[name] = min(best[name], per_call_us(fn, 4000, warm=200, repeats=1))
    for name, value in best.items():
        print(f"{name:30s} {value:7.2f} us", flush=True)

if __name__ == "__main__":
    main()
