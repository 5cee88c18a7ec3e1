"""The kernel paths, one class a module, and how a call or a spec finds its path.

CUDA paths are tried in order, the first that fits a call wins: contiguous vectors, tiles
through shared memory, rows, and strided offsets for everything else. The host has one
path, an OpenMP loop. A path's module is imported the first time a call gets as far as it:
a new process whose first call is contiguous loads neither the tiled kernels nor the others,
which is part of the time to its first result.
"""
from __future__ import annotations

import importlib

from jiter_magic.kernels.base import CallShape, KernelPath, PathChoice
from jiter_magic.planning.spec import CONTIGUOUS, ROWS, STRIDED, TILED, KernelSpec

# The CUDA paths by name (a spec's `path`), in the order a call tries them, with their modules'
# and classes' names; and the host's.
_CUDA: dict[str, tuple[str, str]] = {CONTIGUOUS: ("contiguous", "Contiguous"), TILED: ("tiled", "Tiled"),
                                     ROWS: ("rows", "Rows"), STRIDED: ("strided", "Strided")}
_HOST = ("host", "HostLoop")
_made: dict[str, KernelPath] = {}


def _path(module: str, cls: str) -> KernelPath:
    """The one instance of a path class, its module imported the first time it is asked for."""
    found = _made.get(module)
    if found is None:
        found = _made[module] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
    return found


def cuda_paths() -> tuple[KernelPath, ...]:
    """Every CUDA path, in the order a call tries them (all their modules imported)."""
    return tuple(_path(*entry) for entry in _CUDA.values())


def choose_path(call: CallShape, backend: str) -> PathChoice:
    """The first path that fits the call on `backend` ('cuda' or 'cpu')."""
    for entry in _CUDA.values() if backend == "cuda" else (_HOST,):
        choice = _path(*entry).match(call)
        if choice is not None:
            return choice
    raise AssertionError("the last path of every backend fits any call")


def describe(spec: KernelSpec) -> str:
    """One line for people: dtypes, the path and its loop shape, the index width."""
    ins = ", ".join(("scalar " if s else "") + d for d, s in zip(spec.inputs, spec.scalar_inputs))
    index = "int64" if spec.index64 else "int32"
    shape = path_of(spec, "cuda").shape_text(spec)
    return f"({ins}) -> ({', '.join(spec.outputs)}) compute {spec.compute}, {spec.path} {shape}, {index} index"


def path_of(spec: KernelSpec, backend: str) -> KernelPath:
    """The path object that renders and launches `spec` on `backend`."""
    if backend != "cuda":
        return _path(*_HOST)
    entry = _CUDA.get(spec.path)
    if entry is None:
        raise KeyError(f"no CUDA kernel path named {spec.path!r}")
    return _path(*entry)
