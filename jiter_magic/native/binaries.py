"""The C call path's modules as binaries: from the disk cache, or compiled and stored there.

A builder process (`python -m jiter_magic.native.build NAME`, see build.py) runs `build_here`.
"""
from __future__ import annotations

import importlib.machinery
import os
import platform
import subprocess
import sys
from collections.abc import Callable

from jiter_magic import settings
from jiter_magic.errors import LaunchError

NAMESPACE = "ext"  # the disk cache's folder for the modules: no kernels, so not counted by cache_stats()
HERE = os.path.dirname(os.path.abspath(__file__))


def build_core(only_cached: bool = False) -> bytes | None:
    return binary_of("jm_fast_call", "fast_call.cpp", "", _core_options, only_cached)


def _core_options() -> tuple[str, ...]:
    return "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", f"-I{python_headers()}"


def build_torch(only_cached: bool = False) -> bytes | None:
    import torch

    root = os.path.dirname(os.path.abspath(torch.__file__))
    library = os.path.join(root, "lib")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)

    def options() -> tuple[str, ...]:
        headers, include = os.path.join(root, "include"), python_headers()
        return ("-O2", _cxx_standard(), "-shared", "-fPIC", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                f"-I{headers}", f"-I{os.path.join(headers, 'torch', 'csrc', 'api', 'include')}", f"-I{include}",
                "-Wl,--no-as-needed", f"-L{library}", f"-Wl,-rpath,{library}",
                "-lc10", "-ltorch_cpu", "-ltorch_python")

    identity = f"torch {torch.__version__} {torch.version.git_version} abi {abi} at {root}"
    return binary_of("jm_torch_call", "torch_fast_call.cpp", identity, options, only_cached)


def python_headers() -> str:
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


def binary_of(name: str, source_file: str, identity: str, options: Callable[[], tuple[str, ...]],
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


def start_builder(name: str) -> subprocess.Popen:
    """The builder process of one module, in a session of its own: it goes on when this process ends."""
    package_root = os.path.dirname(os.path.dirname(HERE))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root if not path else package_root + os.pathsep + path}
    return subprocess.Popen([sys.executable, "-m", "jiter_magic.native.build", name], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def finish(builder: subprocess.Popen, name: str, timeout: float | None) -> None:
    """Wait for a builder process; its last lines are the reason where it failed."""
    try:
        _, stderr = builder.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"building {name} took longer than {timeout} s") from None
    if builder.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise LaunchError(f"building {name} failed: {' / '.join(tail) or f'exit status {builder.returncode}'}")


BUILDS: dict[str, Callable[[bool], bytes | None]] = {"jm_fast_call": build_core, "jm_torch_call": build_torch}


def build_here(name: str) -> int:
    """The builder process: build one module into the disk cache."""
    if name == "jm_torch_call":
        import torch  # noqa: F401 - build_torch reads its paths and ABI
    try:
        BUILDS[name](False)
        return 0
    except Exception as exc:  # noqa: BLE001 - the asking process shows this line as the reason
        print(exc, file=sys.stderr)
        return 1
