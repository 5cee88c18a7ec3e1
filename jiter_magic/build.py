"""Render, then find the binary in the disk cache or compile it: one specialization's build.

The key is a SHA-256 of everything that decides the binary: the generated source, the
compiler's options and identity (NVRTC version and architecture, or the host compiler and
CPU) and this package's version. Counters record disk hits, compiles and compile time.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from ._version import __version__
from .bind import Binding
from .cache import COUNTERS, disk_cache
from .codegen.kernel import render_cuda, render_host
from .compilers.base import with_source_lines
from .errors import CompileError
from .plan import KernelSpec


@dataclass(frozen=True)
class Specialization:
    """A built specialization, as the notebook panel and `fn.specializations` show it."""

    backend: str  # 'cuda' or 'cpu'
    target: str  # 'sm_90', or the host compiler
    spec: KernelSpec
    source: str
    binary: bytes
    log: str
    options: tuple[str, ...]
    compile_seconds: float  # 0.0 when it came from the disk cache
    cache_event: str  # 'compiled', 'disk' (then 'memory' on later calls)
    cache_key: str
    cache_file: str | None

    @property
    def binary_size(self) -> int:
        return len(self.binary)


def render(binding: Binding, spec: KernelSpec, backend: str) -> str:
    source, _user_start = (render_cuda if backend == "cuda" else render_host)(binding, spec)
    return source


def cache_key(source: str, options: tuple[str, ...], identity: str) -> str:
    digest = hashlib.sha256()
    for part in (__version__, identity, "\0".join(options), source):
        digest.update(part.encode())
        digest.update(b"\0\1")
    return digest.hexdigest()


def build(binding: Binding, spec: KernelSpec, backend: str, compiler) -> Specialization:
    """The binary for `spec` on `backend`: from disk when a valid entry exists, else compiled and stored."""
    source = render(binding, spec, backend)
    options = compiler.options()
    key = cache_key(source, options, compiler.identity)
    disk = disk_cache()
    namespace = backend
    started = time.perf_counter()
    binary = disk.get(namespace, key)
    if binary is not None:
        with COUNTERS.lock:
            COUNTERS.disk_hits += 1
        return Specialization(backend, getattr(compiler, "arch", "host"), spec, source, binary, "", options,
                              0.0, "disk", key, disk.path(namespace, key))
    try:
        result = compiler.compile(source, binding.functor.name)
    except CompileError as exc:
        header = f"{binding.functor.name}: compiling {spec.describe()} failed."
        log = with_source_lines(exc.log, binding.functor.code)
        raise CompileError(f"{header}\n{log}", log, source) from None
    path = disk.put(namespace, key, result.binary)
    seconds = time.perf_counter() - started
    with COUNTERS.lock:
        COUNTERS.compiles += 1
        COUNTERS.compile_seconds += seconds
    return Specialization(backend, getattr(compiler, "arch", "host"), spec, source, result.binary, result.log,
                          options, seconds, "compiled", key, path)
