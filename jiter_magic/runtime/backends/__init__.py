"""Backends compile and load a specialization for where it runs, behind one protocol.

`backend_for(device)` is CUDA (cuda.py: NVRTC, the driver) for a device and the host (cpu.py: the
host compiler, ctypes, the fault guard) for -1, each made once (a part of `RUNTIME`);
`compile_only()` is the null CUDA backend of a machine without a GPU, which compiles for the
default architecture and loads nothing. Each module imports its libraries only when first used.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Protocol

from jiter_magic.errors import DeviceError
from jiter_magic.state import RUNTIME

if TYPE_CHECKING:
    from jiter_magic.compilers.base import Compiler
    from jiter_magic.runtime.build import Specialization


class Backend(Protocol):
    """Where specializations run: how they are compiled and loaded."""

    name: str  # 'cuda' or 'cpu': the disk cache's namespace and a specialization's backend

    def compiler(self, device: int) -> Compiler:
        """The compiler of kernels for `device` (-1: the host)."""

    def load(self, specialization: Specialization, packer: struct.Struct, block: tuple[int, int, int], device: int,
             name: str) -> Any:
        """A launcher of the built specialization on `device` (runtime/loader.py's `Launcher`), packing
        its `jm_Args` with `packer` and launching `block` threads a block (CUDA)."""


class CompileOnlyCuda:
    """The null CUDA backend: NVRTC for the default architecture, no device to load on."""

    name = "cuda"

    def compiler(self, device: int) -> Compiler:
        from jiter_magic.compilers.nvrtc import NvrtcCompiler
        from jiter_magic.compilers.nvrtc_archs import default_arch

        return NvrtcCompiler(default_arch())

    def load(self, specialization: Specialization, packer: struct.Struct, block: tuple[int, int, int], device: int,
             name: str) -> Any:
        raise DeviceError(f"{name}: no CUDA device to load the kernel on (it was compiled for "
                          f"{specialization.target}); call it on CUDA arrays on a machine with a GPU")


def backend_for(device: int) -> Backend:
    """The backend of `device`: CUDA for a device number, the host for -1."""
    if device >= 0:
        from jiter_magic.runtime.backends.cuda import CudaBackend

        return RUNTIME.part(CudaBackend)
    from jiter_magic.runtime.backends.cpu import CpuBackend

    return RUNTIME.part(CpuBackend)


def compile_only() -> Backend:
    return RUNTIME.part(CompileOnlyCuda)
