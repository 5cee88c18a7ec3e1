"""The single by-value `Args` struct every kernel takes: its C declaration and its Python packer.

Both come from one field list (operands, element count, extras, scalar inputs, then the
path's loop geometry), so they cannot drift apart; a `static_assert`-style test checks the
C layout against the packer.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import NamedTuple

from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.spec import KernelSpec

# name, C type, struct format (no padding), size in bytes, array length (0 for a plain field)
FieldSpec = tuple[str, str, str, int, int]

_SCALAR_FORMAT = {
    "bool": ("?", 1), "uint8": ("B", 1), "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4),
    "int64": ("q", 8), "uint16": ("H", 2), "uint32": ("I", 4), "uint64": ("Q", 8),
    "float32": ("f", 4), "float64": ("d", 8), "complex64": ("ff", 8), "complex128": ("dd", 16),
}


class ArgsField(NamedTuple):
    name: str
    ctype: str
    format: str  # struct module format of the field itself, no padding
    offset: int
    length: int = 0  # array length (sizes/strides); 0 for a plain field
    size: int = 0  # bytes of the field (all elements)
    pointee: int = 0  # bytes of the element a pointer field points to; 0 for other fields


class ArgsLayout(NamedTuple):
    fields: tuple[ArgsField, ...]
    packer: struct.Struct

    def declaration(self) -> str:
        """The C struct, then compile-time checks that it has the layout the packer writes (its size,
        each member's size, each pointer's element size): a macro in the user's code (`#define float
        double`) that changes a type becomes a compile error instead of a kernel that reads the
        wrong bytes or past the end of an array."""
        lines = ["struct jm_Args {"]
        for f in self.fields:
            suffix = f"[{f.length}]" if f.length else ""
            align = 16 if f.format == "dd" else 8
            lines.append(f"  alignas({align}) {f.ctype} {f.name}{suffix};")
        lines.append("};")
        message = '"jm_Args layout: does a macro in the code string redefine a type?"'
        lines.append(f"static_assert(sizeof(jm_Args) == {self.packer.size}, {message});")
        # Sizes only (NVRTC 13.0 has no __builtin_offsetof): with every member's size and the alignas
        # fixed, the offsets follow.
        for f in self.fields:
            member = f"((jm_Args*)0)->{f.name}"
            size = f"sizeof(*{member}) == {f.pointee}" if f.pointee else f"sizeof({member}) == {f.size}"
            lines.append(f"static_assert({size}, {message});")
        return "\n".join(lines)


_ITEMSIZE = {d.ctype: d.itemsize for d in DTYPES.values()}


def _pointee(c_type: str) -> int:
    """Bytes of what a pointer field points to (0 for a field that is no pointer)."""
    if not c_type.endswith("*"):
        return 0
    return _ITEMSIZE[c_type.removeprefix("const ").removesuffix("*")]


def _operand_fields(spec: KernelSpec) -> list[FieldSpec]:
    """Pointers (outputs, then array inputs), the element count, extras and scalar inputs."""
    fields: list[FieldSpec] = []
    for j, d in enumerate(spec.outputs):
        fields.append((f"jm_out{j}", f"{ctype(d)}*", "Q", 8, 0))
    for i in spec.array_inputs:
        fields.append((f"jm_in{i}", f"const {ctype(spec.inputs[i])}*", "Q", 8, 0))
    fields.append(("jm_n", "int64_t", "q", 8, 0))
    for k, d in enumerate(spec.extras):
        fmt, size = _SCALAR_FORMAT[d]
        fields.append((f"jm_extra{k}", ctype(d), fmt, size, 0))
    for i, is_scalar in enumerate(spec.scalar_inputs):
        if is_scalar:
            fmt, size = _SCALAR_FORMAT[spec.inputs[i]]
            fields.append((f"jm_scalar{i}", ctype(spec.inputs[i]), fmt, size, 0))
    return fields


@lru_cache(maxsize=1024)
def args_layout(spec: KernelSpec, backend: str) -> ArgsLayout:
    """Fields of the kernel's `Args` struct on `backend` ('cuda' or 'cpu'), with offsets and packer."""
    from jiter_magic.kernels import path_of

    raw = _operand_fields(spec) + path_of(spec, backend).geometry_fields(spec)
    fields, fmt, offset = [], "<", 0
    for name, c_type, f, size, count in raw:
        align = 16 if f == "dd" else 8
        pad = -offset % align
        fmt += "x" * pad
        offset += pad
        fields.append(ArgsField(name, c_type, f, offset, count, size, _pointee(c_type)))
        fmt += f
        offset += size
    fmt += "x" * (-offset % 16 if any(f.format == "dd" for f in fields) else -offset % 8)
    return ArgsLayout(tuple(fields), struct.Struct(fmt))
