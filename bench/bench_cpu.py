"""CPU benchmark: a fused 3-operation functor on 2^24 float32 against NumPy, torch eager and numexpr.

Run in one process on this machine's cores (OMP_NUM_THREADS honoured); the kernel is compiled
before timing. The contenders take turns (--rounds rounds of 15 calls each), so that a slow
stretch of the machine falls on all of them; a row is the median of all its calls, with the
slowest and fastest round's medians beside it. The `out=` rows write into one preallocated array,
so that their difference to the plain rows is what allocating and first touching a fresh 64 MiB
output costs. Writes bench_cpu.json/.md into --out.
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


def samples(fn, reps: int = 15) -> list[float]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def interleaved(contenders: dict, rounds: int) -> dict[str, tuple[float, float, float]]:
    """name -> (median of all calls, fastest round's median, slowest round's median)."""
    for fn in contenders.values():
        fn()  # warm: compiled, threads started, pages of the inputs touched
    by_round: dict[str, list[list[float]]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            by_round[name].append(samples(fn))
    found = {}
    for name, rounds_of in by_round.items():
        medians = [statistics.median(r) for r in rounds_of]
        found[name] = (statistics.median([t for r in rounds_of for t in r]), min(medians), max(medians))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = 1 << 24
    rng = np.random.default_rng(0)
    a, x, y, z = (rng.random(n, dtype=np.float32) for _ in range(4))
    ta, tx, ty, tz = (torch.from_numpy(v) for v in (a, x, y, z))
    fn = jiter_magic.create_jit_fn(FUSED)
    assert np.allclose(fn(a, x, y, z), a * x * y + z, rtol=1e-6)
    # Steady state: the C call path built (a compiler in a process of its own for up to half a
    # minute) before anything is timed. A build beside the timing takes one core from the OpenMP
    # loop, whose slowest thread sets its time: 8.0 ms against 4 on the H200 host's 16 cores.
    from jiter_magic.native import call_path as fast_call

    fast_call.wait(600)
    out_np, out_torch = np.empty_like(a), torch.empty_like(ta)
    contenders = {
        "jiter_magic (NumPy arrays)": lambda: fn(a, x, y, z),
        "jiter_magic (torch CPU tensors)": lambda: fn(ta, tx, ty, tz),
        "jiter_magic (NumPy, out=)": lambda: fn(a, x, y, z, out=out_np),
        "jiter_magic (torch, out=)": lambda: fn(ta, tx, ty, tz, out=out_torch),
        "NumPy": lambda: a * x * y + z,
        "torch eager": lambda: ta * tx * ty + tz,
    }
    try:
        import numexpr

        names = {"a": a, "x": x, "y": y, "z": z}
        contenders["numexpr"] = lambda: numexpr.evaluate("a * x * y + z", local_dict=names)
        contenders["numexpr (out=)"] = lambda: numexpr.evaluate("a * x * y + z", local_dict=names, out=out_np)
    except ImportError:
        pass
    spread = interleaved(contenders, args.rounds)
    results = {name: found[0] for name, found in spread.items()}
    floor = 5 * 4 * n  # four arrays read, one written
    lines = [
        f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, torch threads {torch.get_num_threads()}, "
        f"date {time.strftime('%Y-%m-%d')}",
        "",
        f"{args.rounds} interleaved rounds of 15 calls each",
        "",
        "| `a*x*y + z`, 2^24 float32 | ms | rounds' medians, ms | GB/s (20 B/elem) | vs NumPy | vs torch eager |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, seconds in results.items():
        low, high = spread[name][1:]
        lines.append(f"| {name} | {seconds * 1e3:.1f} | {low * 1e3:.1f}-{high * 1e3:.1f} | {floor / seconds / 1e9:.1f} | "
                     f"{results['NumPy'] / seconds:.2f}x | {results['torch eager'] / seconds:.2f}x |")
    if "numexpr" in results:
        lines += ["", f"jiter_magic (NumPy arrays) / numexpr: {results['numexpr'] / results['jiter_magic (NumPy arrays)']:.2f}x; "
                  f"with out= both: {results['numexpr (out=)'] / results['jiter_magic (NumPy, out=)']:.2f}x"]
    table = "\n".join(lines)
    with open(os.path.join(args.out, "bench_cpu.json"), "w") as handle:
        json.dump({name: {"median": found[0], "fastest_round": found[1], "slowest_round": found[2]}
                   for name, found in spread.items()}, handle, indent=1)
    with open(os.path.join(args.out, "bench_cpu.md"), "w") as handle:
        handle.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
