"""The host path: an OpenMP loop over the same element body, for the CPU backend.

A dense call is one flat loop that GCC vectorizes; any other layout walks rows of the
innermost dimension, computing each row's start offsets once and striding along it.
Indices are always 64-bit on the host. Each thread runs its share under the fault guard
(backends/fault_guard.py): a fault or a C++ exception in the functor becomes the status the
kernel returns, and a Python exception, instead of the end of the process.
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body
from jiter_magic.codegen.offsets import DIVIDE, operand_offsets
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels.args import FieldSpec
from jiter_magic.kernels.base import CallShape, Grid, KernelPath, PathChoice, loop_fields, loop_geometry
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.planning.layout import Layout
from jiter_magic.planning.spec import CONTIGUOUS, STRIDED, KernelSpec, PathParams

PARALLEL = "#pragma omp parallel if (jm_n > 32768)"


def _guarded(work: CodeBlock, count: str) -> CodeBlock:
    """The parallel region: each thread takes its static share of `count` iterations (`jm_begin`
    to `jm_end`, used by `work`) under the fault guard: a signal or a C++ exception in the functor
    ends that thread's share and sets the status the call returns, instead of ending the process.
    The thread's floating-point environment is saved before its share and restored after it."""
    code = CodeBlock("int jm_status = 0, jm_thrown = 0;", "char jm_what[512];", PARALLEL)
    with code.block(""):
        code.line("jm_index_t jm_begin, jm_end;")
        code.line(f"jm_share({count}, &jm_begin, &jm_end);")
        code.line("volatile int jm_failed = 0;")
        code.line("jm_fenv_t jm_fenv;")
        code.line("jm_fenv_save(&jm_fenv);")
        code.line("sigjmp_buf jm_jump;")
        code.line("const int jm_signal = sigsetjmp(jm_jump, 0);")
        with code.block("if (jm_signal == 0)", close="} else {"):
            code.line("jm_fault_jump = &jm_jump;")
            with code.block("try", close="} catch (const std::exception& jm_error) {"):
                code.extend(work)
            code.line("  jm_fault_note(jm_what, &jm_thrown, jm_error.what());\n  jm_failed = -1;")
            code.line("} catch (...) {")
            code.line('  jm_fault_note(jm_what, &jm_thrown, "an exception that is not a std::exception");')
            code.line("  jm_failed = -1;\n}")
        with code.block(None):
            code.line("jm_failed = jm_signal;")
        code.line("jm_fault_jump = 0;")
        code.line("jm_fenv_restore(&jm_fenv);")
        with code.block("if (jm_failed)"):
            code.line("#pragma omp atomic write\njm_status = jm_failed;")
    code.line("if (jm_status == -1) jm_fault_report(jm_what);")
    code.line("return jm_status;")
    return code


class HostLoop(KernelPath):
    name = "host"

    def match(self, call: CallShape) -> PathChoice | None:
        """The contiguous or the strided loop shape, with that CUDA path's record (the contiguous one at
        vec 1: the flat loop moves an element a step, which GCC vectorizes), so that `describe` reads a
        host spec as it reads a CUDA one of the same shape."""
        if call.layout.is_contiguous:
            return PathChoice(CONTIGUOUS, 1, ContiguousParams(vec=1))
        return PathChoice(STRIDED, max(call.layout.ndim, 1), PathParams())

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        return loop_fields(spec) if spec.path == STRIDED else []

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        return loop_geometry(layout) if spec.path == STRIDED else ()

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        return 1, 1, 1  # one call runs the whole loop

    def render(self, binding: Binding, spec: KernelSpec) -> str:
        code = CodeBlock()
        with code.block('extern "C" int jm_kernel(const jm_Args* jm_args)'):
            code.line(f"const jm_Args& {ARGS} = *jm_args;")
            code.line("typedef int64_t jm_index_t;")
            code.line(f"const jm_index_t jm_n = (jm_index_t){ARGS}.jm_n;")
            code.extend(self._strided(binding, spec) if spec.path == STRIDED else self._flat(binding, spec))
        return code.text() + "\n"

    def _flat(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        work = CodeBlock()
        with work.block("for (jm_index_t jm_i = jm_begin; jm_i < jm_end; ++jm_i)"):
            work.extend(element_body(binding, spec, {i: f"{ARGS}.jm_in{i}[jm_i]" for i in spec.array_inputs},
                                     [f"{ARGS}.jm_out{j}[jm_i]" for j in range(len(spec.outputs))]))
        return _guarded(work, "jm_n")

    def _strided(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        nout = len(spec.outputs)
        code = CodeBlock(f"const jm_index_t jm_inner = (jm_index_t){ARGS}.jm_sizes[0];",
                         "const jm_index_t jm_rows = jm_n / jm_inner;")
        work = CodeBlock()
        with work.block("for (jm_index_t jm_row = jm_begin; jm_row < jm_end; ++jm_row)"):
            work.extend(operand_offsets(spec, "jm_row * jm_inner", DIVIDE))
            with work.block("for (jm_index_t jm_j = 0; jm_j < jm_inner; ++jm_j)"):
                loaded = {i: f"{ARGS}.jm_in{i}[jm_o{nout + p}]" for p, i in enumerate(spec.array_inputs)}
                work.extend(element_body(binding, spec, loaded, [f"{ARGS}.jm_out{j}[jm_o{j}]" for j in range(nout)]))
                for k in range(spec.num_operands):
                    work.line(f"jm_o{k} += (jm_index_t){ARGS}.jm_strides{k}[0];")
        code.extend(_guarded(work, "jm_rows"))
        return code
