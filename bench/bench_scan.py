"""Scan benchmark: cumulative sums, a logcumsumexp and linear recurrences by jiter_magic against torch,
Inductor, CuPy and a device-to-device copy, as in issue 46's table.

GB/s count the bytes read plus written (a cumsum of n float32 moves 8n bytes; a linear recurrence
reads a and b and writes h, 12n bytes: its scan returns h alone, `outputs=(1,)`). Every
contender's result is checked against a float64 reference before anything is timed. Contenders
take turns in each of --rounds rounds; a figure is the median of all its calls (CUDA events on a
GPU, perf_counter on the host). On the CPU (`--device cpu`) the rows are the issue's CPU rows; the
thread count is the process's (OMP_NUM_THREADS, taskset). Writes bench_scan_<device>.json and .md
into --out, with the date, device and commit (--commit names the tree where its git metadata is not
its own). The linear recurrences' other contender is torch's
prototype associative_scan, compiled (it runs only under torch.compile).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402

ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
LSE = ("template <typename T> T lse(T a, T b) {\n  if (b > a) { const T t = a; a = b; b = t; }\n"
       "  const T d = b - a;\n  if (d != d) return (a == a && b == b) ? a : d;\n  return a + log1p(exp(d));\n}\n")
AFFINE = "template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b) { a = a1 * a2; b = a2 * b1 + b2; }\n"
CUMSUM = jiter_magic.create_scan_fn(ADD, 0, combine="add")
LOGCUMSUMEXP = jiter_magic.create_scan_fn(LSE, float("-inf"), combine="lse")
# h alone (outputs=(1,)): the products are carried in the state, not written.
LINEAR = jiter_magic.create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(1,))

PREFIX = 512  # steps of a linear recurrence checked against a sequential loop
GPU_ROWS = [("cumsum", (1 << 28,), -1), ("cumsum", (32768, 1024), -1), ("cumsum", (1024, 32768), 0),
            ("cumsum", (64, 1 << 22), -1), ("logcumsumexp", (32768, 1024), -1),
            ("linear", (8, 1536, 8192), -1), ("linear", (1, 64, 1 << 18), -1), ("linear", (1, 1, 1 << 26), -1)]
CPU_ROWS = [("cumsum", (1 << 24,), -1), ("cumsum", (8192, 1024), -1), ("cumsum", (1024, 8192), 0),
            ("logcumsumexp", (8192, 1024), -1)]


def _combine(earlier: tuple, later: tuple) -> tuple:
    """torch's associative_scan calls combine_fn(x, y) on two pytrees shaped as its xs, here (a, b)
    pairs, the earlier elements' state first."""
    a1, b1 = earlier
    a2, b2 = later
    return a1 * a2, a2 * b1 + b2


def contenders(op: str, inputs: list, dim: int, device: str) -> dict:
    """Calls of no arguments, each giving the op's result (for a recurrence, h)."""
    x = inputs[0]
    if op == "linear":
        a, b = inputs
        found = {"jiter_magic": lambda: LINEAR(a, b, dim=dim)[0]}
        try:
            from torch._higher_order_ops.associative_scan import associative_scan

            torch._dynamo.reset()
            # It runs only under torch.compile; 'pointwise' (the faster mode) takes only GPU tensors.
            mode = "pointwise" if device == "cuda" else "generic"
            scan = torch.compile(lambda p, q: associative_scan(_combine, (p, q), dim=dim, combine_mode=mode)[1])
            found["associative_scan (compiled)"] = lambda: scan(a, b)
        except Exception as exc:  # noqa: BLE001 - a prototype API: report, go on
            print(f"associative_scan unavailable: {exc!r}", file=sys.stderr)
        return found
    ours = CUMSUM if op == "cumsum" else LOGCUMSUMEXP
    eager = torch.cumsum if op == "cumsum" else torch.logcumsumexp
    found = {"jiter_magic": lambda: ours(x, dim=dim), "torch": lambda: eager(x, dim)}
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: eager(t, dim), dynamic=False)
    found["Inductor"] = lambda: compiled(x)
    if device == "cuda" and op == "cumsum":
        try:
            import cupy

            xc = cupy.asarray(x)
            found["CuPy cumsum"] = lambda: cupy.cumsum(xc, axis=dim % x.dim())
        except ImportError:
            pass
    return found


def reference(op: str, inputs: list, dim: int) -> torch.Tensor:
    if op == "cumsum":
        return torch.cumsum(inputs[0].double(), dim)
    if op == "logcumsumexp":
        return torch.logcumsumexp(inputs[0].double(), dim)
    # h = a * h + b in float64 by the same kernels, its first PREFIX steps checked first against a
    # sequential float64 loop (the tests check every kernel path against one; a loop over 2^26 steps
    # in Python would take minutes).
    a, b = (t.double() for t in inputs)
    (h,) = LINEAR(a, b, dim=dim)
    steps, loop = min(PREFIX, a.shape[dim]), torch.zeros_like(a.select(dim, 0))
    for t in range(steps):
        loop = a.select(dim, t) * loop + b.select(dim, t)
        if not torch.allclose(h.select(dim, t), loop, rtol=1e-9, atol=1e-9):
            raise SystemExit(f"the float64 reference of a linear recurrence is wrong at step {t}")
    return h


def make_inputs(op: str, shape: tuple, device: str) -> list:
    generator = torch.Generator(device=device).manual_seed(0)
    if op == "linear":
        a = torch.rand(shape, device=device, generator=generator) * 0.05 + 0.95
        return [a, torch.randn(shape, device=device, generator=generator)]
    return [torch.randn(shape, device=device, generator=generator)]


def timed(call, device: str, repeat: int) -> list[float]:
    """Seconds of each of `repeat` calls."""
    times = []
    for _ in range(repeat):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            begin = time.perf_counter()
            call()
            times.append(time.perf_counter() - begin)
    return times


def check(name: str, got, want: torch.Tensor, op: str) -> None:
    tolerance = 1e-2 if op == "linear" else 2e-3 * max(1.0, want.shape[-1] ** 0.5 / 64)
    got = torch.as_tensor(got, device=want.device)  # CuPy's result, read through DLPack/CUDA arrays
    scale = want.abs().max().item() or 1.0
    error = (got.double() - want).abs().max().item() / scale
    if not error <= tolerance:
        raise SystemExit(f"{name} is wrong: max relative error {error:.3g} > {tolerance:.3g}")


def run_row(op: str, shape: tuple, dim: int, device: str, rounds: int, repeat: int) -> dict:
    inputs = make_inputs(op, shape, device)
    moved = sum(t.numel() * t.element_size() for t in inputs) + inputs[0].numel() * inputs[0].element_size()
    want = reference(op, inputs, dim)
    calls = contenders(op, inputs, dim, device)
    for name, call in list(calls.items()):
        try:
            check(name, call(), want, op)
        except SystemExit:
            raise
        except Exception as exc:  # noqa: BLE001 - a contender that cannot run this row is left out, said why
            print(f"{name} left out of {op} {shape}: {exc!r}", file=sys.stderr)
            del calls[name]
    source = torch.ones(moved // 2 // 4, device=device)  # a copy moving the same bytes: half read, half written
    target = torch.empty_like(source)
    calls["copy (same bytes)"] = lambda: target.copy_(source)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name] += timed(call, device, repeat)
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {"op": op, "shape": list(shape), "dim": dim, "bytes": moved,
            "ms": {n: m * 1e3 for n, m in medians.items()}, "GB/s": {n: moved / m / 1e9 for n, m in medians.items()}}


def commit() -> str:
    """`git rev-parse --short HEAD` of the tree benchmarked (the one holding this script), with the
    count of paths changed since where it has any (its HEAD alone would name another tree), or
    'unknown' outside git."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root,
                              check=False)
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                 text=True, cwd=root, check=False)
    except OSError:  # no git here
        return "unknown"
    if head.returncode != 0 or not head.stdout.strip():  # not a git checkout
        return "unknown"
    dirty = len(changed.stdout.splitlines()) if changed.returncode == 0 else 0
    return head.stdout.strip() + (f" + {dirty} changed paths" if dirty else "")


def markdown(rows: list[dict], header: str) -> str:
    lines = [header, "", "| row | contender | ms | GB/s |", "| --- | --- | ---: | ---: |"]
    for row in rows:
        label = f"{row['op']} {tuple(row['shape'])} dim {row['dim']}"
        for name, ms in row["ms"].items():
            lines.append(f"| {label} | {name} | {ms:.3f} | {row['GB/s'][name]:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    parser.add_argument("--only", default=None, help="run the rows whose op contains this text")
    parser.add_argument("--commit", default=None,
                        help="the label of the tree benchmarked, where its git metadata is not its own (a copy)")
    args = parser.parse_args()
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    rows = []
    for op, shape, dim in GPU_ROWS if args.device == "cuda" else CPU_ROWS:
        if args.only and args.only not in op:
            continue
        rows.append(run_row(op, shape, dim, args.device, args.rounds, args.repeat))
        print(markdown(rows[-1:], ""), flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    label = args.commit or commit()
    header = f"# Scans, {device_name}, {stamp}, commit {label}"
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"bench_scan_{args.device}")
    with open(base + ".json", "w") as handle:
        json.dump({"device": device_name, "date": stamp, "commit": label, "rows": rows}, handle, indent=1)
    with open(base + ".md", "w") as handle:
        handle.write(markdown(rows, header))
    print(markdown(rows, header))


if __name__ == "__main__":
    main()
