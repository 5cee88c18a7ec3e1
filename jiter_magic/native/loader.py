"""The C call path's two extension modules, each imported the first time it is asked for.

The hot path of a planned call in Python costs several microseconds: each torch getter of the key
(0.1-0.3 us, seven a tensor), the output's allocation (argument parsing), packing the `Args`
struct and the launch through ctypes. Two modules take that over:

- `_fast_call` (fast_call.cpp, needs only Python's headers): `Kernel` launches a loaded kernel
  (CUDA through the driver's cuLaunchKernel in the kernel's own context; host kernels with the GIL
  released) and `HotPlan` runs a whole planned call of the hot path: outputs, pointers, stream,
  launch.
- `_torch_call` (torch_fast_call.cpp, compiled against the installed torch's headers): the torch
  key read from ATen, which also refuses a view that reaches past its storage on every call, an
  `Allocator` calling at::empty_strided, and `data_ptr`.

Both are compiled when the package is installed (setup.py), by the packaging toolchain, once a
machine: so the first call of every process, the first process of a fresh machine included, can
take the C path, with no compile at run time, no builder process and nothing in the kernel cache.
The build writes `_built.json` beside them: what it built, the torch the torch module was compiled
against, and why a module was not built (no compiler, no Python.h, no torch at install). Nothing
here is required: a module that is not there reports that reason as its status and the Python path
runs, with the same results and the same errors. The torch module is bound to the torch it was
compiled against (ATen's C++ ABI): it is imported only where this process's torch is that one.
What loaded is decided when a kernel, a plan or an adapter is made, and never changes under it.
"""
from __future__ import annotations

import ctypes
import enum
import hashlib
import importlib
import json
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from jiter_magic.errors import LaunchError

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "_built.json")
REINSTALL = "docs/install.md says how to install jiter_magic with it"
SHARED_HEADER = "vectorcall_type.h"  # both sources include it: part of a module's digest (hatch_build.source_digest)


class State(enum.Enum):
    NOT_ASKED = "not loaded yet"  # nothing asked for the module in this process yet
    LOADED = "loaded"
    UNAVAILABLE = "unavailable"  # it cannot be had here: `NativeModule.reason` says why


class NativeModule:
    """One extension module of the C call path and its state in this process."""

    def __init__(self, name: str, check: Callable[[dict[str, Any]], None],
                 install: Callable[[ModuleType], None]) -> None:
        self.name = name
        self._check = check  # raises LaunchError where the module built cannot serve this process
        self._install = install  # configures an imported module for this process
        self.state = State.NOT_ASKED
        self.reason = ""
        self.module: ModuleType | None = None
        self._lock = threading.Lock()

    def get(self) -> ModuleType | None:
        """The module, or None where this process runs the Python path; the first ask imports it."""
        if self.state is State.NOT_ASKED:
            with self._lock:
                if self.state is State.NOT_ASKED:
                    self._load()
        return self.module

    def status(self) -> str:
        """'loaded', 'not loaded yet' or 'unavailable: <why>'."""
        return f"unavailable: {self.reason}" if self.state is State.UNAVAILABLE else self.state.value

    def _load(self) -> None:
        try:
            built = build_report().get(self.name)
            if built is None:
                raise LaunchError(f"the install's build report {REPORT} does not name {self.name}")
            if not built.get("built"):
                raise LaunchError(f"{built.get('reason', 'not built')} ({REINSTALL})")
            check_source_unchanged(built)
            self._check(built)
            loaded = importlib.import_module(f"jiter_magic.native.{self.name}")
            self._install(loaded)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path, which always works
            self.state, self.reason, self.module = State.UNAVAILABLE, str(exc), None
            return
        self.module, self.state = loaded, State.LOADED

    def after_fork_in_child(self) -> None:
        """A forked child gets a lock of its own: a parent's thread may have held this one at the fork."""
        self._lock = threading.Lock()


def build_report() -> dict[str, dict[str, Any]]:
    """What the install built (setup.py writes it); a source tree nobody installed has none."""
    try:
        with open(REPORT) as handle:
            report = json.load(handle)
    except FileNotFoundError:
        raise LaunchError("jiter_magic's extension modules were not built here (no build report: a source "
                          f"tree that was never installed? pip install -e . builds them; {REINSTALL})") from None
    except (OSError, ValueError) as exc:
        raise LaunchError(f"the install's build report {REPORT} cannot be read: {exc}") from None
    if not isinstance(report, dict):
        raise LaunchError(f"the install's build report {REPORT} is not a JSON object")
    return report


def check_source_unchanged(built: dict[str, Any]) -> None:
    """In an editable install the sources sit beside the modules: one edited since the install
    built its module would run stale code, so the Python path runs until it is built again (a
    wheel carries no sources, and nothing is checked)."""
    path, header = os.path.join(HERE, str(built.get("source", ""))), os.path.join(HERE, SHARED_HEADER)
    if not built.get("source") or not os.path.isfile(path) or not os.path.isfile(header):
        return
    digest = hashlib.sha256()
    for part in (path, header):
        with open(part, "rb") as handle:
            digest.update(handle.read())
    if digest.hexdigest() != built.get("sha256"):
        raise LaunchError(f"native/{built['source']} or native/{SHARED_HEADER} changed since the install built "
                          "it: pip install -e . builds it again")


def check_nothing(built: dict[str, Any]) -> None:
    """The core module needs nothing of this process beyond the interpreter its file name names."""


def check_same_torch(built: dict[str, Any]) -> None:
    """ATen's C++ ABI changes between torch builds: the module serves only the torch it was compiled against."""
    import torch

    made_for = built.get("torch") or {}
    here = {"version": torch.__version__, "git": torch.version.git_version}
    if (made_for.get("version"), made_for.get("git")) != (here["version"], here["git"]):
        raise LaunchError(f"it was built for torch {_torch_name(made_for)} and this process has torch "
                          f"{_torch_name(here)}: reinstall jiter_magic to build it for this torch ({REINSTALL})")


def _torch_name(facts: dict[str, Any]) -> str:
    return f"{facts.get('version')} (git {str(facts.get('git'))[:10]})"


def install_core(loaded: ModuleType) -> None:
    loaded.configure(LaunchError, *_driver_entry_points())


def install_torch(loaded: ModuleType) -> None:
    import torch

    loaded.configure(torch.Tensor, torch.nn.Parameter)


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
