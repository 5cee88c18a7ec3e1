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
then `repeat` samples; the median is reported, and the minimum. Each contender (the function,
the copy, the reference) runs its samples back to back.

Importing this module imports no array library. `jiter_magic` imports it the first time one of its
names is asked for: a new process's first call does not pay for it.
"""
from __future__ import annotations

import functools
import math
import numbers
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jiter_magic.errors import ArgumentTypeError, BindError, DeviceError, InvalidArgumentError, where

Call = Callable[[], Any]

MIN_SAMPLE_NS = 200_000  # a host sample lasts at least this long: batch short calls up to it
MAX_BATCH = 10_000  # calls in one host sample at most
PROBE_AGAIN_NS = 10_000_000  # a host calibration run shorter than this is repeated (see _time_host)


@dataclass(frozen=True, slots=True)
class BenchmarkResult:
    """One timed call: its median time, the bandwidth it achieved, and the copy ceiling beside it."""

    name: str
    device: str  # "cuda:0 NVIDIA H200" or "CPU"
    median_seconds: float
    min_seconds: float
    repeat: int  # timed samples
    bytes: int  # read (each array input once, as stored) + written (each output)
    gbps: float  # bytes / median_seconds / 1e9
    copy_gbps: float  # a device copy of as many bytes (half read, half written), timed alike
    fraction: float  # gbps / copy_gbps
    reference_seconds: float | None = None  # the reference's median, when one was given
    speedup: float | None = None  # reference_seconds / median_seconds
    calls_per_sample: int = 1  # >1 on the host for short calls (see the module's docstring)
    samples: tuple[float, ...] = field(default=(), repr=False, compare=False)  # seconds a call, each sample

    @property
    def reference_gbps(self) -> float | None:
        """The reference's bandwidth on the same bytes (it reads and writes the same arrays)."""
        return None if self.reference_seconds is None else _rate(self.bytes, self.reference_seconds)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready), samples as a list."""
        values = asdict(self)
        values["samples"] = list(self.samples)
        return values

    def __str__(self) -> str:
        line = (f"{self.name}: {format_seconds(self.median_seconds)} median ({self.repeat} runs) · "
                f"{format_bytes(self.bytes)} moved · {format_gbps(self.gbps)} GB/s = "
                f"{format_fraction(self.fraction)} of copy ({format_gbps(self.copy_gbps)} GB/s)")
        if self.speedup is not None:
            line += f" · {self.speedup:.2f}x reference"
        return line

    def _repr_html_(self) -> str:
        from html import escape  # here: the module's import stays light for a new process's first call

        rows = [
            ("device", self.device),
            ("median", f"{format_seconds(self.median_seconds)} ({self.repeat} runs"
                       + (f", {self.calls_per_sample} calls each" if self.calls_per_sample > 1 else "") + ")"),
            ("min", format_seconds(self.min_seconds)),
            ("moved", format_bytes(self.bytes)),
            ("bandwidth", f"{format_gbps(self.gbps)} GB/s"),
            ("copy", f"{format_gbps(self.copy_gbps)} GB/s"),
            ("of copy", format_fraction(self.fraction)),
        ]
        if self.reference_seconds is not None and self.speedup is not None:
            rows.append(("reference", f"{format_seconds(self.reference_seconds)} "
                                      f"({format_gbps(_rate(self.bytes, self.reference_seconds))} GB/s)"))
            rows.append(("speedup", f"{self.speedup:.2f}x"))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table><caption><b>{escape(self.name)}</b></caption>{body}</table>"


@dataclass(frozen=True, repr=False, slots=True)
class SweepResult:
    """`benchmark` at several sizes: a table, and a plot of GB/s against bytes with the copy ceiling."""

    name: str
    sizes: tuple[int, ...]
    results: tuple[BenchmarkResult, ...]

    def __repr__(self) -> str:
        return f"SweepResult(name={self.name!r}, sizes={self.sizes}, results=<{len(self.results)} BenchmarkResult>)"

    def __str__(self) -> str:
        return "\n".join(f"n={n}: {r}" for n, r in zip(self.sizes, self.results))

    def plot(self, ax: Any = None, reference_label: str = "reference") -> Any:
        """Draw GB/s against bytes moved (log x): the function, the copy measured at each size, and
        the reference if there was one (labelled `reference_label`). Returns the matplotlib Axes."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("SweepResult.plot needs matplotlib: pip install matplotlib") from None
        if ax is None:
            _figure, ax = plt.subplots(figsize=(6.4, 3.8))
        moved = [r.bytes for r in self.results]
        ax.plot(moved, [r.gbps for r in self.results], marker="o", label=self.name)
        ax.plot(moved, [r.copy_gbps for r in self.results], linestyle="--", color="gray", label="copy (same bytes)")
        if self.results and self.results[0].reference_seconds is not None:
            ax.plot(moved, [r.reference_gbps for r in self.results], marker="s", label=reference_label)
        ax.set_xscale("log")
        ax.set_xlabel("bytes moved (read + written)")
        ax.set_ylabel("GB/s")
        ax.set_title(f"{self.name} on {self.results[0].device}" if self.results else self.name)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend()
        return ax

    def _repr_html_(self) -> str:
        from html import escape  # here: the module's import stays light for a new process's first call

        with_reference = bool(self.results) and self.results[0].speedup is not None
        head = ["elements", "moved", "median", "GB/s", "copy GB/s", "of copy"] + (["speedup"] if with_reference else [])
        rows = []
        for n, r in zip(self.sizes, self.results):
            cells = [str(n), format_bytes(r.bytes), format_seconds(r.median_seconds), format_gbps(r.gbps),
                     format_gbps(r.copy_gbps), format_fraction(r.fraction)]
            if with_reference:
                cells.append(f"{r.speedup:.2f}x")
            rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
        header = "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
        device = self.results[0].device if self.results else ""
        return (f"<table><caption><b>{escape(self.name)}</b> on {escape(device)}</caption>"
                f"{header}{''.join(rows)}</table>")


def benchmark(fn: Callable[..., Any], *inputs: Any, reference: Callable[..., Any] | None = None, warmup: int = 3,
              repeat: int = 25, out: Any = None, **kwargs: Any) -> BenchmarkResult:
    """Time `fn(*inputs, out=out, **kwargs)` on the inputs' device; report its median time, its
    bandwidth and the fraction of a same-sized device copy's bandwidth, and with `reference`
    (called as `reference(*inputs)`) its median and the speedup over it."""
    _check_counts(warmup, repeat)
    place = _place_of(inputs)
    read = sum(_held_bytes(x) for x in inputs)
    if out is None:
        def call() -> Any:
            return fn(*inputs, **kwargs)
    else:
        def call() -> Any:
            return fn(*inputs, out=out, **kwargs)
    samples, batch, result = _time(place, call, warmup, repeat)
    written = _output_bytes(out if out is not None else result)
    moved = read + written
    copy_gbps = math.nan
    if moved >= 2:
        copy_call, copied = _copy_call(place, moved // 2)
        copy_gbps = _rate(copied, _median(_time(place, copy_call, warmup, repeat)[0]))
    median = _median(samples)
    gbps = _rate(moved, median)
    reference_seconds = speedup = None
    if reference is not None:
        compared = reference
        reference_seconds = _median(_time(place, lambda: compared(*inputs), warmup, repeat)[0])
        speedup = reference_seconds / median if median > 0 else math.nan
    return BenchmarkResult(
        name=_name_of(fn), device=_device_name(place), median_seconds=median, min_seconds=min(samples),
        repeat=repeat, bytes=moved, gbps=gbps, copy_gbps=copy_gbps,
        fraction=gbps / copy_gbps if copy_gbps > 0 else math.nan,
        reference_seconds=reference_seconds, speedup=speedup, calls_per_sample=batch, samples=tuple(samples))


def sweep(fn: Callable[..., Any], make_inputs: Callable[[int], Sequence[Any]], sizes: Iterable[int],
          reference: Callable[..., Any] | None = None, **benchmark_kwargs: Any) -> SweepResult:
    """`benchmark(fn, *make_inputs(n), ...)` for each n in `sizes` (elements); the inputs of one size
    are dropped before the next size's are made."""
    sizes = tuple(sizes)
    if not sizes:
        raise InvalidArgumentError("sweep needs at least one size")
    results = []
    for n in sizes:
        inputs = tuple(make_inputs(n))
        results.append(benchmark(fn, *inputs, reference=reference, **benchmark_kwargs))
        del inputs
    return SweepResult(_name_of(fn), sizes, tuple(results))


# -- formatting ---------------------------------------------------------------------------------

def format_seconds(seconds: float) -> str:
    """'12.3 µs', '4.56 ms', '1.20 s'."""
    if not math.isfinite(seconds):
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.2f} s"


def format_bytes(count: int) -> str:
    """Decimal units, as GB/s are: '512 B', '4.1 kB', '1.02 GB'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def format_gbps(gbps: float) -> str:
    if not math.isfinite(gbps):
        return "n/a"
    return f"{gbps:.0f}" if gbps >= 100 else f"{gbps:.3g}"


def format_fraction(fraction: float) -> str:
    return "n/a" if not math.isfinite(fraction) else f"{fraction:.0%}"


def _median(samples: Sequence[float]) -> float:
    """The median (statistics.median, without importing statistics on every `import jiter_magic`)."""
    ordered = sorted(samples)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _rate(count: int, seconds: float) -> float:
    return count / seconds / 1e9 if seconds > 0 else math.nan


def _name_of(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))


# -- where the inputs live, and their bytes -------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Place:
    library: str  # 'torch', 'cupy' or 'numpy'
    device: int  # -1: the host


def _check_counts(warmup: int, repeat: int) -> None:
    for name, value, least in (("warmup", warmup, 0), ("repeat", repeat, 1)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArgumentTypeError(f"benchmark: {name} must be an int, got {type(value).__name__}")
        if value < least:
            raise InvalidArgumentError(f"benchmark: {name} must be at least {least}, got {value}")


def _array(x: Any) -> tuple[Any, str] | None:
    """(the array, its library) for an array input, None for a Python or NumPy number; foreign arrays
    (CUDA array interface, DLPack, buffers) are seen through the CuPy or NumPy array they convert to."""
    from jiter_magic.arrays import adapter_for, coerce

    adapter = adapter_for(x)
    if adapter is None:
        if isinstance(x, numbers.Number):
            return None
        x, adapter = coerce(x)
    if adapter.lifts:
        raise InvalidArgumentError(
            f"benchmark times calls on arrays a kernel reads (torch tensors, NumPy or CuPy arrays), not on "
            f"{type(x).__name__}, which runs calls its own way (DTensor, Dask, traced tensors): time a local "
            "shard (x.to_local()) or a block, or time the whole computation yourself")
    return x, adapter.library


def _device_of(x: Any, library: str) -> int:
    if library == "torch":
        if x.device.type not in ("cpu", "cuda"):
            raise DeviceError(f"benchmark times CPU and CUDA arrays, got a tensor on {x.device}")
        return -1 if x.device.type == "cpu" else int(x.device.index)
    return int(x.device.id) if library == "cupy" else -1


def _place_of(inputs: tuple) -> _Place:
    """The one library and device of the array inputs (which decide how calls are timed)."""
    if not inputs:
        raise BindError("benchmark needs the inputs of a call, got none")
    place = None
    for x in inputs:
        found = _array(x)
        if found is None:
            continue
        array, library = found
        here = _Place(library, _device_of(array, library))
        if place is None:
            place = here
        elif here.library != place.library:
            raise DeviceError(f"benchmark inputs mix {place.library} and {here.library} arrays; "
                              "convert them to one library")
        elif here.device != place.device:
            raise DeviceError(f"benchmark inputs live on different devices ({where(place.device)} and "
                              f"{where(here.device)}); move them to one device")
    if place is None:
        raise BindError("benchmark needs at least one array input (its device decides the timing), "
                        "got only Python numbers")
    return place


def _held_bytes(x: Any) -> int:
    """Bytes of the elements an array holds, each counted once: a stride-0 dimension (expand,
    broadcast_to) counts one element, so a broadcast input counts its own bytes; numbers count 0."""
    found = _array(x)
    if found is None:
        return 0
    array, library = found
    if library == "torch":
        shape, strides, itemsize = tuple(array.shape), tuple(array.stride()), array.element_size()
    else:
        shape, strides, itemsize = tuple(array.shape), tuple(array.strides), array.itemsize
    if 0 in shape:
        return 0
    return math.prod(n for n, s in zip(shape, strides) if s != 0) * itemsize


def _output_bytes(result: Any) -> int:
    """Bytes written: each array of the call's result (or of `out=`)."""
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    return sum(_held_bytes(o) for o in outputs if o is not None and not isinstance(o, numbers.Number))


def _device_name(place: _Place) -> str:
    if place.device < 0:
        return "CPU"
    if place.library == "torch":
        import torch

        return f"cuda:{place.device} {torch.cuda.get_device_name(place.device)}"
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(place.device)["name"]
    return f"cuda:{place.device} {name.decode() if isinstance(name, bytes) else name}"


# -- timing ---------------------------------------------------------------------------------------

def _time(place: _Place, call: Call, warmup: int, repeat: int) -> tuple[list[float], int, Any]:
    """Seconds a call for each of `repeat` samples after `warmup` calls, the calls a sample, and the
    last call's result."""
    if place.device < 0:
        return _time_host(call, warmup, repeat)
    if place.library == "torch":
        import torch

        with torch.cuda.device(place.device):
            return _time_events(call, warmup, repeat, lambda: torch.cuda.Event(enable_timing=True),
                                lambda start, end: start.elapsed_time(end), torch.cuda.synchronize)
    import cupy

    with cupy.cuda.Device(place.device):
        return _time_events(call, warmup, repeat, cupy.cuda.Event, cupy.cuda.get_elapsed_time,
                            cupy.cuda.Device().synchronize)


def _time_events(call: Call, warmup: int, repeat: int, event: Callable[[], Any],
                 elapsed_ms: Callable[[Any, Any], float], synchronize: Callable[[], None]
                 ) -> tuple[list[float], int, Any]:
    """CUDA events recorded on the current stream around each call; the end event is waited for."""
    result = None
    for _ in range(warmup):
        result = call()
    synchronize()
    start, end = event(), event()
    samples = []
    for _ in range(repeat):
        start.record()
        result = call()
        end.record()
        end.synchronize()
        samples.append(elapsed_ms(start, end) / 1e3)
    return samples, 1, result


def _time_host(call: Call, warmup: int, repeat: int) -> tuple[list[float], int, Any]:
    """perf_counter_ns around a batch of calls a sample. The batch grows in calibration runs (which
    warm up too) until a sample lasts MIN_SAMPLE_NS, so that the clock's cost and resolution are
    negligible against it; a calibration shorter than PROBE_AGAIN_NS is run three times and the least
    disturbed run decides, so that one preemption does not leave short calls unbatched."""
    result = None
    for _ in range(warmup):
        result = call()
    batch = 1
    while True:
        elapsed, result = _run_batch(call, batch)
        if elapsed < PROBE_AGAIN_NS:
            elapsed = min(elapsed, _run_batch(call, batch)[0], _run_batch(call, batch)[0])
        if elapsed >= MIN_SAMPLE_NS or batch >= MAX_BATCH:
            break
        grow = MIN_SAMPLE_NS * 1.2 / elapsed if elapsed > 0 else 10.0
        batch = min(MAX_BATCH, max(batch * 2, math.ceil(batch * grow)))
    samples = []
    for _ in range(repeat):
        elapsed, result = _run_batch(call, batch)
        samples.append(elapsed / batch / 1e9)
    return samples, batch, result


def _run_batch(call: Call, batch: int) -> tuple[int, Any]:
    """Nanoseconds `batch` calls take, and the last one's result."""
    result = None
    start = time.perf_counter_ns()
    for _ in range(batch):
        result = call()
    return time.perf_counter_ns() - start, result


def _copy_call(place: _Place, nbytes: int) -> tuple[Call, int]:
    """A copy of about `nbytes` bytes on the inputs' device (buffers touched first), and the bytes
    it moves (read + written).

    On a GPU, the library's own device-to-device copy. On the host, the same OpenMP loop a jitted
    kernel runs, copying int64 elements: NumPy's copyto (and torch's copy of small tensors) uses
    one thread, a ceiling every multi-threaded kernel would pass."""
    if place.device < 0:
        import numpy

        copy = _host_copy()
        hsrc = numpy.ones(max(1, nbytes // 8), dtype=numpy.int64)
        hdst = numpy.zeros_like(hsrc)
        copy(hsrc, out=hdst)  # compiled or loaded now, never in a timed run
        return (lambda: copy(hsrc, out=hdst)), 2 * hsrc.nbytes
    if place.library == "torch":
        import torch

        src = torch.ones(nbytes, dtype=torch.uint8, device=f"cuda:{place.device}")
        dst = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{place.device}")
        return (lambda: dst.copy_(src)), 2 * nbytes
    import cupy

    with cupy.cuda.Device(place.device):
        csrc = cupy.ones(nbytes, dtype=cupy.uint8)
        cdst = cupy.zeros(nbytes, dtype=cupy.uint8)
    return (lambda: cupy.copyto(cdst, csrc)), 2 * nbytes


@functools.lru_cache(maxsize=1)
def _host_copy() -> Any:
    from jiter_magic.function import JitFunction

    copy = JitFunction("template <typename T> T jm_bench_copy(T x) { return x; }", None, {})
    copy.backend = "cpu"
    return copy
