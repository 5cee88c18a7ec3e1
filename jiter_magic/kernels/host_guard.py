"""The fault guard in a generated host kernel: the one way a host kernel runs code.

Every host kernel, elementwise or reduction, is rendered by `host_kernel`: `jm_kernel` calls the
loop shape's body (`jm_body`) under the guard on the calling thread, so whatever the body runs
there (a reduction's fold of the threads' partials, its finalize) is guarded without the loop
shape asking. The one parallel region a body may open is `guarded`'s, which puts each thread's
share under the guard too: OpenMP calls std::terminate on an exception that escapes a parallel
region, and a signal on a worker thread must jump back on that thread, so the guard cannot sit
around a region, only inside it (tests/runtime/test_cpu_fault_shapes.py checks every shape).

Under the guard (backends/fault_guard.py) a signal or a C++ exception ends the thread's share and
becomes the status the kernel returns. The guard keeps the jump target it found and puts it back
after, so a region's guard on the calling thread nests inside the entry's. Buffers a loop needs
(`Scratch`) come from the heap, allocated before the guard and freed after it, once per thread
and call, so a fault never leaks them and no loop keeps more than a few KiB on a thread's stack:
a Python thread made with `threading.stack_size(32768)`, or an OpenMP worker under
`OMP_STACKSIZE=16K`, runs every loop.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS

# Threads only where there is work enough to pay for waking them.
PARALLEL = "#pragma omp parallel if (jm_n > 32768)"
NO_MEMORY = -2  # the status of a kernel whose scratch buffers could not be allocated
BODY = "jm_body"


class Scratch(NamedTuple):
    """A buffer of `elements` (a C expression) elements of `ctype`, named `name` in the guarded code."""

    ctype: str
    name: str
    elements: str


def _thread_guard(work: CodeBlock, scratch: Sequence[Scratch], own_fenv: str) -> CodeBlock:
    """`work` on this thread under the guard, its status in `jm_failed`: 0, a signal's status, -1
    for a C++ exception (its text noted in the call's `jm_what`) or NO_MEMORY. The jump target found
    is restored on every way out, and so is the floating-point environment where `own_fenv` (a C
    condition) holds: saving and restoring it costs about 170 ns, so the calling thread does it
    once for the whole call (in `jm_kernel`), and in a parallel region only the workers do."""
    code = CodeBlock("volatile int jm_failed = 0;")
    for buffer in scratch:
        code.line(f"{buffer.ctype}* const {buffer.name} = ({buffer.ctype}*)jm_scratch_alloc("
                  f"(int64_t)sizeof({buffer.ctype}) * (int64_t)({buffer.elements}));")
        code.line(f"if (!{buffer.name}) jm_failed = {NO_MEMORY};")
    code.line(f"jm_fenv_t jm_fenv;\nconst int jm_own_fenv = {own_fenv};\nif (jm_own_fenv) jm_fenv_save(&jm_fenv);")
    code.line("sigjmp_buf* const jm_outer = jm_fault_jump;\nsigjmp_buf jm_jump;")
    with code.block("if (jm_failed == 0)"):
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
    code.line("jm_fault_jump = jm_outer;\nif (jm_own_fenv) jm_fenv_restore(&jm_fenv);")
    for buffer in scratch:
        code.line(f"jm_scratch_free({buffer.name});")
    return code


def _region(work: CodeBlock, count: str | None, scratch: Sequence[Scratch]) -> CodeBlock:
    """Statements running `work` under the guard, then returning the status: in a parallel region,
    each thread on its static share of `count` iterations (`jm_begin` to `jm_end`), or with
    `count` None on the calling thread alone."""
    code = CodeBlock("int jm_status = 0, jm_thrown = 0;", "char jm_what[512];")
    if count is not None:
        code.line(PARALLEL)
    with code.block(""):
        if count is not None:
            code.line("jm_index_t jm_begin, jm_end;")
            code.line(f"jm_share({count}, &jm_begin, &jm_end);")
        code.extend(_thread_guard(work, scratch, "1" if count is None else "jm_is_worker()"))
        with code.block("if (jm_failed)"):
            code.line("#pragma omp atomic write\njm_status = jm_failed;")
    # Only the region that caught an exception hands its text on: an outer one sees -1 returned.
    code.line("if (jm_thrown) jm_fault_report(jm_what);")
    code.line("return jm_status;")
    return code


def guarded(work: CodeBlock, count: str, scratch: Sequence[Scratch] = ()) -> CodeBlock:
    """The parallel region: each thread takes its static share of `count` iterations (`jm_begin`
    to `jm_end`, used by `work`) under the fault guard, with its own `scratch` buffers; the
    statements return the call's status."""
    return _region(work, count, scratch)


def host_kernel(body: CodeBlock, scratch: Sequence[Scratch] = ()) -> CodeBlock:
    """`jm_body` (the statements `body`, which return a status, with the `scratch` buffers in scope)
    and the exported `jm_kernel`, which allocates the buffers and calls the body under the guard.
    The body is its own function, kept out of line, so a `return` in it never leaves a jump target
    behind and its loops are optimized as in a function with no sigsetjmp."""
    params = "".join(f", {buffer.ctype}* {buffer.name}" for buffer in scratch)
    code = CodeBlock()
    with code.block(f"static jm_noinline int {BODY}(const jm_Args& {ARGS}{params})"):
        code.extend(body)
    with code.block('extern "C" int jm_kernel(const jm_Args* jm_args)'):
        names = "".join(f", {buffer.name}" for buffer in scratch)
        code.extend(_region(CodeBlock(f"jm_failed = {BODY}(*jm_args{names});"), None, scratch))
    return code


def thread_helpers() -> CodeBlock:
    """`jm_thread()` and `jm_max_threads()`: OpenMP's thread number and team size, or 0 and 1 where
    the kernel is built without OpenMP."""
    return CodeBlock("static inline int jm_thread() {", "#ifdef _OPENMP", "  return omp_get_thread_num();",
                     "#else", "  return 0;", "#endif", "}", "static inline int jm_max_threads() {",
                     "#ifdef _OPENMP", "  return omp_get_max_threads();", "#else", "  return 1;", "#endif", "}")


def column_tiles(before: str, tile: CodeBlock, columns: int, work_count: str) -> CodeBlock:
    """`jm_by_columns`: tiles of up to `columns` neighbouring rows along the innermost kept dim
    (`jm_inner` of them, `jm_width` tiles across it), a thread a static share of the tiles: `before`
    once a thread, then `tile` a tile, which starts at row `jm_t / jm_width * jm_inner + jm_lo` and
    holds `jm_len` rows; `work_count` (a C expression) decides whether the threads are woken."""
    work = CodeBlock(before)
    with work.block("for (jm_index_t jm_t = jm_begin; jm_t < jm_end; ++jm_t)"):
        work.line(f"const jm_index_t jm_lo = jm_t % jm_width * {columns};")
        work.line(f"const jm_index_t jm_len = jm_inner - jm_lo < {columns} ? jm_inner - jm_lo : {columns};")
        work.extend(tile)
    code = CodeBlock()
    with code.block(f"static int jm_by_columns(const jm_Args& {ARGS})"):
        code.line(f"const jm_index_t jm_inner = {ARGS}.jm_ksize[0], jm_width = (jm_inner + {columns - 1}) / {columns};")
        code.line(f"const jm_index_t jm_tiles = {ARGS}.jm_rows / jm_inner * jm_width;")
        code.line(f"const jm_index_t jm_n = {work_count};")
        code.extend(guarded(work, "jm_tiles"))
    return code


def parallel_function(signature: str, work: CodeBlock, count: str, work_count: str) -> CodeBlock:
    """`static int signature`: `work` in the parallel region over `count` iterations (`guarded`);
    `work_count` (a C expression of the elements touched) decides whether the threads are woken."""
    code = CodeBlock()
    with code.block(f"static int {signature}"):
        code.line(f"const jm_index_t jm_n = {work_count};")
        code.extend(guarded(work, count))
    return code
