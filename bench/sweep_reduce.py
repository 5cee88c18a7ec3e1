"""Tuning sweep of the CUDA argmax rows of issue 42 item 7, with bench_reduce.py's sums as a control.

Each variant runs in a fresh process over an empty kernel cache, with constants of
kernels/reduce_cuda.py and kernels/reduce_cuda_loads.py patched before any kernel is built
(INDEXED_LOADS, INDEXED_INDEX32, INDEXED_COLUMN_BYTES, INDEXED_MAX_GRID_BLOCKS, INDEXED_MIN_BLOCKS,
which touch reductions with indices only, and MAX_GRID_BLOCKS, GRID_ELEMENTS, which touch every grid
reduction). Its rows: the argmax along dim 0 of 4096 x 65536 bfloat16 and over all 2^28 float32
elements, then the sum of squares of 4096 x 65536 float32 and bfloat16 over rows, columns and
everything (bench_reduce.py's first rows: in the shipped variant and in those naming a constant
without the INDEXED_ prefix, or with --sums in all). Every result is checked before anything is timed: an
argmax must equal torch.argmax's indices (the first maximum), a sum bench_reduce.check's float64
reference. Then jiter_magic and torch (torch.argmax, x.sum: the same bytes read once) take turns,
five rounds of --repeat calls queued back to back between CUDA events; a figure is the median
round's time a call, in GB/s of the input read. Prints a line a variant as it ends, then one
table, row by variant; the shipped constants are always the first variant, and a variant starts
only where the last one's time still fits in --budget seconds (115).

Usage on the GPU machine: python3 bench/sweep_reduce.py [--only TEXT] [--budget SECONDS]
[--variants 'INDEXED_LOADS=8;INDEXED_COLUMN_BYTES=8,INDEXED_LOADS=2'] (variants separated by ';', a
variant's constants by ',').
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
# The most telling first: the loop of before, 64-bit loop indices, wider columns, more grid blocks.
DEFAULT_VARIANTS = ("INDEXED_LOADS=0;INDEXED_INDEX32=0;INDEXED_COLUMN_BYTES=8;INDEXED_MAX_GRID_BLOCKS=2048;"
                    "INDEXED_COLUMN_BYTES=16;INDEXED_LOADS=8;INDEXED_LOADS=2;INDEXED_COLUMN_BYTES=8,INDEXED_MIN_BLOCKS=8;"
                    "INDEXED_COLUMN_BYTES=8,INDEXED_LOADS=8;INDEXED_MAX_GRID_BLOCKS=1056")
ARGMAX_ROWS = {"argmax bf16 4096x65536 dim 0": ((4096, 65536), "bfloat16", 0),
               "argmax f32 2^28 all": ((1 << 28,), "float32", None)}
SUM_ROWS = {f"sumsq {d} 4096x65536 {label}": ((4096, 65536), d, dim)
            for d in ("float32", "bfloat16") for label, dim in (("rows", 1), ("columns", 0), ("all", None))}


def patch(variant: str) -> None:
    """Set the reduction kernels' constants named in `variant`, in the module that holds each."""
    from jiter_magic.kernels import reduce_cuda, reduce_cuda_loads

    for item in filter(None, variant.split(",")):
        name, value = item.split("=")
        module = next((m for m in (reduce_cuda, reduce_cuda_loads) if hasattr(m, name)), None)
        if module is None:
            raise SystemExit(f"no reduction constant {name}")
        setattr(module, name, int(value))


def touches_sums(variant: str) -> bool:
    """Whether a variant names a constant that plain reductions read: the INDEXED_ ones leave every
    plain reduction's plan and source as they are (tests/kernels/test_reduce_golden.py), so their
    sum rows would only repeat the shipped column's."""
    return any(not item.startswith("INDEXED_") for item in filter(None, variant.split(",")))


def child(variant: str, only: str | None, repeat: int, sums: bool) -> None:
    """One variant's rows, printed as one JSON line: {row: GB/s of ours and torch's, the kernel}."""
    import torch

    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    patch(variant)
    import bench_reduce as br
    import jiter_magic
    from jiter_magic.native import call_path

    call_path.wait(60)  # the C call path, as bench_reduce.py's steady state
    found = {}
    for label, (shape, dtype, dim) in {**ARGMAX_ROWS, **(SUM_ROWS if sums else {})}.items():
        if not only or only in label:
            found[label] = _row(jiter_magic, br, label, shape, dtype, dim, repeat)
            print(label, json.dumps(found[label]), file=sys.stderr, flush=True)  # a row as it is done
            torch.cuda.empty_cache()
    print("RESULT " + json.dumps(found), flush=True)


def _row(jiter_magic, br, label: str, shape: tuple, dtype: str, dim, repeat: int) -> dict:
    """One row: its own function (so that its one specialization is the row's kernel), its result
    checked, then timed against torch's."""
    import torch

    x = torch.randn(shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    x = x.to(getattr(torch, dtype))
    if label.startswith("argmax"):
        fn = jiter_magic.create_multi_output_reduction_fn(br.KEEP_MAX, combine="keep_max")
        ours = lambda: fn(x, dim=dim).indices  # noqa: E731 - one call of each, timed alike
        theirs = (lambda: x.argmax()) if dim is None else (lambda: x.argmax(dim))
        assert torch.equal(ours(), theirs()), f"{label}: jiter_magic's indices differ from torch.argmax's"
    else:
        fn = jiter_magic.create_reduction_fn(br.SUMSQ, 0, map="sq", combine="add")
        ours = lambda: fn(x, dim=dim)  # noqa: E731
        theirs = (lambda: x.sum()) if dim is None else (lambda: x.sum(dim))
        br.check({"jiter_magic": ours}, x, dim)  # raises if ours is off the float64 reference
    figures: dict = _timed(ours, theirs, x.numel() * x.element_size(), repeat)
    spec = fn.specializations[-1].spec
    figures["kernel"] = f"{spec.path} vec {spec.vec}{' index32' if spec.index32 else ''}"
    return figures


def _timed(ours, theirs, read: int, repeat: int) -> dict:
    """GB/s of each: warmed up, then 5 interleaved rounds of `repeat` calls queued back to back
    between two CUDA events (a call's host work overlaps the kernel before it, as in a model's
    stream of launches, so that the C call path's absence or torch's dispatch does not count), the
    median of the rounds' times a call."""
    import torch

    for fn in (ours, theirs):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {"ours": [], "torch": []}
    for _ in range(5):
        for name, fn in (("ours", ours), ("torch", theirs)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeat):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / 1e3 / repeat)
    return {name: read / statistics.median(values) / 1e9 for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="rows whose label holds this text")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--budget", type=float, default=115.0,
                        help="seconds in all: a variant starts only where the last one's time still fits")
    parser.add_argument("--sums", action="store_true", help="the sum rows in every variant, not only in the "
                                                                "shipped one and those naming other constants")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.only, args.repeat, args.sums)
        return
    began, last = time.monotonic(), 0.0
    table: dict[str, dict[str, dict]] = {}
    for variant in [""] + [v for v in args.variants.split(";") if v]:
        left = args.budget - (time.monotonic() - began)
        if left < last:  # the last variant's time again would not fit in the budget
            print(f"variant {variant} not run: {left:.0f} s of the budget left, the last took {last:.0f}", flush=True)
            continue
        started = time.monotonic()
        command = [sys.executable, __file__, "--child", variant, "--repeat", str(args.repeat)]
        command += ["--only", args.only] if args.only else []
        command += ["--sums"] if args.sums or not variant or touches_sums(variant) else []
        env = dict(os.environ, JITER_MAGIC_CACHE_DIR=subprocess.check_output(["mktemp", "-d"], text=True).strip())
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=left, check=False)
        except subprocess.TimeoutExpired:
            print(f"variant {variant or 'shipped'} ran past the budget: left out", flush=True)
            continue
        last = time.monotonic() - started
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            print(f"variant {variant or 'shipped'} failed:\n{done.stderr[-2000:]}", flush=True)
            continue
        rows = json.loads(lines[-1][7:])
        for row, figures in rows.items():
            table.setdefault(row, {})[variant or "shipped"] = figures
        ratios = "; ".join(f"{row} {f['ours']:.0f} GB/s {f['ours'] / f['torch']:.3f}x" for row, f in rows.items())
        print(f"variant {variant or 'shipped'} done at {time.monotonic() - began:.0f} s: {ratios}", flush=True)
    for row, by_variant in table.items():
        print(row)
        for variant, figures in by_variant.items():
            print(f"   {variant:40s} {figures['ours']:7.0f} GB/s  torch {figures['torch']:6.0f}  "
                  f"{figures['ours'] / figures['torch']:6.3f}x  {figures['kernel']}")


if __name__ == "__main__":
    main()
