"""What every kernel path provides, and what the paths share.

A kernel path is one way of walking a call's elements (contiguous vectors, rows, tiles,
strided offsets, the host loop). Each is one class: whether it fits a call (`match`, which
answers with the path's own parameters, a NamedTuple record the spec then carries), the
loop-geometry fields it adds to the `Args` struct and their values for a call, its launch
grid, and its rendered kernel. Adding a path means adding one module with its class and its
parameters' record, and listing the class in `kernels/__init__.py`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple, TypeVar

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels.args import FieldSpec
from jiter_magic.planning.dtypes import DTYPES
from jiter_magic.planning.layout import ArrayDesc, Layout, transposed_operands
from jiter_magic.planning.spec import KernelSpec

BLOCK = 128  # threads a block on CUDA


class CallShape(NamedTuple):
    """What a path needs to decide whether it fits a call."""

    layout: Layout
    arrays: list  # per input: an ArrayDesc, or a Python scalar
    outs: list[ArrayDesc] | None  # out= arrays, if given
    output_dtypes: tuple[str, ...]

    @property
    def array_items(self) -> list[ArrayDesc]:
        return [a for a in self.arrays if isinstance(a, ArrayDesc)]


class PathChoice(NamedTuple):
    """A path's answer to `match`: the spec fields that describe its loop."""

    path: str  # the spec's path: the class's name, or on the host the CUDA path the loop is shaped like
    ndim: int
    params: tuple  # the path's own NamedTuple, or PathParams()


Grid = tuple[int, int, int]
Params = TypeVar("Params", bound=tuple)


def params_of(spec: KernelSpec, record: type[Params]) -> Params:
    """`spec.params` as the path's own record type (a spec types it as the base): a path reading
    another path's spec is a TypeError here rather than a missing attribute deep in rendering."""
    params = spec.params
    if not isinstance(params, record):
        raise TypeError(f"a {spec.path} spec carries {type(params).__name__}, not {record.__name__}")
    return params


class KernelPath:
    """One way of walking the elements of a call; subclasses fill in each step."""

    name: ClassVar[str]
    block: ClassVar[Grid] = (BLOCK, 1, 1)

    def match(self, call: CallShape) -> PathChoice | None:
        """The loop shape if this path fits the call, else None."""
        raise NotImplementedError

    def block_of(self, spec: KernelSpec) -> Grid:
        """Threads of a block for this kernel (CUDA paths): the class's `block` unless a path picks by spec."""
        return self.block

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        """`Args` fields after the operands and scalars: the loop geometry."""
        return []

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        """The values of `geometry_fields` for one call."""
        return ()

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        """Blocks to launch for a call (CUDA paths)."""
        raise NotImplementedError

    def shape_text(self, spec: KernelSpec) -> str:
        """The loop shape in words, for `KernelSpec.describe`."""
        return f"{spec.ndim}-d"

    def render(self, binding: Binding, spec: KernelSpec) -> str:
        """The kernel function, after the Args declaration."""
        raise NotImplementedError


class CudaPath(KernelPath):
    """A path on CUDA: a `__global__` function over the by-value Args struct, around `body`."""

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        raise NotImplementedError

    def render(self, binding: Binding, spec: KernelSpec) -> str:
        block = self.block_of(spec)
        threads = block[0] * block[1] * block[2]
        code = CodeBlock()
        with code.block(f'extern "C" __global__ void __launch_bounds__({threads}) jm_kernel(const jm_Args jm_a)'):
            code.line(f"typedef {'long long' if spec.index64 else 'int'} jm_index_t;")
            code.extend(self.body(binding, spec))
        return code.text() + "\n"


class LoopPath(CudaPath):
    """A CUDA path whose Args carry the loop's sizes and each operand's strides (rows, tiles, strided
    offsets), where the contiguous path needs the element count alone."""

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        return loop_fields(spec)

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        return loop_geometry(layout)


def loop_fields(spec: KernelSpec) -> list[FieldSpec]:
    """Loop sizes and each operand's strides, innermost first."""
    fields: list[FieldSpec] = [("jm_sizes", "int64_t", "q" * spec.ndim, 8 * spec.ndim, spec.ndim)]
    for op in range(spec.num_operands):
        fields.append((f"jm_strides{op}", "int64_t", "q" * spec.ndim, 8 * spec.ndim, spec.ndim))
    return fields


def loop_geometry(layout: Layout) -> tuple[int, ...]:
    return tuple(layout.sizes) + tuple(s for op in layout.strides for s in op)


def transposed_inputs(call: CallShape) -> list[tuple[int, int]]:
    """(the input's index among the call's arguments, its position in `layout.strides`) of each
    input that `transposed_operands` finds: the ones the tiled and blocked loops read through tiles."""
    nout = len(call.output_dtypes)
    array_indices = [index for index, a in enumerate(call.arrays) if isinstance(a, ArrayDesc)]
    return [(array_indices[position - nout], position) for position in transposed_operands(call.layout, nout)]


Item = TypeVar("Item")


def within_budget(candidates: list[Item], cost: Callable[[Item], int], budget: int) -> list[Item]:
    """The candidates, in order, taken while their costs together stay within `budget` (one that
    would pass it is skipped, a later cheaper one may still fit)."""
    chosen, used = [], 0
    for item in candidates:
        if used + cost(item) <= budget:
            chosen.append(item)
            used += cost(item)
    return chosen


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def vector_width(call: CallShape, check_alignment: bool = True) -> int:
    """Elements a thread moves per access: 16 bytes of the widest operand, halved until every
    pointer is aligned to its vector (unless alignment is checked in the kernel)."""
    items, outs = call.array_items, call.outs or []
    vec = widest_vector(list(call.output_dtypes) + [a.dtype for a in items])
    if not check_alignment:
        return vec
    operands = list(items) + list(outs)
    while vec > 1 and any(a.pointer % min(16, vec * DTYPES[a.dtype].itemsize) for a in operands):
        vec //= 2
    return vec


def widest_vector(dtypes: list[str]) -> int:
    """Elements of the widest of these dtypes that fill 16 bytes: 16 one-byte elements, as 8 left
    int8 and uint8 below torch's jiterator (docs/benchmarks.md)."""
    return max(1, 16 // max(DTYPES[d].itemsize for d in dtypes))
