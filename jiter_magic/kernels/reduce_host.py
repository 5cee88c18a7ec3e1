"""The host reduction kernels: OpenMP over output elements, or over one element's reduced extent.

With many output elements (at least twice the threads) each thread folds whole rows of its static
share, each in one pass. With few (a full reduction, a handful of long rows) each row's reduced
elements are split into the threads' static shares: each folds its share into its own partial
(heap memory, one a thread), then the partials are combined in thread order, so that the result is
the same on every call with the same shape and thread count. A fold walks the reduced dims
innermost first, LANES accumulators interleaved along the innermost run (which GCC vectorizes
into several independent vector accumulators: 32 ran 2.5 to 4 times faster than 8 on the
development machine, float32 and bfloat16 sums of squares, and as fast as 64; many partial sums
also keep a long float sum's rounding error small), combined in a fixed order at the end. Where
neighbouring output elements read neighbouring input elements (a sum over the leading dims) the
columns loop folds COLUMNS of them together instead, reading each reduced row densely. Indices are
64-bit; every loop runs under the fault guard, the partials' fold and finalize on the calling
thread too (host_guard.py).
"""
from __future__ import annotations

from typing import ClassVar

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels.host_guard import Scratch, column_tiles, host_kernel, parallel_function, thread_helpers
from jiter_magic.kernels.reduce_common import (
    ARGS,
    element,
    folded,
    initial,
    kept_offsets,
    kept_operands,
    reduced_offsets,
    render_with,
    state_type,
    stored,
)
from jiter_magic.planning.reduce_layout import ReductionLayout
from jiter_magic.planning.reduce_spec import HOST, HOST_COLUMNS, ReductionSpec

LANES = 32  # interleaved accumulators of a fold (module docstring)
SPLIT_COUNT = 4096  # a row at least this long may be split over the threads
COLUMNS = 64  # output elements a thread folds together on the columns loop
MIN_INNER = 8  # the columns loop wants at least this many neighbouring output elements


class HostPath:
    """One host kernel shape of reductions: whether it fits a call, and its body."""

    name: ClassVar[str]

    def match(self, layout: ReductionLayout) -> bool:
        raise NotImplementedError

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        """Every function of the kernel after the thread helpers, `jm_kernel` last."""
        raise NotImplementedError


class HostColumns(HostPath):
    """Where neighbouring output elements read neighbouring elements of every input (a sum over the
    leading dims): each reduced element's row is read densely, for COLUMNS outputs at once, where a
    fold a row would stride across memory."""

    name = HOST_COLUMNS

    def match(self, layout: ReductionLayout) -> bool:
        return bool(layout.kept_sizes and layout.kept_sizes[0] >= MIN_INNER and not layout.inner_reduced_dense
                    and all(s[0] == 1 for s in layout.input_kept_strides))

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = _by_columns(binding, spec)
        code.extend(host_kernel(CodeBlock(f"return jm_by_columns({ARGS});")))
        return code


class HostRows(HostPath):
    """Everything else: a fold a row, or each row split over the threads where rows are few."""

    name = HOST

    def match(self, layout: ReductionLayout) -> bool:
        return True

    def body(self, binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
        code = _fold(binding, spec)
        code.extend(_by_rows(binding, spec))
        code.extend(_split_row(spec))
        # The threads' partials on the heap, one a thread: allocated once a call, outside the guard.
        partials = Scratch(state_type(spec), "jm_part", "jm_max_threads()")
        code.extend(host_kernel(_rows_or_split(binding, spec), [partials]))
        return code


PATHS: tuple[HostPath, ...] = (HostColumns(), HostRows())  # the first that matches runs a call


def choose_path(layout: ReductionLayout) -> str:
    """The name of the first host path that fits the call's layout."""
    return next(path.name for path in PATHS if path.match(layout))


def _lanes(binding: ReductionBinding, spec: ReductionSpec, steps: list[str]) -> CodeBlock:
    """The run's elements LANES at a time, element `jm_j + l` into accumulator l; input i steps `steps[i]`."""
    code = CodeBlock()
    with code.block(f"for (; jm_j + {LANES} <= jm_len; jm_j += {LANES})"):
        with code.block(f"for (int jm_l = 0; jm_l < {LANES}; ++jm_l)"):
            loaded = [f"{ARGS}.jm_in{i}[jm_o{i} + (jm_j + jm_l) * {step}]" for i, step in enumerate(steps)]
            value = element(binding, spec, loaded, "jm_r + jm_j + jm_l")
            code.line(f"jm_lane[jm_l] = {folded(binding, spec, 'jm_lane[jm_l]', value)};")
    return code


def _fold(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """`jm_fold(args, bases..., begin, end)`: the reduced elements [begin, end) of the row whose inputs
    start at the bases, folded into one accumulator value."""
    ins = range(len(spec.inputs))
    bases = ", ".join(f"jm_index_t jm_b{i}" for i in ins)
    state = state_type(spec)
    code = CodeBlock()
    with code.block(f"static inline {state} jm_fold(const jm_Args& {ARGS}, {bases}, jm_index_t jm_begin, "
                    "jm_index_t jm_end)"):
        code.line(f"if (jm_begin >= jm_end) return {initial(spec)};")
        code.line(f"{state} jm_lane[{LANES}];")
        code.line(f"for (int jm_l = 0; jm_l < {LANES}; ++jm_l) jm_lane[jm_l] = {initial(spec)};")
        code.line(f"jm_index_t jm_c[{spec.reduced_ndim}];")
        code.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_b{i}" for i in ins) + ", jm_rest = jm_begin;")
        with code.block(f"for (int jm_d = 0; jm_d < {spec.reduced_ndim}; ++jm_d)"):
            code.line(f"jm_c[jm_d] = jm_rest % {ARGS}.jm_rsize[jm_d]; jm_rest /= {ARGS}.jm_rsize[jm_d];")
            code.line(" ".join(f"jm_o{i} += jm_c[jm_d] * {ARGS}.jm_rstride{i}[jm_d];" for i in ins))
        code.line("const jm_index_t " + ", ".join(f"jm_s{i} = {ARGS}.jm_rstride{i}[0]" for i in ins) + ";")
        code.line(f"const jm_index_t jm_size0 = {ARGS}.jm_rsize[0];")
        with code.block("for (jm_index_t jm_r = jm_begin; jm_r < jm_end;)"):
            code.line("const jm_index_t jm_len = jm_size0 - jm_c[0] < jm_end - jm_r ? jm_size0 - jm_c[0] "
                      ": jm_end - jm_r;")
            code.line("jm_index_t jm_j = 0;")
            # The run read densely by every input gets a loop of its own, with the step a literal 1,
            # which GCC vectorizes with plain loads; any other steps, a loop reading with them.
            dense = " && ".join(f"jm_s{i} == 1" for i in ins)
            with code.block(f"if ({dense})", close="} else {"):
                code.extend(_lanes(binding, spec, ["1"] * len(ins)))
            with code.block(None):
                code.extend(_lanes(binding, spec, [f"jm_s{i}" for i in ins]))
            with code.block("for (; jm_j < jm_len; ++jm_j)"):
                loaded = [f"{ARGS}.jm_in{i}[jm_o{i} + jm_j * jm_s{i}]" for i in ins]
                value = element(binding, spec, loaded, "jm_r + jm_j")
                code.line(f"jm_lane[0] = {folded(binding, spec, 'jm_lane[0]', value)};")
            code.line("jm_r += jm_len; jm_c[0] += jm_len;")
            code.line(" ".join(f"jm_o{i} += jm_len * jm_s{i};" for i in ins))
            # Carry into the outer reduced dims, one at a time, as an odometer does.
            with code.block(f"for (int jm_d = 0; jm_d + 1 < {spec.reduced_ndim} && jm_c[jm_d] == {ARGS}.jm_rsize[jm_d];"
                            " ++jm_d)"):
                code.line(" ".join(f"jm_o{i} += {ARGS}.jm_rstride{i}[jm_d + 1] - {ARGS}.jm_rsize[jm_d] * "
                                   f"{ARGS}.jm_rstride{i}[jm_d];" for i in ins))
                code.line("jm_c[jm_d] = 0; ++jm_c[jm_d + 1];")
        code.line(f"{state} jm_acc = jm_lane[0];")
        code.line(f"for (int jm_l = 1; jm_l < {LANES}; ++jm_l) "
                  f"jm_acc = {folded(binding, spec, 'jm_acc', 'jm_lane[jm_l]')};")
        code.line("return jm_acc;")
    return code


def _by_rows(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """`jm_by_rows`: each thread folds the rows of its share whole and stores them."""
    operands = kept_operands(spec)
    work = CodeBlock()
    with work.block("for (jm_index_t jm_row = jm_begin; jm_row < jm_end; ++jm_row)"):
        for line in kept_offsets(spec, "jm_row", operands):
            work.line(line)
        bases = ", ".join(f"jm_k{i + 1}" for i in range(len(spec.inputs)))
        work.line(f"const {state_type(spec)} jm_acc = jm_fold({ARGS}, {bases}, 0, {ARGS}.jm_count);")
        work.line(stored(binding, spec, "jm_acc", f"{ARGS}.jm_count"))
    return parallel_function(f"jm_by_rows(const jm_Args& {ARGS})", work, f"{ARGS}.jm_rows",
                             f"{ARGS}.jm_rows * ({ARGS}.jm_count > 0 ? {ARGS}.jm_count : 1)")


def _split_row(spec: ReductionSpec) -> CodeBlock:
    """`jm_split_row`: the threads fold their shares of one row's reduced elements into `jm_part`."""
    ins = range(len(spec.inputs))
    work = CodeBlock()
    work.line(f"jm_part[jm_thread()] = jm_fold({ARGS}, {', '.join(f'jm_b{i}' for i in ins)}, jm_begin, jm_end);")
    bases = ", ".join(f"jm_index_t jm_b{i}" for i in ins)
    return parallel_function(f"jm_split_row(const jm_Args& {ARGS}, {bases}, {state_type(spec)}* jm_part)", work,
                             "jm_n", f"{ARGS}.jm_count")


def _by_columns(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """`jm_by_columns`: tiles of up to COLUMNS neighbouring output elements (along the innermost
    kept dim, which every input reads densely), a thread's static share of them; each reduced
    element in order, its run of the tile's inputs folded into the tile's accumulators."""
    operands, ins = kept_operands(spec), range(len(spec.inputs))
    tile = CodeBlock()
    for line in kept_offsets(spec, "jm_t / jm_width * jm_inner + jm_lo", operands):
        tile.line(line)
    tile.line(f"for (int jm_j = 0; jm_j < {COLUMNS}; ++jm_j) jm_col[jm_j] = {initial(spec)};")
    with tile.block(f"for (jm_index_t jm_r = 0; jm_r < {ARGS}.jm_count; ++jm_r)"):
        tile.line("jm_index_t " + ", ".join(f"jm_o{i} = jm_k{i + 1}" for i in ins) + ";")
        for line in reduced_offsets(spec, "jm_r"):
            tile.line(line)
        with tile.block("for (jm_index_t jm_j = 0; jm_j < jm_len; ++jm_j)"):
            loaded = [f"{ARGS}.jm_in{i}[jm_o{i} + jm_j]" for i in ins]
            value = element(binding, spec, loaded, "jm_r")
            tile.line(f"jm_col[jm_j] = {folded(binding, spec, 'jm_col[jm_j]', value)};")
    with tile.block("for (jm_index_t jm_j = 0; jm_j < jm_len; ++jm_j)"):
        tile.line(stored(binding, spec, "jm_col[jm_j]", f"{ARGS}.jm_count",
                         f"jm_k{{0}} + jm_j * {ARGS}.jm_kstride{{0}}[0]"))
    return column_tiles(f"{state_type(spec)} jm_col[{COLUMNS}];", tile, COLUMNS,
                        f"{ARGS}.jm_rows * ({ARGS}.jm_count > 0 ? {ARGS}.jm_count : 1)")


def _rows_or_split(binding: ReductionBinding, spec: ReductionSpec) -> CodeBlock:
    """The body: rows folded whole (`jm_by_rows`) where there are enough of them for the threads, else
    each row split over the threads, their partials (in `jm_part`, one a thread) folded in thread
    order and finalized, on the calling thread, under the guard of `jm_kernel` (host_guard.py)."""
    code = CodeBlock("const int jm_threads = jm_max_threads();")
    code.line(f"if ({ARGS}.jm_rows >= 2 * jm_threads || {ARGS}.jm_count < {SPLIT_COUNT}) return jm_by_rows({ARGS});")
    with code.block(f"for (jm_index_t jm_row = 0; jm_row < {ARGS}.jm_rows; ++jm_row)"):
        for line in kept_offsets(spec, "jm_row", kept_operands(spec)):
            code.line(line)
        code.line(f"for (int jm_t = 0; jm_t < jm_threads; ++jm_t) jm_part[jm_t] = {initial(spec)};")
        bases = ", ".join(f"jm_k{i + 1}" for i in range(len(spec.inputs)))
        code.line(f"const int jm_status = jm_split_row({ARGS}, {bases}, jm_part);")
        code.line("if (jm_status) return jm_status;")
        code.line(f"{state_type(spec)} jm_acc = jm_part[0];")
        code.line(f"for (int jm_t = 1; jm_t < jm_threads; ++jm_t) "
                  f"jm_acc = {folded(binding, spec, 'jm_acc', 'jm_part[jm_t]')};")
        code.line(stored(binding, spec, "jm_acc", f"{ARGS}.jm_count"))
    code.line("return 0;")
    return code


def render_host(binding: ReductionBinding, spec: ReductionSpec) -> str:
    code = thread_helpers()
    code.extend(next(path for path in PATHS if path.name == spec.path).body(binding, spec))
    return render_with(binding, spec, "cpu", code.text() + "\n")
