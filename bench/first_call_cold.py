"""A new process's start, cold and warm: what a user meets in a fresh session, beside the warm rows.

For each of a few representative rows, a NEW process with an EMPTY kernel cache (its own
`JITER_MAGIC_CACHE_DIR`) imports jiter_magic, calls once (which compiles), then times, in that
same process, the host cost of a call on small inputs (many calls queued, one synchronize, as
the warm host-cost rows do) and one bandwidth row on large inputs (whose kernel it compiles too),
with torch's own op (and, on CUDA, torch's jiterator) timed beside it in the same process. Then
new processes over that cache, now warm, time `import jiter_magic` and import plus the first
call (after `import torch`, as a notebook restart does): the medians of WARM_PROCESSES.

bench_gpu.py (elementwise) and bench_reduce.py (reductions) call `cold_rows` under `--cold`;
on a machine without CUDA both kinds run on the CPU backend. Standalone:
  python3 bench/first_call_cold.py [elementwise|reduce] [cuda|cpu]   (prints the JSON)
"""
from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
SUMSQ = ("template <typename T> T sq(T x) { return x * x; }\n"
         "template <typename T> T add(T a, T b) { return a + b; }\n")
WARM_PROCESSES = 5
HOST_REPS = 2000
# (label, dtype, what varies): elementwise rows are the axpy of bench_gpu.py's first row in two
# dtypes; reduction rows issue 32's sum of squares over rows and over columns.
ROWS = {"elementwise": (("float32", "float32", None), ("bfloat16", "bfloat16", None)),
        "reduce": (("float32 rows", "float32", 1), ("bfloat16 columns", "bfloat16", 0))}

# Run in each new process: argv[1] is the JSON of the row; prints one JSON line. Timed from after
# `import torch` and the inputs' creation, as a user's first cell after a restart.
CHILD = r'''
import json, statistics, sys, time
import torch
row = json.loads(sys.argv[1])
device, kind, dtype = row["device"], row["kind"], getattr(torch, row["dtype"])
cuda = device == "cuda"
sync = torch.cuda.synchronize if cuda else (lambda: None)
if kind == "elementwise":
    small = (torch.rand(row["small"], device=device).to(dtype), torch.rand(row["small"], device=device).to(dtype))
else:
    small = (torch.randn(4, 256, device=device).to(dtype),)
sync()
start = time.perf_counter()
import jiter_magic
imported = time.perf_counter()
if kind == "elementwise":
    fn = jiter_magic.create_jit_fn(row["code"], alpha=1.0)
    ours = lambda *a: fn(*a)
    native = lambda x, y: torch.add(y, x, alpha=-1.0)  # -x + alpha * y in one torch op
    jiterator = torch.cuda.jiterator._create_jit_fn(row["code"], alpha=1.0) if cuda else None
else:
    fn = jiter_magic.create_reduction_fn(row["code"], 0, map="sq", combine="add")
    ours = lambda x: fn(x, dim=row["dim"])
    native = lambda x: x.sum(row["dim"])  # the read reference of bench_reduce.py
    jiterator = None
ours(*small)
sync()
first = time.perf_counter()
result = {"import_s": imported - start, "import_and_first_call_s": first - start,
          "first_call_s": first - imported}
if row["stage"] == "cold":
    def host_us(call, args, reps):
        began = time.perf_counter()
        for _ in range(reps):
            call(*args)
        sync()
        return (time.perf_counter() - began) / reps * 1e6

    def seconds(call, args):
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record(); call(*args); end.record(); end.synchronize()
            return begin.elapsed_time(end) / 1e3
        began = time.perf_counter(); call(*args)
        return time.perf_counter() - began

    contenders = {"jiter_magic": ours, "torch_native": native}
    if jiterator is not None:
        contenders["torch_jiterator"] = jiterator
    for call in contenders.values():
        host_us(call, small, 50)
    # The contenders take turns, a fifth of the calls each time, and each reports its median turn:
    # a host's speed drifts by tens of percent within seconds, which one block each would read as
    # a difference between them.
    turns = {name: [] for name in contenders}
    for _ in range(5):
        for name, call in contenders.items():
            turns[name].append(host_us(call, small, row["reps"] // 5))
    result["host_us"] = {name: statistics.median(times) for name, times in turns.items()}
    if kind == "elementwise":
        n = row["big"][0]
        big = (torch.rand(n, device=device).to(dtype), torch.rand(n, device=device).to(dtype))
        moved = 3 * n * big[0].element_size()
    else:
        big = (torch.randn(*row["big"], device=device).to(dtype),)
        moved = big[0].numel() * big[0].element_size()
    for call in contenders.values():  # warm up: jiter_magic compiles this layout's kernel here
        for _ in range(3):
            call(*big)
    sync()
    samples = {name: [] for name in contenders}
    for _ in range(row["rounds"]):
        for name, call in contenders.items():
            samples[name] += [seconds(call, big) for _ in range(row["reps_big"])]
    result["GBps"] = {name: moved / statistics.median(times) / 1e9 for name, times in samples.items()}
    result["compiles"] = jiter_magic.cache_stats()["compiles"]
print(json.dumps(result))
'''


def _run(row: dict, cache: str) -> dict:
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=cache, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(row)], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    if done.returncode:
        raise RuntimeError(f"the {row['stage']} process of {row['kind']} {row['label']} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cold_row(kind: str, device: str, label: str, dtype: str, dim: int | None, big: tuple[int, ...]) -> dict:
    """One row: a new process over an empty cache (compile, host cost, bandwidth), then
    WARM_PROCESSES new processes over the cache it filled (import, import + first call)."""
    row = {"kind": kind, "device": device, "label": label, "dtype": dtype, "dim": dim, "big": list(big),
           "code": AXPY if kind == "elementwise" else SUMSQ, "small": 1024, "reps": HOST_REPS,
           "rounds": 3, "reps_big": 10 if device == "cuda" else 3}
    with tempfile.TemporaryDirectory(prefix="jm-cold-") as cache:
        cold = _run(dict(row, stage="cold"), cache)
        warm = [_run(dict(row, stage="warm"), cache) for _ in range(WARM_PROCESSES)]
    return {"case": label, "cold": cold,
            "warm_disk": {key: statistics.median(run[key] for run in warm)
                          for key in ("import_s", "import_and_first_call_s", "first_call_s")}}


def cold_rows(kind: str, device: str, big: tuple[int, ...]) -> list[dict]:
    """Every representative row of `kind` ('elementwise' or 'reduce') on `device`; `big` is the
    bandwidth row's shape (elements for elementwise, (rows, cols) for a reduction)."""
    # The package's bytecode first, as `pip install` compiles it: a tree copied to a machine whose
    # environment sets PYTHONDONTWRITEBYTECODE (the GPU machine's does) would otherwise compile
    # every module from source in each new process, and `import` would time the compiler.
    compileall.compile_dir(os.path.join(ROOT, "jiter_magic"), quiet=1)
    found = []
    for label, dtype, dim in ROWS[kind]:
        result = cold_row(kind, device, label, dtype, dim, big)
        print(json.dumps(result), flush=True)
        found.append(result)
    return found


def markdown(rows: list[dict], warm_host_us: float | None = None) -> list[str]:
    """The cold rows as a table: host cost and GB/s of a new process over an empty cache (torch's
    beside ours, timed in the same process), its first call, and a warm-disk process's start."""
    lines = ["", "A new process over an EMPTY kernel cache (compiles on its first call), then new processes over "
             "the cache it filled (medians of %d):" % WARM_PROCESSES, "",
             "| row | cold: first call | host us: ours | torch native | torch jiterator | GB/s: ours | torch native "
             "| torch jiterator | warm disk: import | import + first call |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def cell(values: dict, key: str, fmt: str) -> str:
        if key not in values:
            return ""
        value = values[key]
        return format(value, fmt) if fmt != "GB/s" else f"{value:.0f}" if value >= 100 else f"{value:.3g}"

    for r in rows:
        cold, warm = r["cold"], r["warm_disk"]
        lines.append(f"| {r['case']} | {cold['first_call_s'] * 1e3:.0f} ms | "
                     + " | ".join(cell(cold["host_us"], k, ".2f") for k in ("jiter_magic", "torch_native",
                                                                             "torch_jiterator"))
                     + " | " + " | ".join(cell(cold["GBps"], k, "GB/s") for k in ("jiter_magic", "torch_native",
                                                                                "torch_jiterator"))
                     + f" | {warm['import_s'] * 1e3:.1f} ms | {warm['import_and_first_call_s'] * 1e3:.1f} ms |")
    if warm_host_us is not None:
        lines += ["", f"The warm process's host cost of the same call (1024 float32): {warm_host_us:.2f} us."]
    return lines


def latency_entries(rows: list[dict]) -> dict[str, dict]:
    """The cold rows as bench_gpu.json's latency entries (compare_results.py reads their units
    from the names: host_us... in us, ..._s in seconds)."""
    found: dict[str, dict] = {}
    for r in rows:
        tag = r["case"].replace(" ", "_")
        found[f"host_us_1024_cold_process_{tag}"] = dict(r["cold"]["host_us"])
        found[f"cold_process_first_call_{tag}_s"] = {"jiter_magic": r["cold"]["first_call_s"]}
        found[f"warm_disk_import_{tag}_s"] = {"jiter_magic": r["warm_disk"]["import_s"]}
        found[f"warm_disk_import_and_first_call_{tag}_s"] = {"jiter_magic": r["warm_disk"]["import_and_first_call_s"]}
    return found


def bandwidth_entries(rows: list[dict], what: str) -> list[dict]:
    """The cold rows' bandwidth as bench_gpu.json rows (the same contenders' keys)."""
    return [{"case": f"cold process: {what}, {r['case']}", "note": "a new process over an empty kernel cache",
             "jiter_magic": r["cold"]["GBps"].get("jiter_magic"),
             "torch_jiterator": r["cold"]["GBps"].get("torch_jiterator"),
             "torch_native": r["cold"]["GBps"].get("torch_native"), "cupy": None, "inductor": None} for r in rows]


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "elementwise"
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    shape = ((1 << 28,) if device == "cuda" else (1 << 22,)) if kind == "elementwise" else \
        ((4096, 65536) if device == "cuda" else (4096, 8192))
    print("\n".join(markdown(cold_rows(kind, device, shape))))
