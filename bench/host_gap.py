"""Host time of one call on large tensors, ours against torch's jiterator: the time from the call to
its return (the launch queued), with the GPU kept busy so nothing waits on it, and the GPU's time
from an event recorded just before the call to one just after it when the GPU starts idle.

Usage on the GPU machine: python3 bench/host_gap.py [--wait-fast-call]
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402
from jiter_magic.native import call_path as fast_call  # noqa: E402

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"


def host_us(fn, reps: int = 30) -> float:
    """Median microseconds from calling to returning, the GPU busy with earlier calls."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def idle_start_us(fn, reps: int = 30) -> float:
    """Median microseconds between an event before the call and the kernel's end, less the kernel's
    own time measured queued: what an idle GPU waits for the launch."""
    spans = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        spans.append(start.elapsed_time(end) * 1e3)
    return statistics.median(spans)


def main() -> None:
    if "--wait-fast-call" in sys.argv:
        fast_call.wait(600)
    print(f"C call path: {fast_call.status()}, torch module: {fast_call.torch_status()}", flush=True)
    ours = jiter_magic.create_jit_fn(AXPY, alpha=2)
    theirs = torch.cuda.jiterator._create_jit_fn(AXPY, alpha=2)
    for dtype, n in ((torch.float16, 1 << 29), (torch.float16, 1 << 20), (torch.float32, 1 << 28)):
        x, y = (torch.rand(n, device="cuda") * 10).to(dtype), (torch.rand(n, device="cuda") * 10).to(dtype)
        for label, fn in (("ours", lambda: ours(x, y, alpha=2)), ("torch jit", lambda: theirs(x, y, alpha=2)),
                          ("torch.add", lambda: torch.add(y, x, alpha=2)), ("ours out=", None)):
            if fn is None:
                out = torch.empty_like(x)
                fn = lambda: ours(x, y, alpha=2, out=out)  # noqa: E731
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            print(f"{str(dtype)[6:]:8s} n=2^{n.bit_length() - 1:<3d} {label:10s} host {host_us(fn):7.1f} us  "
                  f"idle start to end {idle_start_us(fn):8.1f} us", flush=True)


if __name__ == "__main__":
    main()
