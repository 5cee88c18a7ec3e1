"""The kernels of each kind of operation, behind the one protocol that builds and loads them.

An elementwise map and a reduction render, describe and lay out their kernels differently; what
finds a kernel in the caches, compiles it, loads it and launches it is the same for both
(runtime/loader.py, runtime/build.py, runtime/backends/). A `KernelFamily` is that difference and
nothing more, so a new kind of operation adds one family here, not another loader.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Protocol

from jiter_magic.kernels import describe, identity, path_of
from jiter_magic.kernels.args import args_layout
from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.novelty import novelty
from jiter_magic.kernels.reduce_common import reduce_args
from jiter_magic.kernels.reduce_cuda import block_of, render_cuda
from jiter_magic.kernels.reduce_host import render_host
from jiter_magic.kernels.render import render
from jiter_magic.planning.reduce_spec import HOST_PATHS, ReductionSpec


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
        return render(binding, spec, backend)

    def describe(self, spec: Any) -> str:
        return describe(spec)

    def identity(self, spec: Any) -> str:
        return identity(spec)

    def novelty(self, spec: Any, earlier: Sequence[Any]) -> str:
        return novelty(spec, earlier)

    def packer(self, spec: Any, backend: str) -> struct.Struct:
        return args_layout(spec, backend).packer

    def block(self, spec: Any) -> Grid:
        return path_of(spec, "cuda").block_of(spec)


class ReductionFamily:
    """The kernels of reductions: the host loops (reduce_host.py) and CUDA shapes (reduce_cuda.py);
    a spec's path names its backend."""

    def render(self, binding: Any, spec: ReductionSpec, backend: str) -> str:
        return render_host(binding, spec) if spec.path in HOST_PATHS else render_cuda(binding, spec)

    def describe(self, spec: ReductionSpec) -> str:
        return spec.describe()

    def identity(self, spec: ReductionSpec) -> str:
        return spec.describe().removeprefix("reduce ")

    def novelty(self, spec: ReductionSpec, earlier: Sequence[ReductionSpec]) -> str:
        """'new path, vec; #0 is ...': the spec's fields that differ from the nearest earlier kernel's."""
        if not earlier:
            return ""
        differing = [[f.name for f in fields(spec) if getattr(spec, f.name) != getattr(e, f.name)] for e in earlier]
        index = min(range(len(earlier)), key=lambda i: (len(differing[i]), -i))
        if not differing[index]:
            return f"the same as #{index}"
        return f"new {', '.join(differing[index])}; #{index} is {self.identity(earlier[index])}"

    def packer(self, spec: ReductionSpec, backend: str) -> struct.Struct:
        return reduce_args(spec).packer

    def block(self, spec: ReductionSpec) -> Grid:
        return block_of(spec)


ELEMENTWISE: KernelFamily = ElementwiseFamily()
REDUCTION: KernelFamily = ReductionFamily()
