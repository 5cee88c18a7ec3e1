"""`KernelSpec`: everything one generated kernel depends on, so also the compiled-kernel caches' key.

Resolving a call produces a spec (dtypes, argument kinds, the kernel path and its loop
shape); rendering, the `Args` struct and launching read it, and never the arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

from jiter_magic.planning.dtypes import DTYPES

CONTIGUOUS, ROWS, TILED, STRIDED = "contiguous", "rows", "tiled", "strided"


@dataclass(frozen=True, slots=True)
class KernelSpec:
    """One specialization of a jitted function: dtypes, argument kinds and the loop shape."""

    inputs: tuple[str, ...]  # storage dtype of each input (a scalar input: its compute dtype)
    scalar_inputs: tuple[bool, ...]  # True where the input is a Python scalar passed by value
    outputs: tuple[str, ...]  # storage dtype of each output
    compute: str  # the functor's T
    extras: tuple[str, ...]  # dtype of each extra argument, in the entry function's order
    path: str = CONTIGUOUS  # the kernel path (kernels/): contiguous, rows, tiled or strided
    ndim: int = 1
    vec: int = 1  # contiguous and rows: elements a vector; tiled: 32-element runs of a tiled row a tile holds
    index64: bool = False
    tiled_inputs: tuple[int, ...] = ()  # the tiled path: inputs read transposed through shared memory
    row_broadcast: tuple[int, ...] = ()  # the rows path: inputs constant along a row (inner stride 0)
    pack: int = 1  # the tiled path: elements a thread moves as one 4-byte access along a row (1, 2 or 4)

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
