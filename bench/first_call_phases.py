"""Where a new process's first call goes, step by step (kernel and C call path on disk).

cProfile spreads a first call over hundreds of small functions and charges time lost to other
threads to whatever ran; this instead wraps the call's few large steps with `perf_counter` and
reports each one's own time, the medians over ROUNDS new processes: `import jiter_magic`; the
first call's arguments described (the array adapter's module loaded), its kernel built (the
backend's modules, the compiler's identity, the source rendered and hashed, the disk entry read)
and loaded (cuModuleLoadData, or the host library), the C call path's extension modules loaded,
the dtypes and layout resolved, the launch, the rest of the call (the rest of planning, the
outputs' allocation), and waiting for the device; then how much of the total went to the cyclic
garbage collector's runs, wherever they fell (a run set off here also walks what `import torch`
left in the young generations).

Usage on the GPU machine: python3 bench/first_call_phases.py [ROUNDS] [cpu] [TREE]
(TREE: a folder holding another `jiter_magic/` to time, as bench/first_call_ab.py takes them).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from first_call_ab import AXPY, PREAMBLE, run_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = PREAMBLE + """
import gc
collecting = {"since": 0.0, "spent": 0.0}

def on_collection(phase, info):
    if phase == "start":
        collecting["since"] = time.perf_counter()
    else:
        collecting["spent"] += time.perf_counter() - collecting["since"]

gc.callbacks.append(on_collection)
start = time.perf_counter()
import jiter_magic
imported = time.perf_counter()
from jiter_magic.runtime import dispatch, loader, plan
from jiter_magic.kernels import specialize
from jiter_magic.native import call_path as fast_call
spent = {}

def timed(owner, name, label):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        begin = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - begin
    setattr(owner, name, wrapper)

timed(dispatch.Dispatcher, "describe", "describe")
timed(loader.KernelLoader, "_build_now", "build")
timed(loader.KernelLoader, "_loaded", "load")
timed(fast_call.NativeCallPath, "load", "C call path load")
timed(specialize, "resolve_call", "resolve")
timed(plan.CallPlan, "launch", "launch")
fn = jiter_magic.create_jit_fn(%r, alpha=1.0)
created = time.perf_counter()
fn(x, y)
called = time.perf_counter()
if device == "cuda":
    torch.cuda.synchronize()
done = time.perf_counter()
if sys.argv[2] == "warm":
    fast_call.wait(600)
steps = {"import": imported - start, "create": created - imported, **spent,
         "rest of the call": called - created - sum(spent.values()), "synchronize": done - called,
         "total": done - start, "of which collecting garbage": collecting["spent"]}
print(" ".join(f"{k.replace(' ', '_')}={1e3 * v:.3f}" for k, v in steps.items()))
""" % AXPY


def run(tree: str, cache: str, device: str, mode: str) -> dict[str, float]:
    pairs = (item.split("=") for item in run_script(SCRIPT, tree, cache, device, mode).split() if "=" in item)
    return {key.replace("_", " "): float(value) for key, value in pairs}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 15
    device = "cpu" if "cpu" in sys.argv[1:] else "cuda"
    tree = os.path.abspath(next((a for a in sys.argv[1:] if os.path.isdir(a)), ROOT))
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(tree, "jiter_magic")], check=True,
                   capture_output=True)
    with tempfile.TemporaryDirectory() as cache:
        run(tree, cache, device, "warm")
        runs = [run(tree, cache, device, "plain") for _ in range(rounds)]
    print(f"{tree} on {device}, medians of {rounds} new processes (ms):")
    for key in runs[0]:
        print(f"  {key:28s} {statistics.median(r[key] for r in runs):7.2f}")


if __name__ == "__main__":
    main()
