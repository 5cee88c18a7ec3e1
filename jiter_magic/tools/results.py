"""The records `benchmark` and `sweep` return (`BenchmarkResult`, `SweepResult`), and how their
figures are written: `format_seconds`, `format_bytes`, `format_gbps`, `format_fraction`.

Importing this module imports no array library (matplotlib only when a sweep is plotted).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


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
        return None if self.reference_seconds is None else rate(self.bytes, self.reference_seconds)

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
                                      f"({format_gbps(rate(self.bytes, self.reference_seconds))} GB/s)"))
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


def rate(count: int, seconds: float) -> float:
    return count / seconds / 1e9 if seconds > 0 else math.nan
