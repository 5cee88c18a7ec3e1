"""The host scan kernels: OpenMP over independent rows, over columns, or over one long row's blocks.

- scan_rows: each thread scans the rows of its static share whole, TOGETHER side by side. Where the
  rows are fewer than twice the threads and long (a 1-D cumsum), each row is scanned in two passes
  over the threads' static blocks of it instead: each folds its block into a partial (heap memory,
  one a thread), the calling thread turns the partials into each block's carry in thread order,
  then each thread scans its block again from its carry, writing the results. The result is the
  same on every call with the same shape and thread count.
- scan_columns: neighbouring rows lie next to each other in every operand (a scan along a leading
  dim): tiles of up to COLUMNS of them scanned together, so that each step along the scan reads
  and writes a dense run (GCC vectorizes it where the combine allows), a thread a static share of
  the tiles.
A reversed scan is the same loops over negated steps (planning/scan_plan.py). Every loop runs
under the fault guard (host_guard.py).
"""
from __future__ import annotations

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.frontend.scan import ScanBinding
from jiter_magic.kernels.host_guard import Scratch, column_tiles, host_kernel, parallel_function, thread_helpers
from jiter_magic.kernels.scan_common import ARGS, element_call, identity, offsets, render_scan, step, store_call, walk
from jiter_magic.planning.scan_plan import SCAN_COLUMNS, SCAN_ROWS, ScanLayout, ScanSpec

SPLIT_COUNT = 1 << 16  # a row at least this long may be split over the threads
COLUMNS = 64  # rows a thread scans together on the columns loop
MIN_INNER = 8  # the columns loop wants at least this many neighbouring rows
TOGETHER = 8  # rows a thread scans side by side on the rows loop


def choose_path(layout: ScanLayout) -> str:
    """Columns where neighbouring rows are neighbouring elements and the scan is not along a dense
    run (a scan along a leading dim); else a row at a time."""
    if layout.columns_dense and layout.kept_sizes[0] >= MIN_INNER and not layout.rows_dense:
        return SCAN_COLUMNS
    return SCAN_ROWS


def _rows_together(spec: ScanSpec) -> CodeBlock:
    """TOGETHER rows of a thread's share scanned step by step side by side, each in variables of
    its own: their chains of combines are independent, so a combine's latency (a logcumsumexp's
    exp and log1p) overlaps with the others'."""
    operands = range(spec.outputs + len(spec.inputs))
    code = CodeBlock()
    with code.block(f"for (; jm_row + {TOGETHER} <= jm_end; jm_row += {TOGETHER})"):
        code.line(" ".join(f"jm_index_t jm_g{k}[{TOGETHER}];" for k in operands))
        with code.block(f"for (int jm_r = 0; jm_r < {TOGETHER}; ++jm_r)"):
            for line in offsets(spec, "jm_row + jm_r", operands):
                code.line(line)
            code.line(" ".join(f"jm_g{k}[jm_r] = jm_k{k};" for k in operands))
        code.line(" ".join(f"jm_state_t jm_s{r} = {identity(spec)};" for r in range(TOGETHER)))
        first = "0"
        if not spec.exclusive:  # the first results are the first elements themselves
            first = "1"
            with code.block(f"if ({ARGS}.jm_count > 0)"):
                for r in range(TOGETHER):
                    offset = f"jm_g{{k}}[{r}] + {{j}} * {{ARGS}}.jm_step[{{k}}]"
                    code.line(f"jm_s{r} = {element_call(spec, '0', offset)};")
                    code.line(store_call(spec, "0", f"jm_s{r}", "1", offset))
        with code.block(f"for (jm_index_t jm_j = {first}; jm_j < {ARGS}.jm_count; ++jm_j)"):
            for r in range(TOGETHER):
                offset = f"jm_g{{k}}[{r}] + {{j}} * {{ARGS}}.jm_step[{{k}}]"
                code.line(f"const jm_state_t jm_e{r} = {element_call(spec, 'jm_j', offset)};")
            for r in range(TOGETHER):
                offset = f"jm_g{{k}}[{r}] + {{j}} * {{ARGS}}.jm_step[{{k}}]"
                if spec.exclusive:
                    code.line(store_call(spec, "jm_j", f"jm_s{r}", "jm_j", offset))
                    code.line(f"jm_s{r} = {step(spec, f'jm_s{r}', f'jm_e{r}')};")
                else:
                    code.line(f"jm_s{r} = {step(spec, f'jm_s{r}', f'jm_e{r}')};")
                    code.line(store_call(spec, "jm_j", f"jm_s{r}", "jm_j + 1", offset))
    return code


def _by_rows(spec: ScanSpec) -> CodeBlock:
    """`jm_by_rows`: each thread scans the rows of its share whole, TOGETHER at a time, then the
    rest one by one."""
    work = CodeBlock("jm_index_t jm_row = jm_begin;")
    work.extend(_rows_together(spec))
    with work.block("for (; jm_row < jm_end; ++jm_row)"):
        for line in offsets(spec, "jm_row", range(spec.outputs + len(spec.inputs))):
            work.line(line)
        work.line(f"jm_state_t jm_s = {identity(spec)};")
        if spec.exclusive:
            work.extend(walk(spec, "jm_s", "0", f"{ARGS}.jm_count"))
        else:  # the first result is the first element itself, not the identity's step with it
            with work.block(f"if ({ARGS}.jm_count > 0)"):
                work.line(f"jm_s = {element_call(spec, '0')};")
                work.line(store_call(spec, "0", "jm_s", "1"))
            work.extend(walk(spec, "jm_s", "1", f"{ARGS}.jm_count"))
    return parallel_function(f"jm_by_rows(const jm_Args& {ARGS})", work, f"{ARGS}.jm_rows",
                             f"{ARGS}.jm_rows * {ARGS}.jm_count")


def _split_passes(spec: ScanSpec) -> CodeBlock:
    """`jm_fold_blocks` (pass 1: each thread's block of the row at `jm_k` folded into `jm_part`) and
    `jm_scan_blocks` (pass 2: each block scanned from its carry, now in `jm_part`)."""
    operands = range(spec.outputs + len(spec.inputs))
    bases = ", ".join(f"jm_index_t jm_k{k}" for k in operands)
    fold = CodeBlock(f"jm_state_t jm_s = {identity(spec)};")
    with fold.block("for (jm_index_t jm_j = jm_begin; jm_j < jm_end; ++jm_j)"):
        fold.line(f"jm_s = {step(spec, 'jm_s', element_call(spec, 'jm_j'))};")
    fold.line("jm_part[jm_thread()] = jm_s;")
    scan = CodeBlock("jm_state_t jm_s = jm_part[jm_thread()];")
    scan.extend(walk(spec, "jm_s", "jm_begin", "jm_end"))
    code = CodeBlock()
    for name, work in (("jm_fold_blocks", fold), ("jm_scan_blocks", scan)):
        code.extend(parallel_function(f"{name}(const jm_Args& {ARGS}, {bases}, jm_state_t* jm_part)", work, "jm_n",
                                      f"{ARGS}.jm_count"))
    return code


def _rows_or_split(spec: ScanSpec) -> CodeBlock:
    """The body: rows scanned whole where there are enough of them for the threads, else each row
    in two passes over the threads' blocks, the carries made in thread order on the calling thread."""
    operands = range(spec.outputs + len(spec.inputs))
    code = CodeBlock("const int jm_threads = jm_max_threads();")
    code.line(f"if ({ARGS}.jm_rows >= 2 * jm_threads || {ARGS}.jm_count < {SPLIT_COUNT} || jm_threads < 2) "
              f"return jm_by_rows({ARGS});")
    bases = ", ".join(f"jm_k{k}" for k in operands)
    with code.block(f"for (jm_index_t jm_row = 0; jm_row < {ARGS}.jm_rows; ++jm_row)"):
        for line in offsets(spec, "jm_row", operands):
            code.line(line)
        code.line(f"for (int jm_t = 0; jm_t < jm_threads; ++jm_t) jm_part[jm_t] = {identity(spec)};")
        code.line(f"int jm_status = jm_fold_blocks({ARGS}, {bases}, jm_part);")
        code.line("if (jm_status) return jm_status;")
        code.line(f"jm_state_t jm_carry = {identity(spec)};")
        with code.block("for (int jm_t = 0; jm_t < jm_threads; ++jm_t)"):
            code.line("const jm_state_t jm_total = jm_part[jm_t];")
            code.line("jm_part[jm_t] = jm_carry;")
            code.line(f"jm_carry = {step(spec, 'jm_carry', 'jm_total')};")
        code.line(f"jm_status = jm_scan_blocks({ARGS}, {bases}, jm_part);")
        code.line("if (jm_status) return jm_status;")
    code.line("return 0;")
    return code


def _by_columns(spec: ScanSpec) -> CodeBlock:
    """`jm_by_columns`: tiles of up to COLUMNS neighbouring rows, a thread a static share of them,
    each step along the scan taken for the tile's rows together."""
    operands = range(spec.outputs + len(spec.inputs))
    offset = "jm_k{k} + jm_q + {j} * {ARGS}.jm_step[{k}]"
    tile = CodeBlock()
    for line in offsets(spec, "jm_t / jm_width * jm_inner + jm_lo", operands):
        tile.line(line)
    tile.line(f"for (int jm_q = 0; jm_q < {COLUMNS}; ++jm_q) jm_col[jm_q] = {identity(spec)};")
    with tile.block(f"for (jm_index_t jm_j = 0; jm_j < {ARGS}.jm_count; ++jm_j)"):
        with tile.block("for (jm_index_t jm_q = 0; jm_q < jm_len; ++jm_q)"):
            tile.line(f"const jm_state_t jm_e = {element_call(spec, 'jm_j', offset)};")
            if spec.exclusive:
                tile.line(store_call(spec, "jm_j", "jm_col[jm_q]", "jm_j", offset))
                tile.line(f"jm_col[jm_q] = {step(spec, 'jm_col[jm_q]', 'jm_e')};")
            else:
                tile.line(f"jm_col[jm_q] = jm_j == 0 ? jm_e : {step(spec, 'jm_col[jm_q]', 'jm_e')};")
                tile.line(store_call(spec, "jm_j", "jm_col[jm_q]", "jm_j + 1", offset))
    return column_tiles(f"jm_state_t jm_col[{COLUMNS}];", tile, COLUMNS, f"{ARGS}.jm_rows * {ARGS}.jm_count")


def render_host(binding: ScanBinding, spec: ScanSpec) -> str:
    code = thread_helpers()
    if spec.path == SCAN_COLUMNS:
        code.extend(_by_columns(spec))
        code.extend(host_kernel(CodeBlock(f"return jm_by_columns({ARGS});")))
        return render_scan(binding, spec, "cpu", code.text() + "\n")
    code.extend(_by_rows(spec))
    code.extend(_split_passes(spec))
    partials = Scratch("jm_state_t", "jm_part", "jm_max_threads()")  # one a thread, outside the guard
    code.extend(host_kernel(_rows_or_split(spec), [partials]))
    return render_scan(binding, spec, "cpu", code.text() + "\n")
