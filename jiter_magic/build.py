"""Render, then find the binary in the disk cache or compile it: one specialization's build.

The key is a SHA-256 of everything that decides the binary: the generated source, the
compiler's options and identity (NVRTC version and architecture, or the host compiler and
CPU) and this package's version. Counters record disk hits, compiles and compile time.
With `JITER_MAGIC_DEBUG=1`, the source of a failed compile is saved to a file the error names.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass

from ._version import __version__
from .bind import Binding
from .cache import COUNTERS, disk_cache
from .codegen.kernel import render
from .compilers.base import Compiler, with_source_lines
from .errors import CompileError
from .spec import KernelSpec

DEBUG_VARIABLE = "JITER_MAGIC_DEBUG"


@dataclass(frozen=True)
class Specialization:
    """A built specialization, as the notebook panel and `fn.specializations` show it."""

    backend: str  # 'cuda' or 'cpu'
    target: str  # 'sm_90', or 'host'
    spec: KernelSpec
    source: str
    binary: bytes
    log: str
    options: tuple[str, ...]
    compile_seconds: float  # 0.0 when it came from the disk cache
    cache_event: str  # 'compiled' or 'disk'
    cache_key: str
    cache_file: str | None

    @property
    def binary_size(self) -> int:
        return len(self.binary)


def cache_key(source: str, options: tuple[str, ...], identity: str) -> str:
    digest = hashlib.sha256()
    for part in (__version__, identity, "\0".join(options), source):
        digest.update(part.encode())
        digest.update(b"\0\1")
    return digest.hexdigest()


def debugging() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "").strip().lower() not in ("", "0", "false", "no", "off")


def save_failed_source(source: str, name: str, backend: str, key: str) -> str:
    """Write the source of a failed compile where the user can open it; returns the path."""
    folder = os.path.join(tempfile.gettempdir(), "jiter_magic-failed")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, f"{name}-{key[:16]}{'.cu' if backend == 'cuda' else '.cpp'}")
    with open(path, "w") as handle:
        handle.write(source)
    return path


def build(binding: Binding, spec: KernelSpec, backend: str, compiler: Compiler) -> Specialization:
    """The binary for `spec` on `backend`: from disk when a valid entry exists, else compiled and stored."""
    source = render(binding, spec, backend)
    options = compiler.options()
    key = cache_key(source, options, compiler.identity)
    disk = disk_cache()
    started = time.perf_counter()
    binary = disk.get(backend, key)
    if binary is not None:
        with COUNTERS.lock:
            COUNTERS.disk_hits += 1
        return Specialization(backend, compiler.target, spec, source, binary, "", options,
                              0.0, "disk", key, disk.path(backend, key))
    name = binding.functor.name
    try:
        result = compiler.compile(source, name, options)
    except CompileError as exc:
        log = with_source_lines(exc.log, binding.functor.code)
        message = f"{name}: compiling {spec.describe()} failed.\n{log}"
        if debugging():
            message += f"\n(generated source saved to {save_failed_source(source, name, backend, key)})"
        raise CompileError(message, log, source) from None
    path = disk.put(backend, key, result.binary)
    seconds = time.perf_counter() - started
    with COUNTERS.lock:
        COUNTERS.compiles += 1
        COUNTERS.compile_seconds += seconds
    return Specialization(backend, compiler.target, spec, source, result.binary, result.log,
                          options, seconds, "compiled", key, path)
