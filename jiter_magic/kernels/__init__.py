"""The kernel paths, one class a module, and how a call or a spec finds its path.

CUDA paths are tried in order, the first that fits a call wins: contiguous vectors, tiles
through shared memory, rows, and strided offsets for everything else. The host has one
path class, an OpenMP loop, whose spec names the loop it renders (contiguous, blocked, rows or
strided). Paths are stateless, so each is one instance made here at import.
"""
from __future__ import annotations

from jiter_magic.kernels.base import CallShape, KernelPath, PathChoice
from jiter_magic.kernels.contiguous import Contiguous
from jiter_magic.kernels.host import HostLoop
from jiter_magic.kernels.rows import Rows
from jiter_magic.kernels.strided import Strided
from jiter_magic.kernels.tiled import Tiled
from jiter_magic.planning.spec import KernelSpec

# The CUDA paths in the order a call tries them (a spec's `path` is one's `name`), and the host's.
CUDA_PATHS: tuple[KernelPath, ...] = (Contiguous(), Tiled(), Rows(), Strided())
HOST_PATH: KernelPath = HostLoop()


def choose_path(call: CallShape, backend: str) -> PathChoice:
    """The first path that fits the call on `backend` ('cuda' or 'cpu')."""
    for path in CUDA_PATHS if backend == "cuda" else (HOST_PATH,):
        choice = path.match(call)
        if choice is not None:
            return choice
    raise AssertionError("the last path of every backend fits any call")


def _path_of_name(spec: KernelSpec) -> KernelPath:
    # A host-only path (the blocked loop) has no CUDA path of its name: the host's describes it.
    return next((p for p in CUDA_PATHS if p.name == spec.path), HOST_PATH)


def dtypes_text(spec: KernelSpec) -> str:
    """'(float32, scalar float32) -> (float32)': the dtypes, a Python scalar's marked."""
    ins = ", ".join(("scalar " if s else "") + d for d, s in zip(spec.inputs, spec.scalar_inputs))
    return f"({ins}) -> ({', '.join(spec.outputs)})"


def layout_text(spec: KernelSpec) -> str:
    """'contiguous vec4', 'strided 2-d': the kernel path and its loop shape."""
    return f"{spec.path} {_path_of_name(spec).shape_text(spec)}"


def identity(spec: KernelSpec) -> str:
    """What tells a specialization from its function's others, in one line for the notebook's
    notices: dtypes, scalar kinds, kernel path and layout."""
    return f"{dtypes_text(spec)}, {layout_text(spec)}"


def describe(spec: KernelSpec) -> str:
    """One line for people: dtypes, the path and its loop shape, the index width."""
    index = "int64" if spec.index64 else "int32"
    return f"{dtypes_text(spec)} compute {spec.compute}, {layout_text(spec)}, {index} index"


def path_of(spec: KernelSpec, backend: str) -> KernelPath:
    """The path object that renders and launches `spec` on `backend`."""
    if backend != "cuda":
        return HOST_PATH
    for path in CUDA_PATHS:
        if path.name == spec.path:
            return path
    raise KeyError(f"no CUDA kernel path named {spec.path!r}")
