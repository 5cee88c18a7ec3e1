"""Reduction benchmark: a sum of squares by jiter_magic against torch, Inductor, CuPy and numexpr.

The case is issue 32's: the sum of squares of a 4096 x 65536 tensor (GPU) over its rows (dim=1),
its columns (dim=0) and everything, in float32 and bfloat16, as GB/s of the input read. The
contenders: `x.sum(dim)` (the read reference: one pass, no multiply), the fused
`torch.linalg.vector_norm(x, 2, dim) ** 2`, Inductor (`torch.compile(dynamic=False)` of
`(x * x).sum(dim)`, compiled before timing), torch eager `(x * x).sum(dim)` (two kernels), CuPy's
`ReductionKernel` (float32), and on the CPU numexpr's `sum(x * x, axis)` and NumPy's einsum. Every
result is checked against a float64 reference before anything is timed. Contenders take turns in
each of --rounds rounds, so that a slow stretch of the machine falls on all of them; a figure is
the median of all its calls.

On CUDA the rows of issue 42 item 7 follow (`--cases`): a few long rows (64 x 2^22 float32 summed
along the last dim), two reduced dims that are not adjacent (dims (0, 2) of 64 x 512 x 8192
float32, summed), an argmax along dim 0 of 4096 x 65536 bfloat16 and one over all 2^28 float32
elements, against torch, Inductor and CuPy (no bfloat16 in CuPy); a sum is checked against the
float64 sum, an argmax by the element at each returned index, which must be the maximum.

On the CPU (`--device cpu`) the tensor is 4096 x 8192 by default; the thread count is the
process's: run it under `taskset -c 0,1` with OMP_NUM_THREADS=2 for two threads (bench/run_gpu.sh
`reduce-cpu` does both counts). `--cold` adds a new process's start (bench/first_call_cold.py):
over an empty kernel cache, its host cost and one bandwidth row, then `import jiter_magic` and the
first call with the kernel on disk, beside the warm figures (`--only-cold`: those alone).
Writes bench_reduce_<device>.json and .md into --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import first_call_cold  # noqa: E402 - bench/, this script's folder
import jiter_magic  # noqa: E402

SUMSQ = ("template <typename T> T sq(T x) { return x * x; }\n"
         "template <typename T> T add(T a, T b) { return a + b; }\n")
DIMS = {"rows": 1, "columns": 0, "all": None}
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")
# Issue 42 item 7, the shapes where reductions lagged: case -> (shape, dtype, sum or argmax, dim).
SHAPES = {
    "64 x 2^22 float32 sum dim -1": ((64, 1 << 22), "float32", "sum", -1),
    "64 x 512 x 8192 float32 sum dims (0, 2)": ((64, 512, 8192), "float32", "sum", (0, 2)),
    "4096 x 65536 bfloat16 argmax dim 0": ((4096, 65536), "bfloat16", "argmax", 0),
    "2^28 float32 argmax": ((1 << 28,), "float32", "argmax", None),
}


def _sum_sq(x, dim):
    return (x * x).sum() if dim is None else (x * x).sum(dim)


def contenders(x: torch.Tensor, dim, device: str) -> dict:
    """Calls of no arguments, each giving the sum of squares of `x` over `dim` (None: everything)."""
    ours = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add")
    dims = () if dim is None else (dim,)
    found = {
        "jiter_magic": lambda: ours(x, dim=dim),
        "x.sum (read reference)": lambda: x.sum() if dim is None else x.sum(dim),
        "vector_norm ** 2 (fused)": lambda: torch.linalg.vector_norm(x, 2, dim=dims or None) ** 2,
        "torch (x*x).sum": lambda: _sum_sq(x, dim),
    }
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: _sum_sq(t, dim), dynamic=False)
    found["Inductor"] = lambda: compiled(x)
    if device == "cuda" and x.dtype == torch.float32:
        try:
            import cupy

            kernel = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "jm_bench_sumsq")
            xc = cupy.asarray(x)
            found["CuPy ReductionKernel"] = lambda: kernel(xc, axis=None if dim is None else dim)
        except ImportError:
            pass
    if device == "cpu" and x.dtype == torch.float32:
        import numpy as np

        xn = x.numpy()
        try:
            import numexpr

            text = "sum(xn * xn)" if dim is None else f"sum(xn * xn, axis={dim})"
            found["numexpr"] = lambda: numexpr.evaluate(text, local_dict={"xn": xn})
        except ImportError:
            pass
        subscripts = {None: "ij,ij->", 0: "ij,ij->j", 1: "ij,ij->i"}[dim]
        found["NumPy einsum"] = lambda: np.einsum(subscripts, xn, xn)
    return found


def shape_contenders(x: torch.Tensor, kind: str, dim) -> dict:
    """Calls of no arguments, each giving the sum of `x` over `dim` or the indices of its maxima
    (None: over everything): jiter_magic, torch, Inductor and CuPy (where it has the dtype)."""
    if kind == "sum":
        ours = jiter_magic.create_reduction_fn("template <typename T> T add(T a, T b) { return a + b; }\n", 0,
                                               combine="add")

        def eager(t):
            return t.sum(dim)
    else:
        argmax = jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")

        def ours(t, dim):
            return argmax(t, dim=dim).indices

        def eager(t):
            return t.argmax() if dim is None else t.argmax(dim)
    torch._dynamo.reset()
    compiled = torch.compile(eager, dynamic=False)
    found = {"jiter_magic": lambda: ours(x, dim=dim), f"torch {kind}": lambda: eager(x),
             "Inductor": lambda: compiled(x)}
    if x.is_cuda and x.dtype != torch.bfloat16:
        try:
            import cupy

            xc = cupy.asarray(x)
            axis = dim
            found["CuPy"] = (lambda: xc.sum(axis=axis)) if kind == "sum" else (lambda: cupy.argmax(xc, axis=axis))
        except ImportError:
            pass
    return found


def check_shape(found: dict, x: torch.Tensor, kind: str, dim) -> dict[str, str]:
    """As `check`, for an item 7 row: a sum against the float64 sum (scaled by the sum of |x|), an
    argmax by the elements at its indices, which must be the maxima (whichever of tied ones)."""
    wrong: dict[str, str] = {}
    if kind == "sum":
        wide = x.double()
        expected, scale = wide.sum(dim), wide.abs().sum(dim)
    else:
        expected = x.amax() if dim is None else x.amax(dim)
    for name, fn in found.items():
        result = torch.as_tensor(fn(), device=x.device)
        if kind == "sum":
            ok = float(((result.double() - expected).abs() / scale.clamp_min(1e-30)).max()) <= 1e-4
        else:
            picked = x.flatten()[result] if dim is None else x.gather(dim, result.long().unsqueeze(dim)).squeeze(dim)
            ok = bool(torch.equal(picked, expected))
        if not ok and name == "jiter_magic":
            raise AssertionError(f"jiter_magic's {kind} over dim={dim} of {tuple(x.shape)} is wrong")
        if not ok:
            wrong[name] = f"{name}: wrong result, not timed"
    return _dropped(found, wrong)


def _dropped(found: dict, wrong: dict[str, str]) -> dict[str, str]:
    """`wrong`, after dropping its contenders from `found`."""
    for name in wrong:
        del found[name]
    return wrong


def sumsq_rows(shape: tuple[int, ...], dtypes: list[str], device: str, rounds: int, reps: int) -> list[dict]:
    """The sum of squares of a `shape` tensor of each dtype over its rows, columns and everything."""
    rows = []
    for dtype_name in dtypes:
        generator = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(shape, device=device, generator=generator).to(getattr(torch, dtype_name))
        for label, dim in DIMS.items():
            found = contenders(x, dim, device)
            wrong = check(found, x, dim)
            seconds = timed(found, device, rounds, reps)
            read = x.numel() * x.element_size()
            row = {"case": f"{dtype_name} {label}", "GBps": {n: read / s / 1e9 for n, s in seconds.items()},
                   "notes": list(wrong.values())}
            print(json.dumps(row), flush=True)
            rows.append(row)
        del found, x
    return rows


def shape_rows(device: str, rounds: int, reps: int) -> list[dict]:
    """The rows of issue 42 item 7 (SHAPES), each tensor freed before the next is made."""
    rows = []
    for case, (shape, dtype_name, kind, dim) in SHAPES.items():
        generator = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(shape, device=device, generator=generator).to(getattr(torch, dtype_name))
        found = shape_contenders(x, kind, dim)
        wrong = check_shape(found, x, kind, dim)
        seconds = timed(found, device, rounds, reps)
        read = x.numel() * x.element_size()
        row = {"case": case, "GBps": {n: read / s / 1e9 for n, s in seconds.items()}, "notes": list(wrong.values())}
        print(json.dumps(row), flush=True)
        rows.append(row)
        del found, x
        torch.cuda.empty_cache()
    return rows


def check(found: dict, x: torch.Tensor, dim) -> dict[str, str]:
    """Each contender's result against the float64 sum of squares, before any timing: a contender
    whose result is wrong is dropped from `found` (a wrong result's speed means nothing), and the
    returned notes say why (numexpr's sum of everything adds float32 values one after another)."""
    wrong: dict[str, str] = {}
    wide = x.double()
    squares = _sum_sq(wide, dim)
    plain = wide.sum() if dim is None else wide.sum(dim)
    magnitude = wide.abs().sum() if dim is None else wide.abs().sum(dim)  # the scale of a plain sum's rounding
    # numexpr's sum of everything adds float32 values one after another: 4e-3 off on 2^22 of them.
    tolerance = 2e-2 if x.dtype == torch.bfloat16 or dim is None else 1e-3
    for name, fn in found.items():
        expected, scale = (plain, magnitude) if name.startswith("x.sum") else (squares, squares)  # x.sum sums x
        result = torch.as_tensor(fn()).to(device=expected.device, dtype=torch.float64)
        error = float(((result - expected).abs() / scale.clamp_min(1e-30)).max())
        if error > tolerance:
            if name == "jiter_magic":
                raise AssertionError(f"jiter_magic's result is {error:.2e} off the float64 reference")
            wrong[name] = f"{name}: result {error:.1e} off the float64 reference, not timed"
    return _dropped(found, wrong)


def _seconds(fn, device: str) -> float:
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    start_s = time.perf_counter()
    fn()
    return time.perf_counter() - start_s


def timed(found: dict, device: str, rounds: int, reps: int) -> dict[str, float]:
    """The median seconds of each contender's calls, over interleaved rounds."""
    for fn in found.values():
        for _ in range(3):
            fn()
    if device == "cuda":
        torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(rounds):
        for name, fn in found.items():
            samples[name] += [_seconds(fn, device) for _ in range(reps)]
    return {name: statistics.median(times) for name, times in samples.items()}


def host_costs(device: str, reps: int = 2000) -> dict[str, float]:
    """Microseconds a call of each contender spends on the host, on a (4, 256) float32 tensor whose
    kernel takes far less: calls queued back to back, then one synchronize (as bench_gpu.py's); also
    into a given out= tensor."""
    x = torch.randn(4, 256, device=device)
    found = {name: fn for name, fn in contenders(x, 1, device).items()
             if name in ("jiter_magic", "x.sum (read reference)", "Inductor")}
    ours, out = jiter_magic.create_reduction_fn(SUMSQ, 0, map="sq", combine="add"), torch.empty(4, device=device)
    found["jiter_magic out="] = lambda: ours(x, dim=1, out=out)
    found["x.sum out="] = lambda: torch.sum(x, 1, out=out)
    costs = {}
    for name, fn in found.items():
        for _ in range(50):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        costs[name] = (time.perf_counter() - start) / reps * 1e6
    return costs


def markdown(rows: list[dict], device: str, threads: int, costs: dict[str, float], cold: list[dict]) -> str:
    names = list(dict.fromkeys(name for row in rows for name in row["GBps"]))
    where = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {threads} threads"
    lines = [f"Sum of squares (then issue 42 item 7's shapes), GB/s of the input read ({where}); higher is "
             "better."]
    if rows:
        lines += ["", "| case | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for row in rows:
        cells = [f"{row['GBps'][n]:.0f}" if n in row["GBps"] else "" for n in names]
        lines.append(f"| {row['case']} | " + " | ".join(cells) + " |")
    if rows:
        lines += ["", "jiter_magic against the best other contender and against x.sum (the issue asks at least 0.95):"]
    for row in rows:
        ours = row["GBps"]["jiter_magic"]
        others = {n: v for n, v in row["GBps"].items() if n not in ("jiter_magic", "x.sum (read reference)")}
        best = max(others, key=others.__getitem__)
        notes = "".join(f"; {note}" for note in row.get("notes", []))
        reference = row["GBps"].get("x.sum (read reference)")
        against_sum = f", {ours / reference:.3f}x x.sum" if reference else ""
        lines.append(f"- {row['case']}: {ours / others[best]:.3f}x {best}{against_sum}{notes}")
    if costs:
        lines += ["", "Host cost of a call on a (4, 256) float32 tensor, dim=1 (us; lower is better): "
                  + ", ".join(f"{name} {us:.2f}" for name, us in costs.items())]
    if cold:
        lines += first_call_cold.markdown(cold)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--shape", default=None, help="ROWSxCOLS (default 4096x65536 on CUDA, 4096x8192 on the CPU)")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", default=".")
    parser.add_argument("--cases", default=None, help="sumsq, item7 or both, comma-separated (default: both on "
                                                      "CUDA, sumsq on the CPU)")
    parser.add_argument("--cold", action="store_true",
                        help="also a new process's start over an empty kernel cache (bench/first_call_cold.py)")
    parser.add_argument("--only-cold", action="store_true", help="only the cold rows")
    args = parser.parse_args()
    # Steady state, as bench_gpu.py's: the C call path built (or loaded from the cache) before the
    # first call, which decides whether calls may run in C for the rest of the process.
    from jiter_magic.native import call_path

    call_path.wait(600)
    device = args.device
    shape = tuple(int(v) for v in (args.shape or ("4096x65536" if device == "cuda" else "4096x8192")).split("x"))
    threads = torch.get_num_threads()
    cases = (args.cases or ("sumsq,item7" if device == "cuda" else "sumsq")).split(",")
    rows = []
    if not args.only_cold:
        rows = sumsq_rows(shape, args.dtypes.split(","), device, args.rounds, args.reps) if "sumsq" in cases else []
        if "item7" in cases:
            rows += shape_rows(device, args.rounds, args.reps)
    costs = {} if args.only_cold else host_costs(device)
    # The cold rows' bandwidth on the warm rows' shape, so that the two compare.
    cold = first_call_cold.cold_rows("reduce", device, shape) if args.cold or args.only_cold else []
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"bench_reduce_{device}")
    with open(stem + ".json", "w") as f:
        json.dump({"device": device, "shape": shape, "threads": threads, "rows": rows, "host_us": costs,
                   "cold": cold}, f, indent=1)
    table = markdown(rows, device, threads, costs, cold)
    with open(stem + ".md", "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
