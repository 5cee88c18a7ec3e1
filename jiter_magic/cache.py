"""The on-disk kernel cache and the counters every layer reports into.

Entries live under one root (`JITER_MAGIC_CACHE_DIR`, else `$XDG_CACHE_HOME/jiter_magic`,
else `~/.cache/jiter_magic`), one file a key, written to a temporary file and renamed
into place, with a header carrying a SHA-256 of the payload. A truncated, corrupt or
foreign file is discarded with a warning and the kernel recompiled; an unwritable root
degrades to memory-only caching with one warning. `JITER_MAGIC_DISK_CACHE=0` turns the
disk layer off (a `NullDiskCache`).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import warnings
from dataclasses import dataclass, field

MAGIC = b"JITERMAGIC1\n"
HEADER = len(MAGIC) + 32 + 8


class CacheWarning(UserWarning):
    """A cache entry was discarded, or the cache directory cannot be used."""


@dataclass
class Counters:
    """Process-wide counters, read through `jiter_magic.cache_stats()`."""

    memory_hits: int = 0
    disk_hits: int = 0
    compiles: int = 0
    compile_seconds: float = 0.0
    corrupt_entries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


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


def _pack(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).digest() + len(payload).to_bytes(8, "little") + payload


def _unpack(blob: bytes) -> bytes | None:
    if len(blob) < HEADER or not blob.startswith(MAGIC):
        return None
    digest = blob[len(MAGIC):len(MAGIC) + 32]
    length = int.from_bytes(blob[len(MAGIC) + 32:HEADER], "little")
    payload = blob[HEADER:]
    if len(payload) != length or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _make_private_dirs(folder: str) -> None:
    """Create `folder` and every missing parent with mode 0700 (os.makedirs gives parents 0777)."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


class DiskCache:
    """Checksummed, atomically written files under `root/<namespace>/<key[:2]>/<key>.bin`."""

    def __init__(self, root: str):
        self.root = root
        self.usable = True

    def path(self, namespace: str, key: str) -> str:
        return os.path.join(self.root, namespace, key[:2], key + ".bin")

    def get(self, namespace: str, key: str) -> bytes | None:
        path = self.path(namespace, key)
        try:
            with open(path, "rb") as handle:
                blob = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            warnings.warn(f"jiter_magic: cannot read cache entry {path}: {exc}; recompiling", CacheWarning, 3)
            return None
        payload = _unpack(blob)
        if payload is None:
            with COUNTERS.lock:
                COUNTERS.corrupt_entries += 1
            warnings.warn(
                f"jiter_magic: cache entry {path} is truncated, corrupt or not ours; discarding it and recompiling",
                CacheWarning, 3,
            )
            try:
                os.remove(path)
            except OSError:
                pass
            return None
        return payload

    def put(self, namespace: str, key: str, payload: bytes) -> str | None:
        """Store atomically; returns the path, or None once the root turned out unwritable."""
        if not self.usable:
            return None
        path = self.path(namespace, key)
        folder = os.path.dirname(path)
        try:
            _make_private_dirs(folder)
            fd, temp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".bin")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(_pack(payload))
                os.replace(temp, path)
            except BaseException:
                os.unlink(temp)
                raise
        except OSError as exc:
            self.usable = False
            warnings.warn(
                f"jiter_magic: cache directory {self.root} is not writable ({exc}); "
                "caching compiled kernels in memory only for this process. "
                "Set JITER_MAGIC_CACHE_DIR to a writable folder, or JITER_MAGIC_DISK_CACHE=0.",
                CacheWarning, 3,
            )
            return None
        return path

    def entries(self) -> tuple[int, int]:
        """(number of entries, bytes on disk)."""
        count = size = 0
        for folder, _dirs, files in os.walk(self.root):
            for name in files:
                if name.endswith(".bin") and not name.startswith(".tmp-"):
                    count += 1
                    try:
                        size += os.path.getsize(os.path.join(folder, name))
                    except OSError:
                        pass
        return count, size

    def clear(self) -> None:
        for folder, _dirs, files in os.walk(self.root, topdown=False):
            for name in files:
                if name.endswith(".bin"):
                    try:
                        os.remove(os.path.join(folder, name))
                    except OSError:
                        pass


class NullDiskCache:
    """The disk layer when it is turned off: never finds, never stores."""

    root = None
    usable = False

    def path(self, namespace: str, key: str) -> None:
        return None

    def get(self, namespace: str, key: str) -> None:
        return None

    def put(self, namespace: str, key: str, payload: bytes) -> None:
        return None

    def entries(self) -> tuple[int, int]:
        return 0, 0

    def clear(self) -> None:
        pass


_DISKS: dict[str, DiskCache] = {}


def disk_cache() -> DiskCache | NullDiskCache:
    """The disk layer for the current environment (one object per root, so 'unusable' sticks)."""
    if not disk_cache_enabled():
        return NullDiskCache()
    root = cache_root()
    cache = _DISKS.get(root)
    if cache is None:
        cache = _DISKS[root] = DiskCache(root)
    return cache


def stats() -> dict:
    """Counters and disk usage, for `jiter_magic.cache_stats()` and the notebook panel."""
    disk = disk_cache()
    entries, size = disk.entries()
    return {
        "root": disk.root,
        "enabled": disk_cache_enabled(),
        "writable": disk.usable,
        "memory_hits": COUNTERS.memory_hits,
        "disk_hits": COUNTERS.disk_hits,
        "compiles": COUNTERS.compiles,
        "compile_seconds": round(COUNTERS.compile_seconds, 6),
        "corrupt_entries": COUNTERS.corrupt_entries,
        "entries": entries,
        "bytes": size,
    }
