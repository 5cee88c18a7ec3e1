"""CPU benchmark: jiter_magic's host backend against NumPy, torch eager, Inductor, numexpr and numba.

The rows are in cpu_rows.py: `a*x*y + z`, a math-heavy expression in float32 and float16, a
transposed input, an outer product, int32 and bfloat16. Every contender's result is checked
against a float64 (int64) reference before it is timed; Inductor is `torch.compile(...,
dynamic=False)`, compiled before timing. In each row the contenders take turns (--rounds rounds
of --reps calls each), so that a slow stretch of the machine falls on all of them; a row's figure
is the median of all its calls, with the fastest and slowest round's medians beside it.

`--threads 2,all` runs the rows once per thread count ("all": the cores this process may run
on, as `taskset` leaves them), each in a process of its own started with OMP_NUM_THREADS (read by
libgomp, which jiter_magic's OpenMP loops and Inductor's kernels use, only at start),
NUMBA_NUM_THREADS and NUMEXPR_MAX_THREADS set; there torch, numexpr and numba are also told the
count. Writes bench_cpu.json/.md into --out, one table per thread count.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def samples(fn, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def interleaved(contenders: dict, rounds: int, reps: int, round_s: float) -> dict[str, dict[str, float]]:
    """name -> median of all calls, fastest and slowest round's median (seconds), calls a round.

    A contender makes `reps` calls a round, or as many as fill about `round_s` seconds where its
    calls are slow (at least 3), so that a slow contender does not stretch the run by minutes."""
    calls = {}
    for name, fn in contenders.items():
        fn()  # warm: compiled, threads started, pages of the inputs touched
        one = min(samples(fn, 1))
        calls[name] = max(3, min(reps, math.ceil(round_s / max(one, 1e-9))))
    by_round: dict[str, list[list[float]]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            by_round[name].append(samples(fn, calls[name]))
    found = {}
    for name, rounds_of in by_round.items():
        medians = [statistics.median(r) for r in rounds_of]
        found[name] = {"median": statistics.median([t for r in rounds_of for t in r]),
                       "fastest_round": min(medians), "slowest_round": max(medians), "calls_a_round": calls[name]}
    return found


def child(threads: int, rounds: int, reps: int, round_s: float, path: str) -> None:
    """One thread count: every row checked and timed, the results written to `path` as JSON."""
    import numpy as np
    import torch

    import cpu_rows
    import jiter_magic

    torch.set_num_threads(threads)
    if cpu_rows.numexpr is not None:
        cpu_rows.numexpr.set_num_threads(threads)
    if cpu_rows.numba is not None:
        cpu_rows.numba.set_num_threads(threads)
    jiter_magic.create_jit_fn(cpu_rows.MUL)(np.ones(4, np.float32), np.ones(4, np.float32))
    # Steady state: the C call path built (a compiler in a process of its own for up to half a
    # minute) before anything is timed. A build beside the timing takes one core from the OpenMP
    # loop, whose slowest thread sets its time: 8.0 ms against 4 on the H200 host's 16 cores.
    from jiter_magic.native import call_path as fast_call

    fast_call.wait(600)
    rows = []
    for make in cpu_rows.ROWS:
        torch._dynamo.reset()  # each row's Inductor graph compiled afresh, under no recompile limit
        row = make()
        cpu_rows.check(row)
        timed = interleaved(row.contenders, rounds, reps, round_s)
        rows.append({"row": row.name, "bytes": row.bytes_moved, "omitted": row.omitted, "results": timed})
        print(json.dumps(rows[-1]), flush=True)
        del row
    versions = {"numpy": np.__version__}
    for name in ("numexpr", "numba"):
        module = getattr(cpu_rows, name)
        versions[name] = module.__version__ if module is not None else None
    if cpu_rows.numba is not None:
        versions["numba_threading_layer"] = cpu_rows.numba.threading_layer()
    with open(path, "w") as handle:
        json.dump({"threads": threads, "torch_threads": torch.get_num_threads(), "versions": versions,
                   "rows": rows}, handle)


def thread_counts(spec: str) -> list[int]:
    cores = len(os.sched_getaffinity(0))
    return [cores if part == "all" else int(part) for part in spec.split(",")]


def run_child(threads: int, args) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads),
               NUMEXPR_MAX_THREADS=str(threads), NUMEXPR_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TORCHINDUCTOR_COMPILE_THREADS="1")  # no pool of compile workers beside the timing
    # numba's OpenMP layer took 75 ms a call of `a*x*y + z` on the 2-core development machine
    # against 15 with its own workqueue layer (2 threads both): workqueue unless the caller chooses.
    env.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "run.json")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(threads), "--rounds",
                        str(args.rounds), "--reps", str(args.reps), "--round-s", str(args.round_s),
                        "--child-out", path], env=env, check=True)
        with open(path) as handle:
            return json.load(handle)


def table(run: dict, args) -> list[str]:
    versions = ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items() if v)
    lines = [f"## {run['threads']} threads (OMP_NUM_THREADS={run['threads']}, torch threads {run['torch_threads']})",
             "", versions, "",
             f"{args.rounds} interleaved rounds of {args.reps} calls a contender (fewer, at least 3, where that takes "
             f"over {args.round_s:g} s: the calls column); ms is the median of all calls, then the fastest and "
             "slowest round's median; 'vs X' is X's time over this one's.", "",
             "| row | contender | ms | rounds' medians, ms | calls | GB/s | vs Inductor | vs torch eager |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    left_out = []
    for row in run["rows"]:
        results = row["results"]
        for k, (name, found) in enumerate(results.items()):
            seconds = found["median"]
            lines.append(f"| {row['row'] if k == 0 else ''} | {name} | {seconds * 1e3:.2f} | "
                         f"{found['fastest_round'] * 1e3:.2f}-{found['slowest_round'] * 1e3:.2f} | "
                         f"{found['calls_a_round']} | "
                         f"{row['bytes'] / seconds / 1e9:.1f} | {results['Inductor']['median'] / seconds:.2f}x | "
                         f"{results['torch eager']['median'] / seconds:.2f}x |")
        if row["omitted"]:
            left_out.append(f"- {row['row']}: " + "; ".join(f"{k} ({why})" for k, why in row["omitted"].items()))
    return lines + (["", "Left out (cannot do the row, or not installed):", *left_out] if left_out else [])


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--threads", default="all", help="comma-separated thread counts, 'all' for every core")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=15, help="calls a contender makes in a round")
    parser.add_argument("--round-s", type=float, default=1.0, help="seconds a slow contender's round is cut to")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.rounds, args.reps, args.round_s, args.child_out)
        return
    runs = [run_child(n, args) for n in thread_counts(args.threads)]
    import torch

    import jiter_magic

    lines = [f"CPU: {cpu_name()}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} available), "
             f"torch {torch.__version__}, jiter_magic {jiter_magic.__version__}, date {time.strftime('%Y-%m-%d')}"]
    for run in runs:
        lines += ["", *table(run, args)]
    text = "\n".join(lines)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_cpu.json"), "w") as handle:
        json.dump({"cpu": cpu_name(), "cores": os.cpu_count(), "available": len(os.sched_getaffinity(0)),
                   "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), "rounds": args.rounds,
                   "reps": args.reps, "round_s": args.round_s, "runs": runs}, handle, indent=1)
    with open(os.path.join(args.out, "bench_cpu.md"), "w") as handle:
        handle.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
