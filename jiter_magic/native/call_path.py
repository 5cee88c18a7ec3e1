"""The C call path as the layers above see it: one protocol, a real and a null implementation.

`current()` is this process's `CallPath` (a part of `RUNTIME`): `NativeCallPath`, the two
extension modules of loader.py (compiled at install), or `PythonCallPath` where
`JITER_MAGIC_FAST_CALL=0`, which has no module and makes no C launcher, so every call takes the
Python path. Kernels, plans and the torch adapter ask it once, when they are made; nothing polls
it afterwards.
"""
from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Protocol

import jiter_magic.settings as settings
from jiter_magic.errors import LaunchError
from jiter_magic.native.loader import NativeModule, check_nothing, check_same_torch, install_core, install_torch
from jiter_magic.state import RUNTIME


class CallPath(Protocol):
    """What kernels, plans and the torch adapter ask of the C call path."""

    def core(self) -> ModuleType | None:
        """The core module (Kernel, HotPlan), loaded on the first ask; None: the Python path."""

    def loaded_core(self) -> ModuleType | None:
        """The core module if it is loaded already (asking loads nothing)."""

    def torch_module(self) -> ModuleType | None:
        """The torch module (the key read from ATen, Allocator) where torch is in use, else None."""

    def kernel(self, function: int, host: bool, block: tuple[int, int, int], context: int, on_fault: Any,
               name: str) -> Any | None:
        """A C launcher of one loaded kernel, or None (the Python launch)."""

    def status(self) -> str:
        """The core module's state: 'loaded', 'not loaded yet', 'off' or 'unavailable: <why>'."""

    def torch_status(self) -> str:
        """The same of the torch module."""

    def load(self) -> ModuleType | None:
        """Load now what this process can (the torch module where torch is imported); the core module, or None."""


class NativeCallPath:
    """The real C call path: the core module and the torch module."""

    def __init__(self) -> None:
        self.core_module = NativeModule("_fast_call", check_nothing, install_core)
        self.torch = NativeModule("_torch_call", check_same_torch, install_torch)

    def core(self) -> ModuleType | None:
        return self.core_module.get()

    def loaded_core(self) -> ModuleType | None:
        return self.core_module.module

    def torch_module(self) -> ModuleType | None:
        if "torch" not in sys.modules or self.core_module.get() is None:
            return None
        return self.torch.get()

    def kernel(self, function: int, host: bool, block: tuple[int, int, int], context: int, on_fault: Any,
               name: str) -> Any | None:
        loaded = self.core_module.get()
        if loaded is None:
            return None
        try:
            return loaded.Kernel(function, host, block, context, on_fault, name)
        except LaunchError:  # a CUDA kernel with no driver entry points: the Python launch stays
            return None

    def status(self) -> str:
        return self.core_module.status()

    def torch_status(self) -> str:
        return self.torch.status()

    def load(self) -> ModuleType | None:
        """The core module, and the torch one where torch is imported."""
        core = self.core_module.get()
        if core is not None and "torch" in sys.modules:
            self.torch.get()
        return core

    def after_fork_in_child(self) -> None:
        self.core_module.after_fork_in_child()
        self.torch.after_fork_in_child()


class PythonCallPath:
    """The null C call path (`JITER_MAGIC_FAST_CALL=0`): no module, no C launcher."""

    def core(self) -> ModuleType | None:
        return None

    def loaded_core(self) -> ModuleType | None:
        return None

    def torch_module(self) -> ModuleType | None:
        return None

    def kernel(self, function: int, host: bool, block: tuple[int, int, int], context: int, on_fault: Any,
               name: str) -> Any | None:
        return None

    def status(self) -> str:
        return "off"

    def torch_status(self) -> str:
        return "off"

    def load(self) -> ModuleType | None:
        return None


def _made_for_this_process() -> CallPath:
    return NativeCallPath() if settings.FAST_CALL.get() else PythonCallPath()


def current() -> CallPath:
    """This process's C call path, chosen on the first ask."""
    return RUNTIME.part(CallPath, _made_for_this_process)  # type: ignore[type-abstract]


def status() -> str:
    return current().status()


def torch_status() -> str:
    return current().torch_status()


def load() -> ModuleType | None:
    """Load the modules now (the test session and `python -m jiter_magic` do; calls load them when needed)."""
    return current().load()


def wait(timeout: float | None = None) -> ModuleType | None:
    """`load()`, under the name of the days when a module could still be building at run time: kept
    for scripts that run against several versions (bench/); nothing is built now, so nothing is waited for."""
    return load()
