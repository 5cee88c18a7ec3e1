"""The contiguous path: every operand walks one dense dimension; 16-byte vector loads and stores.

Taken when the call coalesces to a single unit-stride loop. Each block moves
`BLOCK * vec * unroll` elements with aligned vector accesses (the vector shrinks until
every pointer is aligned); the last, partial block falls back to one element a thread.
A vector shrunk by misaligned pointers (a view such as `x[1:]`) is made up for by unrolling:
a thread moves as many elements as at full width, in narrower accesses that stay coalesced,
so that loads stay in flight as they do at full width.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.codegen.block import CodeBlock
from jiter_magic.codegen.element import ARGS, element_body, vector_elements
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels.base import (
    BLOCK,
    CallShape,
    CudaPath,
    Grid,
    PathChoice,
    ceil_div,
    params_of,
    vector_width,
    widest_vector,
)
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.layout import Layout
from jiter_magic.planning.spec import CONTIGUOUS, KernelSpec

# Full-width vectors a thread: two for 4-byte elements and wider, one for narrower ones, so that a
# thread computes at least 8 elements where its vector holds fewer, as torch's jiterator does. For
# bandwidth alone one vector was as fast; a math-bound functor wants the independent elements (its
# float16 row, 8 elements a thread, matched torch's jiterator where float32 at 4 did not).
MIN_ELEMENTS, MAX_UNROLL = 8, 2


class ContiguousParams(NamedTuple):
    """The contiguous loop's parameters (also the host's flat loop, with vec 1)."""

    vec: int = 1  # elements a vector access moves: 16 bytes of the widest operand, less where misaligned


def unroll_of(spec: KernelSpec) -> int:
    """Vectors a thread moves: at full width as many as make MIN_ELEMENTS (at most MAX_UNROLL), and
    more when misalignment narrowed the vector, to move as many bytes."""
    dtypes = [*spec.outputs, *(spec.inputs[i] for i in spec.array_inputs)]
    widest = widest_vector(dtypes)
    full = min(MAX_UNROLL, max(1, MIN_ELEMENTS // widest))
    return full * max(1, widest // params_of(spec, ContiguousParams).vec)


class Contiguous(CudaPath):
    name = CONTIGUOUS

    def match(self, call: CallShape) -> PathChoice | None:
        if not call.layout.is_contiguous:
            return None
        return PathChoice(CONTIGUOUS, 1, ContiguousParams(vector_width(call)))

    def grid(self, spec: KernelSpec, layout: Layout) -> Grid:
        return ceil_div(layout.numel, BLOCK * params_of(spec, ContiguousParams).vec * unroll_of(spec)), 1, 1

    def shape_text(self, spec: KernelSpec) -> str:
        return f"vec{params_of(spec, ContiguousParams).vec}"

    def body(self, binding: Binding, spec: KernelSpec) -> CodeBlock:
        v, unroll, ins = params_of(spec, ContiguousParams).vec, unroll_of(spec), spec.array_inputs
        work = BLOCK * v * unroll
        nout = len(spec.outputs)
        vec_in = {i: f"jm_vec<{ctype(spec.inputs[i])}, {v}>" for i in ins}
        index = f"const jm_index_t jm_i = jm_start + (jm_u * {BLOCK} + (jm_index_t)jm_thread_x()) * {v};"
        code = CodeBlock(f"const jm_index_t jm_n = (jm_index_t){ARGS}.jm_n;",
                         f"const jm_index_t jm_start = (jm_index_t)jm_block_x() * {work};")
        with code.block(f"if (jm_start + {work} <= jm_n)", close="} else {"):
            for i in ins:
                code.line(f"{vec_in[i]} jm_x{i}[{unroll}];")
            code.line("#pragma unroll")
            with code.block(f"for (int jm_u = 0; jm_u < {unroll}; ++jm_u)"):
                code.line(index)
                for i in ins:
                    code.line(f"jm_x{i}[jm_u] = *reinterpret_cast<const {vec_in[i]}*>({ARGS}.jm_in{i} + jm_i);")
            code.line("#pragma unroll")
            with code.block(f"for (int jm_u = 0; jm_u < {unroll}; ++jm_u)"):
                code.extend(vector_elements(binding, spec, {i: f"jm_x{i}[jm_u].jm_v[jm_k]" for i in ins}, v))
                code.line(index)
                for j, d in enumerate(spec.outputs):
                    code.line(f"*reinterpret_cast<jm_vec<{ctype(d)}, {v}>*>({ARGS}.jm_out{j} + jm_i) = jm_y{j};")
        with code.block(None):
            loop = f"for (jm_index_t jm_i = jm_start + (jm_index_t)jm_thread_x(); jm_i < jm_n; jm_i += {BLOCK})"
            with code.block(loop):
                code.extend(element_body(binding, spec, {i: f"{ARGS}.jm_in{i}[jm_i]" for i in ins},
                                         [f"{ARGS}.jm_out{j}[jm_i]" for j in range(nout)]))
        return code
