"""Load host shared libraries with ctypes and run them (synchronously, GIL released), under the
fault guard: a non-zero status from the kernel becomes the Python exception it stands for."""
from __future__ import annotations

import _ctypes
import ctypes
import functools
import os
import tempfile

from ..codegen.kernel import KERNEL_NAME
from ..compilers.cxx import CxxCompiler
from ..errors import LaunchError
from ..kernels.args import args_layout
from ..spec import KernelSpec
from . import fault_guard, heap, load_check

_dlclose = getattr(_ctypes, "dlclose", None)  # POSIX only; elsewhere libraries stay loaded


@functools.cache
def compiler() -> CxxCompiler:
    return CxxCompiler()


class CpuLauncher:
    """One loaded host specialization."""

    def __init__(self, binary: bytes, spec: KernelSpec, key: str, name: str):
        runtime = fault_guard.ensure_runtime(compiler())  # kernels resolve the guard's symbols against it
        load_check.check_loading(binary, runtime, key, name)
        self.name = name
        # The verified bytes go to a file of this loader's own, which is removed once loaded:
        # concurrent loaders never share a half-written file, and nothing is left behind.
        fd, path = tempfile.mkstemp(prefix=f"jiter_magic-{key[:16]}-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(binary)
            self.library = ctypes.CDLL(path)
            self.function = getattr(self.library, KERNEL_NAME)
        except (OSError, AttributeError) as exc:
            raise LaunchError(f"could not load the compiled host kernel: {exc}") from exc
        finally:
            os.unlink(path)
        self.function.argtypes = (ctypes.c_char_p,)
        self.function.restype = ctypes.c_int
        self.pack = args_layout(spec, "cpu").packer.pack

    def __del__(self) -> None:
        """Unload the library once nothing holds this kernel any more (see loader.py)."""
        library = getattr(self, "library", None)
        if library is not None and _dlclose is not None:
            try:
                _dlclose(library._handle)
            except OSError:  # already gone, or the interpreter is shutting down
                return
            note = getattr(heap, "kernel_unloaded", None)  # None once the interpreter is tearing down
            if note is not None:
                note()

    def __call__(self, values: list, geometry: tuple, grid: tuple[int, int, int], stream: int) -> None:
        status = self.function(self.pack(*values, *geometry))
        if status:
            fault_guard.raise_fault(status, self.name)
