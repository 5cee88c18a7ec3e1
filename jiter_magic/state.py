"""`RUNTIME`: the one place this process keeps mutable state.

Each stage defines the state it needs as a small class (the cache's counters and its disk
caches, the C call path, the kernel pool, the host fault guard, the torch operators, the
functions rebuilt by unpickling) and asks the runtime for its one instance with
`RUNTIME.part(Kind)`. The runtime makes each part on first ask and imports none of them, so any
layer can keep its state here without importing the layers above it.

One fork handler lives here too: in a forked child each part that defines
`after_fork_in_child` gets fresh locks (a parent's thread may have held one at the fork).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

Part = TypeVar("Part")


class Runtime:
    """The parts of this process's state, one instance a kind, made on first ask."""

    def __init__(self) -> None:
        self._parts: dict[type, Any] = {}
        # Reentrant: a part's constructor may ask for another part (the kernel pool's memory cache
        # asks for the counters), which would wait forever on a plain lock its own thread holds.
        self._lock = threading.RLock()

    def part(self, kind: type[Part], make: Callable[[], Part] | None = None) -> Part:
        """The one `kind` of this process: made by `make` (default `kind()`) on the first ask."""
        found = self._parts.get(kind)
        if found is None:
            with self._lock:
                found = self._parts.get(kind)
                if found is None:
                    found = self._parts[kind] = (make or kind)()
        return cast(Part, found)

    def parts(self) -> list[Any]:
        """Every part made so far."""
        with self._lock:
            return list(self._parts.values())

    def after_fork_in_child(self) -> None:
        self._lock = threading.RLock()
        for made in list(self._parts.values()):
            hook = getattr(made, "after_fork_in_child", None)
            if hook is not None:
                hook()


RUNTIME = Runtime()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=RUNTIME.after_fork_in_child)
