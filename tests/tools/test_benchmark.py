"""`benchmark`, `sweep`, `fn.benchmark` and `%jiterator_bench` on the CPU: real calls, no mocks.

Timings vary, so no assertion compares two of them; what is checked is what a result is made
of (bytes counted, rates derived from the medians, the copy measured alongside), the errors,
the magic's parsing through a real IPython shell, and the plot's content.
"""
from __future__ import annotations

import dataclasses
import math
import re
import statistics
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("IPython")

from IPython.core.completer import provisionalcompleter  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic import (  # noqa: E402
    ArgumentTypeError,
    BenchmarkResult,
    BindError,
    DeviceError,
    DTypeError,
    InvalidArgumentError,
    JitFunction,
    SweepResult,
    create_jit_fn,
    create_multi_output_jit_fn,
)
from jiter_magic.notebook.bench_line import parse_bench_line  # noqa: E402
from jiter_magic.notebook.magic import JiteratorMagics  # noqa: E402
from jiter_magic.tools.benchmarking import benchmark, sweep  # noqa: E402
from jiter_magic.tools.results import format_bytes, format_gbps, format_seconds  # noqa: E402
from jiter_magic.tools.timing import MIN_SAMPLE_NS  # noqa: E402

AXPY = "template <typename T> T bench_axpy(T x, T y, T alpha) { return x + alpha * y; }"
SUMDIFF = "template <typename T> void bench_sumdiff(T x, T y, T& s, T& d) { s = x + y; d = x - y; }"
axpy = create_jit_fn(AXPY, alpha=2.0)
sumdiff = create_multi_output_jit_fn(SUMDIFF, 2)


def _check_rates(r: BenchmarkResult, repeat: int) -> None:
    """What every result is made of, whatever the machine's speed."""
    assert r.repeat == repeat and len(r.samples) == repeat and r.calls_per_sample >= 1
    assert r.median_seconds == statistics.median(r.samples) and r.min_seconds == min(r.samples)
    assert 0 < r.min_seconds <= r.median_seconds
    assert r.gbps == pytest.approx(r.bytes / r.median_seconds / 1e9)
    assert math.isfinite(r.copy_gbps) and r.copy_gbps > 0
    assert r.fraction == pytest.approx(r.gbps / r.copy_gbps)
    assert 0 < r.fraction
    assert r.device == "CPU"


def test_contiguous_numpy_call_counts_inputs_read_and_output_written():
    x, y = np.ones(50_000, np.float32), np.ones(50_000, np.float32)
    r = benchmark(axpy, x, y, repeat=7, warmup=1)
    assert r.bytes == 3 * x.nbytes
    assert r.name == "bench_axpy"
    _check_rates(r, 7)
    assert r.reference_seconds is None and r.speedup is None and r.reference_gbps is None


def test_broadcast_inputs_count_their_own_bytes_not_the_broadcast_size():
    col, row = np.ones((300, 1), np.float32), np.ones(200, np.float32)
    r = benchmark(axpy, col, row, repeat=3)
    assert r.bytes == 4 * 300 + 4 * 200 + 4 * 300 * 200  # each input once, the (300, 200) output written
    _check_rates(r, 3)
    # an expanded view (stride 0) holds one element per distinct address, and so does broadcast_to
    expanded = torch.rand(300)[:, None].expand(300, 200)
    dense = torch.rand(300, 200)
    assert benchmark(axpy, expanded, dense, repeat=3).bytes == 4 * 300 + 2 * 4 * 300 * 200
    spread = np.broadcast_to(np.ones(200, np.float32), (300, 200))
    assert benchmark(axpy, spread, np.ones((300, 200), np.float32), repeat=3).bytes == 4 * 200 + 2 * 4 * 300 * 200


def test_a_two_output_function_counts_both_outputs():
    x, y = torch.rand(10_000, dtype=torch.float64), torch.rand(10_000, dtype=torch.float64)
    r = sumdiff.benchmark(x, y, repeat=5)
    assert r.bytes == 2 * x.nbytes + 2 * x.nbytes  # two inputs read, two outputs written
    _check_rates(r, 5)


def test_scalars_count_nothing_and_out_arrays_count_as_written():
    x = np.ones(20_000, np.float32)
    assert benchmark(axpy, x, 3.0, repeat=3).bytes == 2 * x.nbytes
    out = np.empty(20_000, np.float64)  # a wider out=: its own bytes are what is written
    r = axpy.benchmark(x, x, out=out, alpha=3.0, repeat=3)
    assert r.bytes == 2 * x.nbytes + out.nbytes
    np.testing.assert_array_equal(out, 4.0)  # out= and the keyword extra reached the call


def test_reference_is_timed_on_the_same_inputs():
    x, y = torch.rand(40_000), torch.rand(40_000)
    seen = []

    def reference(a, b):
        seen.append((a, b))
        return a + 2.0 * b

    r = axpy.benchmark(x, y, reference=reference, repeat=4, warmup=2)
    assert all(a is x and b is y for a, b in seen) and len(seen) >= 2 + 4
    assert r.reference_seconds is not None and r.reference_seconds > 0
    assert r.speedup == pytest.approx(r.reference_seconds / r.median_seconds)
    assert r.reference_gbps == pytest.approx(r.bytes / r.reference_seconds / 1e9)
    _check_rates(r, 4)


def test_repeat_and_warmup_are_honoured():
    """A call longer than a host sample's minimum runs alone in each sample: warm-up calls, three
    calibration calls (the least disturbed decides), then one call a sample."""
    calls = []
    x = np.ones(1000, np.float32)

    def slow(a, b):
        calls.append(1)
        time.sleep(2 * MIN_SAMPLE_NS / 1e9)
        return axpy(a, b)

    r = benchmark(slow, x, x, warmup=2, repeat=6)
    assert r.calls_per_sample == 1 and r.repeat == 6 and len(r.samples) == 6
    assert len(calls) == 2 + 3 + 6
    assert r.name == "slow"


def test_short_host_calls_are_batched_so_that_a_sample_outlasts_the_clock():
    x = np.ones(4, np.float32)
    r = benchmark(axpy, x, x, repeat=3)
    assert r.calls_per_sample > 1
    assert r.median_seconds * r.calls_per_sample >= MIN_SAMPLE_NS / 1e9 * 0.5  # samples last about that long


@pytest.mark.parametrize("inputs, error, message", [
    ((), BindError, "benchmark needs the inputs of a call, got none"),
    ((1.0, 2.0), BindError, "at least one array input (its device decides the timing), got only Python numbers"),
    ((torch.ones(3), np.ones(3)), DeviceError, "inputs mix torch and numpy arrays; convert them to one library"),
    ((torch.ones(3, device="meta"), torch.ones(3, device="meta")), DeviceError,
     "benchmark times CPU and CUDA arrays, got a tensor on meta"),
    ((np.ones(3), object()), DTypeError, "expected a torch tensor, a CuPy or NumPy array"),
])
def test_inputs_that_cannot_be_timed_are_refused_before_any_call(inputs, error, message):
    with pytest.raises(error) as info:
        benchmark(axpy, *inputs)
    assert message in str(info.value)
    assert isinstance(info.value, jiter_magic.JiterError)


@pytest.mark.parametrize("counts, error, message", [
    ({"repeat": 0}, InvalidArgumentError, "benchmark: repeat must be at least 1, got 0"),
    ({"warmup": -1}, InvalidArgumentError, "benchmark: warmup must be at least 0, got -1"),
    ({"repeat": 2.5}, ArgumentTypeError, "benchmark: repeat must be an int, got float"),
    ({"warmup": True}, ArgumentTypeError, "benchmark: warmup must be an int, got bool"),
])
def test_bad_counts_are_refused(counts, error, message):
    with pytest.raises(error, match=re.escape(message)):
        axpy.benchmark(np.ones(3), np.ones(3), **counts)
    assert issubclass(InvalidArgumentError, ValueError) and issubclass(ArgumentTypeError, TypeError)


def test_str_is_one_readable_line_in_sensible_units():
    r = BenchmarkResult(name="axpy", device="cuda:0 NVIDIA H200", median_seconds=12.3e-6, min_seconds=12e-6,
                        repeat=25, bytes=1_020_000_000, gbps=3950.4, copy_gbps=4110.2, fraction=0.961,
                        reference_seconds=17.3e-6, speedup=1.41)
    assert str(r) == ("axpy: 12.3 µs median (25 runs) · 1.02 GB moved · 3950 GB/s = 96% of copy (4110 GB/s) · "
                      "1.41x reference")
    assert (format_seconds(4.56e-3), format_seconds(2.0), format_seconds(850e-9)) == ("4.56 ms", "2.00 s", "0.85 µs")
    assert (format_bytes(512), format_bytes(4100), format_bytes(12_600_000)) == ("512 B", "4.1 kB", "12.6 MB")
    assert (format_gbps(12.34), format_gbps(0.00288), format_gbps(math.nan)) == ("12.3", "0.00288", "n/a")


def test_a_measured_result_prints_and_renders():
    x = np.ones(30_000, np.float32)
    r = axpy.benchmark(x, x, reference=lambda a, b: a + 2 * b, repeat=3)
    line = str(r).splitlines()[0]
    time = r"[\d.]+ (µs|ms|s)"
    assert re.fullmatch(rf"bench_axpy: {time} median \(3 runs, IQR {time}–{time} = \d+%, range {time}–{time}\) · "
                        r"360 kB moved · [\d.]+ GB/s( = \d+% of copy|, above the copy ceiling) "
                        r"\([\d.]+ GB/s\) · [\d.]+x reference( \(not significant\))?", line), line
    assert "the working set (0.343 MiB) fits in the CPU's caches" in str(r)  # 360 kB: a note, above the ceiling or not
    page = r._repr_html_()
    assert page.startswith("<table><caption><b>bench_axpy</b></caption>")
    for text in ("device</th><td style='text-align:left'>CPU", "of copy", "copy", "360 kB", "reference", "speedup"):
        assert text in page
    plain = axpy.benchmark(x, x, repeat=3)._repr_html_()
    assert "speedup" not in plain and "reference" not in plain
    values = r.as_dict()
    assert values["bytes"] == 360_000 and values["repeat"] == 3 and values["samples"] == list(r.samples)
    assert set(values) >= {"device", "median_seconds", "min_seconds", "gbps", "copy_gbps", "fraction",
                           "reference_seconds", "speedup"}


def _timed(samples, reference_samples=(), fraction=0.5, device="CPU", nbytes=100 * 2**20):
    """A result built from given timings, as `benchmark` builds one."""
    median = statistics.median(samples)
    reference = statistics.median(reference_samples) if reference_samples else None
    return BenchmarkResult(name="f", device=device, median_seconds=median, min_seconds=min(samples),
                           repeat=len(samples), bytes=nbytes, gbps=nbytes / median / 1e9, copy_gbps=1.0,
                           fraction=fraction, reference_seconds=reference,
                           speedup=None if reference is None else reference / median,
                           samples=tuple(samples), reference_samples=tuple(reference_samples))


def test_a_result_reports_the_spread_of_its_samples():
    r = _timed([1.0e-3, 1.01e-3, 1.02e-3, 1.03e-3, 1.5e-3])  # quartiles 1.01 and 1.03 ms
    assert r.max_seconds == 1.5e-3 and r.quartiles == pytest.approx((1.01e-3, 1.03e-3))
    assert r.spread == pytest.approx(0.02e-3 / 1.02e-3) and not r.noisy and r.notes == ()
    assert str(r) == ("f: 1.02 ms median (5 runs, IQR 1.01 ms–1.03 ms = 2%, range 1 ms–1.5 ms) · 105 MB moved · "
                      "103 GB/s = 50% of copy (1 GB/s)")
    assert r.quartiles == pytest.approx(tuple(statistics.quantiles(r.samples, n=4, method="inclusive")[::2]))
    page = r._repr_html_()
    assert "<th style='text-align:left'>max</th><td style='text-align:left'>1.5 ms</td>" in page
    assert "IQR</th><td style='text-align:left'>1.01 ms–1.03 ms (2% of the median)" in page
    assert "note" not in page
    bare = dataclasses.replace(r, samples=())  # a result built without samples claims no spread
    assert math.isnan(bare.max_seconds) and math.isnan(bare.spread) and not bare.noisy
    assert str(bare).startswith("f: 1.02 ms median (5 runs) · ")


def test_a_noisy_result_says_so_and_an_overlapping_reference_is_not_significant():
    r = _timed([1.0e-3, 1.2e-3, 1.5e-3, 1.9e-3, 2.0e-3], reference_samples=[0.8e-3, 0.9e-3, 1.3e-3, 1.4e-3, 1.6e-3])
    assert r.noisy and r.spread == pytest.approx(0.7 / 1.5) and r.significant is False
    assert r.speedup == pytest.approx(1.3 / 1.5)
    lines = str(r).splitlines()
    assert lines[0].endswith("· 0.87x reference (not significant)")
    assert lines[1:] == ["  note: timings vary by 47% between repeats (interquartile range over the median): "
                         "the machine is busy; compare with care",
                         "  note: 0.87x reference is not significant: the two timings' quartile ranges overlap"]
    page = r._repr_html_()
    assert "0.87x (not significant)" in page and "the machine is busy; compare with care" in page
    apart = _timed([1.0e-3, 1.0e-3, 1.01e-3], reference_samples=[2.0e-3, 2.1e-3, 2.2e-3])
    assert apart.significant is True and apart.notes == () and str(apart).endswith("· 2.10x reference")
    assert _timed([1e-3]).significant is None


def test_a_bandwidth_above_the_copy_ceiling_is_explained_not_claimed():
    cached = _timed([1e-3, 1e-3, 1e-3], fraction=3.55, nbytes=21_000_000)
    line, *notes = str(cached).splitlines()
    assert cached.above_ceiling and "355%" not in line and "of copy" not in line
    assert "GB/s, above the copy ceiling (1 GB/s)" in line
    assert notes == ["  note: above the copy ceiling (355%): the working set (20 MiB) fits in the CPU's caches, or "
                     "the ceiling's timing was disturbed; not a fraction of the memory's bandwidth"]
    assert "of copy</th><td style='text-align:left'>above the copy ceiling</td>" in cached._repr_html_()
    large = _timed([1e-3], fraction=1.2, nbytes=2**30)
    assert "the call mostly reads, or the working set (1.02e+03 MiB) partly fits" in str(large)
    gpu = _timed([1e-3], fraction=1.2, device="cuda:0 NVIDIA H200", nbytes=2**20)
    assert "the working set (1 MiB) may fit in the GPU's L2 cache" in str(gpu)
    small = _timed([1e-3], fraction=0.5, nbytes=2**20)
    assert not small.above_ceiling and small.in_cache and not gpu.in_cache
    assert str(small).splitlines()[1] == ("  note: the working set (1 MiB) fits in the CPU's caches (under 32 MiB): "
                                         "this times the caches, not the memory")
    assert "50% of copy" in str(small)


def test_a_measured_result_has_a_consistent_spread():
    x = np.ones(1000, np.float32)
    r = axpy.benchmark(x, x, reference=lambda a, b: a + 2 * b, repeat=5, warmup=1)
    low, high = r.quartiles
    assert r.min_seconds <= low <= r.median_seconds <= high <= r.max_seconds == max(r.samples)
    assert len(r.reference_samples) == 5 and r.reference_seconds == statistics.median(r.reference_samples)
    assert r.spread == pytest.approx((high - low) / r.median_seconds) and r.noisy == (r.spread > 0.10)
    assert isinstance(r.significant, bool) and r.in_cache
    assert all(note in str(r) for note in r.notes)


def test_a_result_is_frozen():
    r = axpy.benchmark(np.ones(10), np.ones(10), repeat=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.gbps = 1.0  # type: ignore[misc]


def test_a_result_is_a_dataclass_whose_samples_neither_show_nor_compare():
    """What `%jiterator_bench` (a renamed copy) and users' code (`dataclasses`) rely on."""
    r = axpy.benchmark(np.ones(10), np.ones(10), repeat=3)
    renamed = dataclasses.replace(r, name="renamed")
    assert renamed is not r and renamed.name == "renamed" and r.name == "bench_axpy"
    assert renamed.samples == r.samples and dataclasses.asdict(r)["name"] == "bench_axpy"
    assert "samples" not in repr(r) and r == dataclasses.replace(r, samples=())
    assert hash(r) == hash(dataclasses.replace(r, samples=()))


@pytest.mark.slow
def test_sweep_runs_each_size_and_plots_gbps_against_bytes_with_the_copy_ceiling():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def make_inputs(n):
        made.append(n)
        return torch.rand(n), torch.rand(n)

    result = sweep(axpy, make_inputs, [1000, 10_000, 100_000], reference=lambda a, b: a + 2.0 * b, repeat=3)
    assert isinstance(result, SweepResult) and made == [1000, 10_000, 100_000]
    assert result.sizes == (1000, 10_000, 100_000) and result.name == "bench_axpy"
    assert [r.bytes for r in result.results] == [12_000, 120_000, 1_200_000]
    assert all(r.repeat == 3 and r.speedup is not None for r in result.results)
    try:
        ax = result.plot()
        assert [line.get_label() for line in ax.get_lines()] == ["bench_axpy", "copy (same bytes)", "reference"]
        fn_line, copy_line, ref_line = ax.get_lines()
        assert list(fn_line.get_xdata()) == [12_000, 120_000, 1_200_000]
        assert list(fn_line.get_ydata()) == [r.gbps for r in result.results]
        assert list(copy_line.get_ydata()) == [r.copy_gbps for r in result.results]
        assert list(ref_line.get_ydata()) == [r.reference_gbps for r in result.results]
        assert ax.get_xscale() == "log"
        assert ax.get_xlabel() == "bytes moved (read + written)" and ax.get_ylabel() == "GB/s"
        assert ax.get_title() == "bench_axpy on CPU"
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bench_axpy", "copy (same bytes)", "reference"]
        _figure, given = plt.subplots()
        assert sweep(axpy, make_inputs, [64], repeat=1).plot(ax=given) is given
        assert [line.get_label() for line in given.get_lines()] == ["bench_axpy", "copy (same bytes)"]
    finally:
        plt.close("all")
    page = result._repr_html_()
    assert page.count("<tr>") == 1 + 3 and "speedup" in page and "<th>of copy</th>" in page
    assert str(result).splitlines()[0].startswith("n=1000: bench_axpy: ")


def test_sweep_needs_a_size():
    with pytest.raises(InvalidArgumentError, match="at least one size"):
        sweep(axpy, lambda n: (np.ones(n), np.ones(n)), [])


class _Counted:
    """axpy, counting its calls: a refused argument must be refused before the first one."""

    __name__ = "counted"

    def __init__(self):
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return axpy(*args, **kwargs)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"reference": 5}, ArgumentTypeError, "benchmark: reference must be a callable or None, got int 5"),
    ({"reference": "np.add"}, ArgumentTypeError, "benchmark: reference must be a callable or None, got str"),
    ({"repeat": 2.0}, ArgumentTypeError, "benchmark: repeat must be an int, got float"),
    ({"warmup": -1}, InvalidArgumentError, "benchmark: warmup must be at least 0, got -1"),
])
def test_bad_benchmark_arguments_are_refused_before_any_call(kwargs, error, message):
    fn = _Counted()
    x = np.ones(1000, np.float32)
    with pytest.raises(error) as info:
        benchmark(fn, x, x, **kwargs)
    assert message in str(info.value)
    with pytest.raises(error) as info:
        axpy.benchmark(x, x, **kwargs)  # the method checks the same way
    assert message in str(info.value)
    assert fn.calls == 0


def test_a_function_that_is_not_callable_is_refused():
    with pytest.raises(ArgumentTypeError, match=r"benchmark: fn \(the function timed\) must be a callable, got str"):
        benchmark("axpy", np.ones(3), np.ones(3))


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((lambda n: (np.ones(n),), [10]), {"reference": 5}, ArgumentTypeError,
     "sweep: reference must be a callable or None, got int"),
    (((np.ones(10),), [10]), {}, ArgumentTypeError, "sweep: make_inputs must be a callable, got tuple"),
    ((lambda n: (np.ones(n),), 10), {}, ArgumentTypeError, "sweep: sizes must be an iterable of ints (elements), got int"),
    ((lambda n: (np.ones(n),), [10, 2.5]), {}, ArgumentTypeError, "sweep: each size must be an int (elements), got float"),
    ((lambda n: (np.ones(n),), [10, True]), {}, ArgumentTypeError, "sweep: each size must be an int (elements), got bool"),
    ((lambda n: (np.ones(n),), [10, 0]), {}, InvalidArgumentError, "sweep: each size must be at least 1 element, got 0"),
    ((lambda n: (np.ones(n),), [10]), {"repeat": 0}, InvalidArgumentError, "sweep: repeat must be at least 1, got 0"),
    ((lambda n: (np.ones(n),), [10]), {"warmup": "3"}, ArgumentTypeError, "sweep: warmup must be an int, got str"),
    ((lambda n: {"x": np.ones(n)}, [10]), {}, ArgumentTypeError,
     "sweep: make_inputs(10) must return the call's inputs as a tuple or list (or one array, the one input), got dict"),
    ((lambda n: None, [10]), {}, ArgumentTypeError, "sweep: make_inputs(10) must return the call's inputs"),
])
def test_bad_sweep_arguments_are_refused_before_any_call(args, kwargs, error, message):
    fn = _Counted()
    with pytest.raises(error) as info:
        sweep(fn, *args, **kwargs)
    assert message in str(info.value)
    assert fn.calls == 0


def test_sweep_takes_one_array_from_make_inputs_as_the_one_input():
    neg = create_jit_fn("template <typename T> T bench_neg(T x) { return -x; }")
    result = sweep(neg, lambda n: np.ones(n, np.float32), [100, np.int64(1000)], repeat=2, warmup=1)
    assert result.sizes == (100, 1000) and all(type(n) is int for n in result.sizes)
    assert [r.bytes for r in result.results] == [2 * 4 * 100, 2 * 4 * 1000]  # one input read, one output written
    listed = sweep(axpy, lambda n: [np.ones(n), np.ones(n)], (64,), repeat=1)  # a list: the inputs
    assert listed.results[0].bytes == 3 * 8 * 64


def test_the_package_exports_the_helpers():
    assert jiter_magic.benchmark is benchmark and jiter_magic.sweep is sweep
    assert {"benchmark", "sweep", "BenchmarkResult", "SweepResult"} <= set(jiter_magic.__all__)
    with pytest.raises(AttributeError, match="no attribute 'benchmarks'"):
        jiter_magic.benchmarks  # noqa: B018 - the attribute access is the test


def test_a_new_process_imports_the_benchmarking_and_inspection_modules_only_when_asked():
    """`import jiter_magic`, creating a function and its first call need neither: a new process's
    first result does not wait for them. The names still resolve, also through `import *`."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, numpy, jiter_magic\n"
        "fn = jiter_magic.create_jit_fn('template <typename T> T f(T x) { return x + 1; }')\n"
        "assert fn(numpy.arange(3.0)).tolist() == [1.0, 2.0, 3.0]\n"
        "print(sorted(m for m in sys.modules if m.startswith('jiter_magic.tools.') or m == 'jiter_magic.runtime.inspection'))\n"
        "from jiter_magic import *\n"
        "print(benchmark.__module__, BenchmarkResult.__name__, sorted(m for m in sys.modules if m.endswith('benchmarking')))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "jiter_magic.tools.benchmarking BenchmarkResult ['jiter_magic.tools.benchmarking']"]


# -- %jiterator_bench ---------------------------------------------------------------------------

@pytest.fixture
def shell(fresh_cache, monkeypatch):
    """The process's IPython shell with the extension loaded and a jitted axpy and arrays defined."""
    monkeypatch.setenv("JITER_MAGIC_PANEL", "static")
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jiter_magic")
    names = {"bx": np.ones(20_000, np.float32), "by": np.full(20_000, 2.0, np.float32),
             "bout": np.zeros(20_000, np.float32), "baxpy": axpy, "bnot": len, "bdata": {"x": np.ones(8)}}
    ip.user_ns.update(names)
    yield ip
    ip.run_line_magic("unload_ext", "jiter_magic")
    for name in names:
        ip.user_ns.pop(name, None)


def test_the_magic_times_a_call_prints_the_line_and_returns_the_result(shell, capsys):
    r = shell.run_line_magic("jiterator_bench", "baxpy(bx, by)")
    assert isinstance(r, BenchmarkResult)
    assert capsys.readouterr().out == str(r) + "\n"
    assert r.repeat == 25 and r.bytes == 3 * 80_000 and r.reference_seconds is None
    assert r.name == "baxpy (bench_axpy)"  # the notebook's name, then the C++ function's


def test_the_magic_passes_options_keywords_and_a_reference(shell, capsys):
    r = shell.run_line_magic("jiterator_bench", '-n 4 -w 0 --against "lambda x, y: x + 3 * y" '
                                                "baxpy(bx, by, alpha=3.0, out=bout)")
    assert r.repeat == 4 and r.speedup is not None and r.reference_seconds is not None
    np.testing.assert_array_equal(shell.user_ns["bout"], 7.0)  # alpha and out= reached the call
    assert "x reference" in capsys.readouterr().out
    r = shell.run_line_magic("jiterator_bench", '-n 2 baxpy(*[bdata["x"]] * 2, **{"alpha": 1.0});')
    assert r.repeat == 2 and r.bytes == 3 * 8 * 8  # string literals, * and ** and a trailing ';' are fine
    shell.run_cell("bench_r = %jiterator_bench -n 3 baxpy(bx, by)")
    assert isinstance(shell.user_ns.pop("bench_r"), BenchmarkResult) and shell.user_ns.get("bench_r") is None


@pytest.mark.parametrize("line, message", [
    ("bnot(bx)", "%jiterator_bench: bnot is a builtin_function_or_method, not a jitted function"),
    ("bx", "%jiterator_bench 'bx': expected a call such as axpy(x, y)"),
    ("baxpy(bx, by", "%jiterator_bench 'baxpy(bx, by': not a Python call expression"),
    ("", "give the call to time"),
    ("-n 5", "give the call to time"),
    ("--bogus baxpy(bx, by)", "unrecognized arguments: --bogus"),
    ("-n two baxpy(bx, by)", "argument -n: invalid int value: 'two'"),
    ("-n 0 baxpy(bx, by)", "-n 0: at least one timed run"),
    ("-w -1 baxpy(bx, by)", "-w -1: the number of warm-up calls cannot be negative"),
    ("--against 3 baxpy(bx, by)", "--against 3: expected a callable taking the same inputs, got 3 (a 'int')"),
    ("--against 'lambda: ' baxpy(bx, by)", "--against 'lambda: ': not a Python expression"),
    ('--against "oops baxpy(bx, by)', "No closing quotation"),
])
def test_bad_magic_lines_are_usage_errors(shell, line, message):
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("jiterator_bench", line)
    assert message in str(info.value)


def test_errors_of_the_call_itself_are_the_users(shell):
    with pytest.raises(NameError):
        shell.run_line_magic("jiterator_bench", "baxpy(bx, undefined_name)")
    with pytest.raises(DeviceError, match="mix numpy and torch"):
        shell.user_ns["bt"] = torch.ones(3)
        shell.run_line_magic("jiterator_bench", "baxpy(bx, bt)")
    shell.user_ns.pop("bt")


def test_the_bench_line_parser_keeps_the_call_as_written():
    parser = JiteratorMagics.jiterator_bench.parser
    options = parse_bench_line('-n 7 -w 1 --against "lambda x, y: 2*x + y" f(d["a b"], -y, k=1)', parser)
    assert (options.repeat, options.warmup) == (7, 1)
    assert options.against == "lambda x, y: 2*x + y"
    assert options.call == 'f(d["a b"], -y, k=1)'
    assert parse_bench_line("f(x)", parser) == type(options)(25, 3, None, "f(x)")


def test_the_bench_magic_help_and_unload(shell):
    doc = shell.find_line_magic("jiterator_bench").__doc__
    assert "%jiterator_bench [-n REPEAT] [-w WARMUP] [--against EXPR] CALL" in doc
    assert "Example:\n" in doc and "::" not in doc
    assert doc == JiteratorMagics.jiterator_bench.__doc__
    shell.run_line_magic("unload_ext", "jiter_magic")
    assert shell.find_line_magic("jiterator_bench") is None
    shell.run_line_magic("load_ext", "jiter_magic")
    assert shell.find_line_magic("jiterator_bench") is not None


@pytest.mark.parametrize("text, expected", [
    ("%jiterator_bench -", ["--against", "-n", "-w"]),
    ("%jiterator_bench --a", ["--against"]),
    ("%jiterator_bench -n 5 -", ["--against", "-n", "-w"]),
    ("x = 1\n%jiterator_bench -w 0 --", ["--against"]),
])
def test_the_bench_line_completes_its_options_before_the_call(shell, text, expected):
    with provisionalcompleter():
        assert [c.text for c in shell.Completer.completions(text, len(text))] == expected
    with provisionalcompleter():  # the CALL is Python: IPython's own completions, no options
        offered = [c.text for c in shell.Completer.completions("%jiterator_bench baxpy(b", 24)]
    assert "bx" in offered and "-n" not in offered


@pytest.mark.parametrize("text", ["%jiterator_bench b", "%jiterator_bench ba", "%jiterator_bench -n 5 -w 0 b",
                                  "r = %jiterator_bench b", '%jiterator_bench --against "lambda x, y: x" b'])
def test_the_bench_line_completes_the_jitted_functions_its_call_starts_with(shell, text):
    shell.user_ns["_b_hidden"] = axpy  # IPython's own `_`-names are not offered
    try:
        with provisionalcompleter():
            offered = [c.text for c in shell.Completer.completions(text, len(text))]
    finally:
        shell.user_ns.pop("_b_hidden")
    assert offered == ["baxpy"]  # not the arrays bx, by, nor bnot (len), nor Python's builtins


def test_the_bench_line_offers_every_jitted_function_after_the_magic_and_python_inside_the_call(shell):
    with provisionalcompleter():
        offered = [c.text for c in shell.Completer.completions("%jiterator_bench ", 17)]
    assert "baxpy" in offered
    assert all(isinstance(shell.user_ns[name], JitFunction) for name in offered)
    with provisionalcompleter():  # inside the call, the arguments are any Python names
        offered = [c.text for c in shell.Completer.completions("%jiterator_bench baxpy(bx, b", 28)]
    assert {"bx", "by", "bnot"} <= set(offered)
