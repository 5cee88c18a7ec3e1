"""The disk cache's counters, key and entry format: what the disk cache (disk.py) reports into,
names entries by, and writes.

An entry is MAGIC, a SHA-256 of the rest, then the namespace and the full key it was written
for, the payload's length and the payload: a file copied from another key, cut short or
changed is caught on read.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import jiter_magic.settings as settings
from jiter_magic._version import __version__
from jiter_magic.state import RUNTIME

MAGIC = b"JITERMAGIC2\n"
NAMESPACES = ("cuda", "cpu")
_NAMESPACE_BYTES, _KEY_BYTES = 8, 64
HEADER = len(MAGIC) + 32 + 8 + _NAMESPACE_BYTES + _KEY_BYTES


class CacheWarning(UserWarning):
    """A cache entry was discarded, or the cache directory cannot be used."""


class Counters:
    """The process's cache counters (`counters()`), read through `jiter_magic.cache_stats()`. A
    plain class: a new process makes this one at import, where a dataclass costs a millisecond."""

    __slots__ = ("memory_hits", "disk_hits", "compiles", "compile_seconds", "corrupt_entries", "evictions",
                 "lock_timeouts", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def add(self, name: str, amount: float = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + amount)

    def reset(self) -> None:
        with self.lock:
            self.memory_hits = self.disk_hits = self.compiles = self.corrupt_entries = 0
            self.evictions = self.lock_timeouts = 0
            self.compile_seconds = 0.0


def counters() -> Counters:
    """This process's cache counters (a part of `RUNTIME`)."""
    return RUNTIME.part(Counters)


def cache_root() -> str:
    """The cache directory the environment asks for (read at each use, so tests can move it)."""
    explicit = settings.CACHE_DIR.get()
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jiter_magic")


def disk_cache_enabled() -> bool:
    return settings.DISK_CACHE.get()


def max_bytes() -> int:
    """The size bound of the disk cache: `JITER_MAGIC_CACHE_MAX_BYTES` (bytes, or 500K/200M/2G)."""
    return settings.CACHE_MAX_BYTES.get()


def lock_timeout() -> float:
    """Seconds to wait for another process compiling the same key: `JITER_MAGIC_CACHE_LOCK_TIMEOUT`."""
    return settings.CACHE_LOCK_TIMEOUT.get()


def sha256(data: bytes = b"") -> Any:
    """hashlib's SHA-256, imported at the first use: loading OpenSSL costs milliseconds of
    `import jiter_magic`, which keys, reads and writes no entry."""
    import hashlib

    return hashlib.sha256(data)


def cache_key(source: str, options: tuple[str, ...], identity: str) -> str:
    """The disk cache's key of a binary: the package version, what the binary depends on besides
    its source (`identity`: compiler, target), the options and `source`: the source itself, or
    text that decides it (a kernel's: runtime/build.py's `recipe`)."""
    digest = sha256()
    for part in (__version__, identity, "\0".join(options), source):
        digest.update(part.encode())
        digest.update(b"\0\1")
    return digest.hexdigest()


def _pack(namespace: str, key: str, payload: bytes) -> bytes:
    """MAGIC, then a SHA-256 of everything after it: the namespace, the full key, the length, the payload."""
    if len(namespace.encode()) > _NAMESPACE_BYTES or len(key.encode()) > _KEY_BYTES:
        raise ValueError(f"cache namespace {namespace!r} or key {key[:16]!r}... is longer than an entry holds")
    body = (namespace.encode().ljust(_NAMESPACE_BYTES, b"\0") + key.encode().ljust(_KEY_BYTES, b"\0")
            + len(payload).to_bytes(8, "little") + payload)
    return MAGIC + sha256(body).digest() + body


def _unpack(blob: bytes) -> tuple[str, str, bytes] | None:
    """(namespace, key, payload) of an intact entry, else None."""
    start = len(MAGIC) + 32
    if len(blob) < HEADER or not blob.startswith(MAGIC):
        return None
    if sha256(blob[start:]).digest() != blob[len(MAGIC):start]:
        return None
    namespace, key = blob[start:start + _NAMESPACE_BYTES], blob[start + _NAMESPACE_BYTES:HEADER - 8]
    if int.from_bytes(blob[HEADER - 8:HEADER], "little") != len(blob) - HEADER:
        return None
    return namespace.rstrip(b"\0").decode("latin-1"), key.rstrip(b"\0").decode("latin-1"), blob[HEADER:]
