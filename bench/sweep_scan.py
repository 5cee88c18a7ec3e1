"""Tuning sweep of the CUDA scan paths: bench_scan.py's GPU rows with other kernel constants.

Each variant runs in a fresh process over an empty kernel cache, with constants of
kernels/scan_cuda.py (BLOCK, ITEMS, SMALL_ITEMS, BUSY_THREADS, SEGMENT, MIN_ROWS),
kernels/scan_lookback.py (WINDOW, TILE_ITEMS, KEEP_STAGED, PERSIST, MIN_BLOCKS),
kernels/scan_entries.py (PACKED, BACKOFF) or kernels/scan_loads.py (STAGED_LOADS, FULL_TILES)
patched before any kernel is built, and times jiter_magic on every row against a device-to-device
copy of the same bytes in the same process (CUDA events, median of --repeat calls in two rounds).
Every result is checked first: cumsum and logcumsumexp against torch in float64, a linear
recurrence's first steps against a sequential float64 loop and 64 positions along each row against
a float64 loop over the 1024 steps before each (a in [0.95, 1): earlier steps weigh less than
1e-11), and a second call must give the same bits. Prints one table, row by variant, in GB/s
(bytes read plus written).

Usage on the GPU machine:
  python3 bench/sweep_scan.py [--only TEXT] [--lookback] [--budget S] [--timeout S]
      [--variants 'ITEMS=16;BLOCK=512,ITEMS=4']
(--only: text in a row's label, such as 'cumsum' or 'dim 0'; variants separated by ';', a variant's
constants by ','; the shipped constants are always the first column; --lookback: only the rows that
take the look-back path).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VARIANTS = ("STAGED_LOADS=0,FULL_TILES=0;TILE_ITEMS=16;SMALL_ITEMS=8;ITEMS=16;BLOCK=128;WINDOW=4;"
                    "BUSY_THREADS=262144")
LOOKBACK_ROWS = [("cumsum", (1 << 28,), -1), ("cumsum", (64, 1 << 22), -1), ("linear", (1, 1, 1 << 26), -1),
                 ("linear", (1, 64, 1 << 18), -1)]


def patch(variant: str) -> None:
    """Set the scan paths' constants named in `variant` and the ones derived from them."""
    from jiter_magic.kernels import scan_cuda, scan_entries, scan_loads, scan_lookback

    for item in filter(None, variant.split(",")):
        name, value = item.split("=")
        module = next((m for m in (scan_cuda, scan_lookback, scan_entries, scan_loads) if hasattr(m, name)), None)
        if module is None:
            raise SystemExit(f"no scan kernel constant {name}")
        setattr(module, name, int(value))
    scan_cuda.WARPS = scan_cuda.BLOCK >> 5
    scan_cuda.WARP_COUNT = 32 * scan_cuda.ITEMS * 4
    scan_cuda.TILE = scan_cuda.BLOCK * scan_cuda.ITEMS
    scan_cuda.LOOKBACK_COUNT = 8 * scan_cuda.TILE


def child(variant: str, only: str | None, lookback: bool, repeat: int) -> None:
    """One variant's rows, printed as one JSON line: {row: GB/s of ours, copy, path}."""
    import torch

    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    patch(variant)
    import bench_scan as bs

    found = {}
    for op, shape, dim in LOOKBACK_ROWS if lookback else bs.GPU_ROWS:
        label = f"{op} {tuple(shape)} dim {dim}"
        if not only or only in label:
            found[label] = _row(bs, op, shape, dim, repeat)
            print(label, json.dumps(found[label]), file=sys.stderr, flush=True)  # a row as it is done
            torch.cuda.empty_cache()
    print("RESULT " + json.dumps(found), flush=True)


def _row(bs, op: str, shape: tuple, dim: int, repeat: int) -> dict:
    """One row: checked, then timed against a copy of its bytes."""
    import torch

    inputs = bs.make_inputs(op, shape, "cuda")
    moved = sum(t.numel() * t.element_size() for t in inputs) + inputs[0].numel() * inputs[0].element_size()
    fn = {"cumsum": bs.CUMSUM, "logcumsumexp": bs.LOGCUMSUMEXP, "linear": bs.LINEAR}[op]
    call = (lambda: fn(*inputs, dim=dim)[0]) if op == "linear" else (lambda: fn(inputs[0], dim=dim))  # h alone
    got = call()
    if op == "linear":  # the first steps against a float64 loop
        a, b = (t.double() for t in inputs)
        h = torch.zeros_like(a.select(dim, 0))
        for t in range(64):
            h = a.select(dim, t) * h + b.select(dim, t)
        assert torch.allclose(got.select(dim, 63).double(), h, rtol=1e-4, atol=1e-4), "linear is wrong"
        _check_linear_windows(got, inputs, dim)
    else:
        bs.check(f"{op} {shape}", got, bs.reference(op, inputs, dim), op)
    same = torch.equal(got, call())
    source = torch.ones(moved // 8, device="cuda")
    target = torch.empty_like(source)
    times: dict[str, list[float]] = {"ours": [], "copy": []}
    for _ in range(2):
        times["ours"] += bs.timed(call, "cuda", repeat)
        times["copy"] += bs.timed(lambda: target.copy_(source), "cuda", repeat)
    figures: dict = {k: moved / statistics.median(v) / 1e9 for k, v in times.items()}
    figures["path"] = fn.specializations[-1].spec.path if fn.specializations else ""
    figures["same"] = same
    return figures


def _check_linear_windows(got, inputs, dim: int, window: int = 1024) -> None:
    """h = a h + b at 64 positions along each row (the last included) against a float64 loop over
    the `window` steps before each: far past the first tile, so the look-back's carries are checked."""
    import torch

    a, b, got = (t.movedim(dim, -1) for t in (*inputs, got))
    count = a.shape[-1]
    # Integer steps: a float32 linspace rounds count - 1 = 2^26 - 1 up to 2^26, an index past the row.
    first = min(window, count) - 1
    ends = first + (count - 1 - first) * torch.arange(64, device=a.device) // 63
    steps = ends[:, None] - torch.arange(min(window, count) - 1, -1, -1, device=a.device)  # (64, window)
    h = torch.zeros(a.shape[:-1] + (64,), dtype=torch.float64, device=a.device)
    for t in range(steps.shape[1]):
        h = a[..., steps[:, t]].double() * h + b[..., steps[:, t]].double()
    want, seen = h, got[..., ends].double()
    if not torch.allclose(seen, want, rtol=1e-3, atol=1e-3):
        raise SystemExit(f"linear is wrong along the row: max error {(seen - want).abs().max().item():.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--lookback", action="store_true", help="only the rows that take the look-back path")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=300, help="seconds a variant's process may take")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole sweep, then none started")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.only, args.lookback, args.repeat)
        return
    table: dict[str, dict[str, float]] = {}
    variants = [""] + [v for v in args.variants.split(";") if v]
    start = time.monotonic()
    for variant in variants:
        left = args.timeout if args.budget is None else min(args.timeout, args.budget - (time.monotonic() - start))
        if left < 5:
            print(f"variant {variant or 'shipped'} skipped: the budget is spent", flush=True)
            continue
        command = [sys.executable, __file__, "--child", variant, "--repeat", str(args.repeat)]
        command += ["--only", args.only] if args.only else []
        command += ["--lookback"] if args.lookback else []
        env = dict(os.environ, JITER_MAGIC_CACHE_DIR=subprocess.check_output(["mktemp", "-d"], text=True).strip())
        name = variant or "shipped"
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=left, check=False)
            out, err, failed = done.stdout, done.stderr, done.returncode != 0
        except subprocess.TimeoutExpired as stopped:  # the rows it finished before still count
            out, err, failed = "", stopped.stderr.decode(errors="replace") if stopped.stderr else "", False
            print(f"variant {name} ran past {left:.0f} s", flush=True)
        found = _found(out, err)
        if failed or not found:
            print(f"variant {name} failed:\n{err[-2000:]}", flush=True)
        for row, figures in found.items():
            table.setdefault(row, {})[name] = figures
            print(f"{name} | {row} | " + _figures(figures), flush=True)  # kept if a later one hangs
    for row, by_variant in table.items():
        print(row)
        for variant, figures in by_variant.items():
            print(f"   {variant:28s} " + _figures(figures))


def _found(out: str, err: str) -> dict:
    """A child's rows: its RESULT line, or (stopped before it) the rows it printed as each ended."""
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if lines:
        return json.loads(lines[-1][7:])
    rows = (line.partition(' {"ours"') for line in err.splitlines())
    return {label: json.loads(sep[1:] + rest) for label, sep, rest in rows if sep}


def _figures(figures: dict) -> str:
    return (f"{figures['ours']:7.0f} GB/s  copy {figures['copy']:6.0f}  {figures['ours'] / figures['copy']:5.1%}  "
            f"{figures['path']}  {'bit-equal' if figures['same'] else 'NOT BIT-EQUAL'}")


if __name__ == "__main__":
    main()
