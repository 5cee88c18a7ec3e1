"""The kernels of reductions as a `KernelFamily` (families.py): the host loops (reduce_host.py)
and the CUDA paths (reduce_cuda.py), a spec's path naming its backend."""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.families import KernelFamily
from jiter_magic.kernels.reduce_common import reduce_args
from jiter_magic.kernels.reduce_cuda import block_of, render_cuda
from jiter_magic.kernels.reduce_host import render_host
from jiter_magic.planning.reduce_spec import HOST_PATHS, ReductionSpec


class ReductionFamily:
    """The kernels of reductions."""

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


REDUCTION: KernelFamily = ReductionFamily()
