"""The kernel paths, one class a module, and how a call or a spec finds its path.

CUDA paths are tried in order, the first that fits a call wins: contiguous vectors, tiles
through shared memory, rows, and strided offsets for everything else. The host has one
path class, an OpenMP loop, whose spec names the loop it renders (contiguous, blocked, rows or
strided). Paths are stateless, so each is one instance, made the first time a backend's
paths are asked for: the path modules (and the code generators they import) cost milliseconds
to import, and a process that only calls on the CPU never needs the CUDA ones (nor `import
jiter_magic` any). `CUDA_PATHS` and `HOST_PATH` are still names of this package (PEP 562).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from jiter_magic.planning.spec import CONTIGUOUS, ROWS, STRIDED, TILED, KernelSpec

if TYPE_CHECKING:
    from jiter_magic.kernels.base import CallShape, KernelPath, PathChoice


# The CUDA paths' names in the order a call tries them (a spec's `path` is one's `name`).
CUDA_ORDER = (CONTIGUOUS, TILED, ROWS, STRIDED)


@functools.cache
def cuda_path(name: str) -> KernelPath:
    """The CUDA path named `name`; only its own module is imported (describing a host spec asks
    for the CUDA path of its name, and needs no other)."""
    kind: type[KernelPath]
    if name == CONTIGUOUS:
        from jiter_magic.kernels.contiguous import Contiguous as kind
    elif name == TILED:
        from jiter_magic.kernels.tiled import Tiled as kind
    elif name == ROWS:
        from jiter_magic.kernels.rows import Rows as kind
    elif name == STRIDED:
        from jiter_magic.kernels.strided import Strided as kind
    else:
        raise KeyError(f"no CUDA kernel path named {name!r}")
    return kind()


def cuda_paths() -> tuple[KernelPath, ...]:
    """The CUDA paths in the order a call tries them."""
    return tuple(cuda_path(name) for name in CUDA_ORDER)


@functools.cache
def host_path() -> KernelPath:
    """The host's one path, whose spec names the loop it renders."""
    from jiter_magic.kernels.host import HostLoop

    return HostLoop()


def __getattr__(name: str) -> Any:
    """`CUDA_PATHS` and `HOST_PATH`, their modules imported when first asked for; and base.py's
    `CallShape`, `KernelPath` and `PathChoice` (specialize.py takes them from here), since base.py
    imports a code generator (CodeBlock) that `import jiter_magic` has no use for."""
    if name == "CUDA_PATHS":
        return cuda_paths()
    if name == "HOST_PATH":
        return host_path()
    if name in ("CallShape", "KernelPath", "PathChoice"):
        from jiter_magic.kernels import base

        return getattr(base, name)
    raise AttributeError(f"module 'jiter_magic.kernels' has no attribute {name!r}")


def choose_path(call: CallShape, backend: str) -> PathChoice:
    """The first path that fits the call on `backend` ('cuda' or 'cpu'). A CUDA path's module is
    imported only once the paths before it did not fit: a contiguous call imports no other."""
    paths = (cuda_path(name) for name in CUDA_ORDER) if backend == "cuda" else (host_path(),)
    for path in paths:
        choice = path.match(call)
        if choice is not None:
            return choice
    raise AssertionError("the last path of every backend fits any call")


def _path_of_name(spec: KernelSpec) -> KernelPath:
    # A host-only path (the blocked loop) has no CUDA path of its name: the host's describes it.
    return cuda_path(spec.path) if spec.path in CUDA_ORDER else host_path()


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
    return cuda_path(spec.path) if backend == "cuda" else host_path()
