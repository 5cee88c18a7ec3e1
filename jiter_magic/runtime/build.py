"""Find a specialization's binary in the disk cache, else render and compile it: one build.

The key is a SHA-256 of everything that decides the binary: what decides the generated source
(the kernel family, the function's binding, the spec, the backend, and the code that renders
them: `generator_fingerprint`), the compiler's options and identity (NVRTC version and
architecture, or the host compiler, CPU and instruction-set features) and this package's
version. So a disk hit needs no rendering, and none of the code generators' modules load in a
process whose kernels are all on disk (`Specialization.source` renders when first read).
Processes missing the same key together compile it once: the others
wait on the key's lock, then find the entry on disk.
Counters record disk hits, compiles and compile time. With `JITER_MAGIC_DEBUG=1`, the source
of a failed compile is saved to a file the error names. `discard` removes an entry whose
binary failed to load, so that the loader can build it again.
"""
from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jiter_magic.settings as settings
from jiter_magic.cache.entry import cache_key, counters, sha256
from jiter_magic.errors import CompileError

if TYPE_CHECKING:  # imported where used: a new process imports this module, and may never build
    from jiter_magic.cache.disk import DiskCache, NullDiskCache
    from jiter_magic.compilers.base import Compiler
    from jiter_magic.kernels.families import KernelFamily

DEBUG_VARIABLE = settings.DEBUG.name


class Specialization(NamedTuple):
    """A built specialization, as the notebook panel and `fn.specializations` show it: the build
    (its binary and how it was found), and what was built where. A NamedTuple: a new process makes
    this class on its first call, where a frozen dataclass costs a millisecond."""

    binary: bytes
    log: str
    options: tuple[str, ...]
    compile_seconds: float  # 0.0 when it came from the disk cache
    cache_event: str  # 'compiled', 'disk' or 'memory'
    cache_key: str
    cache_file: str | None
    backend: str  # 'cuda' or 'cpu'
    target: str  # 'sm_90', or 'host'
    spec: Any  # a KernelSpec of an elementwise function, a ReductionSpec of a reduction
    # The generated source: the compiled text, or (a disk hit) rendered on the first read, so that
    # a process whose kernels are all on disk loads no code generator unless someone asks.
    rendered: Callable[[], str]
    description: str  # one line for people (its family's `describe`)

    def __repr__(self) -> str:  # neither the binary (megabytes) nor the renderer
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields if name not in _UNSHOWN)
        return f"Specialization({shown})"

    @property
    def source(self) -> str:
        return self.rendered()

    @property
    def binary_size(self) -> int:
        return len(self.binary)

    def describe(self) -> str:
        """One line for people: dtypes, the kernel's path and its loop shape."""
        return self.description


_UNSHOWN = ("binary", "rendered")


def debugging() -> bool:
    return settings.DEBUG.get()


def save_failed_source(source: str, name: str, backend: str, key: str) -> str:
    """Write the source of a failed compile where the user can open it; returns the path."""
    import tempfile  # with JITER_MAGIC_DEBUG=1 only: it brings shutil, random and compressors

    folder = os.path.join(tempfile.gettempdir(), "jiter_magic-failed")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, f"{name}-{key[:16]}{'.cu' if backend == 'cuda' else '.cpp'}")
    with open(path, "w") as handle:
        handle.write(source)
    return path


class _Job(NamedTuple):
    """One build: the function's name and code (for messages), what is built, and where."""

    name: str
    code: str  # the user's code string: compiler logs point at its lines
    what: str  # one line naming the specialization, for messages and its description
    backend: str
    compiler: Compiler
    options: tuple[str, ...]
    key: str
    spec: Any
    rendered: Callable[[], str]

    def made(self, binary: bytes, log: str, seconds: float, event: str, path: str | None) -> Specialization:
        return Specialization(binary, log, self.options, seconds, event, self.key, path, self.backend,
                              self.compiler.target, self.spec, self.rendered, self.what)


def build(binding: Any, family: KernelFamily, spec: Any, backend: str, compiler: Compiler) -> Specialization:
    """The binary for `spec` of `family` (a kind of operation's kernels) on `backend`: from disk
    when a valid entry exists, else rendered, compiled and stored. `binding` is the function's, as
    its family renders it (it names the function and holds the user's code). On a miss the key's
    inter-process lock is taken and the disk checked again, so that of several processes (or
    threads) missing together only one compiles."""
    from jiter_magic.cache.disk import disk_cache

    what = family.describe(spec)
    options = compiler.options()
    key = cache_key(recipe(binding, family, spec, backend), options, compiler.identity)
    rendered: Callable[[], str] = functools.cache(functools.partial(family.render, binding, spec, backend))
    job = _Job(binding.name, binding.code, what, backend, compiler, options, key, spec, rendered)
    disk = disk_cache()
    found = _from_disk(job, disk)
    if found is None:
        with disk.key_lock(backend, key) as held:
            found = _from_disk(job, disk) if held else None  # the previous holder may have compiled it
            if found is None:
                found = _compile(job, rendered(), disk)
    return found


def recipe(binding: Any, family: KernelFamily, spec: Any, backend: str) -> str:
    """What decides the source `family` renders for `spec`, as text: the binding and the spec are
    frozen records of plain values (their reprs say all they hold), and the code that renders them
    is `generator_fingerprint`'s."""
    return "\0".join((type(family).__qualname__, backend, repr(binding), repr(spec), generator_fingerprint()))


# The subpackages whose code renders a kernel: a kernel path's loop (kernels/), the pieces of C++
# (codegen/), the C types of dtypes (planning/) and the user's code read (frontend/).
_GENERATORS = ("codegen", "kernels", "planning", "frontend")


@functools.cache
def generator_fingerprint() -> str:
    """A SHA-256 of the modules that render kernels (read once a process, about a millisecond): the
    disk key names no source, so an edit of a generator (a checkout, an editable install) must
    change the key as an edit of the source would, where the version stays the same."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = sha256()
    for sub in _GENERATORS:
        folder = os.path.join(package, sub)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as handle:
                    digest.update(name.encode() + b"\0" + handle.read() + b"\0")
    return digest.hexdigest()


def discard(specialization: Specialization, reason: str = "its binary could not be loaded") -> bool:
    """Remove `specialization`'s disk entry (one CacheWarning, counted as a corrupt entry) because
    its binary failed to load; the caller then builds again, which compiles. True when removed."""
    from jiter_magic.cache.disk import disk_cache

    return disk_cache().discard(specialization.backend, specialization.cache_key, reason)


# A compile's warnings are stored with its binary, so that a kernel loaded from the disk cache
# still shows them: the payload is then this tag, the log's length and text, and the binary (a
# binary alone, as stored without warnings, is an ELF file and never starts with the tag).
_WITH_LOG = b"jm-log1\0"


def stored_payload(binary: bytes, log: str) -> bytes:
    if not log:
        return binary
    text = log.encode()
    return _WITH_LOG + len(text).to_bytes(8, "little") + text + binary


def split_payload(payload: bytes) -> tuple[bytes, str]:
    """(binary, log) of a stored payload."""
    if not payload.startswith(_WITH_LOG):
        return payload, ""
    start = len(_WITH_LOG) + 8
    end = start + int.from_bytes(payload[len(_WITH_LOG):start], "little")
    return payload[end:], payload[start:end].decode(errors="replace")


def _from_disk(job: _Job, disk: DiskCache | NullDiskCache) -> Specialization | None:
    payload = disk.get(job.backend, job.key)
    if payload is None:
        return None
    counters().add("disk_hits")
    binary, log = split_payload(payload)
    return job.made(binary, log, 0.0, "disk", disk.path(job.backend, job.key))


def _compile(job: _Job, source: str, disk: DiskCache | NullDiskCache) -> Specialization:
    from jiter_magic.compilers.base import with_source_lines

    name = job.name
    started = time.perf_counter()
    try:
        result = job.compiler.compile(source, name, job.options)
    except CompileError as exc:
        log = with_source_lines(exc.log, job.code)
        message = f"{name}: compiling {job.what} failed.\n{log}"
        if debugging():
            message += f"\n(generated source saved to {save_failed_source(source, name, job.backend, job.key)})"
        raise CompileError(message, log, source) from None
    log = with_source_lines(result.log, job.code) if result.log else ""
    path = disk.put(job.backend, job.key, stored_payload(result.binary, log))
    seconds = time.perf_counter() - started
    count = counters()
    with count.lock:
        count.compiles += 1
        count.compile_seconds += seconds
    return job.made(result.binary, log, seconds, "compiled", path)
