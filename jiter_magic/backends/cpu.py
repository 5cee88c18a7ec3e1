"""Load host shared libraries with ctypes and run them (synchronously, GIL released)."""
from __future__ import annotations

import ctypes
import functools
import os
import tempfile

from ..codegen.kernel import KERNEL_NAME
from ..compilers.cxx import CxxCompiler
from ..errors import LaunchError
from ..kernels.args import args_layout
from ..spec import KernelSpec


@functools.cache
def compiler() -> CxxCompiler:
    return CxxCompiler()


class CpuLauncher:
    """One loaded host specialization."""

    def __init__(self, binary: bytes, spec: KernelSpec, key: str):
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
        self.function.restype = None
        self.pack = args_layout(spec, "cpu").packer.pack

    def __call__(self, values: list, geometry: tuple, grid: tuple[int, int, int], stream: int) -> None:
        self.function(self.pack(*values, *geometry))
