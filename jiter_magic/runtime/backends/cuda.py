"""Load cubins through the CUDA driver and launch them with cuLaunchKernel on the caller's stream.

The launch passes one by-value `Args` struct (packed by the caller) and returns at once:
no synchronization, no allocation, nothing that would break CUDA graph capture.
"""
from __future__ import annotations

import ctypes
import functools
import struct
import threading
import weakref
from types import ModuleType
from typing import Any

from jiter_magic.codegen.names import KERNEL_NAME
from jiter_magic.compilers.nvrtc import NvrtcCompiler
from jiter_magic.errors import DeviceError, LaunchError
from jiter_magic.native import call_path as fast_call
from jiter_magic.runtime.backends import cuda_driver, heap


def _cupy() -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        raise DeviceError(
            "CUDA inputs need CuPy to launch kernels: pip install 'jiter_magic[cuda13]' (or [cuda12])"
        ) from exc
    return cupy


@functools.cache
def device_arch(device: int) -> str:
    major, minor = cuda_driver.compute_capability(device)
    return f"sm_{major}{minor}"


def current_device() -> int:
    return _cupy().cuda.runtime.getDevice()


def compiler(device: int) -> NvrtcCompiler:
    return NvrtcCompiler(device_arch(device))


class CudaBackend:
    """Kernels on CUDA devices: NVRTC for the device's architecture, loaded through the driver."""

    name = "cuda"

    def compiler(self, device: int) -> NvrtcCompiler:
        return compiler(device)

    def load(self, specialization: Any, packer: struct.Struct, block: tuple[int, int, int], device: int,
             name: str) -> CudaLauncher:
        return CudaLauncher(specialization.binary, packer, block, device, name)


def _unload(module: int, context: int) -> None:
    cuda_driver.unload(module, context)
    heap.kernel_unloaded()


class CudaLauncher:
    """One loaded kernel (of any kind of operation) on one device, loaded through the driver (cuda_driver.py).
    Launches from C where the C call path was loaded when it was made (native/loader.py), else
    packs the Args struct into a buffer it owns and launches through the driver's cuLaunchKernel
    (ctypes)."""

    def __init__(self, binary: bytes, packer: struct.Struct, block: tuple[int, int, int], device: int,
                 name: str = "kernel"):
        try:
            module, self.function, self.context = cuda_driver.load(binary, device, KERNEL_NAME.encode())
        except LaunchError as exc:
            raise LaunchError(f"could not load the compiled kernel on CUDA device {device}: {exc}") from exc
        self.device = device
        self.block = block
        self.pack_into = packer.pack_into
        self.pack = packer.pack
        self.name = name
        # The C launcher (native/loader.py) where the C call path is loaded, else None: decided here.
        self.native: Any = fast_call.current().kernel(self.function, False, self.block, self.context, None, name)
        self.buffer = ctypes.create_string_buffer(packer.size)
        self.params = (ctypes.c_void_p * 1)(ctypes.addressof(self.buffer))
        self.params_address = ctypes.addressof(self.params)
        self.lock = threading.Lock()
        # The module unloads once nothing holds this launcher, from a finalizer: Python runs it after
        # clearing the launcher's weak references, so no thread can find it in the loader's weak
        # registry meanwhile (a __del__ would run before that); it also counts the unload for a trim.
        weakref.finalize(self, _unload, module, self.context).atexit = False

    def __call__(self, values: list, geometry: tuple, grid: tuple[int, int, int], stream: int) -> None:
        native = self.native
        if native is not None:
            native.launch(self.pack(*values, *geometry), grid, stream)
            return
        # The driver copies the parameters during the launch call; the kernel's context is made
        # current for it, as the C launch does, where the thread has another or none.
        with self.lock, cuda_driver.InContext(self.context):
            self.pack_into(self.buffer, 0, *values, *geometry)
            cuda_driver.launch(self.function, grid, self.block, stream, self.params_address, self.name)
