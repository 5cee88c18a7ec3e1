"""The C call path's two small extension modules, each loaded the first time it is asked for.

The hot path of a planned call in Python costs several microseconds: each torch getter of the key
(0.1-0.3 us, seven a tensor), the output's allocation (argument parsing), packing the `Args`
struct and the launch through ctypes. Two modules take that over:

- `fast_call.cpp` (needs only Python's headers): `Kernel` launches a loaded kernel (CUDA through
  the driver's cuLaunchKernel in the kernel's own context; host kernels with the GIL released) and
  `HotPlan` runs a whole planned call of the hot path: outputs, pointers, stream, launch.
- `torch_fast_call.cpp` (built against the installed torch's headers, ~25 s, only once torch is
  in use): the torch key read from ATen, which also refuses a view that reaches past its storage
  on every call, an `Allocator` calling at::empty_strided, and `data_ptr`.

Nothing here is required (call_path.py puts both behind one protocol, with a null version for
`JITER_MAGIC_FAST_CALL=0`). A module loads synchronously when first asked for (`NativeModule.get`):
from the disk cache (key-bound entries under `root/ext/`, not counted as kernels), a dlopen of
about a millisecond. Where the disk cache does not hold it yet, a builder process is started
(`python -m jiter_magic.native.build NAME`) that outlives this one and stores it; this process
keeps the Python path and later processes load the module. `wait()` builds what is missing here
and loads it (the tests, the benchmarks and `python -m jiter_magic` do). Where a module cannot be
built (no compiler, no headers), the Python path runs: the same
results and the same errors. What loaded is decided when a kernel, a plan or an adapter is made,
and never changes under it.
"""
from __future__ import annotations

import contextlib
import ctypes
import enum
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from types import ModuleType

from jiter_magic import settings
from jiter_magic.errors import LaunchError
from jiter_magic.native import binaries

DIR_VARIABLE = settings.FAST_CALL_DIR.name  # a cache directory for the modules (default: the kernels' one)
NAMESPACE = binaries.NAMESPACE


class State(enum.Enum):
    NOT_ASKED = "not started"  # nothing asked for the module in this process yet
    LOADED = "loaded"
    BUILDING = "building"  # a builder process makes it; this process keeps the Python path
    UNAVAILABLE = "unavailable"  # it cannot be had here: `NativeModule.reason` says why


class NativeModule:
    """One extension module of the C call path and its state in this process."""

    def __init__(self, name: str, build: Callable[[bool], bytes | None], install: Callable[[ModuleType], None]) -> None:
        self.name = name
        self._build = build  # (only_cached) -> the binary from the disk cache, else compiled and stored (or None)
        self._install = install  # configures a loaded module for this process
        self.state = State.NOT_ASKED
        self.reason = ""
        self.module: ModuleType | None = None
        self._builder: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def get(self) -> ModuleType | None:
        """The loaded module, or None where this process runs the Python path; the first ask
        loads it from the disk cache, or starts its builder process."""
        if self.state is State.NOT_ASKED:
            with self._lock:
                if self.state is State.NOT_ASKED:
                    self._first_ask()
        return self.module

    def wait(self, timeout: float | None = None) -> ModuleType | None:
        """The module, built here or by its builder process first where needed (blocking)."""
        with self._lock:
            if self.state is State.NOT_ASKED:
                self._first_ask()
            if self.state is State.BUILDING:
                builder, self._builder = self._builder, None
                try:
                    if builder is not None:
                        binaries.finish(builder, self.name, timeout)
                    self._load(self._build(False))
                except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path, which always works
                    self._unavailable(exc)
        return self.module

    def status(self) -> str:
        """'loaded', 'building', 'not started', 'off' or 'unavailable: <why>'."""
        return f"unavailable: {self.reason}" if self.state is State.UNAVAILABLE else self.state.value

    def _first_ask(self) -> None:
        try:
            binary = self._build(True)
            if binary is None:
                binaries.python_headers()  # without them no build can succeed: say so now
                self._builder = binaries.start_builder(self.name)
                self.state = State.BUILDING
                return
            self._load(binary)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path, which always works
            self._unavailable(exc)

    def _load(self, binary: bytes | None) -> None:
        if binary is None:
            raise LaunchError(f"{self.name} is not in the disk cache after its build")
        loaded = _import(self.name, binary)
        self._install(loaded)
        self.module = loaded
        self.state = State.LOADED

    def _unavailable(self, exc: Exception) -> None:
        self.state, self.reason, self.module = State.UNAVAILABLE, str(exc), None

    def after_fork_in_child(self) -> None:
        """A forked child gets a lock of its own (a parent's thread may have held this one at the
        fork); a build the parent started is the parent's, so the child keeps the Python path."""
        self._lock = threading.Lock()
        self._builder = None


def install_core(loaded: ModuleType) -> None:
    loaded.configure(LaunchError, *_driver_entry_points())


def install_torch(loaded: ModuleType) -> None:
    import torch

    loaded.configure(torch.Tensor, torch.nn.Parameter)


def _import(name: str, binary: bytes) -> ModuleType:
    """The extension module of these bytes, loaded from a private file removed at once."""
    fd, path = tempfile.mkstemp(prefix=f"jiter_magic-{name}-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(binary)
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None
        loaded = importlib.util.module_from_spec(spec)
        loader.exec_module(loaded)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return loaded


def _driver_entry_points() -> tuple[int, int, int, int]:
    """Addresses of the CUDA driver's cuLaunchKernel, cuCtxGetCurrent, cuCtxSetCurrent and
    cuGetErrorName; zeros where there is no driver (host kernels only)."""
    if not sys.platform.startswith("linux"):
        return 0, 0, 0, 0
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        names = ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent", "cuGetErrorName")
        found = tuple(ctypes.cast(getattr(driver, name), ctypes.c_void_p).value or 0 for name in names)
    except (OSError, AttributeError):
        return 0, 0, 0, 0
    return found[0], found[1], found[2], found[3]
