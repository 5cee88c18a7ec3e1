"""A line in the notebook cell while a call waits for a new specialization to compile.

A call with a new dtype pauses for a compile (0.2-0.5 s on the CPU, more for big functors); in a
notebook that looks like a hang. When a build takes longer than a threshold, a timer puts one line
in the running cell ("compiling ..."), and the build's end rewrites it in place ("compiled in ...").
Only inside a Jupyter kernel: scripts and terminals stay silent, as torch's jiterator is.
`JITER_MAGIC_NOTICE_AFTER` sets the threshold in seconds (default 0.5); `off` silences it.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import jiter_magic.settings as settings
from jiter_magic.errors import device_name
from jiter_magic.kernels.families import KernelFamily

NOTICE_ENV = settings.NOTICE_AFTER.name
DEFAULT_AFTER_S = settings.NOTICE_AFTER.default
_SILENCED: contextvars.ContextVar[bool] = contextvars.ContextVar("jiter_magic_notice_silenced", default=False)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No notice for builds inside this block (the `%%jiterator` magic prints its own line)."""
    token = _SILENCED.set(True)
    try:
        yield
    finally:
        _SILENCED.reset(token)


def threshold() -> float | None:
    """Seconds before the notice appears (JITER_MAGIC_NOTICE_AFTER), or None when it is off."""
    after = settings.NOTICE_AFTER.get()
    return None if after == math.inf else after


def _in_a_kernel() -> bool:
    """Inside a Jupyter kernel; a process that has not imported IPython is not in one (and a call
    must not import it)."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython.get_ipython(), "kernel", None) is not None


class CompileNotice:
    """One build's notice: shown by a timer after the threshold, finished by the building thread."""

    def __init__(self, what: str, why: str, after: float) -> None:
        self._what = what
        self._why = why
        self._started = time.perf_counter()
        self._lock = threading.Lock()
        self._handle: Any = None
        self._finished = False
        self._timer = threading.Timer(after, self._show)
        self._timer.daemon = True
        self._timer.start()

    def _show(self) -> None:
        from IPython.display import display

        with self._lock:
            if not self._finished:
                self._handle = display(_Line(f"jiter_magic: compiling {self._what}{self._why} ..."),
                                       display_id=True)

    def finish(self, how: str | None) -> None:
        """`how`: 'compiled', 'disk', or None when the build failed (its error says the rest)."""
        self._timer.cancel()
        with self._lock:
            self._finished = True
            if self._handle is None:
                return
            seconds = time.perf_counter() - self._started
            if how is None:
                text = f"jiter_magic: compiling {self._what} failed after {seconds:.2f} s{self._why}"
            else:
                verb = "compiled" if how == "compiled" else "loaded from the disk cache"
                text = f"jiter_magic: {verb} {self._what} in {seconds:.2f} s{self._why}"
            self._handle.update(_Line(text))


def what_is_built(name: str, family: KernelFamily, spec: Any, device: int, number: int) -> str:
    """'axpy #1 for (float32, scalar float32) -> (float32), contiguous vec1 on the CPU': the
    specialization's number and what tells it apart from the function's others."""
    return f"{name} #{number} for {family.identity(spec)} on {device_name(device)}"


def why_new(family: KernelFamily, spec: Any, earlier: Sequence[Any]) -> str:
    """' (new scalar kinds; #0 is ...)': the facets that make `spec` new beside `earlier`, '' for a first."""
    new = family.novelty(spec, earlier)
    return f" ({new})" if new else ""


class _Line:
    """Plain text for the cell output (a str would be shown with its quotes)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def start(name: str, family: KernelFamily, spec: Any, device: int,
          earlier: Sequence[Any] = ()) -> CompileNotice | None:
    """A notice for a build of `spec` (of `family`'s kernels) about to start, `earlier` the
    function's specs so far; None outside a Jupyter kernel or when silenced."""
    after = threshold()
    if after is None or _SILENCED.get() or not _in_a_kernel():
        return None
    return CompileNotice(what_is_built(name, family, spec, device, len(earlier)), why_new(family, spec, earlier), after)
