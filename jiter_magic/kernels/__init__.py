"""The kernel paths, one class a module, and how a call or a spec finds its path.

CUDA paths are tried in order, the first that fits a call wins: contiguous vectors, tiles
through shared memory, rows, and strided offsets for everything else. The host has one
path, an OpenMP loop.
"""
from __future__ import annotations

from ..spec import KernelSpec
from .base import CallShape, KernelPath, PathChoice
from .contiguous import Contiguous
from .host import HostLoop
from .rows import Rows
from .strided import Strided
from .tiled import Tiled

CUDA_PATHS: tuple[KernelPath, ...] = (Contiguous(), Tiled(), Rows(), Strided())
HOST_PATH = HostLoop()
_BY_NAME = {path.name: path for path in CUDA_PATHS}


def choose_path(call: CallShape, backend: str) -> PathChoice:
    """The first path that fits the call on `backend` ('cuda' or 'cpu')."""
    paths = CUDA_PATHS if backend == "cuda" else (HOST_PATH,)
    for path in paths:
        choice = path.match(call)
        if choice is not None:
            return choice
    raise AssertionError("the last path of every backend fits any call")


def path_of(spec: KernelSpec, backend: str) -> KernelPath:
    """The path object that renders and launches `spec` on `backend`."""
    return _BY_NAME[spec.path] if backend == "cuda" else HOST_PATH
