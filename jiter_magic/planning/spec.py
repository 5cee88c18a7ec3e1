"""`KernelSpec`: everything one generated kernel depends on, so also the compiled-kernel caches' key.

Resolving a call produces a spec (dtypes, argument kinds, the kernel path and its loop
shape); rendering, the `Args` struct and launching read it, and never the arrays. What only
one kernel path needs (a vector width, the inputs read through tiles) sits in that path's own
record, `params`, a NamedTuple defined next to the path in kernels/: a new path adds its record
there, not fields here.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.planning.dtypes import DTYPES

CONTIGUOUS, ROWS, TILED, STRIDED = "contiguous", "rows", "tiled", "strided"
BLOCKED = "blocked"  # the host's cache-blocked loop (kernels/host.py): no CUDA path has this shape


class PathParams(NamedTuple):
    """The parameters of a path that has none of its own (strided). A path that has some defines
    its own NamedTuple next to it (kernels/): immutable, so that a spec stays hashable and equal by
    value, and its repr names its class, so that a cache recipe (runtime/build.py) tells paths
    apart. A NamedTuple class costs a fifth of a frozen dataclass's to make, and a new process
    makes these on its first call."""


class KernelSpec(NamedTuple):
    """One specialization of a jitted function: dtypes, argument kinds and the loop shape."""

    inputs: tuple[str, ...]  # storage dtype of each input (a scalar input: its compute dtype)
    scalar_inputs: tuple[bool, ...]  # True where the input is a Python scalar passed by value
    outputs: tuple[str, ...]  # storage dtype of each output
    compute: str  # the functor's T
    extras: tuple[str, ...]  # dtype of each extra argument, in the entry function's order
    # The loop's fields: every caller names them, so that no caller's positions drift when they change.
    path: str  # the kernel path (kernels/): contiguous, rows, tiled or strided; blocked on the host
    params: tuple  # the path's own NamedTuple (kernels/: ContiguousParams, RowsParams, TiledParams), or PathParams()
    ndim: int = 1  # loop dimensions
    index64: bool = False  # 64-bit indices: always on the host, on CUDA where 32 bits do not reach

    @property
    def array_inputs(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.scalar_inputs) if not s)

    @property
    def num_operands(self) -> int:
        """Arrays the kernel walks: outputs first, then array inputs."""
        return len(self.outputs) + len(self.array_inputs)

    @property
    def needs_complex(self) -> bool:
        names = self.inputs + self.outputs + self.extras + (self.compute,)
        return any(DTYPES[n].kind == "c" for n in names)

    def dtypes_text(self) -> str:
        """'(float32, float32) -> (float32)': what the notebook's lines name a specialization by."""
        return f"({', '.join(self.inputs)}) -> ({', '.join(self.outputs)})"
