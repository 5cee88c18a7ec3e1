"""Hand freed heap memory back to the operating system after kernels are unloaded.

Loading a kernel (and compiling it, from many threads at once) spreads small allocations over
glibc's per-thread heaps; once the kernels are unloaded most of that memory is free but stays
in the heaps, so a process that made and dropped thousands of functions would keep its peak
size. Every `UNLOADS_PER_TRIM` unloads, `malloc_trim(0)` returns the free pages (a few
milliseconds; a no-op where the C library has no such call).
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

from jiter_magic.state import RUNTIME

UNLOADS_PER_TRIM = 64


def _load_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim from the symbols already in the process (no library search: that
    would start programs, costing a first call tens of milliseconds)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _load_malloc_trim()


class Unloads:
    """Kernels unloaded in this process, counted to trim the heap now and then: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()


def kernel_unloaded() -> None:
    """Count one unloaded kernel; trim the heap every UNLOADS_PER_TRIM of them. Called from
    finalizers, so it never raises (at interpreter exit this module may be half torn down)."""
    try:
        unloads = RUNTIME.part(Unloads)
        with unloads.lock:
            unloads.count += 1
            due = unloads.count % UNLOADS_PER_TRIM == 0
        if due:
            trim()
    except Exception:  # noqa: BLE001, S110 - a finalizer must not raise
        pass


def trim() -> bool:
    """Return free heap pages to the operating system now; whether the C library could."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True
