"""The kernels of scans as a `KernelFamily` (families.py): the host loops (scan_host.py) and the
CUDA paths (scan_cuda.py), a spec's path naming its backend. What tells one scan kernel from
another for the notebook's notices is read as a reduction's is (its spec's differing fields), and a
scan's spec describes itself as a reduction's does."""
from __future__ import annotations

import struct
from typing import Any

from jiter_magic.kernels.base import Grid
from jiter_magic.kernels.families import KernelFamily
from jiter_magic.kernels.reduce_family import ReductionFamily
from jiter_magic.kernels.scan_common import scan_args
from jiter_magic.kernels.scan_host import render_host
from jiter_magic.planning.scan_plan import HOST_SCAN_PATHS, ScanSpec


class ScanFamily(ReductionFamily):
    """The kernels of scans."""

    def render(self, binding: Any, spec: ScanSpec, backend: str) -> str:  # type: ignore[override]
        if spec.path in HOST_SCAN_PATHS:
            return render_host(binding, spec)
        from jiter_magic.kernels import scan_cuda

        return scan_cuda.render_cuda(binding, spec)

    def identity(self, spec: ScanSpec) -> str:  # type: ignore[override]
        return spec.describe().removeprefix("exclusive ").removeprefix("scan ")

    def packer(self, spec: ScanSpec, backend: str) -> struct.Struct:  # type: ignore[override]
        return scan_args(spec).packer

    def block(self, spec: ScanSpec) -> Grid:  # type: ignore[override]
        from jiter_magic.kernels import scan_cuda

        return scan_cuda.block_of(spec)


SCAN: KernelFamily = ScanFamily()
