"""The rows path: every operand walks the innermost dimension densely or not at all.

An outer product or a bias add: one block a chunk of a row, 16-byte vectors where the
row is aligned (checked in the kernel, a row at a time), inputs constant along the row
loaded once, and one index division a block instead of one an element. Where an input is constant
along the row, a thread moves two vectors (each warp's accesses stay contiguous), so that a
block is not gone after one store.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body, vector_elements
from jiter_magic.codegen.offsets import MODULO, operand_offsets
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels import base
from jiter_magic.kernels.base import BLOCK, Grid, PathChoice, ceil_div, params_of, vector_width
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.layout import INT32_MAX, ArrayDesc, Layout
from jiter_magic.planning.spec import ROWS, KernelSpec

# Vectors a thread: 2 where an input is constant along the row (an outer product: there is little
# to load, and with one vector a block is gone after one store), else 1 (a bias add, which loads a
# row of an input, ran slower with 2). The measurements: docs/benchmarks.md.
ROW_CONSTANT_UNROLL = 2


class RowsParams(NamedTuple):
    """The rows loop's parameters."""

    vec: int = 1  # elements a vector access moves where a row is aligned (checked in the kernel)
    row_broadcast: tuple[int, ...] = ()  # inputs constant along a row (inner stride 0), loaded once


def unroll_of(spec: KernelSpec) -> int:
    return ROW_CONSTANT_UNROLL if params_of(spec, RowsParams).row_broadcast else 1


class Rows(base.LoopPath):
    name = ROWS

    def match(self, call: base.CallShape) -> PathChoice | None:
        layout = call.layout
        if layout.ndim < 2 or layout.sizes[0] < 2 * BLOCK:
            return None
        if any(strides[0] not in (0, 1) for strides in layout.strides):
            return None
        if layout.numel // layout.sizes[0] * ceil_div(layout.sizes[0], BLOCK) >= INT32_MAX:
            return None  # one block a row-chunk must fit grid.x
        broadcast, position = [], len(call.output_dtypes)
        for index, a in enumerate(call.arrays):
            if isinstance(a, ArrayDesc):
                if layout.strides[position][0] == 0:
                    broadcast.append(index)
                position += 1
        return PathChoice(ROWS, layout.ndim, RowsParams(vector_width(call, check_alignment=False), tuple(broadcast)))

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        inner = layout.sizes[0]
        return layout.numel // inner * ceil_div(inner, BLOCK * params_of(spec, RowsParams).vec * unroll_of(spec)), 1, 1

    def shape_text(self, spec: KernelSpec) -> str:
        params = params_of(spec, RowsParams)
        broadcast = f", inputs {list(params.row_broadcast)} broadcast along rows" if params.row_broadcast else ""
        return f"{spec.ndim}-d, vec{params.vec}{broadcast}"  # "rows 2-d, vec4": the path already says rows

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        params = params_of(spec, RowsParams)
        v, broadcast, unroll = params.vec, params.row_broadcast, unroll_of(spec)
        nout, ins = len(spec.outputs), spec.array_inputs
        chunk = BLOCK * v * unroll
        code = CodeBlock(
            f"const jm_index_t jm_inner = (jm_index_t){ARGS}.jm_sizes[0];",
            f"const jm_index_t jm_chunks = (jm_inner + {chunk - 1}) / {chunk};",
            "const jm_index_t jm_row = (jm_index_t)jm_block_x() / jm_chunks;",
            f"const jm_index_t jm_base = ((jm_index_t)jm_block_x() - jm_row * jm_chunks) * {chunk};",
        )
        code.extend(operand_offsets(spec, "jm_row", MODULO, first_dim=1))
        offset = {i: f"jm_o{nout + pos}" for pos, i in enumerate(ins)}
        dense = [(f"{ARGS}.jm_out{j}", spec.outputs[j], f"jm_o{j}") for j in range(nout)]
        dense += [(f"{ARGS}.jm_in{i}", spec.inputs[i], offset[i]) for i in ins if i not in broadcast]
        aligned = " && ".join(f"(((unsigned long long)({ptr} + {off})) % {v * DTYPES[d].itemsize} == 0)"
                              for ptr, d, off in dense) or "true"
        code.line(f"const bool jm_aligned = {aligned};")
        loaded = {}
        for i in ins:
            if i in broadcast:  # constant along the row: loaded once
                code.line(f"const {ctype(spec.inputs[i])} jm_x{i} = {ARGS}.jm_in{i}[{offset[i]}];")
        vectors = [i for i in ins if i not in broadcast]
        full = f"jm_aligned && jm_i0 + {v} <= jm_inner"
        index = f"const jm_index_t jm_i0 = jm_base + (jm_u * {BLOCK} + (jm_index_t)jm_thread_x()) * {v};"
        if vectors:  # every load of the thread first, so that they are in flight together
            for i in vectors:
                code.line(f"jm_vec<{ctype(spec.inputs[i])}, {v}> jm_d{i}[{unroll}];")
            code.line("#pragma unroll")
            with code.block(f"for (int jm_u = 0; jm_u < {unroll}; ++jm_u)"):
                code.line(index)
                with code.block(f"if ({full})"):
                    for i in vectors:
                        vec_t = f"jm_vec<{ctype(spec.inputs[i])}, {v}>"
                        code.line(f"jm_d{i}[jm_u] = *reinterpret_cast<const {vec_t}*>"
                                  f"({ARGS}.jm_in{i} + {offset[i]} + jm_i0);")
        for i in ins:
            loaded[i] = f"jm_x{i}" if i in broadcast else f"jm_d{i}[jm_u].jm_v[jm_k]"
        code.line("#pragma unroll")
        with code.block(f"for (int jm_u = 0; jm_u < {unroll}; ++jm_u)"):
            code.line(index)
            with code.block(f"if ({full})", close="} else {"):
                code.extend(vector_elements(binding, spec, loaded, v))
                for j, d in enumerate(spec.outputs):
                    code.line(f"*reinterpret_cast<jm_vec<{ctype(d)}, {v}>*>({ARGS}.jm_out{j} + jm_o{j} + jm_i0) "
                              f"= jm_y{j};")
            with code.block(None):
                with code.block(f"for (jm_index_t jm_j = jm_i0; jm_j < jm_inner && jm_j < jm_i0 + {v}; ++jm_j)"):
                    scalar = {i: f"jm_x{i}" if i in broadcast else f"{ARGS}.jm_in{i}[{offset[i]} + jm_j]"
                              for i in ins}
                    stores = [f"{ARGS}.jm_out{j}[jm_o{j} + jm_j]" for j in range(nout)]
                    code.extend(element_body(binding, spec, scalar, stores))
        return code
