"""The records `benchmark` and `sweep` return (`BenchmarkResult`, `SweepResult`), and how their
figures are written: `format_seconds`, `format_bytes`, `format_gbps`, `format_fraction`.

A result also says how far its figures can be trusted, since a busy machine (another process on
two shared cores) moves a median by more than the gap between two kernels: its spread (the
interquartile range of the samples), a note when that spread passes NOISY_SPREAD, a speedup marked
not significant when the quartile ranges of the function and the reference overlap, and an
explanation in place of a fraction of copy above 100% (see `BenchmarkResult.notes`).

Importing this module imports no array library (matplotlib only when a sweep is plotted).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

NOISY_SPREAD = 0.10  # an interquartile range over 10% of the median: the repeats disagree, say so
CPU_CACHE_BYTES = 32 * 2**20  # a host working set under this likely sits in the L2/L3 caches of a
#                               server CPU (tens of MiB), so it times the caches, not the memory


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
    reference_samples: tuple[float, ...] = field(default=(), repr=False, compare=False)  # the reference's

    @property
    def max_seconds(self) -> float:
        """The slowest sample (nan without samples)."""
        return max(self.samples) if self.samples else math.nan

    @property
    def quartiles(self) -> tuple[float, float]:
        """The first and third quartiles of the samples (nan, nan without samples)."""
        return _quartiles(self.samples)

    @property
    def spread(self) -> float:
        """The interquartile range over the median: 0.04 when the middle half of the samples lies
        within 4% of the median's size (nan without samples)."""
        low, high = self.quartiles
        return (high - low) / self.median_seconds if self.median_seconds > 0 else math.nan

    @property
    def noisy(self) -> bool:
        """The spread passes NOISY_SPREAD: the machine disturbed the timing."""
        return self.spread > NOISY_SPREAD  # nan compares False: no samples, no claim

    @property
    def significant(self) -> bool | None:
        """Whether the speedup holds beyond the noise: False when the function's and the reference's
        quartile ranges overlap, None without a reference. Without samples a range is its median."""
        if self.reference_seconds is None:
            return None
        mine = _quartiles(self.samples) if self.samples else (self.median_seconds, self.median_seconds)
        theirs = (_quartiles(self.reference_samples) if self.reference_samples
                  else (self.reference_seconds, self.reference_seconds))
        return mine[1] < theirs[0] or theirs[1] < mine[0]

    @property
    def above_ceiling(self) -> bool:
        """The bandwidth passes the copy measured beside it, which a memory-bound call cannot do."""
        return self.fraction > 1

    @property
    def in_cache(self) -> bool:
        """A host working set under CPU_CACHE_BYTES: it fits in the CPU's caches."""
        return self.device == "CPU" and self.bytes < CPU_CACHE_BYTES

    @property
    def notes(self) -> tuple[str, ...]:
        """Why a figure should be read with care, one sentence each (none for a clean result)."""
        found = []
        if self.noisy:
            found.append(f"timings vary by {self.spread:.0%} between repeats (interquartile range over the "
                         "median): the machine is busy; compare with care")
        working_set = f"{self.bytes / 2**20:.3g} MiB"
        if self.above_ceiling:
            if self.in_cache:
                why = f"the working set ({working_set}) fits in the CPU's caches"
            elif self.device == "CPU":  # a CPU pays about twice for a written byte, so reading can pass a copy
                why = f"the call mostly reads, or the working set ({working_set}) partly fits in the CPU's caches"
            else:
                why = f"the working set ({working_set}) may fit in the GPU's L2 cache"
            found.append(f"above the copy ceiling ({format_fraction(self.fraction)}): {why}, or the "
                         "ceiling's timing was disturbed; not a fraction of the memory's bandwidth")
        elif self.in_cache:
            found.append(f"the working set ({working_set}) fits in the CPU's caches (under "
                         f"{CPU_CACHE_BYTES // 2**20} MiB): this times the caches, not the memory")
        if self.significant is False:
            found.append(f"{self.speedup:.2f}x reference is not significant: the two timings' quartile "
                         "ranges overlap")
        return tuple(found)

    @property
    def reference_gbps(self) -> float | None:
        """The reference's bandwidth on the same bytes (it reads and writes the same arrays)."""
        return None if self.reference_seconds is None else rate(self.bytes, self.reference_seconds)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready), samples as a list."""
        values = asdict(self)
        values["samples"] = list(self.samples)
        return values

    def __str__(self) -> str:
        """One line of figures, then one line a note (see `notes`)."""
        line = (f"{self.name}: {format_seconds(self.median_seconds)} median ({self._runs()}) · "
                f"{format_bytes(self.bytes)} moved · {format_gbps(self.gbps)} GB/s{self._of_copy()}")
        if self.speedup is not None:
            line += f" · {self.speedup:.2f}x reference" + (" (not significant)" if self.significant is False else "")
        return "\n".join([line, *(f"  note: {note}" for note in self.notes)])

    def _runs(self) -> str:
        """'25 runs', and with samples their spread: '25 runs, IQR 12.1–12.6 µs = 4%, range 12–14 µs'."""
        if not self.samples:
            return f"{self.repeat} runs"
        low, high = self.quartiles
        return (f"{self.repeat} runs, IQR {format_seconds(low)}–{format_seconds(high)} = "
                f"{format_fraction(self.spread)}, range {format_seconds(self.min_seconds)}–"
                f"{format_seconds(self.max_seconds)}")

    def _of_copy(self) -> str:
        """' = 96% of copy (4110 GB/s)'; above 100% no fraction is claimed (a note says why)."""
        if self.above_ceiling:
            return f", above the copy ceiling ({format_gbps(self.copy_gbps)} GB/s)"
        return f" = {format_fraction(self.fraction)} of copy ({format_gbps(self.copy_gbps)} GB/s)"

    def _repr_html_(self) -> str:
        from html import escape  # here: the module's import stays light for a new process's first call

        rows = [
            ("device", self.device),
            ("median", f"{format_seconds(self.median_seconds)} ({self.repeat} runs"
                       + (f", {self.calls_per_sample} calls each" if self.calls_per_sample > 1 else "") + ")"),
            ("min", format_seconds(self.min_seconds)),
        ]
        if self.samples:
            low, high = self.quartiles
            rows += [("max", format_seconds(self.max_seconds)),
                     ("IQR", f"{format_seconds(low)}–{format_seconds(high)} ({format_fraction(self.spread)} "
                             "of the median)")]
        rows += [
            ("moved", format_bytes(self.bytes)),
            ("bandwidth", f"{format_gbps(self.gbps)} GB/s"),
            ("copy", f"{format_gbps(self.copy_gbps)} GB/s"),
            ("of copy", "above the copy ceiling" if self.above_ceiling else format_fraction(self.fraction)),
        ]
        if self.reference_seconds is not None and self.speedup is not None:
            rows.append(("reference", f"{format_seconds(self.reference_seconds)} "
                                      f"({format_gbps(rate(self.bytes, self.reference_seconds))} GB/s)"))
            rows.append(("speedup", f"{self.speedup:.2f}x"
                                    + (" (not significant)" if self.significant is False else "")))
        rows += [("note", note) for note in self.notes]
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
        head = (["elements", "moved", "median", "IQR", "GB/s", "copy GB/s", "of copy"]
                + (["speedup"] if with_reference else []))
        rows = []
        for n, r in zip(self.sizes, self.results):
            # the marks are explained by the notes in str(sweep) and in each result's own display
            cells = [str(n), format_bytes(r.bytes), format_seconds(r.median_seconds),
                     format_fraction(r.spread) + (" (noisy)" if r.noisy else ""), format_gbps(r.gbps),
                     format_gbps(r.copy_gbps), "above ceiling" if r.above_ceiling else format_fraction(r.fraction)]
            if with_reference:
                cells.append(f"{r.speedup:.2f}x" + (" (n.s.)" if r.significant is False else ""))
            rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
        header = "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
        device = self.results[0].device if self.results else ""
        return (f"<table><caption><b>{escape(self.name)}</b> on {escape(device)}</caption>"
                f"{header}{''.join(rows)}</table>")


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


def _quartiles(samples: tuple[float, ...]) -> tuple[float, float]:
    """The first and third quartiles, interpolated between order statistics."""
    if len(samples) < 2:
        return (samples[0], samples[0]) if samples else (math.nan, math.nan)
    first, _median, third = statistics.quantiles(samples, n=4, method="inclusive")
    return first, third


def rate(count: int, seconds: float) -> float:
    return count / seconds / 1e9 if seconds > 0 else math.nan
