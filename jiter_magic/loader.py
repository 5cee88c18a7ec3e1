"""The loaded kernels of one jitted function: each (device, spec) built and loaded once.

Threads that miss together build once (under a lock); each build is recorded as a
`Specialization` and announced to listeners (the notebook panel). Loaded kernels are shared
process-wide by (device, binding, spec): re-creating a function (a cell run again, a
`create_jit_fn` in a loop) reuses its kernel, from a weak registry of the kernels live functions
hold and a small pool of the most recently loaded ones; any other kernel no function holds any
more is unloaded.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .bind import Binding
from .build import Specialization, build, discard
from .errors import LaunchError
from .memcache import MemoryCache
from .spec import KernelSpec

Launcher = Callable[[list, tuple, tuple[int, int, int], int], None]
KERNEL_LIMIT = 1024  # loaded kernels kept a function
POOL_LIMIT = 64  # kernels kept loaded after the last function holding them is gone
_SHARED: weakref.WeakValueDictionary[tuple, Any] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()
_POOL: MemoryCache[Any] = MemoryCache(POOL_LIMIT, counted=False)


class _DiskEntryUnloadable(Exception):
    """A binary from the disk cache that passed its checks but does not load."""

    def __init__(self, specialization: Specialization) -> None:
        super().__init__(specialization.cache_key)
        self.specialization = specialization


class KernelLoader:
    def __init__(self, binding: Binding) -> None:
        self.binding = binding
        self.loaded: MemoryCache[Launcher] = MemoryCache(KERNEL_LIMIT, counted=False)
        self.specializations: list[Specialization] = []
        self.warnings: list[str] = []
        self.listeners: list[Callable[[Specialization], None]] = []
        self._lock = threading.RLock()

    def launcher(self, spec: KernelSpec, device: int) -> Launcher:
        """The loaded kernel of `spec` on `device` (-1: the host), built on first use."""
        key = (device, spec)
        found = self.loaded.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self.loaded.get(key)
            if found is None:
                found = self._load(spec, device)
                self.loaded.put(key, found, spec)
        return found

    def _load(self, spec: KernelSpec, device: int) -> Launcher:
        shared_key = (device, self.binding, spec)
        with _SHARED_LOCK:
            launcher: Any = _SHARED.get(shared_key)
        if launcher is None:
            launcher = _POOL.get(shared_key)
        if launcher is not None:  # loaded for an equal function that is still alive
            self.record(replace(launcher.specialization, cache_event="memory", compile_seconds=0.0))
            return launcher
        try:
            specialization, launcher = self._build_and_load(spec, device)
        except _DiskEntryUnloadable as failed:  # a valid-looking entry that does not load: rebuild once
            discard(failed.specialization, str(failed.__cause__))
            specialization, launcher = self._build_and_load(spec, device)
        launcher.specialization = specialization
        with _SHARED_LOCK:
            _SHARED[shared_key] = launcher
        _POOL.put(shared_key, launcher, spec)
        self.record(specialization)
        return launcher

    def _build_and_load(self, spec: KernelSpec, device: int) -> tuple[Specialization, Any]:
        if device >= 0:
            from .backends import cuda

            specialization = build(self.binding, spec, "cuda", cuda.compiler(device))
            load: Callable[[], Any] = lambda: cuda.CudaLauncher(specialization.binary, spec, device)  # noqa: E731
        else:
            from .backends import cpu

            specialization = build(self.binding, spec, "cpu", cpu.compiler())
            load = lambda: cpu.CpuLauncher(specialization.binary, spec, specialization.cache_key,  # noqa: E731
                                           self.binding.functor.name)
        try:
            return specialization, load()
        except LaunchError as exc:
            if specialization.cache_event != "disk":
                raise
            raise _DiskEntryUnloadable(specialization) from exc

    def build_without_device(self, spec: KernelSpec) -> Specialization:
        """Compile a CUDA specialization with no GPU present (for the default architecture)."""
        from .compilers.nvrtc import NvrtcCompiler, default_arch

        specialization = build(self.binding, spec, "cuda", NvrtcCompiler(default_arch()))
        self.record(specialization)
        return specialization

    def record(self, specialization: Specialization) -> None:
        self.specializations.append(specialization)
        if specialization.log.strip():
            self.warnings.append(specialization.log.strip())
        for callback in list(self.listeners):
            try:
                callback(specialization)
            except Exception as exc:  # noqa: BLE001 - a display must never fail the computation
                warnings.warn(f"jiter_magic: a specialization listener failed: {exc!r}", RuntimeWarning, 2)
