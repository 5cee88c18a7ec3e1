"""The kernels of each kind of operation, behind the one protocol that builds and loads them.

An elementwise map and a reduction render, describe and lay out their kernels differently; what
finds a kernel in the caches, compiles it, loads it and launches it is the same for both
(runtime/loader.py, runtime/build.py, runtime/backends/). A `KernelFamily` is that difference and
nothing more, so a new kind of operation adds one family (the reductions' is reduce_family.py,
imported with the first reduction), not another loader.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from jiter_magic.kernels import describe, identity, path_of
from jiter_magic.kernels.args import args_layout

if TYPE_CHECKING:
    from jiter_magic.kernels.base import Grid


class KernelFamily(Protocol):
    """What building, loading and launching need of one kind of operation's kernels."""

    def render(self, binding: Any, spec: Any, backend: str) -> str:
        """The kernel's whole source on `backend` ('cuda' or 'cpu')."""

    def describe(self, spec: Any) -> str:
        """One line for people: dtypes, the kernel's shape and its loop."""

    def identity(self, spec: Any) -> str:
        """What tells `spec` from the function's other kernels, for the notebook's notices."""

    def novelty(self, spec: Any, earlier: Sequence[Any]) -> str:
        """Why `spec` is new beside `earlier` ('' for a function's first kernel)."""

    def packer(self, spec: Any, backend: str) -> struct.Struct:
        """The packer of the kernel's `jm_Args` struct."""

    def block(self, spec: Any) -> Grid:
        """Threads of a block of a CUDA kernel (a host spec has none)."""


class ElementwiseFamily:
    """The kernels of elementwise maps: one class a kernel path (kernels/__init__.py)."""

    def render(self, binding: Any, spec: Any, backend: str) -> str:
        # Imported here: the code generators load with the first compile, not with the package
        # (a kernel found in the disk cache is never rendered).
        from jiter_magic.kernels.render import render

        return render(binding, spec, backend)

    def describe(self, spec: Any) -> str:
        return describe(spec)

    def identity(self, spec: Any) -> str:
        return identity(spec)

    def novelty(self, spec: Any, earlier: Sequence[Any]) -> str:
        from jiter_magic.kernels.novelty import novelty  # only a notebook's notices ask

        return novelty(spec, earlier)

    def packer(self, spec: Any, backend: str) -> struct.Struct:
        return args_layout(spec, backend).packer

    def block(self, spec: Any) -> Grid:
        return path_of(spec, "cuda").block_of(spec)


ELEMENTWISE: KernelFamily = ElementwiseFamily()
