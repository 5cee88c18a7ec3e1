"""Load cubins with CuPy and launch them with cuLaunchKernel on the caller's stream.

The launch passes one by-value `Args` struct (packed by the caller) and returns at once:
no synchronization, no allocation, nothing that would break CUDA graph capture.
"""
from __future__ import annotations

import ctypes
import functools
import threading

from ..codegen.kernel import KERNEL_NAME
from ..compilers.nvrtc import NvrtcCompiler
from ..errors import DeviceError, LaunchError
from ..plan import BLOCK, CONTIGUOUS, ITEMS, ROWS, TILE, TILE_ROWS, TILED, UNROLL, KernelSpec, args_layout

NAME = "cuda"


def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise DeviceError(
            "CUDA inputs need CuPy to launch kernels: pip install 'jiter_magic[cuda13]' (or [cuda12])"
        ) from exc
    return cupy


@functools.lru_cache(maxsize=None)
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
        self.work = BLOCK * spec.vec * UNROLL if spec.path == CONTIGUOUS else BLOCK * ITEMS
        self.tiled = spec.path == TILED
        self.rows = spec.path == ROWS
        self.chunk = BLOCK * spec.vec
        self.device = device
        self.numel_index = spec.num_operands
        self.pack_into = args_layout(spec).packer.pack_into
        self.buffer = ctypes.create_string_buffer(args_layout(spec).packer.size)
        self.params = (ctypes.c_void_p * 1)(ctypes.addressof(self.buffer))
        self.params_address = ctypes.addressof(self.params)
        self.launch = driver.launchKernel
        self.lock = threading.Lock()
        # With several GPUs the kernel's context must be current at launch; one GPU never switches.
        self.switch = cupy.cuda.Device(device) if cupy.cuda.runtime.getDeviceCount() > 1 else None

    def __call__(self, values: list, geometry: tuple, stream: int) -> None:
        if self.tiled:
            grid, block = _tiled_grid(values[self.numel_index], geometry), (TILE, TILE_ROWS, 1)
        elif self.rows:
            inner = geometry[0]
            grid, block = (values[self.numel_index] // inner * ((inner + self.chunk - 1) // self.chunk), 1, 1), (BLOCK, 1, 1)
        else:
            grid, block = ((values[self.numel_index] + self.work - 1) // self.work, 1, 1), (BLOCK, 1, 1)
        with self.lock:  # the driver copies the parameters during the launch call
            self.pack_into(self.buffer, 0, *values, *geometry)
            if self.switch is None:
                self.launch(self.function, *grid, *block, 0, stream, self.params_address, 0)
            else:
                with self.switch:
                    self.launch(self.function, *grid, *block, 0, stream, self.params_address, 0)


def _tiled_grid(numel: int, geometry: tuple) -> tuple[int, int, int]:
    """Tiles along the two inner dimensions, and up to 65535 batches (the kernel loops over more)."""
    s0, s1 = geometry[0], geometry[1]
    batches = numel // (s0 * s1)
    return (s0 + TILE - 1) // TILE, (s1 + TILE - 1) // TILE, min(batches, 65535)
