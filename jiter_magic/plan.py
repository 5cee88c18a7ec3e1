"""The resolved form of one call: what kernel to build (`KernelSpec`) and how to feed it.

`KernelSpec` is everything the generated source depends on, so it is the key of the
compiled-kernel caches. `args_layout` turns a spec into the byte layout of the single
by-value `Args` struct every kernel takes; the C declaration and the Python packer
are both derived from it, so they cannot drift apart.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from .dtypes import DTYPES

CONTIGUOUS, STRIDED, TILED, ROWS = "contiguous", "strided", "tiled", "rows"
TILE, TILE_ROWS = 32, 8  # the tiled path: 32x32 tiles, 32x8 threads, 4 rows a thread
BLOCK = 128  # threads a block on CUDA
UNROLL = 1  # vectors a thread on the contiguous path (bench/sweep_gpu.py: 1 is best on the H200)
ITEMS = 4  # elements a thread on the strided path


@dataclass(frozen=True)
class KernelSpec:
    """One specialization of a jitted function: dtypes, argument kinds and the loop shape."""

    inputs: tuple[str, ...]  # storage dtype of each input (a scalar input: its compute dtype)
    scalar_inputs: tuple[bool, ...]  # True where the input is a Python scalar passed by value
    outputs: tuple[str, ...]  # storage dtype of each output
    compute: str  # the functor's T
    extras: tuple[str, ...]  # dtype of each extra argument, in the entry function's order
    path: str = CONTIGUOUS
    ndim: int = 1
    vec: int = 1
    index64: bool = False
    tiled_inputs: tuple[int, ...] = ()  # the tiled path: inputs read transposed through shared memory
    row_broadcast: tuple[int, ...] = ()  # the rows path: inputs constant along a row (inner stride 0)

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

    def describe(self) -> str:
        ins = ", ".join(("scalar " if s else "") + d for d, s in zip(self.inputs, self.scalar_inputs))
        outs = ", ".join(self.outputs)
        index = "int64" if self.index64 else "int32"
        shape = f"vec{self.vec}" if self.path == CONTIGUOUS else f"{self.ndim}-d"
        if self.path == TILED:
            shape += f", inputs {list(self.tiled_inputs)} through shared memory"
        if self.path == ROWS:
            shape += f" rows of vec{self.vec}" + (f", inputs {list(self.row_broadcast)} broadcast along rows"
                                                  if self.row_broadcast else "")
        return f"({ins}) -> ({outs}) compute {self.compute}, {self.path} {shape}, {index} index"


_SCALAR_FORMAT = {
    "bool": ("?", 1), "uint8": ("B", 1), "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4),
    "int64": ("q", 8), "uint16": ("H", 2), "uint32": ("I", 4), "uint64": ("Q", 8),
    "float32": ("f", 4), "float64": ("d", 8), "complex64": ("ff", 8), "complex128": ("dd", 16),
}


@dataclass(frozen=True)
class ArgsField:
    name: str
    ctype: str
    format: str  # struct module format of the field itself, no padding
    offset: int
    count: int = 0  # array length (sizes/strides); 0 for a plain field


@dataclass(frozen=True)
class ArgsLayout:
    fields: tuple[ArgsField, ...]
    packer: struct.Struct

    def declaration(self) -> str:
        lines = ["struct Args {"]
        for f in self.fields:
            suffix = f"[{f.count}]" if f.count else ""
            align = 16 if f.format == "dd" else 8
            lines.append(f"  alignas({align}) {f.ctype} {f.name}{suffix};")
        lines.append("};")
        return "\n".join(lines)


def _ctype(name: str) -> str:
    return DTYPES[name].ctype


@lru_cache(maxsize=1024)
def args_layout(spec: KernelSpec) -> ArgsLayout:
    """Fields of the kernel's `Args` struct: pointers, n, extras, scalar inputs, then loop geometry."""
    raw: list[tuple[str, str, str, int, int]] = []  # name, ctype, format, size, count
    for j, d in enumerate(spec.outputs):
        raw.append((f"out{j}", f"{_ctype(d)}*", "Q", 8, 0))
    for i in spec.array_inputs:
        raw.append((f"in{i}", f"const {_ctype(spec.inputs[i])}*", "Q", 8, 0))
    raw.append(("n", "int64_t", "q", 8, 0))
    for k, d in enumerate(spec.extras):
        fmt, size = _SCALAR_FORMAT[d]
        raw.append((f"extra{k}", _ctype(d), fmt, size, 0))
    for i, is_scalar in enumerate(spec.scalar_inputs):
        if is_scalar:
            fmt, size = _SCALAR_FORMAT[spec.inputs[i]]
            raw.append((f"scalar{i}", _ctype(spec.inputs[i]), fmt, size, 0))
    if spec.path in (STRIDED, TILED, ROWS):
        raw.append(("sizes", "int64_t", "q" * spec.ndim, 8 * spec.ndim, spec.ndim))
        for op in range(spec.num_operands):
            raw.append((f"strides{op}", "int64_t", "q" * spec.ndim, 8 * spec.ndim, spec.ndim))
        if spec.path == STRIDED and not spec.index64:
            raw.append(("div_mul", "uint32_t", "I" * spec.ndim, 4 * spec.ndim, spec.ndim))
            raw.append(("div_shift", "uint32_t", "I" * spec.ndim, 4 * spec.ndim, spec.ndim))
    fields, fmt, offset = [], "<", 0
    for name, ctype, f, size, count in raw:
        align = 16 if f == "dd" else 8
        pad = -offset % align
        fmt += "x" * pad
        offset += pad
        fields.append(ArgsField(name, ctype, f, offset, count))
        fmt += f
        offset += size
    fmt += "x" * (-offset % 16 if any(f.format == "dd" for f in fields) else -offset % 8)
    return ArgsLayout(tuple(fields), struct.Struct(fmt))


def fast_divisor(d: int) -> tuple[int, int]:
    """Magic multiplier and shift so that n // d == (umulhi(n, mul) + n) >> shift for 0 <= n < 2**31."""
    shift = 0
    while (1 << shift) < d:
        shift += 1
    mul = ((1 << 32) * ((1 << shift) - d)) // d + 1
    return mul & 0xFFFFFFFF, shift
