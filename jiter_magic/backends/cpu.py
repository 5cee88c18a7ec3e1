"""Load host shared libraries with ctypes and run them (synchronously, GIL released)."""
from __future__ import annotations

import ctypes
import functools
import os
import tempfile

from ..codegen.kernel import KERNEL_NAME
from ..compilers.cxx import CxxCompiler
from ..errors import LaunchError
from ..plan import KernelSpec, args_layout

NAME = "cpu"


@functools.lru_cache(maxsize=None)
def compiler() -> CxxCompiler:
    return CxxCompiler()


@functools.lru_cache(maxsize=1)
def _library_folder() -> str:
    """Where verified libraries are written to be dlopen-ed: private to this process."""
    return tempfile.mkdtemp(prefix="jiter_magic-libs-")


class CpuLauncher:
    """One loaded host specialization."""

    def __init__(self, binary: bytes, spec: KernelSpec, key: str):
        self.path = os.path.join(_library_folder(), f"{key}.so")
        if not os.path.exists(self.path):
            temp = self.path + ".tmp"
            with open(temp, "wb") as handle:
                handle.write(binary)
            os.replace(temp, self.path)
        try:
            self.library = ctypes.CDLL(self.path)
            self.function = getattr(self.library, KERNEL_NAME)
        except (OSError, AttributeError) as exc:
            raise LaunchError(f"could not load the compiled host kernel {self.path}: {exc}") from exc
        self.function.argtypes = (ctypes.c_char_p,)
        self.function.restype = None
        self.pack = args_layout(spec).packer.pack

    def __call__(self, values: list, geometry: tuple, stream: int) -> None:
        self.function(self.pack(*values, *geometry))
