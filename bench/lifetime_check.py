"""Kernel lifetime at scale: 20,000 re-creations of one function and 2,000 distinct functions
created, called and dropped, on the CPU backend and (with a GPU) on CUDA; prints memory mappings
and RSS before, while loaded and after. Usage: python bench/lifetime_check.py [--distinct 2000]
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
    gc.collect()
    return {"maps": maps(), "rss_mib": round(rss_mib(), 1)}


def run(make_input, label: str, distinct: int) -> dict:
    code = f"template <typename T> T {label}_again(T x) {{ return x + T(1); }}"
    jiter_magic.create_jit_fn(code)(make_input())
    report = {"start": snapshot()}
    started = time.perf_counter()
    for _ in range(20000):
        fn = jiter_magic.create_jit_fn(code)
        fn(make_input())
    report["recreated_20000"] = {**snapshot(), "seconds": round(time.perf_counter() - started, 1)}

    def one(i: int):
        f = jiter_magic.create_jit_fn(f"template <typename T> T {label}_d{i}(T x) {{ return x + T({i}); }}")
        f(make_input())
        return f

    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        functions = list(pool.map(one, range(distinct)))
    report[f"loaded_{distinct}"] = {**snapshot(), "seconds": round(time.perf_counter() - started, 1)}
    del functions
    report[f"dropped_{distinct}"] = snapshot()
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--distinct", type=int, default=2000)
    args = parser.parse_args()
    import numpy as np

    results = {"cpu": run(lambda: np.ones(3), "cpu", args.distinct)}
    try:
        import torch

        if torch.cuda.is_available():
            results["cuda"] = run(lambda: torch.ones(3, device="cuda"), "cuda", args.distinct)
    except ImportError:
        pass
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
