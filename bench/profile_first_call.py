"""Where a new process's first call goes, with its kernel (and the C call path) on disk.

Runs one process that compiles the kernel and builds the C call path into a fresh cache, then
new processes that, after `import torch` and CUDA's start, time `import jiter_magic`, creating
the function and its first call: once plainly (three times), once under cProfile (the functions
that took the time; then the first call alone), once with `-X importtime` (the modules imported, slowest first).

Usage on the GPU machine: python3 bench/profile_first_call.py [cpu]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"

SCRIPT = """
import sys, time, torch
device = sys.argv[1]
x = torch.rand(1024, device=device); y = torch.rand(1024, device=device)
if device == "cuda":
    torch.cuda.synchronize()
profile = sys.argv[2] in ("profile", "profile-call")
if profile:
    import cProfile, pstats
    profiler = cProfile.Profile()
    if sys.argv[2] == "profile":
        profiler.enable()
t0 = time.perf_counter()
import jiter_magic
t1 = time.perf_counter()
fn = jiter_magic.create_jit_fn(%r, alpha=1.0)
t2 = time.perf_counter()
if sys.argv[2] == "profile-call":
    profiler.enable()
fn(x, y)
if device == "cuda":
    torch.cuda.synchronize()
t3 = time.perf_counter()
if profile:
    profiler.disable()
if sys.argv[2] == "warm":
    from jiter_magic.native import call_path as fast_call
    fast_call.wait(600)
print(f"import {1e3 * (t1 - t0):.1f} ms, create {1e3 * (t2 - t1):.1f} ms, first call {1e3 * (t3 - t2):.1f} ms, "
      f"total {1e3 * (t3 - t0):.1f} ms; cupy imported: {'cupy' in sys.modules}")
if profile:
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
""" % AXPY


def run(root: str, device: str, mode: str, *flags: str) -> str:
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=root, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, *flags, "-c", SCRIPT, device, mode], env=env, check=True,
                          capture_output=True, text=True)
    return done.stdout + done.stderr


def main() -> None:
    device = "cpu" if "cpu" in sys.argv[1:] else "cuda"
    with tempfile.TemporaryDirectory() as root:
        print("warm (compiles, builds the C call path):", run(root, device, "warm").strip().splitlines()[-1])
        for _ in range(3):
            print("new process:", run(root, device, "plain").strip().splitlines()[-1])
        print(run(root, device, "profile"))
        print("the first call alone, profiled:")
        print(run(root, device, "profile-call"))
        lines = run(root, device, "plain", "-X", "importtime").splitlines()
        ours = [line for line in lines if line.startswith("import time:") and "torch" not in line
                and line.split("|")[0].split(":")[1].strip().isdigit()]
        ours.sort(key=lambda line: -int(line.split("|")[0].split(":")[1]))
        print("slowest imports by own time (us):")
        print("\n".join(ours[:40]))


if __name__ == "__main__":
    main()
