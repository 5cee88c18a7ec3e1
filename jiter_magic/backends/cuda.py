"""Load cubins with CuPy and launch them with cuLaunchKernel on the caller's stream.

The launch passes one by-value `Args` struct (packed by the caller) and returns at once:
no synchronization, no allocation, nothing that would break CUDA graph capture.
"""
from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from types import ModuleType

from ..codegen.kernel import KERNEL_NAME
from ..compilers.nvrtc import NvrtcCompiler
from ..errors import DeviceError, LaunchError
from ..kernels import path_of
from ..kernels.args import args_layout
from ..spec import KernelSpec
from . import heap


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
    cupy = _cupy()
    return "sm_" + cupy.cuda.Device(device).compute_capability


def current_device() -> int:
    return _cupy().cuda.runtime.getDevice()


def compiler(device: int) -> NvrtcCompiler:
    return NvrtcCompiler(device_arch(device))


class CudaLauncher:
    """One loaded specialization on one device; packs the Args struct into a buffer it owns."""

    def __init__(self, binary: bytes, spec: KernelSpec, device: int):
        cupy = _cupy()
        from cupy.cuda import driver, function

        with cupy.cuda.Device(device):
            self.module = function.Module()
            try:
                self.module.load(binary)
                self.function = self.module.get_function(KERNEL_NAME).ptr
            except Exception as exc:  # noqa: BLE001 - the driver's own error, re-raised with context
                raise LaunchError(f"could not load the compiled kernel on CUDA device {device}: {exc}") from exc
        self.block = path_of(spec, "cuda").block
        packer = args_layout(spec, "cuda").packer
        self.pack_into = packer.pack_into
        self.buffer = ctypes.create_string_buffer(packer.size)
        self.params = (ctypes.c_void_p * 1)(ctypes.addressof(self.buffer))
        self.params_address = ctypes.addressof(self.params)
        self.launch = driver.launchKernel
        self.lock = threading.Lock()
        # With several GPUs the kernel's context must be current at launch; one GPU never switches.
        self.switch = cupy.cuda.Device(device) if cupy.cuda.runtime.getDeviceCount() > 1 else None
        # The module unloads with this launcher (CuPy's Module unloads when collected), which Python
        # does after clearing its weak references, so no thread can find it in the loader's weak
        # registry meanwhile (a __del__ would run before that); the finalizer counts it for a trim.
        weakref.finalize(self, heap.kernel_unloaded).atexit = False

    def __call__(self, values: list, geometry: tuple, grid: tuple[int, int, int], stream: int) -> None:
        with self.lock:  # the driver copies the parameters during the launch call
            self.pack_into(self.buffer, 0, *values, *geometry)
            if self.switch is None:
                self.launch(self.function, *grid, *self.block, 0, stream, self.params_address, 0)
            else:
                with self.switch:
                    self.launch(self.function, *grid, *self.block, 0, stream, self.params_address, 0)
