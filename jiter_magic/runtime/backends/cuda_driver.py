"""The few CUDA driver calls that load and launch a kernel, through ctypes: no CuPy on the way.

Importing CuPy costs a first call about 0.1 s, and a kernel found in the disk cache needs only
the driver: the device's compute capability, its primary context, cuModuleLoadData and
cuModuleGetFunction (and cuModuleUnload when no function holds the kernel any more), and
cuLaunchKernel where the C call path (native/loader.py) is not loaded. NVRTC, the compile path, still
comes from CuPy.
"""
from __future__ import annotations

import ctypes
import functools
import threading

from jiter_magic.errors import DeviceError, LaunchError
from jiter_magic.state import RUNTIME

_ATTRIBUTE_MAJOR, _ATTRIBUTE_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR


class ModuleLoads:
    """One module load through the driver at a time in this process: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()


@functools.cache
def _driver() -> ctypes.CDLL:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise DeviceError(f"the CUDA driver (libcuda.so.1) could not be loaded: {exc}") from exc
    _check(driver, driver.cuInit(0), "cuInit")
    return driver


def _check(driver: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        name = ctypes.c_char_p()
        driver.cuGetErrorName(status, ctypes.byref(name))
        raise LaunchError(f"{what} failed with {(name.value or b'an unknown CUDA error').decode()} ({status})")


@functools.cache
def compute_capability(device: int) -> tuple[int, int]:
    driver = _driver()
    handle, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _check(driver, driver.cuDeviceGet(ctypes.byref(handle), device), f"cuDeviceGet({device})")
    _check(driver, driver.cuDeviceGetAttribute(ctypes.byref(major), _ATTRIBUTE_MAJOR, handle), "cuDeviceGetAttribute")
    _check(driver, driver.cuDeviceGetAttribute(ctypes.byref(minor), _ATTRIBUTE_MINOR, handle), "cuDeviceGetAttribute")
    return major.value, minor.value


@functools.cache
def primary_context(device: int) -> int:
    """The device's primary context (the one torch and CuPy use), retained for the process."""
    driver = _driver()
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    _check(driver, driver.cuDeviceGet(ctypes.byref(handle), device), f"cuDeviceGet({device})")
    _check(driver, driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle), "cuDevicePrimaryCtxRetain")
    return context.value or 0


class InContext:
    """Make `context` current in this thread for a few driver calls or a launch (a thread may have
    none, as autograd's and Dask's have not), then put the previous one back."""

    def __init__(self, context: int) -> None:
        self.context = context
        self.previous = ctypes.c_void_p()
        self.switched = False

    def __enter__(self) -> ctypes.CDLL:
        driver = _driver()
        _check(driver, driver.cuCtxGetCurrent(ctypes.byref(self.previous)), "cuCtxGetCurrent")
        self.switched = (self.previous.value or 0) != self.context
        if self.switched:
            _check(driver, driver.cuCtxSetCurrent(ctypes.c_void_p(self.context)), "cuCtxSetCurrent")
        return driver

    def __exit__(self, *exc: object) -> None:
        if self.switched:
            _driver().cuCtxSetCurrent(self.previous)


def load(binary: bytes, device: int, name: bytes) -> tuple[int, int, int]:
    """(module, function, context) of a cubin loaded on `device` in its primary context."""
    context = primary_context(device)
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    with RUNTIME.part(ModuleLoads).lock, InContext(context) as driver:
        _check(driver, driver.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(binary)), "cuModuleLoadData")
        status = driver.cuModuleGetFunction(ctypes.byref(function), module, ctypes.c_char_p(name))
        if status != 0:
            driver.cuModuleUnload(module)
            _check(driver, status, "cuModuleGetFunction")
    return module.value or 0, function.value or 0, context


def unload(module: int, context: int) -> None:
    """Unload a module (from a finalizer: never raises; at interpreter exit the driver may be gone)."""
    try:
        with InContext(context) as driver:
            driver.cuModuleUnload(ctypes.c_void_p(module))
    except Exception:  # noqa: BLE001 - the context or the driver is already torn down
        pass


def launch(function: int, grid: tuple[int, int, int], block: tuple[int, int, int], stream: int,
           params: int, name: str = "kernel") -> None:
    """cuLaunchKernel of `function` (the functor `name`) on `stream`, its parameters at the address
    `params` (an array of pointers to them); the caller makes the kernel's context current. A
    failure reads as the C path's: "<name>: cuLaunchKernel failed with ..."."""
    driver = _driver()
    dims = [ctypes.c_uint(v) for v in (*grid, *block)]
    status = driver.cuLaunchKernel(ctypes.c_void_p(function), *dims, ctypes.c_uint(0), ctypes.c_void_p(stream),
                                   ctypes.c_void_p(params), None)
    _check(driver, status, f"{name}: cuLaunchKernel")
