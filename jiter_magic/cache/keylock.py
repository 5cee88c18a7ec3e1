"""The disk cache's per-key inter-process lock: `filelock.FileLock`, plus removing its lock file.

filelock's Unix lock is an `fcntl.flock` on the open file, so it dies with its process: a killed
compiler never leaves a stale lock. Each attempt opens the path with O_NOFOLLOW (never through a
symbolic link planted there) and creates the file with the mode given (0600, inside the cache's
0700 folders); waiting polls until the timeout, then raises `filelock.Timeout`, and the caller
compiles anyway. `fallback_to_soft=False` keeps it from turning into an existence lock (a file a
killed process leaves behind) on a file system without flock: it raises OSError there instead,
and the caller compiles without the lock.

The one thing filelock does not do is remove the lock file: it leaves it in place after the
release, on purpose. Here that would leave one file for every key ever compiled, so the holder
removes it while it still holds the lock, and only a holder does (`KeyLock.release`, and
`remove_if_free` when clearing the cache). A waiter whose flock then succeeds on the removed
file sees it unlinked (filelock checks `st_nlink` after each flock) and opens the file now at
the path, so removing lock files never lets two holders in. filelock 3.30 is the first version
with all of this (O_NOFOLLOW since 3.20.1, the `st_nlink` check since 3.20.4, and
`fallback_to_soft`); docs/cache.md says why this piece stays here.

filelock is imported by the first lock, which comes right before a compile, not with
jiter_magic: importing it costs tens of milliseconds, which a process that only loads cached
kernels would pay for nothing. Without `fcntl` (Windows) `AVAILABLE` is False and callers
compile without locking, as before: filelock's Windows lock is not used.
"""
from __future__ import annotations

import os

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

AVAILABLE = fcntl is not None


class KeyLock:
    """An exclusive inter-process lock on one file path (its folder must exist) whose file goes
    with its release."""

    def __init__(self, path: str) -> None:
        from filelock import FileLock  # here, not at import: see the module's docstring

        self.path = path
        # thread_local=False: the object is the holder, as a lock any thread may release
        self._lock = FileLock(path, mode=0o600, thread_local=False, fallback_to_soft=False)
        self._file: tuple[int, int] | None = None  # (st_dev, st_ino) at the path once locked

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting at most `timeout` seconds (0: one try); False when they passed.
        Raises OSError when the lock file cannot be opened or locked (a symbolic link, a file
        system without flock): the caller then compiles unlocked."""
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=timeout)
        except Timeout:  # a TimeoutError, so an OSError: caught first
            return False
        self._file = _identity(self.path)
        return True

    def release(self) -> bool:
        """Remove the lock file (nobody else can hold it now), then drop the lock; whether the
        file was removed. A file that is no longer the one locked stays (another holder's)."""
        if not self._lock.is_locked:
            return False
        held, self._file = self._file, None
        try:
            if held is not None and _identity(self.path) == held:
                os.unlink(self.path)
                return True
            return False
        except OSError:
            return False
        finally:
            self._lock.release()


def remove_if_free(path: str) -> bool:
    """Remove a lock file unless a live process holds it (for clearing the cache); True if removed."""
    if not AVAILABLE or not os.path.lexists(path):
        return False
    lock = KeyLock(path)
    try:
        if not lock.acquire(0):
            return False
    except OSError:  # a symbolic link or another file that is not ours to lock: left alone
        return False
    return lock.release()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino
