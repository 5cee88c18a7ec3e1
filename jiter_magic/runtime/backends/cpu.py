"""Load host shared libraries with ctypes and run them (synchronously, GIL released), under the
fault guard: a non-zero status from the kernel becomes the Python exception it stands for."""
from __future__ import annotations

import _ctypes
import ctypes
import functools
import os
import struct
import tempfile
import weakref
from typing import Any

from jiter_magic.codegen.names import KERNEL_NAME
from jiter_magic.compilers.cxx import CxxCompiler
from jiter_magic.errors import LaunchError
from jiter_magic.native import call_path as fast_call
from jiter_magic.runtime.backends import fault_guard, heap, host_threads, load_check
from jiter_magic.state import RUNTIME

_dlclose = getattr(_ctypes, "dlclose", None)  # POSIX only; elsewhere libraries stay loaded


class CpuBackend:
    """Kernels on the host: the host C++ compiler, loaded with ctypes under the fault guard."""

    name = "cpu"

    def __init__(self) -> None:
        self.host_compiler = CxxCompiler()

    def compiler(self, device: int) -> CxxCompiler:
        return self.host_compiler

    def load(self, specialization: Any, packer: struct.Struct, block: tuple[int, int, int], device: int,
             name: str) -> CpuLauncher:
        return CpuLauncher(specialization.binary, packer, specialization.cache_key, name)


def compiler() -> CxxCompiler:
    """The host compiler (the host backend's)."""
    return RUNTIME.part(CpuBackend).host_compiler


def _unload(handle: int) -> None:
    """Close a kernel's library (where the platform can) and count it for a heap trim."""
    if _dlclose is None:
        return
    try:
        _dlclose(handle)
    except OSError:  # already gone
        return
    heap.kernel_unloaded()


def load_library(binary: bytes, key: str, name: str) -> tuple[ctypes.CDLL, Any]:
    """A verified host binary loaded with ctypes, and its `jm_kernel(const jm_Args*)` function."""
    runtime = fault_guard.ensure_runtime(compiler())  # kernels resolve the guard's symbols against it
    load_check.check_loading(binary, runtime, key, name)
    # The verified bytes go to a file of this loader's own, which is removed once loaded:
    # concurrent loaders never share a half-written file, and nothing is left behind.
    fd, path = tempfile.mkstemp(prefix=f"jiter_magic-{key[:16]}-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(binary)
        library = ctypes.CDLL(path)
        function = getattr(library, KERNEL_NAME)
    except (OSError, AttributeError) as exc:
        raise LaunchError(f"could not load the compiled host kernel: {exc}") from exc
    finally:
        os.unlink(path)
    function.argtypes = (ctypes.c_char_p,)
    function.restype = ctypes.c_int
    host_threads.kernel_loaded()  # a forked child then runs its loops on one thread (host_threads.py)
    return library, function


def unload_when_gone(owner: object, library: ctypes.CDLL) -> None:
    """Unload `library` once nothing holds `owner` any more (see loader.py), from a weakref
    finalizer rather than __del__: Python runs __del__ before it clears the object's weak
    references, so while __del__ closed the library (the GIL released), another thread could
    still find the kernel in the loader's weak registry and run unmapped code."""
    weakref.finalize(owner, _unload, library._handle).atexit = False


class CpuLauncher:
    """One loaded host kernel, of any kind of operation."""

    def __init__(self, binary: bytes, packer: struct.Struct, key: str, name: str):
        self.name = name
        self.library, self.function = load_library(binary, key, name)
        self.pack = packer.pack
        # The C launcher where the C call path is loaded (it runs the kernel with the GIL released,
        # as ctypes does), else None: decided once, here.
        address = ctypes.cast(self.function, ctypes.c_void_p).value or 0
        self.native: Any = fast_call.current().kernel(address, True, (1, 1, 1), 0,
                                             functools.partial(fault_guard.raise_fault, name=name), name)
        unload_when_gone(self, self.library)

    def __call__(self, values: list, geometry: tuple, grid: tuple[int, int, int], stream: int) -> None:
        native = self.native
        if native is not None:
            native.launch(self.pack(*values, *geometry), grid, stream)
            return
        status = self.function(self.pack(*values, *geometry))
        if status:
            fault_guard.raise_fault(status, self.name)
