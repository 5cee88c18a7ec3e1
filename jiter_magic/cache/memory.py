"""`MemoryCache`: a bounded, thread-safe, least-recently-used cache of plans or loaded kernels,
with hit and miss counts.

Counts are kept per group (the kernel specialization a plan runs), so the notebook panel can
say how often each specialization was served from memory. Every cache registers itself in the
process's `MemoryCaches` (a part of `RUNTIME`), so `jiter_magic.clear_cache(memory=True)` can
empty all of them.

Recency is kept in two generations, as a hit must cost no more than one dictionary lookup (it is
on the hot path of every call): a hit in the young generation changes nothing, a hit in the old
one moves the entry to the young; when the young generation fills half the limit it becomes the
old one and the previous old one, whatever nobody used for a whole generation, is dropped.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

from jiter_magic.cache.entry import counters
from jiter_magic.state import RUNTIME

Value = TypeVar("Value")


class _Counts:
    __slots__ = ("hits", "misses")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0


class MemoryCache(Generic[Value]):
    """At most `limit` entries; what was least recently used goes first."""

    def __init__(self, limit: int, counted: bool = True) -> None:
        self.limit = limit
        self.counted = counted  # hits also count in cache_stats()["memory_hits"]
        self._young: dict[Hashable, tuple[Value, _Counts]] = {}
        self._old: dict[Hashable, tuple[Value, _Counts]] = {}
        self._groups: dict[Hashable, _Counts] = {}
        self._lock = threading.Lock()
        self._counters = counters()
        RUNTIME.part(MemoryCaches).caches.add(self)

    def get(self, key: Hashable) -> Value | None:
        """The entry for `key` (counted as a memory hit of its group), or None.

        A young hit takes no lock: a dictionary lookup is atomic, and a count may (rarely) lose
        one increment when two threads hit the same specialization at the same instant.
        """
        entry = self._young.get(key)
        if entry is None:
            entry = self._promote(key)
            if entry is None:
                return None
        entry[1].hits += 1
        if self.counted:
            self._counters.memory_hits += 1
        return entry[0]

    def _promote(self, key: Hashable) -> tuple[Value, _Counts] | None:
        with self._lock:
            entry = self._old.pop(key, None)
            if entry is not None:
                self._store(key, entry)
            return entry

    def put(self, key: Hashable, value: Value, group: Hashable, miss: bool = True) -> None:
        """Store `value` of `group` (after a miss, unless `miss` is False: another key for a value
        already counted)."""
        with self._lock:
            counts = self._groups.get(group)
            if counts is None:
                counts = self._groups[group] = _Counts()
            counts.misses += miss
            self._old.pop(key, None)
            self._store(key, (value, counts))

    def _store(self, key: Hashable, entry: tuple[Value, _Counts]) -> None:
        """Into the young generation, starting a new one when it is full (under the lock)."""
        if len(self._young) >= max(1, self.limit // 2) and key not in self._young:
            self._old = self._young
            self._young = {}
        self._young[key] = entry

    def counts(self, group: Hashable) -> tuple[int, int]:
        """(hits, misses) of one group since the cache was last cleared."""
        with self._lock:
            counts = self._groups.get(group)
            return (counts.hits, counts.misses) if counts else (0, 0)

    def values(self) -> list[Value]:
        """Every cached value (a key may share its value with others)."""
        with self._lock:
            return [entry[0] for entry in (*self._old.values(), *self._young.values())]

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def clear(self) -> None:
        with self._lock:
            self._young = {}
            self._old = {}
            self._groups.clear()


class MemoryCaches:
    """Every memory cache of this process, held weakly: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.caches: weakref.WeakSet[MemoryCache] = weakref.WeakSet()

    def clear(self) -> None:
        for cache in list(self.caches):
            cache.clear()

    def after_fork_in_child(self) -> None:
        """A parent's thread may have held a cache's lock at the fork: each gets a fresh one."""
        for cache in list(self.caches):
            cache._lock = threading.Lock()


def clear_all() -> None:
    """Empty every memory cache of every jitted function in this process."""
    RUNTIME.part(MemoryCaches).clear()
