"""Seconds a call takes on its device: CUDA events on a GPU, `time.perf_counter_ns` over batches of
calls on the host (see jiter_magic.tools.benchmarking), and the device copy timed beside a call.

Importing this module imports no array library: torch, CuPy or NumPy are imported by the call that times on them.
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any

from jiter_magic.tools.inputs import Place

Call = Callable[[], Any]

MIN_SAMPLE_NS = 200_000  # a host sample lasts at least this long: batch short calls up to it
MAX_BATCH = 10_000  # calls in one host sample at most
PROBE_AGAIN_NS = 10_000_000  # a host calibration run shorter than this is repeated (see _time_host)


def time_call(place: Place, call: Call, warmup: int, repeat: int) -> tuple[list[float], int, Any]:
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


def device_copy(place: Place, nbytes: int) -> tuple[Call, int]:
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
        copy((hsrc,), hdst, {})  # compiled or loaded now, never in a timed run
        return (lambda: copy((hsrc,), hdst, {})), 2 * hsrc.nbytes
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
def _host_copy() -> Callable[[tuple, Any, dict], Any]:
    """A jitted copy's call path, made from the runtime's stages (below the tools), not as a
    `JitFunction`: the facade's `fn.benchmark` imports the tools, so the tools never import it."""
    from jiter_magic.frontend.bind import bind
    from jiter_magic.frontend.parse import parse_functor
    from jiter_magic.kernels.families import ELEMENTWISE
    from jiter_magic.runtime.dispatch import Dispatcher
    from jiter_magic.runtime.loader import KernelLoader

    functor = parse_functor("template <typename T> T jm_bench_copy(T x) { return x; }")
    calls = Dispatcher(functor.name, KernelLoader(bind(functor, [], None), ELEMENTWISE), {}, True)
    calls.set_backend("cpu")
    return calls.call
