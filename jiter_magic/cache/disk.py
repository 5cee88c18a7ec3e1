"""The on-disk kernel cache, and `stats()` of it and of the counters every layer reports into.

Entries live under one root (`JITER_MAGIC_CACHE_DIR`, else `$XDG_CACHE_HOME/jiter_magic`,
else `~/.cache/jiter_magic`) as `root/<cuda|cpu>/<key[:2]>/<key>.bin`, written to a temporary
file and renamed into place. A kernel found there is executed, so the cache trusts nothing it
did not check: the header binds the entry to its namespace and full key under a SHA-256 (a
copied, truncated, corrupt or foreign file is discarded with a warning and recompiled),
entries are opened without following symbolic links, and the folders must be private to
this user (`files.folder_problem`), else one warning and memory-only caching. The total
size is bounded (`JITER_MAGIC_CACHE_MAX_BYTES`, least recently used first out; a disk hit
refreshes the entry's mtime). Only files of this layout are counted, evicted or cleared.
`JITER_MAGIC_DISK_CACHE=0` turns the disk layer off (a `NullDiskCache`).
"""
from __future__ import annotations

import contextlib
import os
import stat
import threading
import warnings
from collections.abc import Iterator

from jiter_magic.cache import files as fs
from jiter_magic.cache import keylock
from jiter_magic.cache.entry import (
    NAMESPACES,
    CacheWarning,
    _pack,
    _unpack,
    cache_root,
    counters,
    disk_cache_enabled,
    lock_timeout,
    max_bytes,
)
from jiter_magic.cache.memory import clear_all
from jiter_magic.state import RUNTIME


class DiskCache:
    """Key-bound, checksummed, atomically written files under private `root/<namespace>/<key[:2]>/`."""

    def __init__(self, root: str):
        self.root = root
        self.usable = True
        self._lock = threading.Lock()

    def path(self, namespace: str, key: str) -> str:
        return os.path.join(self.root, namespace, key[:2], key + ".bin")

    def lock_path(self, namespace: str, key: str) -> str:
        return os.path.join(self.root, namespace, key[:2], key + ".lock")

    def get(self, namespace: str, key: str) -> bytes | None:
        """The payload stored for exactly (namespace, key); a bad entry is discarded with one warning."""
        if not self._private(namespace, key[:2], create=False):
            return None
        path = self.path(namespace, key)
        try:
            blob = fs.read_nofollow(path)
        except fs.Rejected as why:
            self._discard(path, str(why))
            return None
        except OSError as exc:
            warnings.warn(f"jiter_magic: cannot read cache entry {path}: {exc}; recompiling", CacheWarning, 3)
            return None
        if blob is None:
            return None
        unpacked = _unpack(blob)
        if unpacked is None:
            self._discard(path, "is truncated, corrupt or not ours")
            return None
        bound_namespace, bound_key, payload = unpacked
        if (bound_namespace, bound_key) != (namespace, key):
            self._discard(path, f"holds the kernel of another key ({bound_namespace}/{bound_key[:16]}...), "
                                "e.g. a copied file")
            return None
        return payload

    def put(self, namespace: str, key: str, payload: bytes) -> str | None:
        """Store atomically, then evict over the bound; the path, or None when not stored."""
        if not self._private(namespace, key[:2], create=True):
            return None
        path = self.path(namespace, key)
        import secrets  # here: a process that only reads the cache never imports it

        temp = os.path.join(os.path.dirname(path), f".tmp-{key}-{secrets.token_hex(8)}.bin")
        try:
            fs.write_atomic(path, _pack(namespace, key, payload), temp)
        except FileNotFoundError:
            return None  # a concurrent clear_cache() removed the temporary file: not stored this time
        except OSError as exc:
            self._give_up(self._unwritable(exc))
            return None
        self._evict(keep=path)
        return path

    def discard(self, namespace: str, key: str, reason: str) -> bool:
        """Remove the entry of `key` (it failed to load: `reason`); True when there was one."""
        path = self.path(namespace, key)
        if not self._private(namespace, key[:2], create=False) or not os.path.lexists(path):
            return False
        self._discard(path, f"could not be loaded ({reason})")
        return True

    @contextlib.contextmanager
    def key_lock(self, namespace: str, key: str) -> Iterator[bool]:
        """Hold the key's inter-process lock around a compile. Yields whether it is held: False
        without flock, with unusable folders, or after the timeout (the caller compiles anyway)."""
        lock: keylock.KeyLock | None = None
        if keylock.AVAILABLE and self._private(namespace, key[:2], create=True):
            lock = keylock.KeyLock(self.lock_path(namespace, key))
            try:
                if not lock.acquire(lock_timeout()):
                    self._timed_out(lock.path)
                    lock = None
            except OSError:
                lock = None
        try:
            yield lock is not None
        finally:
            if lock is not None:
                lock.release()

    def entries(self) -> tuple[int, int]:
        """(number of entries, bytes on disk), counting only the library's own entries."""
        sizes = [info.st_size for kind, _path, info in self._own_files()
                 if kind == "entry" and stat.S_ISREG(info.st_mode)]
        return len(sizes), sum(sizes)

    def clear(self) -> None:
        """Remove the library's own entries, temporary files and free lock files; nothing else."""
        for kind, path, info in self._own_files():
            if kind == "lock":
                keylock.remove_if_free(path)
            elif not stat.S_ISDIR(info.st_mode):
                fs.unlink(path)

    def _own_files(self) -> list[tuple[str, str, os.stat_result]]:
        """(kind, path, lstat) of the files of the library's layout, when the root is private."""
        return fs.own_files(self.root, NAMESPACES) if self._private(create=False) else []

    def _evict(self, keep: str) -> None:
        """Remove least recently used entries (oldest mtime first) until the total fits the bound;
        the entry just written is kept even when it alone is larger."""
        bound = max_bytes()
        found = [(info.st_mtime_ns, info.st_size, path) for kind, path, info in self._own_files()
                 if kind == "entry" and stat.S_ISREG(info.st_mode)]
        total = sum(size for _mtime, size, _path in found)
        for _mtime, size, path in sorted(found):
            if total <= bound:
                break
            if path == keep:
                continue
            if fs.unlink(path):
                counters().add("evictions")
            total -= size  # gone either way (another process may have evicted it first)

    def _private(self, *parts: str, create: bool) -> bool:
        """Whether the root and `parts` below it exist (made 0700 when `create`) and are private."""
        if not self.usable:
            return False
        for index in range(len(parts) + 1):
            folder = os.path.join(self.root, *parts[:index])
            problem = fs.folder_problem(folder, may_be_link=index == 0)
            if problem is fs.MISSING:
                if not create:
                    return False
                try:
                    fs.make_private_dirs(folder)
                except OSError as exc:
                    self._give_up(self._unwritable(exc))
                    return False
                problem = fs.folder_problem(folder, may_be_link=index == 0)
            if problem is not None:
                what, fix = problem
                self._give_up(f"jiter_magic: cache directory {self.root} is not private: {what}, so another "
                              "user could plant code in it; caching compiled kernels in memory only for this "
                              f"process. Fix: {fix}, or set JITER_MAGIC_CACHE_DIR to a private folder of yours.")
                return False
        return True

    def _unwritable(self, exc: OSError) -> str:
        return (f"jiter_magic: cache directory {self.root} is not writable ({exc}); caching compiled kernels "
                "in memory only for this process. Set JITER_MAGIC_CACHE_DIR to a writable folder, or "
                "JITER_MAGIC_DISK_CACHE=0.")

    def _give_up(self, message: str) -> None:
        """Turn the disk layer off for this process, with one warning."""
        with self._lock:
            if not self.usable:
                return
            self.usable = False
        warnings.warn(message, CacheWarning, 4)

    def _discard(self, path: str, why: str) -> None:
        counters().add("corrupt_entries")
        warnings.warn(f"jiter_magic: cache entry {path} {why}; discarding it and recompiling", CacheWarning, 4)
        fs.remove_entry(path)

    def _timed_out(self, path: str) -> None:
        counters().add("lock_timeouts")
        warnings.warn(f"jiter_magic: waited {lock_timeout():g} s for another process compiling the same kernel "
                      f"(lock {path}); compiling it here too. JITER_MAGIC_CACHE_LOCK_TIMEOUT sets the wait.",
                      CacheWarning, 5)


class NullDiskCache:
    """The disk layer when it is turned off: never finds, never stores, never locks."""

    root = None
    usable = False

    def path(self, namespace: str, key: str) -> None:
        return None

    def get(self, namespace: str, key: str) -> None:
        return None

    def put(self, namespace: str, key: str, payload: bytes) -> None:
        return None

    def discard(self, namespace: str, key: str, reason: str) -> bool:
        return False

    def key_lock(self, namespace: str, key: str) -> contextlib.AbstractContextManager[bool]:
        return contextlib.nullcontext(False)

    def entries(self) -> tuple[int, int]:
        return 0, 0

    def clear(self) -> None:
        pass


class DiskCaches:
    """The disk caches this process opened, one a root (so 'unusable' sticks): a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.by_root: dict[str, DiskCache] = {}

    def at(self, root: str) -> DiskCache:
        cache = self.by_root.get(root)
        if cache is None:
            cache = self.by_root.setdefault(root, DiskCache(root))
        return cache

    def after_fork_in_child(self) -> None:
        """A parent's thread may have held a cache's lock at the fork: each gets a fresh one."""
        for cache in list(self.by_root.values()):
            cache._lock = threading.Lock()


def disk_cache() -> DiskCache | NullDiskCache:
    """The disk layer for the current environment."""
    if not disk_cache_enabled():
        return NullDiskCache()
    return RUNTIME.part(DiskCaches).at(cache_root())


def stats() -> dict:
    """Counters and disk usage, for `jiter_magic.cache_stats()` and the notebook panel."""
    disk = disk_cache()
    entries, size = disk.entries()
    count = counters()
    return {
        "root": disk.root,
        "enabled": disk_cache_enabled(),
        "writable": disk.usable,
        "memory_hits": count.memory_hits,
        "disk_hits": count.disk_hits,
        "compiles": count.compiles,
        "compile_seconds": round(count.compile_seconds, 6),
        "corrupt_entries": count.corrupt_entries,
        "entries": entries,
        "bytes": size,
        "max_bytes": max_bytes(),
        "evictions": count.evictions,
        "lock_timeouts": count.lock_timeouts,
    }


def clear_caches(memory: bool, disk: bool) -> None:
    """`jiter_magic.clear_cache`: the disk cache, and/or the memory caches (every function's plans
    and loaded kernels) with the counters."""
    if disk:
        disk_cache().clear()
    if memory:
        clear_all()
        counters().reset()
