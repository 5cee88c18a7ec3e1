"""The file-system guards of the disk cache: private folders, no-follow reads, atomic writes, and
the cache's own file layout (what counting, eviction and clearing may touch).

A cache folder is trusted only when this user owns it and nobody else can write to it: a
kernel found there is executed, so a folder another user can write to would let them plant
code. Folders are created 0700; only the root may be a symbolic link (to a folder that passes
the same check), because users do point `~/.cache` elsewhere. Entries are read without
following a symbolic link and written to a new private file renamed into place. The per-key
locks are in keylock.py.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MISSING = ("missing", "")
# Patterns compiled (and kept by `re`) at their first use: only listing and trimming read them.
_PREFIX = r"[0-9a-f]{2}"
_OWN_FILE = r"(\.tmp-)?([0-9a-f]{64})(-[0-9a-f]{16})?\.(bin|lock)"


def make_private_dirs(folder: str) -> None:
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


def folder_problem(path: str, may_be_link: bool) -> tuple[str, str] | None:
    """None when `path` is a folder only this user can write to; MISSING when it does not exist;
    else (what is wrong, how to fix it), for the one warning that turns the disk cache off."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return MISSING
    if stat.S_ISLNK(info.st_mode):
        if not may_be_link:
            return f"{path} is a symbolic link", f"remove the link {path}"
        try:
            info = os.stat(path)
        except OSError:
            return f"{path} is a symbolic link to a missing folder", f"remove the link {path}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder", f"remove {path}"
    if not hasattr(os, "geteuid"):  # pragma: no cover - Windows: no POSIX owners or modes
        return None
    if info.st_uid != os.geteuid():
        return (f"{path} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})",
                "use a folder of your own")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})",
                f"run `chmod go-w {path}`")
    return None


class Rejected(Exception):
    """An entry path that is not a regular file we may read (a symbolic link, a folder, a FIFO)."""


def read_nofollow(path: str) -> bytes | None:
    """The bytes at `path` (None when absent), never through a link (Rejected); refreshes its mtime,
    the recency of the least-recently-used eviction."""
    if not NOFOLLOW and os.path.islink(path):  # pragma: no cover - no O_NOFOLLOW (Windows): look first
        raise Rejected("is a symbolic link (not followed)")
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        if os.path.islink(path):
            raise Rejected("is a symbolic link (not followed)") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Rejected("is not a regular file")
        with open(fd, "rb", closefd=False) as handle:
            blob = handle.read()
        with contextlib.suppress(OSError):
            os.utime(fd if os.utime in os.supports_fd else path)
        return blob
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, temp: str) -> None:
    """Write `data` to the new private file `temp` (beside `path`, never through a link), then
    rename it over `path`: a reader sees the old file or the new one, never a partial one."""
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        unlink(temp)
        raise


def unlink(path: str) -> bool:
    """Remove a file (or link, not its target); whether it was removed."""
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def remove_entry(path: str) -> bool:
    """Remove whatever sits at an entry's path: a file, a link (not its target), or a folder
    planted there (with what it holds, links inside removed, never followed); whether it went."""
    if unlink(path):
        return True
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        return not os.path.lexists(path)
    return False


def scan(folder: str) -> list[os.DirEntry]:
    """The items of `folder`; none when it is missing or unreadable."""
    try:
        with os.scandir(folder) as items:
            return list(items)
    except OSError:
        return []


def own_files(root: str, namespaces: tuple[str, ...]) -> list[tuple[str, str, os.stat_result]]:
    """(kind, path, lstat) of each file of the cache's own layout, `root/<namespace>/<2 hex>/` then
    `<key>.bin` ('entry'), `<key>.lock` ('lock') or `.tmp-<key>-<16 hex>.bin` ('temp'), the key
    starting with its folder's two digits. Anything else is the user's; linked folders are not entered."""
    found = []
    for namespace in namespaces:
        for prefix in scan(os.path.join(root, namespace)):
            if not (re.fullmatch(_PREFIX, prefix.name) and prefix.is_dir(follow_symlinks=False)):
                continue
            for item in scan(prefix.path):
                kind = _kind(item.name, prefix.name)
                if kind is None:
                    continue
                try:
                    found.append((kind, item.path, item.stat(follow_symlinks=False)))
                except OSError:  # removed meanwhile by another process
                    pass
    return found


def _kind(name: str, prefix: str) -> str | None:
    """'entry', 'lock' or 'temp' for a name of the layout in the folder `prefix`, else None."""
    match = re.fullmatch(_OWN_FILE, name)
    if not match or match[2][:2] != prefix or (match[1] is None) != (match[3] is None):
        return None
    if match[4] == "lock":
        return None if match[1] else "lock"
    return "temp" if match[1] else "entry"
