"""OpenMP after a fork: a forked child runs host kernels on one thread.

GCC's OpenMP runtime (libgomp) is not fork-safe: in a child of a process whose thread pool has
started, the pool's threads are gone and the child's first parallel region waits for them
forever (plain torch hangs the same way). Once a host kernel is loaded, `HostThreads` holds
libgomp's `omp_set_num_threads`; a forked child's at-fork hook calls it with 1, so the loops
of the thread that forked (a DataLoader worker's, a multiprocessing pool's) run serially and
finish. Threads the child starts later get thread pools of their own (libgomp keeps one a
thread that starts parallel regions), so their loops still run in parallel.
"""
from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

from jiter_magic.state import RUNTIME

LIBGOMP = "libgomp.so.1"  # what `g++ -fopenmp` links host kernels against


class HostThreads:
    """The OpenMP runtime the host kernels use, once one is loaded: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.set_num_threads: Callable[[int], None] | None = None

    def kernel_loaded(self) -> None:
        """Find libgomp among the libraries already loaded (a host kernel brought it)."""
        if self.set_num_threads is not None or not hasattr(os, "RTLD_NOLOAD"):
            return
        try:
            found = ctypes.CDLL(LIBGOMP, mode=os.RTLD_NOLOAD).omp_set_num_threads
        except (OSError, AttributeError):  # no OpenMP (a compiler without -fopenmp): loops are serial anyway
            return
        found.argtypes = (ctypes.c_int,)
        found.restype = None
        self.set_num_threads = found

    def after_fork_in_child(self) -> None:
        if self.set_num_threads is not None:
            self.set_num_threads(1)


def kernel_loaded() -> None:
    RUNTIME.part(HostThreads).kernel_loaded()
