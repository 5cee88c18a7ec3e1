"""The loaded kernels of one function, of any kind: each (device, spec) built and loaded once.

The function's `KernelFamily` (kernels/families.py) renders, describes and lays out its kernels;
everything else here serves every kind of operation alike.

Threads that miss together build once (under a lock); each build is recorded as a
`Specialization` and announced to listeners (the notebook panel). Loaded kernels are shared
process-wide by (device, binding, spec): re-creating a function (a cell run again, a
`create_jit_fn` in a loop) reuses its kernel, from a weak registry of the kernels live functions
hold and a small pool of the most recently loaded ones; any other kernel no function holds any
more is unloaded.
"""
from __future__ import annotations

import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from jiter_magic.cache.memory import MemoryCache
from jiter_magic.errors import LaunchError
from jiter_magic.kernels.families import KernelFamily
from jiter_magic.runtime.backends import backend_for, compile_only
from jiter_magic.runtime.build import Specialization, build, discard
from jiter_magic.state import RUNTIME

Launcher = Callable[[list, tuple, tuple[int, int, int], int], None]
KERNEL_LIMIT = 1024  # loaded kernels kept per function
POOL_LIMIT = 64  # kernels kept loaded after the last function holding them is gone


class KernelPool:
    """Loaded kernels shared by equal functions, by (device, binding, spec): those a live function
    holds (weakly) and the POOL_LIMIT most recently loaded. A part of `RUNTIME`."""

    def __init__(self) -> None:
        self._live: weakref.WeakValueDictionary[tuple, Any] = weakref.WeakValueDictionary()
        self._recent: MemoryCache[Any] = MemoryCache(POOL_LIMIT, counted=False)
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Any | None:
        with self._lock:
            found = self._live.get(key)
        return found if found is not None else self._recent.get(key)

    def put(self, key: tuple, launcher: Any, spec: Hashable) -> None:
        with self._lock:
            self._live[key] = launcher
        self._recent.put(key, launcher, spec)

    def forget(self) -> None:
        """Share nothing any more: functions keep the kernels they hold, a new one builds its own."""
        with self._lock:
            self._live.clear()
        self._recent.clear()

    def live_keys(self) -> list[tuple]:
        with self._lock:
            return list(self._live.keys())

    def held(self, key: tuple) -> Any | None:
        """The kernel a live function holds under `key`, else None. Takes no lock, so that a
        finalizer may ask (a weak dictionary's lookup is one atomic step)."""
        return self._live.get(key)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()


class KernelLoaders:
    """Every kernel loader of this process, held weakly: a part of `RUNTIME`, so that a forked
    child gives each a fresh lock (a parent's thread may have been compiling under one at the fork,
    and that thread does not exist in the child)."""

    def __init__(self) -> None:
        self.loaders: weakref.WeakSet[KernelLoader] = weakref.WeakSet()

    def after_fork_in_child(self) -> None:
        for loader in list(self.loaders):
            loader._lock = threading.RLock()


class KernelLoader:
    """One function's loaded kernels. `binding` is the function's (its family renders from it; it
    names the function and holds the user's code); specs are its family's spec records."""

    def __init__(self, binding: Any, family: KernelFamily) -> None:
        self.binding = binding
        self.family = family
        self.loaded: MemoryCache[Launcher] = MemoryCache(KERNEL_LIMIT, counted=False)
        self.specializations: list[Specialization] = []
        self.warnings: list[str] = []
        self.listeners: list[Callable[[Specialization], None]] = []
        self.start_listeners: list[Callable[[Any, int], None]] = []  # a build of (spec, device) begins
        self._lock = threading.RLock()
        RUNTIME.part(KernelLoaders).loaders.add(self)

    def launcher(self, spec: Hashable, device: int) -> Launcher:
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

    def _load(self, spec: Any, device: int) -> Launcher:
        shared_key = (device, self.binding, spec)
        pool = RUNTIME.part(KernelPool)
        launcher = pool.get(shared_key)
        if launcher is not None:  # loaded for an equal function that is still alive
            self.record(launcher.specialization._replace(cache_event="memory", compile_seconds=0.0))
            return launcher
        specialization = self._build(spec, device)
        try:
            launcher = self._loaded(specialization, device)
        except LaunchError as exc:  # a valid-looking disk entry that does not load: rebuild once
            if specialization.cache_event != "disk":
                raise
            discard(specialization, str(exc))
            specialization = self._build(spec, device)
            launcher = self._loaded(specialization, device)
        launcher.specialization = specialization
        pool.put(shared_key, launcher, spec)
        self.record(specialization)
        return launcher

    def _build(self, spec: Any, device: int) -> Specialization:
        """The binary of `spec` for `device`: from the disk cache or compiled, announced to the
        start listeners and, when slow, in the notebook cell."""
        self._announce(self.start_listeners, spec, device)
        notice = None
        if "IPython" in sys.modules:  # no notebook without it: the notice's module loads only in one
            from jiter_magic.runtime import notice as compile_notice

            earlier = [s.spec for s in self.specializations]
            notice = compile_notice.start(self.binding.name, self.family, spec, device, earlier)
        built: Specialization | None = None
        try:
            built = self._build_now(spec, device)
            return built
        finally:
            if notice is not None:
                notice.finish(None if built is None else built.cache_event)

    def _build_now(self, spec: Any, device: int) -> Specialization:
        backend = backend_for(device)
        return build(self.binding, self.family, spec, backend.name, backend.compiler(device))

    def _loaded(self, specialization: Specialization, device: int) -> Any:
        """A launcher for a built binary, loaded on `device` (-1: the host)."""
        backend, spec = backend_for(device), specialization.spec
        block = self.family.block(spec) if device >= 0 else (1, 1, 1)  # host kernels have no thread blocks
        return backend.load(specialization, self.family.packer(spec, backend.name), block, device, self.binding.name)

    def build_without_device(self, spec: Any) -> Specialization:
        """Compile a CUDA specialization with no GPU present (for the default architecture)."""
        backend = compile_only()
        specialization = build(self.binding, self.family, spec, backend.name, backend.compiler(-1))
        self.record(specialization)
        return specialization

    def record(self, specialization: Specialization) -> None:
        self.specializations.append(specialization)
        log = specialization.log.strip()
        if log and log not in self.warnings:  # each dtype's compile says the same of the same code
            self.warnings.append(log)
        self._announce(self.listeners, specialization)

    @staticmethod
    def _announce(listeners: list, *event: Any) -> None:
        for callback in list(listeners):
            try:
                callback(*event)
            except Exception as exc:  # noqa: BLE001 - a display must never fail the computation
                warnings.warn(f"jiter_magic: a specialization listener failed: {exc!r}", RuntimeWarning, 3)
