"""GPU benchmark: jiter_magic against torch's jiterator, torch's native ops, Inductor, CuPy and the bandwidth ceiling.

Every case is timed in the same run with CUDA events (median of many launches, after a
warm-up), so the figures compare like with like. Inductor is `torch.compile` (default mode,
`dynamic=False`, `fullgraph=True`) of the case's expression on the same tensors, compiled in the
warm-up; `--no-inductor` leaves it out (bench/compare_gpu.sh, which compares package trees).
`--cold` adds a new process's start (bench/first_call_cold.py): over an empty kernel cache, its
host cost and one bandwidth row, then `import jiter_magic` and the first call with the kernel on
disk; on a machine without CUDA only those run, on the CPU backend (`--only cold`).
Writes bench_gpu.json and bench_gpu.md into --out and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import first_call_cold  # noqa: E402 - bench/, this script's folder
import jiter_magic  # noqa: E402

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
# Math-bound; the same code string for torch's jiterator. jiter_magic calls it with T = float for
# half inputs (its compute type).
MATH = ("template <typename T> T mathy(T x, T y) "
        "{ return ::sin(x) * ::exp(-y * y) + ::erf(x * y) / (T(1) + ::tanh(x)); }")
INDUCTOR = True  # main() turns it off for --no-inductor


def mathy(x, y):
    return torch.sin(x) * torch.exp(-y * y) + torch.erf(x * y) / (1 + torch.tanh(x))


def axpy(alpha):
    return lambda x, y: -x + alpha * y


def compiled(expr, *tensors):
    """Inductor's kernel of `expr` on these tensors, as a call of no arguments (compiled at its first
    call). Made just before its case is timed: the compiled graphs of the cases before are dropped
    here, so that no case meets dynamo's limit on recompiles of one function."""
    if not INDUCTOR:
        return None
    torch._dynamo.reset()
    fn = torch.compile(expr, dynamic=False, fullgraph=True)
    return lambda: fn(*tensors)


def timed(fn, reps: int = 50, warmup: int = 5) -> float:
    """Median seconds of one call, by CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return statistics.median(_event_times(fn, reps))


def host_cost(fn, reps: int = 2000) -> float:
    """Microseconds of host time per call on tiny inputs (launch-bound)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def cupy_kernel():
    try:
        import cupy
    except ImportError:
        return None
    return cupy.ElementwiseKernel("T x, T y, T alpha", "T z", "z = -x + alpha * y", "jm_bench_axpy")


def ceilings(n_bytes: int) -> dict:
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    copy = timed(lambda: dst.copy_(src), reps=30)
    fill = timed(lambda: dst.fill_(1.5), reps=30)
    return {"copy_GBps": 2 * n_bytes / copy / 1e9, "write_GBps": n_bytes / fill / 1e9}


def _event_times(fn, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def case(name, bytes_moved, ours, torch_jit=None, native=None, cupy_fn=None, note="", rounds: int = 6, reps: int = 10,
         inductor=None):
    """GB/s of each contender, timed in interleaved rounds so that clock and thermal drift hit all alike."""
    contenders = {"jiter_magic": ours, "torch_jiterator": torch_jit, "torch_native": native, "cupy": cupy_fn,
                  "inductor": inductor}
    if inductor is not None:
        try:
            inductor()
        except Exception as exc:  # noqa: BLE001 - one case Inductor cannot compile must not end the run
            print(f"Inductor failed on {name!r}: {exc!r}", file=sys.stderr, flush=True)
            contenders["inductor"] = None
            note = (note + "; " if note else "") + f"Inductor failed: {type(exc).__name__}"
    live = {label: fn for label, fn in contenders.items() if fn is not None}
    for fn in live.values():  # warm up: compile, load, allocate
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {label: [] for label in live}
    for _ in range(rounds):
        for label, fn in live.items():
            samples[label] += _event_times(fn, reps)
    row = {"case": name, "note": note}
    for label in contenders:
        row[label] = bytes_moved / statistics.median(samples[label]) / 1e9 if label in live else None
    print(json.dumps(row), flush=True)
    return row


def bandwidth_cases() -> list[dict]:
    rows = []
    ours = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    ref = torch.cuda.jiterator._create_jit_fn(AXPY, alpha=1.0)
    ck = cupy_kernel()
    n = 1 << 28
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    cupy_args = None
    if ck is not None:
        import cupy

        cx, cy = cupy.asarray(x), cupy.asarray(y)
        cz = cupy.empty_like(cx)
        cupy_args = lambda: ck(cx, cy, cupy.float32(2.0), cz)  # noqa: E731
    rows.append(case("-x + alpha*y, 2^28 float32, contiguous (12 B/elem)", 12 * n,
                     lambda: ours(x, y, alpha=2.0), lambda: ref(x, y, alpha=2.0),
                     lambda: torch.add(y, x, alpha=2.0), cupy_args, inductor=compiled(axpy(2.0), x, y)))
    rows.append(case("same, out= preallocated", 12 * n, lambda: ours(x, y, alpha=2.0, out=out), None,
                     lambda: torch.add(y, x, alpha=2.0, out=out)))
    xv, yv = x[1:], y[1:]  # views 4 bytes past 16-byte alignment: no 16-byte vector access fits them
    rows.append(case("misaligned views x[1:], y[1:], 2^28 float32", 12 * (n - 1),
                     lambda: ours(xv, yv, alpha=2.0), lambda: ref(xv, yv, alpha=2.0),
                     lambda: torch.add(yv, xv, alpha=2.0), inductor=compiled(axpy(2.0), xv, yv)))
    del x, y, out, xv, yv
    for dtype in (torch.int8, torch.uint8, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                  torch.complex64):
        m = (1 << 30) // torch.empty((), dtype=dtype).element_size()
        a = (torch.rand(m, device="cuda") * 10).to(dtype)
        b = (torch.rand(m, device="cuda") * 10).to(dtype)
        size = a.element_size()
        alpha = 2 if not dtype.is_floating_point and not dtype.is_complex else 2.0
        rows.append(case(f"contiguous {str(dtype)[6:]}, 1 GiB an input", 3 * size * m,
                         lambda: ours(a, b, alpha=alpha), lambda: ref(a, b, alpha=alpha),
                         lambda: torch.add(b, a, alpha=alpha), inductor=compiled(axpy(alpha), a, b)))
        del a, b
    s = 16384
    col = torch.rand(s, 1, device="cuda")
    row = torch.rand(1, s, device="cuda")
    rows.append(case("broadcast (16384,1) with (1,16384), GB/s of output", 4 * s * s,
                     lambda: ours(col, row, alpha=2.0), lambda: ref(col, row, alpha=2.0),
                     lambda: torch.add(row, col, alpha=2.0), inductor=compiled(axpy(2.0), col, row)))
    del col, row
    t = torch.rand(s, s, device="cuda").T
    u = torch.rand(s, s, device="cuda")
    rows.append(case("first input transposed, 16384^2 float32", 12 * s * s,
                     lambda: ours(t, u, alpha=2.0), lambda: ref(t, u, alpha=2.0),
                     lambda: torch.add(u, t, alpha=2.0), inductor=compiled(axpy(2.0), t, u)))
    th, uh = t.half(), u.half()  # .half() keeps the transposed strides
    del t, u
    rows.append(case("first input transposed, 16384^2 float16", 6 * s * s,
                     lambda: ours(th, uh, alpha=2.0), lambda: ref(th, uh, alpha=2.0),
                     lambda: torch.add(uh, th, alpha=2.0), inductor=compiled(axpy(2.0), th, uh)))
    del th, uh
    t8 = (torch.rand(s, s, device="cuda") * 100).to(torch.int8).T
    u8 = (torch.rand(s, s, device="cuda") * 100).to(torch.int8)
    rows.append(case("first input transposed, 16384^2 int8", 3 * s * s,
                     lambda: ours(t8, u8, alpha=2), lambda: ref(t8, u8, alpha=2),
                     lambda: torch.add(u8, t8, alpha=2), inductor=compiled(axpy(2), t8, u8)))
    del t8, u8
    n = 1 << 28
    h = torch.rand(n, device="cuda").half()
    f = torch.rand(n, device="cuda")
    rows.append(case("half + float inputs (cast path), 2^28", 10 * n,
                     lambda: ours(h, f, alpha=2.0), lambda: ref(h, f, alpha=2.0),
                     lambda: torch.add(f, h, alpha=2.0), inductor=compiled(axpy(2.0), h, f)))
    del h, f
    m_, n_ = 16384, 8192
    mat = torch.rand(m_, n_, device="cuda")
    bias = torch.rand(n_, device="cuda")
    rows.append(case("bias (N,) over (M,N) float32", 8 * m_ * n_ + 4 * n_,
                     lambda: ours(mat, bias, alpha=2.0), lambda: ref(mat, bias, alpha=2.0),
                     lambda: torch.add(bias, mat, alpha=2.0), inductor=compiled(axpy(2.0), mat, bias)))
    del mat, bias
    nchw = torch.rand(64, 256, 64, 64, device="cuda")
    nhwc = nchw.permute(0, 2, 3, 1)
    dense = torch.rand(64, 64, 64, 256, device="cuda")
    rows.append(case("NCHW tensor read as NHWC + dense NHWC", 12 * nchw.numel(),
                     lambda: ours(nhwc, dense, alpha=2.0), lambda: ref(nhwc, dense, alpha=2.0),
                     lambda: torch.add(dense, nhwc, alpha=2.0), inductor=compiled(axpy(2.0), nhwc, dense)))
    nhwc_h, dense_h = nhwc.half(), dense.half()
    del nchw, nhwc, dense
    rows.append(case("NCHW tensor read as NHWC + dense NHWC, float16", 6 * nhwc_h.numel(),
                     lambda: ours(nhwc_h, dense_h, alpha=2.0), lambda: ref(nhwc_h, dense_h, alpha=2.0),
                     lambda: torch.add(dense_h, nhwc_h, alpha=2.0),
                     inductor=compiled(axpy(2.0), nhwc_h, dense_h)))
    del nhwc_h, dense_h
    # int8 at 128 images (the float16 row's 400 MB): at 64 images a copy of the case's 200 MB itself
    # reaches only 84% of the 1 GiB ceiling (bench/results/2026-12-02-h200-batched, sweep 22).
    for images, channels in ((128, 256), (512, 64)):
        nhwc_8 = (torch.rand(images, channels, 64, 64, device="cuda") * 100).to(torch.int8).permute(0, 2, 3, 1)
        dense_8 = (torch.rand(images, 64, 64, channels, device="cuda") * 100).to(torch.int8)
        rows.append(case(f"NCHW tensor read as NHWC + dense NHWC, int8, {channels} channels", 3 * nhwc_8.numel(),
                         lambda: ours(nhwc_8, dense_8, alpha=2), lambda: ref(nhwc_8, dense_8, alpha=2),
                         lambda: torch.add(dense_8, nhwc_8, alpha=2),
                         inductor=compiled(axpy(2), nhwc_8, dense_8)))
        del nhwc_8, dense_8
    cube = torch.rand(1024, 512, 512, device="cuda")
    rotated = cube.permute(2, 0, 1)  # a 3-d rotation read against a dense tensor of its shape
    dense = torch.rand(512, 1024, 512, device="cuda")
    rows.append(case("3-d permute (2,0,1) + dense, float32", 12 * cube.numel(),
                     lambda: ours(rotated, dense, alpha=2.0), lambda: ref(rotated, dense, alpha=2.0),
                     lambda: torch.add(dense, rotated, alpha=2.0), inductor=compiled(axpy(2.0), rotated, dense)))
    del cube, rotated, dense
    k = 1 << 26
    xs = [torch.rand(k, device="cuda") for _ in range(8)]
    code8 = ("template <typename T> T f(T a, T b, T c, T d, T e, T g, T h, T i) "
             "{ return a + b + c + d + e + g + h + i; }")
    ours8, ref8 = jiter_magic.create_jit_fn(code8), torch.cuda.jiterator._create_jit_fn(code8)
    rows.append(case("8 inputs, 2^26 float32", 36 * k, lambda: ours8(*xs), lambda: ref8(*xs),
                     inductor=compiled(lambda a, b, c, d, e, g, h, i: a + b + c + d + e + g + h + i, *xs)))
    code2 = "template <typename T> void f(T x, T y, T& s, T& d) { s = x + y; d = x - y; }"
    ours2 = jiter_magic.create_multi_output_jit_fn(code2, 2)
    ref2 = torch.cuda.jiterator._create_multi_output_jit_fn(code2, 2)
    rows.append(case("2 outputs, 2^26 float32", 16 * k, lambda: ours2(xs[0], xs[1]), lambda: ref2(xs[0], xs[1]),
                     inductor=compiled(lambda x, y: (x + y, x - y), xs[0], xs[1])))
    del xs
    rows += math_cases()
    return rows


def math_cases() -> list[dict]:
    """`sin(x)*exp(-y*y) + erf(x*y)/(1+tanh(x))` on 2^28 elements in [0, 1), float32 and float16:
    every contender checked against float64 before it is timed."""
    rows = []
    ours, ref = jiter_magic.create_jit_fn(MATH), torch.cuda.jiterator._create_jit_fn(MATH)
    n = 1 << 28
    for dtype, tolerance in ((torch.float32, 1e-4), (torch.float16, 1e-2)):
        x, y = (torch.rand(n, device="cuda").to(dtype) for _ in range(2))
        inductor = compiled(mathy, x, y)
        expected = mathy(x.double(), y.double())
        for label, fn in (("jiter_magic", lambda: ours(x, y)), ("torch_jiterator", lambda: ref(x, y)),
                          ("torch_native", lambda: mathy(x, y)), ("inductor", inductor)):
            if fn is not None:
                got = fn()
                assert got.dtype == dtype, (label, got.dtype)
                torch.testing.assert_close(got.double(), expected, rtol=tolerance, atol=tolerance,
                                           msg=lambda m, label=label: f"math row, {dtype}, {label}: {m}")
        del expected, got
        size = x.element_size()
        rows.append(case(f"sin(x)*exp(-y*y) + erf(x*y)/(1+tanh(x)), 2^28 {str(dtype)[6:]}", 3 * size * n,
                         lambda: ours(x, y), lambda: ref(x, y), lambda: mathy(x, y), inductor=inductor))
        del x, y, inductor
    return rows


def latency_cases() -> dict:
    result = {}
    _wait_for_fast_call()
    ours = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    ref = torch.cuda.jiterator._create_jit_fn(AXPY, alpha=1.0)
    for n in (1, 1024):
        x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        result[f"host_us_{n}"] = {
            "jiter_magic": host_cost(lambda: ours(x, y)),
            "torch_jiterator": host_cost(lambda: ref(x, y)),
            "torch_native": host_cost(lambda: torch.add(y, x, alpha=1.0)),
        }
        # The same with the extra given at the call, as torch's jiterator documentation calls it.
        result[f"host_us_{n}_alpha_kwarg"] = {
            "jiter_magic": host_cost(lambda: ours(x, y, alpha=2.0)),
            "torch_jiterator": host_cost(lambda: ref(x, y, alpha=2.0)),
            "torch_native": host_cost(lambda: torch.add(y, x, alpha=2.0)),
        }
    tag = str(time.time_ns())
    fresh = f"template <typename T> T cold_{tag}(T x, T y, T alpha) {{ return -x + alpha * y; }}"
    os.environ["JITER_MAGIC_DISK_CACHE"] = "0"
    x, y = torch.rand(1024, device="cuda"), torch.rand(1024, device="cuda")
    fn = jiter_magic.create_jit_fn(fresh, alpha=1.0)
    start = time.perf_counter()
    fn(x, y)
    torch.cuda.synchronize()
    cold = time.perf_counter() - start
    start = time.perf_counter()
    fn(x.double(), y.double())
    torch.cuda.synchronize()
    cold_dtype = time.perf_counter() - start
    os.environ.pop("JITER_MAGIC_DISK_CACHE")
    rfn = torch.cuda.jiterator._create_jit_fn(fresh.replace("cold_", "tcold_"), alpha=1.0)
    start = time.perf_counter()
    rfn(x, y)
    torch.cuda.synchronize()
    tcold = time.perf_counter() - start
    result["cold_compile_s"] = {"jiter_magic": cold, "torch_jiterator": tcold}
    result["cold_new_dtype_s"] = {"jiter_magic": cold_dtype}
    hit, with_import, cupy_imported = _disk_hit_seconds(False)
    result["new_process_disk_hit_s"] = {"jiter_magic": hit}
    result["new_process_import_and_disk_hit_s"] = {"jiter_magic": with_import}
    result["new_process_disk_hit_imports_cupy"] = {"jiter_magic": cupy_imported}
    result["new_process_disk_hit_cupy_loaded_s"] = {"jiter_magic": _disk_hit_seconds(True)[0]}
    new_function, new_dtype = warm_disk_hit_seconds()
    result["warm_process_disk_hit_new_function_s"] = {"jiter_magic": new_function}
    result["warm_process_disk_hit_new_dtype_s"] = {"jiter_magic": new_dtype}
    return result


# The C call path in any layout: native/call_path.py, native/loader.py before it, backends/ before
# that (the same script times a baseline tree, see compare_gpu.sh).
FAST_CALL_IMPORT = ("try:\n    from jiter_magic.native import call_path as fast_call\n"
                    "except ImportError:\n    try:\n        from jiter_magic.native import loader as fast_call\n"
                    "    except ImportError:\n        from jiter_magic.backends import fast_call\n")


def _wait_for_fast_call() -> None:
    """Steady state: the C call path built (or loaded from the cache) before anything is timed."""
    scope: dict = {}
    try:
        exec(FAST_CALL_IMPORT, scope)
    except ImportError:  # a tree from before the C call path
        return
    scope["fast_call"].wait(600)


DISK_HIT_PROCESSES = 7


def _tree_env(cache_dir: str) -> dict:
    """The environment of a timed new process: this tree's package and a cache of its own."""
    # The C call path's modules from this process's cache, as on a machine that has run before.
    modules = os.environ.get("JITER_MAGIC_FAST_CALL_DIR") or os.environ.get("JITER_MAGIC_CACHE_DIR") or cache_dir
    return dict(os.environ, JITER_MAGIC_CACHE_DIR=cache_dir, JITER_MAGIC_FAST_CALL_DIR=modules,
                PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _disk_hit_seconds(preimport_cupy: bool) -> tuple[float, float, bool]:
    """A new process's first call with the kernel (and the C call path) on disk: (the call, the
    call plus `import jiter_magic`, whether CuPy got imported), timed after `import torch`: the
    medians of DISK_HIT_PROCESSES processes."""
    script = (
        "import sys, time, torch\n"
        + ("import cupy; from cupy.cuda import nvrtc; nvrtc.getVersion()\n" if preimport_cupy else "")
        +
        "x = torch.rand(1024, device='cuda'); y = torch.rand(1024, device='cuda'); torch.cuda.synchronize()\n"
        "t0 = time.perf_counter()\n"
        "import jiter_magic\n"
        f"fn = jiter_magic.create_jit_fn({AXPY!r}, alpha=1.0)\n"
        "t = time.perf_counter(); fn(x, y); torch.cuda.synchronize(); end = time.perf_counter()\n"
        "if len(sys.argv) > 1:\n"
        + FAST_CALL_IMPORT.replace("\n", "\n    ").join(("    ", "")) +
        "fast_call.wait(600)\n"
        "print(end - t, end - t0, 'cupy' in sys.modules)\n"
    )
    with tempfile.TemporaryDirectory() as root:
        env = _tree_env(root)
        subprocess.run([sys.executable, "-c", script, "warm"], env=env, check=True, capture_output=True)
        runs = [subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True,
                               text=True).stdout.strip().splitlines()[-1].split() for _ in range(DISK_HIT_PROCESSES)]
    # One process's figure moves by milliseconds from one to the next: the median of several.
    call = statistics.median(float(run[0]) for run in runs)
    with_import = statistics.median(float(run[1]) for run in runs)
    return call, with_import, any(run[2] == "True" for run in runs)


WARM_DTYPES = ("float64", "float16", "bfloat16", "int32", "int64", "int16", "uint8")
WARM_FUNCTIONS = 5


def warm_disk_hit_seconds(device: str = "cuda") -> tuple[float, float]:
    """A running process's disk hits, its C call path and every module already loaded: (a new
    function whose kernel another process compiled, a new dtype of a function already called),
    each the median over several (WARM_FUNCTIONS functions, WARM_DTYPES)."""
    codes = [f"template <typename T> T warm{k}(T x, T y, T alpha) {{ return alpha * x - y + {k}; }}"
             for k in range(WARM_FUNCTIONS)]
    script = (
        "import sys, time, statistics, torch, jiter_magic\n"
        + FAST_CALL_IMPORT +
        f"codes, dtypes, device = {codes!r}, {WARM_DTYPES!r}, {device!r}\n"
        "sync = torch.cuda.synchronize if device == 'cuda' else (lambda: None)\n"
        "x = torch.rand(1024, device=device); y = torch.rand(1024, device=device)\n"
        "first = jiter_magic.create_jit_fn(codes[0], alpha=1.0); first(x, y); sync()\n"
        "fast_call.wait(600)\n"
        "if sys.argv[1] == 'compile':\n"
        "    for code in codes:\n"
        "        fn = jiter_magic.create_jit_fn(code, alpha=1.0)\n"
        "        for name in ('float32', *dtypes):\n"
        "            fn(x.to(getattr(torch, name)), y.to(getattr(torch, name)))\n"
        "    sync(); sys.exit(0)\n"
        "functions, kinds = [], []\n"
        "for code in codes[1:]:\n"
        "    fn = jiter_magic.create_jit_fn(code, alpha=1.0)\n"
        "    t = time.perf_counter(); fn(x, y); sync(); functions.append(time.perf_counter() - t)\n"
        "cast = {name: (x.to(getattr(torch, name)), y.to(getattr(torch, name))) for name in dtypes}; sync()\n"
        "for name in dtypes:\n"
        "    t = time.perf_counter(); first(*cast[name]); sync(); kinds.append(time.perf_counter() - t)\n"
        "assert jiter_magic.cache_stats()['compiles'] == 0, jiter_magic.cache_stats()\n"
        "print(statistics.median(functions), statistics.median(kinds))\n"
    )
    with tempfile.TemporaryDirectory() as root:
        env = _tree_env(root)
        subprocess.run([sys.executable, "-c", script, "compile"], env=env, check=True, capture_output=True)
        done = subprocess.run([sys.executable, "-c", script, "time"], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the warm disk-hit process failed:\n{done.stderr}")
    new_function, new_dtype = (float(v) for v in done.stdout.split()[-2:])
    return new_function, new_dtype


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU ({torch.get_num_threads()} threads)"


def markdown(rows, latency, ceiling, cold=()) -> str:
    lines = [
        f"Device: {device_name()}, torch {torch.__version__}, jiter_magic {jiter_magic.__version__}, "
        f"date {time.strftime('%Y-%m-%d')}",
        f"Ceilings: copy {ceiling['copy_GBps']:.0f} GB/s (read + write), write-only {ceiling['write_GBps']:.0f} GB/s"
        + (f"; at the end: copy {ceiling['copy_GBps_end']:.0f}, write-only {ceiling['write_GBps_end']:.0f}"
           if "copy_GBps_end" in ceiling else "") if ceiling else "Ceilings: not measured (no CUDA device)",
        "",
        "| case (GB/s) | jiter_magic | torch jiterator | torch native | Inductor | CuPy | ours / torch jiterator "
        "| ours / Inductor | ours / copy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    copy = max(ceiling.get("copy_GBps", 0.0), ceiling.get("copy_GBps_end", 0.0))  # the higher: the stricter fraction

    def fmt(v):
        return "" if v is None else f"{v:.0f}"

    def ratio(r, key):
        return f"{r['jiter_magic'] / r[key]:.2f}x" if r.get(key) else ""

    for r in rows:
        lines.append(f"| {r['case']} | {fmt(r['jiter_magic'])} | {fmt(r['torch_jiterator'])} | "
                     f"{fmt(r['torch_native'])} | {fmt(r.get('inductor'))} | {fmt(r['cupy'])} | "
                     f"{ratio(r, 'torch_jiterator')} | {ratio(r, 'inductor')} | "
                     f"{format(r['jiter_magic'] / copy, '.0%') if copy else ''} |")
    notes = [f"- {r['case']}: {r['note']}" for r in rows if r.get("note")]
    lines += ["", "Notes:", *notes] if notes else []
    lines += ["", "| latency | jiter_magic | torch jiterator | torch native |", "| --- | ---: | ---: | ---: |"]
    for key, values in latency.items():
        cells = [values.get(k) for k in ("jiter_magic", "torch_jiterator", "torch_native")]
        unit = "us" if key.startswith("host") else "s"
        lines.append(f"| {key} | " + " | ".join("" if c is None else str(c) if isinstance(c, bool)
                                                else f"{c:.4g} {unit}" for c in cells) + " |")
    if cold:
        lines += first_call_cold.markdown(list(cold), latency.get("host_us_1024", {}).get("jiter_magic"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--only", choices=["bandwidth", "latency", "cold"], default=None)
    parser.add_argument("--no-inductor", action="store_true", help="time no torch.compile column (faster)")
    parser.add_argument("--cold", action="store_true",
                        help="also a new process's start over an empty kernel cache (bench/first_call_cold.py)")
    args = parser.parse_args()
    global INDUCTOR
    INDUCTOR = not args.no_inductor
    cuda = torch.cuda.is_available()
    if not cuda and args.only not in (None, "cold"):
        parser.error("no CUDA device here: only the cold rows run on the CPU (--only cold, or --cold)")
    warm = cuda and args.only != "cold"  # without CUDA only the cold rows, on the CPU backend
    ceiling = ceilings(1 << 30) if warm else {}
    print(json.dumps(ceiling), flush=True)
    latency = latency_cases() if warm and args.only in (None, "latency") else {}
    rows = bandwidth_cases() if warm and args.only in (None, "bandwidth") else []
    if rows:  # the clock drifts over a run: the ceilings again, after the cases
        ceiling.update({f"{k}_end": v for k, v in ceilings(1 << 30).items()})
    cold = []
    if args.cold or args.only == "cold" or not cuda:
        cold = first_call_cold.cold_rows("elementwise", "cuda" if cuda else "cpu", (1 << 28,) if cuda else (1 << 22,))
        latency.update(first_call_cold.latency_entries(cold))
        rows += first_call_cold.bandwidth_entries(cold, f"-x + alpha*y, 2^{28 if cuda else 22}, contiguous")
    table = markdown(rows, latency, ceiling, cold)
    with open(os.path.join(args.out, "bench_gpu.json"), "w") as handle:
        json.dump({"ceiling": ceiling, "rows": rows, "latency": latency, "cold": cold, "device": device_name(),
                   "date": time.strftime("%Y-%m-%d")}, handle, indent=1)
    with open(os.path.join(args.out, "bench_gpu.md"), "w") as handle:
        handle.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
