"""The loaded kernels of one jitted function: each (device, spec) built and loaded once.

Threads that miss together build once (under a lock); each build is recorded as a
`Specialization` and announced to listeners (the notebook panel).
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

from .bind import Binding
from .build import Specialization, build
from .memcache import MemoryCache
from .spec import KernelSpec

Launcher = Callable[[list, tuple, tuple[int, int, int], int], None]
KERNEL_LIMIT = 1024  # loaded kernels kept a function


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
        launcher: Launcher
        if device >= 0:
            from .backends import cuda

            specialization = build(self.binding, spec, "cuda", cuda.compiler(device))
            launcher = cuda.CudaLauncher(specialization.binary, spec, device)
        else:
            from .backends import cpu

            specialization = build(self.binding, spec, "cpu", cpu.compiler())
            launcher = cpu.CpuLauncher(specialization.binary, spec, specialization.cache_key)
        self.record(specialization)
        return launcher

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
