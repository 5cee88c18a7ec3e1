"""The host path: an OpenMP loop over the same element body, for the CPU backend.

A dense call is one flat loop that GCC vectorizes. A call with an input that walks the second
loop dimension contiguously while the outputs walk the first (a transpose, NCHW read as NHWC)
is the blocked loop: tiles of the two dimensions, each such input copied along its own rows
into a buffer of the thread's (heap memory: host_guard.py), then every operand walked in the
outputs' order, so that neither the stores nor that input's reads stride across memory. Any other layout walks rows of
the innermost dimension, computing each row's start offsets once: with the steps 1 and 0 where
every operand walks the row densely or not at all (an outer product, a bias, an array times a
0-dim tensor), else striding along it; a thread's share of elements may start and end mid-row.
Indices are always 64-bit on the host. Every loop shape runs under the fault guard, through
host_guard.py (backends/fault_guard.py): a fault or a C++ exception in the functor becomes the
status the kernel returns, and a Python exception, instead of the end of the process.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body
from jiter_magic.codegen.offsets import DIVIDE, operand_offsets
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels.args import FieldSpec
from jiter_magic.kernels.base import (
    CallShape,
    Grid,
    KernelPath,
    PathChoice,
    loop_fields,
    loop_geometry,
    params_of,
    transposed_inputs,
    within_budget,
)
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.kernels.host_guard import Scratch, guarded, host_kernel
from jiter_magic.kernels.rows import RowsParams
from jiter_magic.planning.dtypes import DTYPES, ctype
from jiter_magic.planning.layout import ArrayDesc, Layout
from jiter_magic.planning.spec import BLOCKED, CONTIGUOUS, ROWS, STRIDED, KernelSpec, PathParams

# The blocked loop's tiles: EDGE0 elements along the outputs' rows (loop dimension 0) by EDGE1
# along the tiled inputs' rows (dimension 1); a buffer's rows are PAD elements longer. Chosen by
# measuring on the 2-core development machine (transposes of float32, float64, int8 and bfloat16,
# NCHW read as NHWC; docs/benchmarks.md): 64x64 was the fastest or within noise of it for all but
# float16; 32x32 and 16x16 were slower on the transposes, 128x128 and 128x64 no faster. The buffer
# is what makes tiles pay: read in the outputs' order, a transposed input whose rows are a power
# of two apart (4096 float32: 16 KiB) puts all of a tile's lines in one L1 set, which then thrash.
# One element of padding beat none (the buffer's columns then spread over the sets) and beat 2, 4
# or a cache line's worth.
EDGE0, EDGE1, PAD = 64, 64, 1
# The tiled inputs' rows (loop dimension 1) at least this long: from 16 elements on the blocked loop
# beat the strided one, below 12 it lost (rows that short keep the strided loop's reads within a few
# cache lines anyway). Along dimension 0 no minimum: from 2 to 32 elements (NCHW read as NHWC with
# 3 channels) the blocked loop won by the most, the strided loop's rows being that short.
MIN_TILED_ROWS = 16
# Tile buffers a thread keeps at most (heap memory of its own, allocated once a call): one complex128
# tile (66.5 KiB) fits, as do seven float32 ones; inputs past it are read in place, so that a
# thread's tiles stay within its core's L2 cache.
STAGE_LIMIT = 128 * 1024


class BlockedParams(NamedTuple):
    """The blocked loop's parameters."""

    tiled_inputs: tuple[int, ...] = ()  # inputs copied along their rows into a tile buffer, read back transposed


def buffer_bytes(dtype: str) -> int:
    """Bytes one tiled input's buffer takes in the blocked loop."""
    return EDGE0 * (EDGE1 + PAD) * DTYPES[dtype].itemsize


class HostLoop(KernelPath):
    name = "host"

    def match(self, call: CallShape) -> PathChoice | None:
        """The contiguous, blocked, rows or strided loop shape. All but the blocked one carry the record of
        the CUDA path of that name (the contiguous one at vec 1: the flat loop moves an element a step,
        which GCC vectorizes; rows at vec 1), so that `describe` reads a host spec as it reads a CUDA
        one of the same shape; the blocked loop is the host's own path, taken where CUDA would tile.
        Rows take any layout whose operands all walk the innermost dimension densely or not at all."""
        layout, nout = call.layout, len(call.output_dtypes)
        if layout.is_contiguous:
            return PathChoice(CONTIGUOUS, 1, ContiguousParams(vec=1))
        found = transposed_inputs(call)
        if found and layout.sizes[1] >= MIN_TILED_ROWS:
            tiled = within_budget([index for index, _ in found], lambda index: buffer_bytes(call.arrays[index].dtype),
                                  STAGE_LIMIT)
            return PathChoice(BLOCKED, layout.ndim, BlockedParams(tiled_inputs=tuple(tiled)))
        if layout.ndim and all(strides[0] in (0, 1) for strides in layout.strides):
            array_indices = [index for index, a in enumerate(call.arrays) if isinstance(a, ArrayDesc)]
            broadcast = tuple(i for p, i in enumerate(array_indices) if layout.strides[nout + p][0] == 0)
            return PathChoice(ROWS, layout.ndim, RowsParams(vec=1, row_broadcast=broadcast))
        return PathChoice(STRIDED, max(layout.ndim, 1), PathParams())

    def geometry_fields(self, spec: KernelSpec) -> list[FieldSpec]:
        return [] if spec.path == CONTIGUOUS else loop_fields(spec)

    def geometry(self, spec: KernelSpec, layout: Layout) -> tuple[int, ...]:
        return () if spec.path == CONTIGUOUS else loop_geometry(layout)

    def shape_text(self, spec: KernelSpec) -> str:
        if spec.path != BLOCKED:
            return f"{spec.ndim}-d"
        tiled = list(params_of(spec, BlockedParams).tiled_inputs)
        return f"{spec.ndim}-d, inputs {tiled} through {EDGE0}x{EDGE1} tiles in cache"

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        return 1, 1, 1  # one call runs the whole loop

    def render(self, binding: Binding, spec: KernelSpec) -> str:
        body = CodeBlock("typedef int64_t jm_index_t;", f"const jm_index_t jm_n = (jm_index_t){ARGS}.jm_n;")
        loop = {CONTIGUOUS: self._flat, ROWS: self._rows, STRIDED: self._rows, BLOCKED: self._blocked}[spec.path]
        body.extend(loop(binding, spec))
        return host_kernel(body).text() + "\n"

    def _flat(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        work = CodeBlock()
        with work.block("for (jm_index_t jm_i = jm_begin; jm_i < jm_end; ++jm_i)"):
            work.extend(element_body(binding, spec, {i: f"{ARGS}.jm_in{i}[jm_i]" for i in spec.array_inputs},
                                     [f"{ARGS}.jm_out{j}[jm_i]" for j in range(len(spec.outputs))]))
        return guarded(work, "jm_n")

    def _rows(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        """Rows of the innermost dimension, each row's start offsets computed once. A thread's static
        share is of elements, not rows, so that one long row (a 1-d view with a step, an array times a
        0-dim tensor) is split over the threads too: a share starts and ends inside a row. On the rows
        path (every operand walks the row densely or not at all) the steps are the literals 1 and 0,
        which GCC vectorizes with plain loads, an input constant along the row loaded once; on the
        strided path they are the layout's strides."""
        nout, ins = len(spec.outputs), spec.array_inputs
        broadcast = params_of(spec, RowsParams).row_broadcast if spec.path == ROWS else ()
        code = CodeBlock(f"const jm_index_t jm_inner = (jm_index_t){ARGS}.jm_sizes[0];")
        work = CodeBlock()
        with work.block("for (jm_index_t jm_i = jm_begin; jm_i < jm_end;)"):
            work.line("const jm_index_t jm_row = jm_i / jm_inner, jm_j0 = jm_i - jm_row * jm_inner;")
            work.line("const jm_index_t jm_j1 = jm_end - jm_i < jm_inner - jm_j0 ? jm_j0 + (jm_end - jm_i) : jm_inner;")
            work.extend(operand_offsets(spec, "jm_row * jm_inner", DIVIDE))
            if spec.path == ROWS:
                for i in broadcast:
                    work.line(f"const {ctype(spec.inputs[i])} jm_c{i} = {ARGS}.jm_in{i}[jm_o{nout + ins.index(i)}];")
                with work.block("for (jm_index_t jm_j = jm_j0; jm_j < jm_j1; ++jm_j)"):
                    loaded = {i: f"jm_c{i}" if i in broadcast else f"{ARGS}.jm_in{i}[jm_o{nout + p} + jm_j]"
                              for p, i in enumerate(ins)}
                    work.extend(element_body(binding, spec, loaded,
                                             [f"{ARGS}.jm_out{j}[jm_o{j} + jm_j]" for j in range(nout)]))
            else:
                for k in range(spec.num_operands):
                    work.line(f"jm_o{k} += jm_j0 * (jm_index_t){ARGS}.jm_strides{k}[0];")
                with work.block("for (jm_index_t jm_j = jm_j0; jm_j < jm_j1; ++jm_j)"):
                    loaded = {i: f"{ARGS}.jm_in{i}[jm_o{nout + p}]" for p, i in enumerate(ins)}
                    work.extend(element_body(binding, spec, loaded,
                                             [f"{ARGS}.jm_out{j}[jm_o{j}]" for j in range(nout)]))
                    for k in range(spec.num_operands):
                        work.line(f"jm_o{k} += (jm_index_t){ARGS}.jm_strides{k}[0];")
            work.line("jm_i += jm_j1 - jm_j0;")
        code.extend(guarded(work, "jm_n"))
        return code

    def _blocked(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        """Tiles of EDGE0 x EDGE1 elements of the two inner loop dimensions, in every batch (the loop
        dimensions past the second), a thread's static share of all of them. In a tile each tiled
        input is copied into its buffer along its own rows (dimension 1, unit stride), then the
        element loop runs dimension 0 innermost: the outputs' unit-stride dimension, so stores are
        contiguous and vectorize, reading the tiled inputs back from the buffers. Partial tiles at
        the edges run shorter loops (`jm_len0`, `jm_len1`) instead of checking each element."""
        nout, count, ins = len(spec.outputs), spec.num_operands, spec.array_inputs
        tiled, row = params_of(spec, BlockedParams).tiled_inputs, EDGE1 + PAD
        code = CodeBlock(f"const jm_index_t jm_s0 = (jm_index_t){ARGS}.jm_sizes[0], "
                         f"jm_s1 = (jm_index_t){ARGS}.jm_sizes[1];",
                         f"const jm_index_t jm_tiles0 = (jm_s0 + {EDGE0 - 1}) / {EDGE0}, "
                         f"jm_tiles1 = (jm_s1 + {EDGE1 - 1}) / {EDGE1};",
                         "jm_index_t jm_tiles = jm_tiles0 * jm_tiles1;")
        for d in range(2, spec.ndim):
            code.line(f"jm_tiles *= (jm_index_t){ARGS}.jm_sizes[{d}];")
        # Strides in locals: an output of an integer type could otherwise alias the Args struct's
        # strides for the compiler, which would then reload them after every store.
        for k in range(count):
            code.line(f"const jm_index_t jm_st{k}_0 = (jm_index_t){ARGS}.jm_strides{k}[0], "
                      f"jm_st{k}_1 = (jm_index_t){ARGS}.jm_strides{k}[1];")
        work = CodeBlock()
        with work.block("for (jm_index_t jm_t = jm_begin; jm_t < jm_end; ++jm_t)"):
            work.line(f"const jm_index_t jm_lo0 = jm_t % jm_tiles0 * {EDGE0}, "
                      f"jm_lo1 = jm_t / jm_tiles0 % jm_tiles1 * {EDGE1};")
            work.line(f"const jm_index_t jm_len0 = jm_s0 - jm_lo0 < {EDGE0} ? jm_s0 - jm_lo0 : {EDGE0};")
            work.line(f"const jm_index_t jm_len1 = jm_s1 - jm_lo1 < {EDGE1} ? jm_s1 - jm_lo1 : {EDGE1};")
            work.extend(operand_offsets(spec, "jm_t / (jm_tiles0 * jm_tiles1)", DIVIDE, first_dim=2))
            for k in range(count):
                work.line(f"jm_o{k} += jm_lo0 * jm_st{k}_0 + jm_lo1 * jm_st{k}_1;")
            if tiled:
                with work.block("for (jm_index_t jm_i0 = 0; jm_i0 < jm_len0; ++jm_i0)"):
                    with work.block("for (jm_index_t jm_i1 = 0; jm_i1 < jm_len1; ++jm_i1)"):
                        for i in tiled:
                            k = nout + ins.index(i)
                            work.line(f"jm_tile{i}[jm_i0 * {row} + jm_i1] = "
                                      f"{ARGS}.jm_in{i}[jm_o{k} + jm_i0 * jm_st{k}_0 + jm_i1 * jm_st{k}_1];")
            with work.block("for (jm_index_t jm_i1 = 0; jm_i1 < jm_len1; ++jm_i1)"):
                walked = [k for k in range(count) if k < nout or ins[k - nout] not in tiled]
                work.line("const jm_index_t " + ", ".join(
                    f"jm_p{k} = jm_o{k} + jm_i1 * jm_st{k}_1" for k in walked) + ";")
                with work.block("for (jm_index_t jm_i0 = 0; jm_i0 < jm_len0; ++jm_i0)"):
                    loaded = {i: f"jm_tile{i}[jm_i0 * {row} + jm_i1]" if i in tiled
                              else f"{ARGS}.jm_in{i}[jm_p{nout + pos} + jm_i0 * jm_st{nout + pos}_0]"
                              for pos, i in enumerate(ins)}
                    # The outputs walk dimension 0 with unit stride (`transposed_operands`).
                    work.extend(element_body(binding, spec, loaded,
                                             [f"{ARGS}.jm_out{j}[jm_p{j} + jm_i0]" for j in range(nout)]))
        # The tile buffers: a thread's own, allocated once for its whole share (not a tile).
        scratch = [Scratch(ctype(spec.inputs[i]), f"jm_tile{i}", str(EDGE0 * row)) for i in tiled]
        code.extend(guarded(work, "jm_tiles", scratch))
        return code
