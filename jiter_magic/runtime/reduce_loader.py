"""The loaded kernels of one reduction function: each (spec, device) rendered, built and loaded once.

A build goes through `build_source` (runtime/build.py), so reduction kernels share the disk cache,
its keys, locks and counters with elementwise ones. A launcher packs the `jm_Args` struct of the
spec and runs the kernel: on the host through ctypes under the fault guard, on CUDA through the
driver on the caller's stream.
"""
from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jiter_magic.codegen.names import KERNEL_NAME
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels.reduce_common import reduce_args
from jiter_magic.kernels.reduce_cuda import block_of, render_cuda
from jiter_magic.kernels.reduce_host import render_host
from jiter_magic.native import call_path
from jiter_magic.planning.reduce_spec import HOST_PATHS, ReductionSpec
from jiter_magic.runtime.backends import backend_for
from jiter_magic.runtime.backends.fault_guard import raise_fault
from jiter_magic.runtime.build import Built, build_source
from jiter_magic.state import RUNTIME

PLAN_LIMIT = 1024  # plans a function remembers


def render(binding: ReductionBinding, spec: ReductionSpec) -> str:
    """The source of `spec`: the host kernel, or the CUDA kernel of its path."""
    return render_host(binding, spec) if spec.path in HOST_PATHS else render_cuda(binding, spec)


@dataclass(frozen=True, slots=True)
class BuiltReduction:
    """A built reduction kernel, as `fn.specializations` lists it."""

    spec: ReductionSpec
    backend: str
    target: str
    source: str
    built: Built

    def describe(self) -> str:
        return self.spec.describe()


class HostReduction:
    """A reduction kernel loaded on the host; run from C where the C call path is loaded."""

    def __init__(self, built: Built, spec: ReductionSpec, name: str) -> None:
        from jiter_magic.runtime.backends.cpu import load_library, unload_when_gone

        self.library, self.function = load_library(built.binary, built.cache_key, name)
        self.pack = reduce_args(spec).packer.pack
        self.name = name
        address = ctypes.cast(self.function, ctypes.c_void_p).value or 0
        self.native: Any = call_path.current().kernel(address, True, (1, 1, 1), 0,
                                                      functools.partial(raise_fault, name=name), name)
        unload_when_gone(self, self.library)

    def __call__(self, values: list, grid: tuple, block: tuple, stream: int) -> None:
        if self.native is not None:
            self.native.launch(self.pack(*values), grid, stream)
            return
        status = self.function(self.pack(*values))
        if status:
            raise_fault(status, self.name)


class CudaReduction:
    """A reduction kernel loaded on a CUDA device; launches on the caller's stream, no sync, from C
    where the C call path is loaded."""

    def __init__(self, built: Built, spec: ReductionSpec, device: int, name: str) -> None:
        from jiter_magic.runtime.backends import cuda_driver

        module, self.function, self.context = cuda_driver.load(built.binary, device, KERNEL_NAME.encode())
        packer = reduce_args(spec).packer
        self.pack = packer.pack
        self.pack_into = packer.pack_into
        self.buffer = ctypes.create_string_buffer(packer.size)
        self.params = (ctypes.c_void_p * 1)(ctypes.addressof(self.buffer))
        self.name = name
        self.lock = threading.Lock()
        # Every launch of a spec has the same block (reduce_cuda.block_of), so one C launcher serves.
        self.native: Any = call_path.current().kernel(self.function, False, block_of(spec), self.context, None, name)
        weakref.finalize(self, cuda_driver.unload, module, self.context).atexit = False

    def __call__(self, values: list, grid: tuple, block: tuple, stream: int) -> None:
        from jiter_magic.runtime.backends import cuda_driver

        if self.native is not None:
            self.native.launch(self.pack(*values), grid, stream)
            return
        # The driver copies the parameters during the launch call, so one buffer serves each launch.
        with self.lock, cuda_driver.InContext(self.context):
            self.pack_into(self.buffer, 0, *values)
            cuda_driver.launch(self.function, grid, block, stream, ctypes.addressof(self.params), self.name)


class ReductionKernelSets:
    """Every reduction function's kernels of this process, held weakly: a part of `RUNTIME`, so that
    a forked child gives each a fresh lock (a parent's thread may have been building under one at
    the fork, and that thread does not exist in the child)."""

    def __init__(self) -> None:
        self.sets: weakref.WeakSet[ReductionKernels] = weakref.WeakSet()

    def after_fork_in_child(self) -> None:
        for kernels in list(self.sets):
            kernels._lock = threading.Lock()


class ReductionKernels:
    """One function's kernels by (spec, device), threads missing together building once, and the
    plans of its calls."""

    def __init__(self, binding: ReductionBinding) -> None:
        self.binding = binding
        self.built: list[BuiltReduction] = []
        self.listeners: list[Callable[[BuiltReduction], None]] = []  # told of each new build (notebook panels)
        self.plans: dict[tuple, Any] = {}  # a call's plan by what decides it (runtime/reduce_call.py)
        self.hot: dict[tuple, Callable[[list], Any]] = {}  # C hot paths by hot key (runtime/reduce_hot.py)
        self.fast_keys: dict[type, Any] = {}  # the adapter's fast key function by input type (None: none)
        self._loaded: dict[tuple[ReductionSpec, int], Any] = {}
        self._lock = threading.Lock()
        RUNTIME.part(ReductionKernelSets).sets.add(self)

    def keep_plan(self, key: tuple, plan: Any) -> None:
        """Remember a plan; a full memo starts again (calls of a function rarely vary that much)."""
        if len(self.plans) >= PLAN_LIMIT:
            self.plans.clear()
        self.plans[key] = plan

    def launcher(self, spec: ReductionSpec, device: int) -> Any:
        key = (spec, device)
        found = self._loaded.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._loaded.get(key)
            if found is None:
                made = self.build(spec, device)
                name = self.binding.name
                found = HostReduction(made.built, spec, name) if device < 0 else \
                    CudaReduction(made.built, spec, device, name)
                self._loaded[key] = found
        return found

    def build(self, spec: ReductionSpec, device: int, backend: Any = None) -> BuiltReduction:
        """Render and build `spec` for `device` (-1: the host), through the disk cache; recorded."""
        backend = backend if backend is not None else backend_for(device)
        compiler = backend.compiler(device)
        source = render(self.binding, spec)
        built = build_source(self.binding.name, self.binding.code, spec.describe(), source, backend.name, compiler)
        made = BuiltReduction(spec, backend.name, compiler.target, source, built)
        self.built.append(made)
        for listener in list(self.listeners):
            listener(made)
        return made
