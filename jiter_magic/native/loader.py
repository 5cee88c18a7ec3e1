"""The C call path: two small extension modules, each loaded the first time it is asked for.

The hot path of a planned call in Python costs several microseconds: each torch getter of the key
(0.1-0.3 us, seven a tensor), the output's allocation (argument parsing), packing the `Args`
struct and the launch through ctypes. Two modules take that over:

- `fast_call.cpp` (needs only Python's headers): `Kernel` launches a loaded kernel (CUDA through
  the driver's cuLaunchKernel in the kernel's own context; host kernels with the GIL released) and
  `HotPlan` runs a whole planned call of the hot path: outputs, pointers, stream, launch.
- `torch_fast_call.cpp` (built against the installed torch's headers, ~25 s, only once torch is
  in use): the torch key read from ATen, which also refuses a view that reaches past its storage
  on every call, an `Allocator` calling at::empty_strided, and `data_ptr`.

Nothing here is required. A module loads synchronously when first asked for (`NativeModule.get`):
from the disk cache (key-bound entries under `root/ext/`, not counted as kernels), a dlopen of
about a millisecond. Where the disk cache does not hold it yet, a builder process is started
(`python -m jiter_magic.native.build NAME`) that outlives this one and stores it; this process
keeps the Python path and later processes load the module. `wait()` builds what is missing here
and loads it (the tests, the benchmarks and `python -m jiter_magic` do). Where a module cannot be
built (no compiler, no headers) or `JITER_MAGIC_FAST_CALL=0`, the Python path runs: the same
results and the same errors. What loaded is decided when a kernel, a plan or an adapter is made,
and never changes under it.
"""
from __future__ import annotations

import contextlib
import ctypes
import enum
import importlib.machinery
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from jiter_magic import settings
from jiter_magic.errors import LaunchError

DIR_VARIABLE = settings.FAST_CALL_DIR.name  # a cache directory for the modules (default: the kernels' one)
NAMESPACE = "ext"  # the disk cache's folder for them: no kernels, so not counted by cache_stats()
HERE = os.path.dirname(os.path.abspath(__file__))


class State(enum.Enum):
    NOT_ASKED = "not started"  # nothing asked for the module in this process yet
    LOADED = "loaded"
    BUILDING = "building"  # a builder process makes it; this process keeps the Python path
    OFF = "off"  # JITER_MAGIC_FAST_CALL=0
    UNAVAILABLE = "unavailable"  # it cannot be had here: `NativeModule.reason` says why


class NativeModule:
    """One extension module of the C call path and its state in this process."""

    def __init__(self, name: str, build: Callable[[bool], bytes | None], install: Callable[[ModuleType], None]) -> None:
        self.name = name
        self._build = build  # (only_cached) -> the binary from the disk cache, else compiled and stored (or None)
        self._install = install  # configures a loaded module for this process
        self.state = State.NOT_ASKED
        self.reason = ""
        self.module: ModuleType | None = None
        self._builder: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def get(self) -> ModuleType | None:
        """The loaded module, or None where this process runs the Python path; the first ask
        loads it from the disk cache, or starts its builder process."""
        if self.state is State.NOT_ASKED:
            with self._lock:
                if self.state is State.NOT_ASKED:
                    self._first_ask()
        return self.module

    def wait(self, timeout: float | None = None) -> ModuleType | None:
        """The module, built here or by its builder process first where needed (blocking)."""
        with self._lock:
            if self.state is State.NOT_ASKED:
                self._first_ask()
            if self.state is State.BUILDING:
                builder, self._builder = self._builder, None
                try:
                    if builder is not None:
                        _finish(builder, self.name, timeout)
                    self._load(self._build(False))
                except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path, which always works
                    self._unavailable(exc)
        return self.module

    def status(self) -> str:
        """'loaded', 'building', 'not started', 'off' or 'unavailable: <why>'."""
        return f"unavailable: {self.reason}" if self.state is State.UNAVAILABLE else self.state.value

    def _first_ask(self) -> None:
        if not settings.FAST_CALL.get():
            self.state = State.OFF
            return
        try:
            binary = self._build(True)
            if binary is None:
                _python_headers()  # without them no build can succeed: say so now
                self._builder = _start_builder(self.name)
                self.state = State.BUILDING
                return
            self._load(binary)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path, which always works
            self._unavailable(exc)

    def _load(self, binary: bytes | None) -> None:
        if binary is None:
            raise LaunchError(f"{self.name} is not in the disk cache after its build")
        loaded = _import(self.name, binary)
        self._install(loaded)
        self.module = loaded
        self.state = State.LOADED

    def _unavailable(self, exc: Exception) -> None:
        self.state, self.reason, self.module = State.UNAVAILABLE, str(exc), None

    def after_fork_in_child(self) -> None:
        """A forked child gets a lock of its own (a parent's thread may have held this one at the
        fork); a build the parent started is the parent's, so the child keeps the Python path."""
        self._lock = threading.Lock()
        self._builder = None


def _install_core(loaded: ModuleType) -> None:
    loaded.configure(LaunchError, *_driver_entry_points())


def _install_torch(loaded: ModuleType) -> None:
    import torch

    loaded.configure(torch.Tensor, torch.nn.Parameter)


def _build_core(only_cached: bool = False) -> bytes | None:
    return _binary("jm_fast_call", "fast_call.cpp", "", _core_options, only_cached)


def _core_options() -> tuple[str, ...]:
    return "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", f"-I{_python_headers()}"


def _build_torch(only_cached: bool = False) -> bytes | None:
    import torch

    root = os.path.dirname(os.path.abspath(torch.__file__))
    library = os.path.join(root, "lib")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)

    def options() -> tuple[str, ...]:
        headers, include = os.path.join(root, "include"), _python_headers()
        return ("-O2", _cxx_standard(), "-shared", "-fPIC", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                f"-I{headers}", f"-I{os.path.join(headers, 'torch', 'csrc', 'api', 'include')}", f"-I{include}",
                "-Wl,--no-as-needed", f"-L{library}", f"-Wl,-rpath,{library}",
                "-lc10", "-ltorch_cpu", "-ltorch_python")

    identity = f"torch {torch.__version__} {torch.version.git_version} abi {abi} at {root}"
    return _binary("jm_torch_call", "torch_fast_call.cpp", identity, options, only_cached)


CORE = NativeModule("jm_fast_call", _build_core, _install_core)
TORCH = NativeModule("jm_torch_call", _build_torch, _install_torch)
MODULES = {module.name: module for module in (CORE, TORCH)}


def _after_fork_in_child() -> None:
    for module in MODULES.values():
        module.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def status() -> str:
    """The core module's state: 'loaded', 'building', 'not started', 'off' or 'unavailable: <why>'."""
    return CORE.status()


def torch_status() -> str:
    """The same of the torch module."""
    return TORCH.status()


def torch_module() -> ModuleType | None:
    """The torch module where torch is in use and the core module loaded, else None."""
    if "torch" not in sys.modules or CORE.get() is None:
        return None
    return TORCH.get()


def wait(timeout: float | None = None) -> ModuleType | None:
    """Build here what is missing and load it: the core module, and the torch one where torch is
    imported. Returns the core module, or None where it is not to be had."""
    core = CORE.wait(timeout)
    if core is not None and "torch" in sys.modules:
        TORCH.wait(timeout)
    return core


def kernel(function: int, host: bool, block: tuple[int, int, int], context: int, on_fault: Any,
           name: str) -> Any | None:
    """A C launcher of one loaded kernel, or None where the core module is not loaded (or refuses)."""
    loaded = CORE.get()
    if loaded is None:
        return None
    try:
        return loaded.Kernel(function, host, block, context, on_fault, name)
    except LaunchError:  # a CUDA kernel with no driver entry points: the Python launch stays
        return None


def _python_headers() -> str:
    """Python.h's folder, for a build (sysconfig costs a new process 2 ms, so a load never asks)."""
    import sysconfig

    include = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise LaunchError(f"Python's headers are not installed (no Python.h in {include!r}; "
                          "Debian/Ubuntu: apt-get install python3-dev)")
    return include


def _cxx_standard() -> str:
    """C++20 where the compiler has it (torch's own extensions build with it), else C++17."""
    from jiter_magic.compilers.cxx import _accepts, find_cxx

    return "-std=c++20" if _accepts(find_cxx(os.environ.get("CXX") or None), "-std=c++20") else "-std=c++17"


def _binary(name: str, source_file: str, identity: str, options: Callable[[], tuple[str, ...]],
            only_cached: bool) -> bytes | None:
    """A module's shared library from the disk cache; else None with `only_cached`, or built here
    and stored. The key is the source, the Python build and `identity` (what the module links
    against), not the compiler, whose probes cost more than the load itself: any compiler's build
    of it serves."""
    from jiter_magic.cache.disk import disk_cache
    from jiter_magic.cache.entry import cache_key

    with open(os.path.join(HERE, source_file)) as handle:
        source = handle.read()
    # The Python build, by what names it without sysconfig: version, extension suffix, installation.
    python = f"{sys.version}|{importlib.machinery.EXTENSION_SUFFIXES[0]}|{platform.machine()}|{sys.base_prefix}"
    key = cache_key(source, (), f"{python}|{identity}")
    disk = disk_cache(settings.FAST_CALL_DIR.get() or None)
    binary = disk.get(NAMESPACE, key)
    if binary is not None or only_cached:
        return binary
    from jiter_magic.compilers.cxx import CxxCompiler

    with disk.key_lock(NAMESPACE, key):
        binary = disk.get(NAMESPACE, key)
        if binary is None:
            binary = CxxCompiler().compile(source, name, options()).binary
            disk.put(NAMESPACE, key, binary)
    return binary


def _start_builder(name: str) -> subprocess.Popen:
    """The builder process of one module, in a session of its own: it goes on when this process ends."""
    package_root = os.path.dirname(os.path.dirname(HERE))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root if not path else package_root + os.pathsep + path}
    return subprocess.Popen([sys.executable, "-m", "jiter_magic.native.build", name], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def _finish(builder: subprocess.Popen, name: str, timeout: float | None) -> None:
    """Wait for a builder process; its last lines are the reason where it failed."""
    try:
        _, stderr = builder.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"building {name} took longer than {timeout} s") from None
    if builder.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise LaunchError(f"building {name} failed: {' / '.join(tail) or f'exit status {builder.returncode}'}")


def build_here(name: str) -> int:
    """The builder process: build one module into the disk cache."""
    if name == "jm_torch_call":
        import torch  # noqa: F401 - _build_torch reads its paths and ABI
    try:
        MODULES[name]._build(False)
        return 0
    except Exception as exc:  # noqa: BLE001 - the asking process shows this line as the reason
        print(exc, file=sys.stderr)
        return 1


def _import(name: str, binary: bytes) -> ModuleType:
    """The extension module of these bytes, loaded from a private file removed at once."""
    fd, path = tempfile.mkstemp(prefix=f"jiter_magic-{name}-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(binary)
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None
        loaded = importlib.util.module_from_spec(spec)
        loader.exec_module(loaded)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return loaded


def _driver_entry_points() -> tuple[int, int, int, int]:
    """Addresses of the CUDA driver's cuLaunchKernel, cuCtxGetCurrent, cuCtxSetCurrent and
    cuGetErrorName; zeros where there is no driver (host kernels only)."""
    if not sys.platform.startswith("linux"):
        return 0, 0, 0, 0
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        names = ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent", "cuGetErrorName")
        found = tuple(ctypes.cast(getattr(driver, name), ctypes.c_void_p).value or 0 for name in names)
    except (OSError, AttributeError):
        return 0, 0, 0, 0
    return found[0], found[1], found[2], found[3]
