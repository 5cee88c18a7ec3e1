"""The host path: an OpenMP loop over the same element body, for the CPU backend.

A dense call is one flat loop that GCC vectorizes; any other layout walks rows of the
innermost dimension, computing each row's start offsets once and striding along it.
Indices are always 64-bit on the host.
"""
from __future__ import annotations

from ..bind import Binding
from ..codegen.block import CodeBlock
from ..codegen.element import ARGS, element_body
from ..codegen.offsets import DIVIDE, operand_offsets
from ..layout import Layout
from ..spec import CONTIGUOUS, STRIDED, KernelSpec
from .args import FieldSpec
from .base import CallShape, Grid, KernelPath, PathChoice, loop_fields, loop_geometry

PARALLEL = "#pragma omp parallel for schedule(static) if (jm_n > 32768)"


class HostLoop(KernelPath):
    name = "host"

    def match(self, call: CallShape) -> PathChoice | None:
        if call.layout.is_contiguous:
            return PathChoice(CONTIGUOUS, 1)
        return PathChoice(STRIDED, max(call.layout.ndim, 1))

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        return loop_fields(spec) if spec.path == STRIDED else []

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        return loop_geometry(layout) if spec.path == STRIDED else ()

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        return 1, 1, 1  # one call runs the whole loop

    def render(self, binding: Binding, spec: KernelSpec) -> str:
        code = CodeBlock()
        with code.block('extern "C" void jm_kernel(const jm_Args* jm_args)'):
            code.line(f"const jm_Args& {ARGS} = *jm_args;")
            code.line("typedef int64_t jm_index_t;")
            code.line(f"const jm_index_t jm_n = (jm_index_t){ARGS}.jm_n;")
            code.extend(self._strided(binding, spec) if spec.path == STRIDED else self._flat(binding, spec))
        return code.text() + "\n"

    def _flat(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        code = CodeBlock(PARALLEL)
        with code.block("for (jm_index_t jm_i = 0; jm_i < jm_n; ++jm_i)"):
            code.extend(element_body(binding, spec, {i: f"{ARGS}.jm_in{i}[jm_i]" for i in spec.array_inputs},
                                     [f"{ARGS}.jm_out{j}[jm_i]" for j in range(len(spec.outputs))]))
        return code

    def _strided(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        nout = len(spec.outputs)
        code = CodeBlock(f"const jm_index_t jm_inner = (jm_index_t){ARGS}.jm_sizes[0];",
                         "const jm_index_t jm_rows = jm_n / jm_inner;", PARALLEL)
        with code.block("for (jm_index_t jm_row = 0; jm_row < jm_rows; ++jm_row)"):
            code.extend(operand_offsets(spec, "jm_row * jm_inner", DIVIDE))
            with code.block("for (jm_index_t jm_j = 0; jm_j < jm_inner; ++jm_j)"):
                loaded = {i: f"{ARGS}.jm_in{i}[jm_o{nout + p}]" for p, i in enumerate(spec.array_inputs)}
                code.extend(element_body(binding, spec, loaded, [f"{ARGS}.jm_out{j}[jm_o{j}]" for j in range(nout)]))
                for k in range(spec.num_operands):
                    code.line(f"jm_o{k} += (jm_index_t){ARGS}.jm_strides{k}[0];")
        return code
