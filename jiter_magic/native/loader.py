"""The C-level call path: two small extension modules, built once a machine in the background.

The hot path of a planned call in Python costs several microseconds: each torch getter of the key
(0.1-0.3 us, seven a tensor), the output's allocation (argument parsing), packing the `Args`
struct and the launch through ctypes. Two modules take that over:

- `fast_call.cpp` (needs only Python's headers): `Kernel` launches a loaded kernel (CUDA through
  the driver's cuLaunchKernel in the kernel's own context; host kernels with the GIL released) and
  `HotPlan` runs a whole planned call of the hot path: outputs, pointers, stream, launch.
- `torch_fast_call.cpp` (built against the installed torch's headers, ~25 s, only once torch is
  in use): the torch key read from ATen, which also refuses a view that reaches past its storage
  on every call, an `Allocator` calling at::empty_strided, and `data_ptr`.

Nothing here is required. The host C++ compiler builds each module the first time a kernel is
loaded, in a builder process watched by a daemon thread (which loads or builds only once the
process's first call has returned its result, or a second on), so no call waits for it and the build
outlives a process that ends first; the binaries go to the disk cache under
`root/ext/` (key-bound, private folders, no symlinks; not counted as kernels) and later processes
load them in milliseconds. Until then, or where a module cannot be built (no compiler, no headers)
or `JITER_MAGIC_FAST_CALL=0`, the Python path runs: the same results and the same errors.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.machinery
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import threading
import weakref
from _thread import start_new_thread
from collections.abc import Callable
from types import ModuleType
from typing import Any

from jiter_magic.errors import LaunchError

VARIABLE = "JITER_MAGIC_FAST_CALL"
DIR_VARIABLE = "JITER_MAGIC_FAST_CALL_DIR"  # a cache directory for the modules (default: the kernels' one)
NAMESPACE = "ext"  # the disk cache's folder for them: no kernels, so not counted by cache_stats()
HERE = os.path.dirname(os.path.abspath(__file__))

module: ModuleType | None = None  # jm_fast_call once loaded: read on every hot call
torch_module: ModuleType | None = None  # jm_torch_call once loaded
_states = {"jm_fast_call": "not started", "jm_torch_call": "not started"}
_lock = threading.Lock()


class _LoadThread:
    """The daemon thread that loads the modules. It is started with `_thread.start_new_thread`:
    `threading.Thread.start` waits until the new thread runs, 0.3 ms of a new process's first call
    on the H200's host (0.03 ms without the wait). It counts as running from its creation until
    its target returns, or its start fails: the new thread may run before `start_new_thread`
    returns, and no other thread may see it finished then. A thread made without a target (the
    path turned off) is finished from the start."""

    def __init__(self, target: Callable[[], None] | None) -> None:
        self.target = target
        self.done = threading.Event()
        if target is None:
            self.done.set()

    def start(self) -> None:
        try:
            start_new_thread(self._run, ())
        except BaseException:
            self.done.set()
            raise

    def _run(self) -> None:
        try:
            if self.target is not None:
                self.target()
        finally:
            self.done.set()

    def is_alive(self) -> bool:
        return not self.done.is_set()

    def join(self, timeout: float | None = None) -> None:
        self.done.wait(timeout)

    def gone_in_child(self) -> None:
        """A forked child has none of its parent's threads: this one counts as finished there."""
        self.done = threading.Event()
        self.done.set()


_thread: _LoadThread | None = None  # the latest loading thread (a second one may load the torch module)
_waiting: weakref.WeakSet[Any] = weakref.WeakSet()  # objects whose `fast_call_loaded()` to call after a load
_waiting_lock = threading.Lock()  # the loading thread walks `_waiting` while callers add to it
loads = 0  # modules loaded so far: a binding read before a load and stored after it is to be read again
_compiling: set[subprocess.Popen] = set()  # the compiler of a background build, while it runs
# The modules' loads (dlopens, the torch module's against libtorch: milliseconds holding the GIL) wait
# for the process's first result: a new process's first call then does not share the interpreter.
_first_result = threading.Event()
FIRST_RESULT_WAIT = 1.0  # seconds the load waits at most (a process that launches nothing yet)
_temporary_files: set[str] = set()  # a load's private file, while it exists
_temporary_lock = threading.Lock()
_exiting = False  # set at exit: no load makes a file then, as the exit may end its thread at any step


@atexit.register
def _stop_builds() -> None:
    """A process that ends during a build stops its compiler rather than leave it running alone,
    and lets the build thread unwind (its lock file and temporary folder removed). A load's
    private file goes, and no load makes another."""
    global _exiting
    with _temporary_lock:
        _exiting = True
    for path in list(_temporary_files):
        _remove_temporary(path)
    killed = list(_compiling)
    for process in killed:
        process.kill()
    thread = _thread
    if killed and thread is not None and thread.is_alive():
        thread.join(5)


def enabled() -> bool:
    return os.environ.get(VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


def status() -> str:
    """'loaded', 'building', 'not started', 'off' or 'unavailable: <why>', of the core module."""
    return _states["jm_fast_call"]


def torch_status() -> str:
    """The same of the torch module."""
    return _states["jm_torch_call"]


def settled() -> bool:
    """Whether no build is running: plans made from now on use whatever is loaded for good."""
    return _thread is not None and not _thread.is_alive()


def start() -> None:
    """Have a daemon thread load the modules from the disk cache, or build what is missing (through
    a builder process) and load it: once a process, and not at all when turned off. The thread
    starts loading once the process's first call has returned its result (`first_result`): a load
    (a dlopen, the torch module's against libtorch) holds the interpreter for milliseconds, which a
    new process's first call would wait for; that call launches through the driver (ctypes)."""
    global _thread
    if _thread is not None:
        return
    with _lock:
        if _thread is not None:
            return
        if not enabled():
            _states.update({name: "off" for name in _states})
            _thread = _LoadThread(None)  # marks the decision; never started
            return
        _start_thread(_load_all, list(_states))


def _start_thread(target: Callable[[], None], names: list[str]) -> None:
    """Start a loading thread of `target` as `_thread` (under `_lock`); where no thread can be had,
    the modules `names` are unavailable and say why."""
    global _thread
    _thread = _LoadThread(target)
    try:
        _thread.start()
    except Exception as exc:  # noqa: BLE001 - no thread to be had (the interpreter finalizing, a thread limit)
        _states.update({name: f"unavailable: the loading thread could not start: {exc}" for name in names})


def torch_in_use() -> None:
    """The torch adapter was just made. Where the core module is loaded but the torch module was
    never asked for (torch was not imported when the loading thread looked), a thread loads it now:
    a process that used jiter_magic before it imported torch still gets the torch key in C."""
    if module is None or _states["jm_torch_call"] != "not started":
        return
    with _lock:
        if module is None or not _claim_torch():
            return
        previous = _thread

        def after_previous() -> None:  # `wait` and `settled` follow the latest thread: it ends last
            if previous is not None:
                previous.join()
            _load_torch()
        _start_thread(after_previous, ["jm_torch_call"])


def _claim_torch() -> bool:
    """Whether the caller is to load the torch module (under `_lock`): torch is imported and no
    thread has taken the load on. The one that is to marks it 'building'."""
    if _states["jm_torch_call"] != "not started" or "torch" not in sys.modules:
        return False
    _states["jm_torch_call"] = "building"
    return True


def wait(timeout: float | None = None) -> ModuleType | None:
    """Start the builds if needed and wait for them: the core module, or None where it is not to be had."""
    start()
    _first_result.set()  # a waiter wants every module now
    thread = _thread
    if thread is not None:
        thread.join(timeout)
    return module


def first_result() -> None:
    """A newly planned call has launched: the modules may load now (after a call that failed,
    they load FIRST_RESULT_WAIT seconds on)."""
    _first_result.set()


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads: where the loading thread had not loaded
    everything, the child starts its own (the locks, which a parent's thread may have held at
    the fork, made anew), so that a child forked soon after a first call still gets the C path.
    A module being loaded counts as loaded where it was already in place, else as not started;
    the parent's thread may have been about to announce a module, so the child announces what is
    loaded again (binding key functions anew is harmless)."""
    global _thread, _lock, _waiting_lock, _temporary_lock, _first_result, _exiting
    _lock, _waiting_lock, _temporary_lock = threading.Lock(), threading.Lock(), threading.Lock()
    had_result, _first_result = _first_result.is_set(), threading.Event()
    if had_result:
        _first_result.set()
    _compiling.clear()  # the parent's compilers are the parent's to stop
    _temporary_files.clear()  # and its temporary files its own to remove
    _exiting = False
    thread = _thread
    if thread is None:  # never started here
        return
    running = thread.is_alive()
    thread.gone_in_child()
    in_place = {"jm_fast_call": module, "jm_torch_call": torch_module}
    for name, state in _states.items():
        if state == "building":  # a thread's load, or a claim whose thread had not started yet
            _states[name] = "loaded" if in_place[name] is not None else "not started"
    if "not started" in _states.values():
        _thread = None
        start()
    if running and "loaded" in _states.values():
        _announce()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def when_loaded(owner: Any) -> None:
    """Call `owner.fast_call_loaded()` after each module loads (held weakly): also after the first
    loading thread has finished, as the torch module may load later (`torch_in_use`)."""
    with _waiting_lock:
        _waiting.add(owner)


def _install_core(loaded: ModuleType) -> None:
    global module
    loaded.configure(LaunchError, *_driver_entry_points())
    module = loaded


def _install_torch(loaded: ModuleType) -> None:
    global torch_module
    import torch

    loaded.configure(torch.Tensor, torch.nn.Parameter)
    torch_module = loaded


def _load_all() -> None:
    """After the first result: load (or build, then load) the core module, then the torch module
    where torch is imported (else `torch_in_use` loads it once torch's adapter is made)."""
    _first_result.wait(FIRST_RESULT_WAIT)
    if module is None and _states["jm_fast_call"] in ("not started", "building"):
        _load("jm_fast_call", _build_core, _install_core)
    if module is None:
        return
    with _lock:
        claimed = _claim_torch()
    if claimed:
        _load_torch()


def _load_torch() -> None:
    _load("jm_torch_call", _build_torch, _install_torch)


def _announce() -> None:
    global loads
    loads += 1
    with _waiting_lock:
        owners = list(_waiting)
    for owner in owners:
        owner.fast_call_loaded()


def _load(name: str, build: Callable[[], bytes], install: Callable[[ModuleType], None]) -> None:
    """Build or read the module, load it, `install` it (configured, then assigned), then mark it
    'loaded' and announce it, in that order: a child forked at any step finds a module marked
    'loaded' in place. Where it is not to be had, the state says why ('unavailable: <why>')."""
    _states[name] = "building"
    try:
        install(_import(name, build()))
    except Exception as exc:  # noqa: BLE001 - any failure leaves the Python path, which always works
        _states[name] = f"unavailable: {exc}"
        return
    _states[name] = "loaded"
    _announce()


def _python_headers() -> str:
    """Python.h's folder, for a build (sysconfig costs a new process 2 ms, so a load never asks)."""
    import sysconfig

    include = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise LaunchError(f"Python's headers are not installed (no Python.h in {include!r}; "
                          "Debian/Ubuntu: apt-get install python3-dev)")
    return include


def _build_core() -> bytes:
    return _binary("jm_fast_call", "fast_call.cpp", "",
                   lambda: ("-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", f"-I{_python_headers()}"))


def _build_torch() -> bytes:
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
    return _binary("jm_torch_call", "torch_fast_call.cpp", identity, options)


def _cxx_standard() -> str:
    """C++20 where the compiler has it (torch's own extensions build with it), else C++17."""
    from jiter_magic.compilers.cxx import _accepts, find_cxx

    return "-std=c++20" if _accepts(find_cxx(os.environ.get("CXX") or None), "-std=c++20") else "-std=c++17"


def _binary(name: str, source_file: str, identity: str, options: Callable[[], tuple[str, ...]]) -> bytes:
    """A module's shared library: from the disk cache, else built and stored. The key is the source,
    the Python build and `identity` (what the module links against), not the compiler, whose probes
    cost more than the load itself: any compiler's build of it serves.

    The build runs in a process of its own (`python -m jiter_magic.native.build NAME`), which
    stores the entry even when this process ends first: a script that ends during the build still
    leaves the module for the next run. Where the disk cache cannot hold it, it is built here."""
    from jiter_magic.cache.disk import disk_cache
    from jiter_magic.runtime.build import cache_key

    with open(os.path.join(HERE, source_file)) as handle:
        source = handle.read()
    # The Python build, by what names it without sysconfig: version, extension suffix, installation.
    python = f"{sys.version}|{importlib.machinery.EXTENSION_SUFFIXES[0]}|{platform.machine()}|{sys.base_prefix}"
    key = cache_key(source, (), f"{python}|{identity}")
    disk = disk_cache(os.environ.get(DIR_VARIABLE) or None)
    binary = disk.get(NAMESPACE, key)
    if binary is not None:
        return binary
    _python_headers()  # before any builder starts: without them no build can succeed
    if disk.usable and not _building_here:
        _build_in_own_process(name)
        binary = disk.get(NAMESPACE, key)
        if binary is not None:
            return binary
    from jiter_magic.compilers.cxx import CxxCompiler

    with disk.key_lock(NAMESPACE, key):
        binary = disk.get(NAMESPACE, key)
        if binary is None:
            binary = CxxCompiler().compile(source, name, options(), _compiling).binary
            disk.put(NAMESPACE, key, binary)
    return binary


_building_here = False  # True in the builder process itself


def _build_in_own_process(name: str) -> None:
    """Run the builder process and wait for it; it is left running if this process ends first."""
    package_root = os.path.dirname(os.path.dirname(HERE))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root if not path else package_root + os.pathsep + path}
    builder = subprocess.Popen([sys.executable, "-m", "jiter_magic.native.build", name], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    _, stderr = builder.communicate()
    if builder.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise LaunchError(f"building {name} failed: {' / '.join(tail) or f'exit status {builder.returncode}'}")


def build_here(name: str) -> int:
    """The builder process: build one module into the disk cache."""
    global _building_here
    _building_here = True
    if name == "jm_torch_call":
        import torch  # noqa: F401 - _build_torch reads its paths and ABI
    build = {"jm_fast_call": _build_core, "jm_torch_call": _build_torch}[name]
    try:
        build()
        return 0
    except Exception as exc:  # noqa: BLE001 - the asking process shows this line as the reason
        print(exc, file=sys.stderr)
        return 1


def _import(name: str, binary: bytes) -> ModuleType:
    """The extension module of these bytes, loaded from a private file removed at once (or at the
    process's exit, which can stop this daemon thread before its own removal)."""
    with _temporary_lock:
        if _exiting:
            raise LaunchError("the process is exiting")
        fd, path = tempfile.mkstemp(prefix=f"jiter_magic-{name}-", suffix=".so")
        _temporary_files.add(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(binary)
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None
        loaded = importlib.util.module_from_spec(spec)
        loader.exec_module(loaded)
    finally:
        _remove_temporary(path)
    return loaded


def _remove_temporary(path: str) -> None:
    with _temporary_lock:
        if path in _temporary_files:
            _temporary_files.discard(path)
            with contextlib.suppress(OSError):
                os.unlink(path)


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


def kernel(function: int, host: bool, block: tuple[int, int, int], context: int, on_fault: Any,
           name: str) -> Any | None:
    """A C launcher of one loaded kernel, or None while the module is not loaded (or it refuses)."""
    loaded = module
    if loaded is None:
        return None
    try:
        return loaded.Kernel(function, host, block, context, on_fault, name)
    except LaunchError:  # a CUDA kernel with no driver entry points: the Python launch stays
        return None


def torch_key() -> Callable[[tuple], Any] | None:
    """The hot path's key of calls of torch tensors read through ATen, or None while that module
    is not loaded (the torch adapter's Python key runs then)."""
    loaded = torch_module
    return None if loaded is None else loaded.torch_key
