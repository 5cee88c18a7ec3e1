"""Facts about the installed compilers, remembered in the disk cache between processes.

Every cache key holds the compiler's identity (NVRTC's version, the host compiler's version and
target features) and its options (the CUDA include folder, the flags the host compiler
accepts). Finding them costs a new process more than the disk hit they key: cuda.pathfinder
takes about 50 ms to import, and probing g++ starts several processes (about 0.1 s). So each
set of facts is stored once under the cache's `tools/` folder (key-bound, private, checksummed,
like every entry), under a key naming the facts, this interpreter and the environment that
decides them, with the files they were read from (its "witnesses"). A later process uses
them only while every witness still has the size, mtime and inode recorded; any change (a pip
install into site-packages, a new compiler) finds them afresh. Facts that cannot name a
witness are not remembered.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from jiter_magic._version import __version__

NAMESPACE = "tools"  # the cache's folder for them: not kernels, so not counted by cache_stats()
FORMAT = "toolchain-facts-2"  # 2: the host compiler's facts say whether it links libmvec

Finder = Callable[[], tuple[Any, Sequence[str]]]  # () -> (JSON-able facts, witness paths)


def _stamp(path: str) -> list | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [path, info.st_size, info.st_mtime_ns, info.st_ino]


def _key(kind: str, context: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for part in (FORMAT, __version__, kind, sys.executable, sys.prefix, *context):
        digest.update(part.encode(errors="replace"))
        digest.update(b"\0\1")
    return digest.hexdigest()


def remembered(kind: str, context: Sequence[str], find: Finder) -> Any:
    """The facts `find` returns, from the disk cache when its witnesses are unchanged, else found
    now (and stored when they have witnesses). `context`: what else decides them (variables)."""
    from jiter_magic.cache.disk import disk_cache

    disk = disk_cache()
    key = _key(kind, context)
    payload = disk.get(NAMESPACE, key)
    if payload is not None:
        try:
            stored = json.loads(payload)
            if stored["witnesses"] and all(_stamp(w[0]) == w for w in stored["witnesses"]):
                return stored["facts"]
        except (ValueError, KeyError, TypeError, IndexError):
            pass  # not ours or from another format: found afresh and overwritten
    facts, witnesses = find()
    stamps = [_stamp(path) for path in witnesses]
    if stamps and all(stamps):
        disk.put(NAMESPACE, key, json.dumps({"facts": facts, "witnesses": stamps}).encode())
    return facts


def site_folders() -> list[str]:
    """The interpreter's package folders: their mtime changes with any package (un)installed there."""
    import sysconfig

    paths = sysconfig.get_paths()
    folders = {paths.get("purelib"), paths.get("platlib")}
    return sorted(f for f in folders if f and os.path.isdir(f))
