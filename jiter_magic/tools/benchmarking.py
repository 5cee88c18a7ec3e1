"""Time a call and say how close it comes to the memory's bandwidth: `benchmark` and `sweep`.

An elementwise kernel is bound by memory, so its time alone says little: the figure that does is
the bandwidth it achieves (bytes moved per second) against what the device reaches for a plain
copy of as many bytes. Both are measured in the same call, the same way, so the fraction compares
like with like on this machine, at this size, now.

How: the device comes from the inputs. CUDA arrays (torch, CuPy) are timed with CUDA events
around each call on the library's current stream (so the figure is device time, launch gaps
included); host arrays (NumPy, CPU tensors) with `time.perf_counter_ns`, where a sample times a
batch of calls when one call is short (under 0.2 ms) so that the clock's resolution and the
cost of reading it do not dominate. `warmup` calls come first (compiles, allocations, caches),
then `repeat` samples; the median is reported, with the minimum, the maximum and the quartiles,
and notes when the samples disagree or a figure cannot mean what it says (see
jiter_magic.tools.results). Each contender (the function, the copy, the reference) runs its
samples back to back.

Importing this module imports no array library. `jiter_magic` imports it the first time one of its
names is asked for: a new process's first call does not pay for it.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jiter_magic.tools.checks import check_benchmark, check_sweep, checked_sizes, inputs_made
from jiter_magic.tools.inputs import held_bytes, inputs_device_name, output_bytes, place_of
from jiter_magic.tools.results import BenchmarkResult, SweepResult, rate
from jiter_magic.tools.timing import device_copy, time_call


def benchmark(fn: Callable[..., Any], *inputs: Any, reference: Callable[..., Any] | None = None, warmup: int = 3,
              repeat: int = 25, out: Any = None, **kwargs: Any) -> BenchmarkResult:
    """Time `fn(*inputs, out=out, **kwargs)` on the inputs' device; report its median time, its
    bandwidth and the fraction of a same-sized device copy's bandwidth, and with `reference`
    (called as `reference(*inputs)`) its median and the speedup over it."""
    check_benchmark(fn, reference, warmup, repeat)
    place = place_of(inputs)
    read = sum(held_bytes(x) for x in inputs)
    if out is None:
        def call() -> Any:
            return fn(*inputs, **kwargs)
    else:
        def call() -> Any:
            return fn(*inputs, out=out, **kwargs)
    samples, batch, result = time_call(place, call, warmup, repeat)
    written = output_bytes(out if out is not None else result)
    moved = read + written
    copy_gbps = math.nan
    if moved >= 2:
        copy, copied = device_copy(place, moved // 2)
        copy_gbps = rate(copied, statistics.median(time_call(place, copy, warmup, repeat)[0]))
    median = statistics.median(samples)
    gbps = rate(moved, median)
    reference_seconds = speedup = None
    reference_samples: list[float] = []
    if reference is not None:
        compared = reference
        reference_samples = time_call(place, lambda: compared(*inputs), warmup, repeat)[0]
        reference_seconds = statistics.median(reference_samples)
        speedup = reference_seconds / median if median > 0 else math.nan
    return BenchmarkResult(
        name=_name_of(fn), device=inputs_device_name(place), median_seconds=median, min_seconds=min(samples),
        repeat=repeat, bytes=moved, gbps=gbps, copy_gbps=copy_gbps,
        fraction=gbps / copy_gbps if copy_gbps > 0 else math.nan,
        reference_seconds=reference_seconds, speedup=speedup, calls_per_sample=batch, samples=tuple(samples),
        reference_samples=tuple(reference_samples))


def sweep(fn: Callable[..., Any], make_inputs: Callable[[int], Sequence[Any] | Any], sizes: Iterable[int],
          reference: Callable[..., Any] | None = None, **benchmark_kwargs: Any) -> SweepResult:
    """`benchmark(fn, *make_inputs(n), ...)` for each n in `sizes` (elements); `make_inputs(n)` returns
    the inputs as a tuple or list, or one array (the one input). The inputs of one size are dropped
    before the next size's are made. Every argument is checked before anything is timed."""
    check_sweep(fn, make_inputs, reference, benchmark_kwargs)
    checked = checked_sizes(sizes)
    results = []
    for n in checked:
        inputs = inputs_made(make_inputs(n), n)
        results.append(benchmark(fn, *inputs, reference=reference, **benchmark_kwargs))
        del inputs
    return SweepResult(_name_of(fn), checked, tuple(results))


def _name_of(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))
