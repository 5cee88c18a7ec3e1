"""Kernel lifetime at scale: 20,000 re-creations of one function and 2,000 distinct functions
created, called and dropped, on the CPU backend and (with a GPU) on CUDA; prints memory mappings
and RSS before, while loaded and after; later rounds (new functions each) show whether what stays
is a plateau. Usage: python bench/lifetime_check.py [--distinct 2000] [--rounds 1] [--backends cpu,cuda]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402


def maps() -> int:
    with open("/proc/self/maps") as handle:
        return sum(1 for _ in handle)


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def snapshot() -> dict:
    from jiter_magic.runtime.loader import _SHARED

    gc.collect()
    return {"maps": maps(), "rss_mib": round(rss_mib(), 1), "kernels_alive": len(_SHARED)}


def run(make_input, label: str, distinct: int, rounds: int, reuse: bool = False) -> dict:
    code = f"template <typename T> T {label}_again(T x) {{ return x + T(1); }}"
    jiter_magic.create_jit_fn(code)(make_input())
    report = {"start": snapshot()}
    started = time.perf_counter()
    for _ in range(20000):
        fn = jiter_magic.create_jit_fn(code)
        fn(make_input())
    report["recreated_20000"] = {**snapshot(), "seconds": round(time.perf_counter() - started, 1)}
    for round_ in range(1, rounds + 1):  # later rounds: is what stays after the first one a plateau?
        # New names compile every round; reused names load round 1's kernels from the disk cache,
        # which tells the loader's share (load, unload) from the compiler's.
        name = f"{label}_r{1 if reuse else round_}"
        report[f"round_{round_}"] = distinct_round(make_input, name, distinct)
    return report


def distinct_round(make_input, label: str, distinct: int) -> dict:
    """`distinct` new functions made (16 threads), called and dropped; then the pool emptied."""
    from jiter_magic.runtime.backends import heap
    from jiter_magic.runtime.loader import _POOL

    def one(i: int):
        f = jiter_magic.create_jit_fn(f"template <typename T> T {label}_d{i}(T x) {{ return x + T({i}); }}")
        f(make_input())
        return f

    report = {}
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        functions = list(pool.map(one, range(distinct)))
    report[f"loaded_{distinct}"] = {**snapshot(), "seconds": round(time.perf_counter() - started, 1)}
    del functions
    report[f"dropped_{distinct}"] = snapshot()  # the pool of recent kernels (loader.POOL_LIMIT) stays
    _POOL.clear()
    heap.trim()
    report["pool_emptied"] = snapshot()  # what stays beyond the pool
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--distinct", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of distinct functions (new names each)")
    parser.add_argument("--backends", default="cpu,cuda", help="which of cpu,cuda to run (cuda: with a GPU)")
    parser.add_argument("--reuse-names", action="store_true", help="later rounds load round 1's kernels from disk")
    args = parser.parse_args()
    import numpy as np

    wanted = args.backends.split(",")
    results = {}
    if "cpu" in wanted:
        results["cpu"] = run(lambda: np.ones(3), "cpu", args.distinct, args.rounds, args.reuse_names)
    try:
        import torch

        if "cuda" in wanted and torch.cuda.is_available():
            results["cuda"] = run(lambda: torch.ones(3, device="cuda"), "cuda", args.distinct, args.rounds,
                                  args.reuse_names)
    except ImportError:
        pass
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
