"""Cache settings, counters and the entry format: what the disk cache (cache.py) is configured by,
reports into, and writes.

An entry is MAGIC, a SHA-256 of the rest, then the namespace and the full key it was written
for, the payload's length and the payload: a file copied from another key, cut short or
changed is caught on read.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
import warnings
from dataclasses import dataclass, field

MAGIC = b"JITERMAGIC2\n"
NAMESPACES = ("cuda", "cpu")
_NAMESPACE_BYTES, _KEY_BYTES = 8, 64
HEADER = len(MAGIC) + 32 + 8 + _NAMESPACE_BYTES + _KEY_BYTES
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_LOCK_TIMEOUT = 60.0
_NUMBER = r"(?i)(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?"  # compiled by `re` at first use, not at import


class CacheWarning(UserWarning):
    """A cache entry was discarded, or the cache directory cannot be used."""


@dataclass(slots=True)
class Counters:
    """Process-wide counters, read through `jiter_magic.cache_stats()`."""

    memory_hits: int = 0
    disk_hits: int = 0
    compiles: int = 0
    compile_seconds: float = 0.0
    corrupt_entries: int = 0
    evictions: int = 0
    lock_timeouts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, amount: float = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + amount)


COUNTERS = Counters()


def cache_root() -> str:
    """The cache directory the environment asks for (read at each use, so tests can move it)."""
    explicit = os.environ.get("JITER_MAGIC_CACHE_DIR")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jiter_magic")


def disk_cache_enabled() -> bool:
    return os.environ.get("JITER_MAGIC_DISK_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def max_bytes() -> int:
    """The size bound of the disk cache: `JITER_MAGIC_CACHE_MAX_BYTES` (bytes, or 500K/200M/2G)."""
    return int(_setting("JITER_MAGIC_CACHE_MAX_BYTES", os.environ.get("JITER_MAGIC_CACHE_MAX_BYTES", "")))


def lock_timeout() -> float:
    """Seconds to wait for another process compiling the same key: `JITER_MAGIC_CACHE_LOCK_TIMEOUT`."""
    return _setting("JITER_MAGIC_CACHE_LOCK_TIMEOUT", os.environ.get("JITER_MAGIC_CACHE_LOCK_TIMEOUT", ""))


@functools.lru_cache(maxsize=16)  # one warning per bad value, not one per build
def _setting(name: str, text: str) -> float:
    """A number from the environment (sizes may end in K, M, G or T, powers of 1024); the default
    when unset, and with one warning when it is not a number (or not positive, for the size)."""
    default = DEFAULT_MAX_BYTES if name.endswith("BYTES") else DEFAULT_LOCK_TIMEOUT
    match = re.fullmatch(_NUMBER, text.strip())
    if match:
        value = float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " ")
        if value > 0 or (value == 0 and default is DEFAULT_LOCK_TIMEOUT):
            return value
    if text.strip():
        warnings.warn(f"jiter_magic: {name}={text!r} is not a valid value (like 1073741824, 500M or 2G for "
                      f"sizes, 60 for seconds); using {default:g}", CacheWarning, 3)
    return default


def _pack(namespace: str, key: str, payload: bytes) -> bytes:
    """MAGIC, then a SHA-256 of everything after it: the namespace, the full key, the length, the payload."""
    if len(namespace.encode()) > _NAMESPACE_BYTES or len(key.encode()) > _KEY_BYTES:
        raise ValueError(f"cache namespace {namespace!r} or key {key[:16]!r}... is longer than an entry holds")
    body = (namespace.encode().ljust(_NAMESPACE_BYTES, b"\0") + key.encode().ljust(_KEY_BYTES, b"\0")
            + len(payload).to_bytes(8, "little") + payload)
    return MAGIC + hashlib.sha256(body).digest() + body


def _unpack(blob: bytes) -> tuple[str, str, bytes] | None:
    """(namespace, key, payload) of an intact entry, else None."""
    start = len(MAGIC) + 32
    if len(blob) < HEADER or not blob.startswith(MAGIC):
        return None
    if hashlib.sha256(blob[start:]).digest() != blob[len(MAGIC):start]:
        return None
    namespace, key = blob[start:start + _NAMESPACE_BYTES], blob[start + _NAMESPACE_BYTES:HEADER - 8]
    if int.from_bytes(blob[HEADER - 8:HEADER], "little") != len(blob) - HEADER:
        return None
    return namespace.rstrip(b"\0").decode("latin-1"), key.rstrip(b"\0").decode("latin-1"), blob[HEADER:]
