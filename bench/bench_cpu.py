"""CPU benchmark: a fused 3-operation functor on 2^24 float32 against NumPy and torch eager.

Run in one process on this machine's cores (OMP_NUM_THREADS honoured); medians of repeated
runs; the kernel is compiled before timing. Writes bench_cpu.json/.md into --out.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402

FUSED = "template <typename T> T fused(T a, T x, T y, T z) { return a * x * y + z; }"


def median_seconds(fn, reps: int = 15) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    n = 1 << 24
    rng = np.random.default_rng(0)
    a, x, y, z = (rng.random(n, dtype=np.float32) for _ in range(4))
    ta, tx, ty, tz = (torch.from_numpy(v) for v in (a, x, y, z))
    fn = jiter_magic.create_jit_fn(FUSED)
    assert np.allclose(fn(a, x, y, z), a * x * y + z, rtol=1e-6)
    results = {
        "jiter_magic (NumPy arrays)": median_seconds(lambda: fn(a, x, y, z)),
        "jiter_magic (torch CPU tensors)": median_seconds(lambda: fn(ta, tx, ty, tz)),
        "NumPy": median_seconds(lambda: a * x * y + z),
        "torch eager": median_seconds(lambda: ta * tx * ty + tz),
    }
    try:
        import numexpr

        results["numexpr"] = median_seconds(lambda: numexpr.evaluate("a * x * y + z", local_dict={"a": a, "x": x, "y": y, "z": z}))
    except ImportError:
        pass
    floor = 5 * 4 * n  # four arrays read, one written
    lines = [
        f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, torch threads {torch.get_num_threads()}, "
        f"date {time.strftime('%Y-%m-%d')}",
        "",
        "| `a*x*y + z`, 2^24 float32 | ms | GB/s (20 B/elem) | vs NumPy | vs torch eager |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, seconds in results.items():
        lines.append(f"| {name} | {seconds * 1e3:.1f} | {floor / seconds / 1e9:.1f} | "
                     f"{results['NumPy'] / seconds:.2f}x | {results['torch eager'] / seconds:.2f}x |")
    table = "\n".join(lines)
    with open(os.path.join(args.out, "bench_cpu.json"), "w") as handle:
        json.dump({name: s for name, s in results.items()}, handle, indent=1)
    with open(os.path.join(args.out, "bench_cpu.md"), "w") as handle:
        handle.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
