"""A new process's first call (kernel and C call path on disk), package trees taking turns.

Machines differ in how fast they import: comparing a change with a figure from another day says
little. This times `import jiter_magic`, creating a function and its first call (after `import
torch` and CUDA's start) for each tree in turn, ROUNDS times, each tree with its own warmed disk
cache and its bytecode compiled ahead, and prints the medians.

Usage on the GPU machine: python3 bench/first_call_ab.py TREE TREE... [ROUNDS] [cpu]
(each tree a folder holding `jiter_magic/`; `git archive REV jiter_magic | tar -x -C OLD_TREE`).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
# A new process's start: torch imported, CUDA started and two inputs made before anything is timed.
PREAMBLE = """
import sys, time, torch
device = sys.argv[1]
x = torch.rand(1024, device=device); y = torch.rand(1024, device=device)
if device == "cuda":
    torch.cuda.synchronize()
"""
SCRIPT = PREAMBLE + f"""t0 = time.perf_counter()
import jiter_magic
t1 = time.perf_counter()
fn = jiter_magic.create_jit_fn({AXPY!r}, alpha=1.0)
fn(x, y)
if device == "cuda":
    torch.cuda.synchronize()
t2 = time.perf_counter()
if sys.argv[2] == "warm":
    from jiter_magic.native import call_path as fast_call
    fast_call.wait(600)
print(1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t2 - t0))
"""


def run_script(script: str, tree: str, cache: str, device: str, mode: str) -> str:
    """The output of `script` in a new process importing the package from `tree`, with its own cache."""
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=cache, PYTHONPATH=os.path.abspath(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode compiled ahead, as an installed package has it
    done = subprocess.run([sys.executable, "-c", script, device, mode], env=env, check=True, capture_output=True,
                          text=True)
    return done.stdout


def run(tree: str, cache: str, device: str, mode: str) -> list[float]:
    return [float(v) for v in run_script(SCRIPT, tree, cache, device, mode).split()]


def main() -> None:
    trees = [a for a in sys.argv[1:] if os.path.isdir(a)]
    rounds = next((int(a) for a in sys.argv[1:] if a.isdigit()), 15)
    device = "cpu" if "cpu" in sys.argv[1:] else "cuda"
    with tempfile.TemporaryDirectory() as root:
        caches = {tree: os.path.join(root, str(i)) for i, tree in enumerate(trees)}
        for tree in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(tree, "jiter_magic")], check=True,
                           capture_output=True)
            run(tree, caches[tree], device, "warm")
            run(tree, caches[tree], device, "plain")
        times: dict[str, list[list[float]]] = {tree: [] for tree in trees}
        for _ in range(rounds):
            for tree in trees:
                times[tree].append(run(tree, caches[tree], device, "plain"))
    for tree in trees:
        parts = [statistics.median(column) for column in zip(*times[tree])]
        print(f"{tree}: median of {rounds}: import {parts[0]:.1f} ms, create and first call {parts[1]:.1f} ms, "
              f"total {parts[2]:.1f} ms (min total {min(t[2] for t in times[tree]):.1f})", flush=True)


if __name__ == "__main__":
    main()
