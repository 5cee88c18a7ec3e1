"""The functions unpickling made in this process, reused while they are still what was pickled.

A Dask worker unpickles a jitted function for every task; parsing, binding and planning it once is
enough. But the rebuilt function is an ordinary object its user may change (`def_backward`, its
backend, its kwargs), and a later unpickling must still give the function the pickle holds. So a
rebuilt function is kept with two byte strings: the pickled state it was made from (the key) and
what it was right after it was made; it is reused only while it still is that.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

REBUILT_LIMIT = 64  # functions kept for unpickling

Made = TypeVar("Made")


class UnpickledFunctions:
    """The REBUILT_LIMIT functions most recently rebuilt by unpickling: a part of `RUNTIME`.

    It knows nothing of `JitFunction` (a layer above): `reuse_or_make` takes how to make one and
    how to read what one is now."""

    def __init__(self) -> None:
        # pickled state -> (the function rebuilt from it, what it was when made)
        self.by_state: dict[bytes, tuple[Any, bytes]] = {}
        self.lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()

    def reuse_or_make(self, state: bytes, make: Callable[[], Made], now: Callable[[Made], bytes]) -> Made:
        """The function rebuilt from `state` before, if `now(it)` is still what it was when made;
        else a new one from `make()`, kept in its place."""
        with self.lock:
            found = self.by_state.get(state)
        if found is not None and now(found[0]) == found[1]:
            made: Made = found[0]
            return made
        made = make()
        as_made = now(made)
        with self.lock:
            self.by_state.pop(state, None)
            if len(self.by_state) >= REBUILT_LIMIT:
                self.by_state.pop(next(iter(self.by_state)))
            self.by_state[state] = (made, as_made)
        return made
