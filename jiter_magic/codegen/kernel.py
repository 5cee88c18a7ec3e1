"""Render the full kernel source of one specialization, for CUDA (NVRTC) or the host (C++).

Strings in, string out. Both targets share the `Args` struct, the per-element body
(load, convert in registers, call the functor, convert, store) and the `#line`
directives that make compiler messages point at the user's own lines. They differ
only in the loop around the body: a vectorized or a strided CUDA kernel, an OpenMP
loop on the host.
"""
from __future__ import annotations

import re

from ..bind import EXTRA, INPUT, Binding
from ..dtypes import DTYPES
from ..plan import BLOCK, CONTIGUOUS, ITEMS, ROWS, STRIDED, TILE, TILE_ROWS, UNROLL, KernelSpec, args_layout
from .prelude import prelude

USER_FILE = "jiterator"
KERNEL_NAME = "jm_kernel"

# Names the generated kernel declares. The user's functions live in the same translation unit, so
# each is prefixed with jm_ when rendered: a functor called `k`, `n` or `a` must not be shadowed.
_LOCAL_NAMES = re.compile(
    r"(?<![\w.:>\x01])(a|n|start|u|i|k|j|r|base|it|li|rem|idx|inner|rows|row|chunks|batch|batches|args|i0|i1|i0_base|"
    r"i1_base|s0|s1|out_offset|compute_t|index_t|Args|[oqvrxy]\d+|tile\d+)\b"
)


def _prefix_locals(text: str) -> str:
    """Prefix generated names; the user's entry function is marked as \\x01name and left alone."""
    return _LOCAL_NAMES.sub(r"jm_\1", text).replace("\x01", "")


def _ctype(name: str) -> str:
    return DTYPES[name].ctype


def convert(expr: str, source: str, target: str) -> str:
    """C++ expression converting `expr` of dtype `source` to dtype `target`, in registers."""
    if source == target:
        return expr
    if source in ("float16", "bfloat16"):
        expr, source = f"jm::to_float({expr})", "float32"
        if source == target:
            return expr
    src, dst = DTYPES[source], DTYPES[target]
    if src.kind == "c" and dst.kind != "c":
        expr, source = f"({expr}).real()", ("float32" if source == "complex64" else "float64")
    if target == "float16":
        return f"jm::to_half((float)({expr}))"
    if target == "bfloat16":
        return f"jm::to_bfloat16((float)({expr}))"
    if dst.kind == "c":
        return f"{dst.ctype}({expr})"
    return f"static_cast<{dst.ctype}>({expr})"


def _call(binding: Binding, spec: KernelSpec, values: list[str], outs: list[str]) -> list[str]:
    """Statements computing the outputs `outs` (compute-typed locals) from input `values`."""
    f = binding.functor
    args = []
    for role, index in binding.roles:
        if role == INPUT:
            args.append(values[index])
        elif role == EXTRA:
            args.append(f"a.extra{index}")
        else:
            args.append(outs[index])
    template = "<compute_t>" if len(f.template_params) == 1 and not f.template_params[0].startswith(("int ", "bool ")) else ""
    call = f"\x01{f.name}{template}({', '.join(args)})"
    if binding.returns_value:
        return [f"{outs[0]} = {call};"]
    return [f"{call};"]


def element_body(binding: Binding, spec: KernelSpec, loaded: dict[int, str], stores: list[str]) -> list[str]:
    """Body for one element: `loaded[i]` is input i's storage expression, `stores[j]` output j's lvalue."""
    lines, values = [], []
    for i, dtype in enumerate(spec.inputs):
        source = f"a.scalar{i}" if spec.scalar_inputs[i] else loaded[i]
        lines.append(f"const compute_t v{i} = {convert(source, dtype, spec.compute)};")
        values.append(f"v{i}")
    outs = [f"r{j}" for j in range(len(spec.outputs))]
    lines.append(f"compute_t {', '.join(outs)};")
    lines += _call(binding, spec, values, outs)
    for j, dtype in enumerate(spec.outputs):
        lines.append(f"{stores[j]} = {convert(outs[j], spec.compute, dtype)};")
    return lines


def _indent(lines: list[str], depth: int) -> str:
    """Indent every line, including each line of already-joined blocks."""
    pad = "  " * depth
    return "\n".join(pad + row for line in lines for row in line.split("\n"))


def _header(binding: Binding, spec: KernelSpec, target: str) -> tuple[str, int]:
    """Prelude, then the user's code under `#line 1`, then the Args struct; returns text and user line offset."""
    code = binding.functor.code
    head = prelude(target, spec.needs_complex or "complex" in code)
    head += f'\ntypedef {_ctype(spec.compute)} jm_compute_t;\n'
    user_start = head.count("\n") + 2
    text = head + f'#line 1 "{USER_FILE}"\n' + code + "\n"
    text += f'#line {text.count(chr(10)) + 2} "jiter_magic_kernel"\n'
    text += args_layout(spec).declaration().replace("struct Args", "struct jm_Args") + "\n"
    return text, user_start


def _offsets(spec: KernelSpec, linear: str, indent: int) -> list[str]:
    """Statements turning a linear index into each operand's element offset `o{k}`."""
    nops = spec.num_operands
    lines = [f"index_t rem = {linear};"]
    lines.append("index_t " + ", ".join(f"o{k} = 0" for k in range(nops)) + ";")
    for d in range(spec.ndim):
        if d == spec.ndim - 1:
            lines.append("const index_t idx = rem;")
        elif spec.index64:
            lines.append(f"const index_t q{d} = rem / (index_t)a.sizes[{d}];")
        else:
            lines.append(
                f"const index_t q{d} = (index_t)((__umulhi((unsigned)rem, a.div_mul[{d}]) + (unsigned)rem) >> a.div_shift[{d}]);"
            )
        if d != spec.ndim - 1:
            lines.append(f"{{ const index_t idx = rem - q{d} * (index_t)a.sizes[{d}];")
        pad = "  " if d != spec.ndim - 1 else ""
        for k in range(nops):
            lines.append(f"{pad}o{k} += idx * (index_t)a.strides{k}[{d}];")
        if d != spec.ndim - 1:
            lines.append(f"  rem = q{d}; }}")
    return lines


def _cuda_contiguous(binding: Binding, spec: KernelSpec) -> list[str]:
    v = spec.vec
    work = BLOCK * v * UNROLL
    ins = spec.array_inputs
    lines = [
        "const index_t n = (index_t)a.n;",
        f"const index_t start = (index_t)blockIdx.x * {work};",
        f"if (start + {work} <= n) {{",
    ]
    for i in ins:
        lines.append(f"  jm::vec<{_ctype(spec.inputs[i])}, {v}> x{i}[{UNROLL}];")
    lines.append(f"  #pragma unroll\n  for (int u = 0; u < {UNROLL}; ++u) {{")
    lines.append(f"    const index_t i = start + (u * {BLOCK} + (index_t)threadIdx.x) * {v};")
    for i in ins:
        lines.append(f"    x{i}[u] = *reinterpret_cast<const jm::vec<{_ctype(spec.inputs[i])}, {v}>*>(a.in{i} + i);")
    lines.append("  }")
    lines.append(f"  #pragma unroll\n  for (int u = 0; u < {UNROLL}; ++u) {{")
    for j, d in enumerate(spec.outputs):
        lines.append(f"    jm::vec<{_ctype(d)}, {v}> y{j};")
    lines.append(f"    #pragma unroll\n    for (int k = 0; k < {v}; ++k) {{")
    body = element_body(binding, spec, {i: f"x{i}[u].v[k]" for i in ins}, [f"y{j}.v[k]" for j in range(len(spec.outputs))])
    lines.append(_indent(body, 3))
    lines.append("    }")
    lines.append(f"    const index_t i = start + (u * {BLOCK} + (index_t)threadIdx.x) * {v};")
    for j, d in enumerate(spec.outputs):
        lines.append(f"    *reinterpret_cast<jm::vec<{_ctype(d)}, {v}>*>(a.out{j} + i) = y{j};")
    lines.append("  }")
    lines.append("} else {")
    lines.append(f"  for (index_t i = start + (index_t)threadIdx.x; i < n; i += {BLOCK}) {{")
    body = element_body(binding, spec, {i: f"a.in{i}[i]" for i in ins}, [f"a.out{j}[i]" for j in range(len(spec.outputs))])
    lines.append(_indent(body, 2))
    lines.append("  }")
    lines.append("}")
    return lines


def _cuda_strided(binding: Binding, spec: KernelSpec) -> list[str]:
    nout = len(spec.outputs)
    ins = spec.array_inputs
    lines = [
        "const index_t n = (index_t)a.n;",
        f"const index_t base = (index_t)blockIdx.x * {BLOCK * ITEMS} + (index_t)threadIdx.x;",
    ]
    for i in ins:
        lines.append(f"{_ctype(spec.inputs[i])} x{i}[{ITEMS}];")
    lines.append(f"index_t out_offset[{ITEMS}][{max(nout, 1)}];")
    lines.append(f"#pragma unroll\nfor (int it = 0; it < {ITEMS}; ++it) {{")
    lines.append(f"  const index_t li = base + it * {BLOCK};")
    lines.append("  if (li < n) {")
    lines.append(_indent(_offsets(spec, "li", 2), 2))
    for k in range(nout):
        lines.append(f"    out_offset[it][{k}] = o{k};")
    for pos, i in enumerate(ins):
        lines.append(f"    x{i}[it] = a.in{i}[o{nout + pos}];")
    lines.append("  }\n}")
    lines.append(f"#pragma unroll\nfor (int it = 0; it < {ITEMS}; ++it) {{")
    lines.append(f"  if (base + it * {BLOCK} < n) {{")
    body = element_body(binding, spec, {i: f"x{i}[it]" for i in ins}, [f"a.out{j}[out_offset[it][{j}]]" for j in range(nout)])
    lines.append(_indent(body, 2))
    lines.append("  }\n}")
    return lines


def _cuda_tiled(binding: Binding, spec: KernelSpec) -> list[str]:
    """Two innermost dims in 32x32 tiles; inputs walking dim 1 contiguously are staged through
    shared memory, so both their reads and the other operands' accesses are coalesced."""
    nout = len(spec.outputs)
    ins = spec.array_inputs
    rows = TILE // TILE_ROWS
    lines = []
    for i in spec.tiled_inputs:
        lines.append(f"__shared__ {_ctype(spec.inputs[i])} tile{i}[{TILE}][{TILE + 1}];")
    lines += [
        f"const index_t i0_base = (index_t)blockIdx.x * {TILE}, i1_base = (index_t)blockIdx.y * {TILE};",
        "const index_t s0 = (index_t)a.sizes[0], s1 = (index_t)a.sizes[1];",
        "index_t batches = 1;",
    ]
    for d in range(2, spec.ndim):
        lines.append(f"batches *= (index_t)a.sizes[{d}];")
    lines.append("for (index_t batch = blockIdx.z; batch < batches; batch += gridDim.z) {")
    if spec.ndim > 2:
        lines.append("  index_t rem = batch;")
    lines.append("  " + "index_t " + ", ".join(f"o{k} = 0" for k in range(spec.num_operands)) + ";")
    for d in range(2, spec.ndim):
        lines.append(f"  {{ const index_t idx = rem % (index_t)a.sizes[{d}]; rem /= (index_t)a.sizes[{d}];")
        for k in range(spec.num_operands):
            lines.append(f"    o{k} += idx * (index_t)a.strides{k}[{d}];")
        lines.append("  }")
    if spec.tiled_inputs:
        lines.append("  #pragma unroll")
        lines.append(f"  for (int r = 0; r < {rows}; ++r) {{")
        lines.append(f"    const index_t i0 = i0_base + threadIdx.y + r * {TILE_ROWS}, i1 = i1_base + threadIdx.x;")
        lines.append("    if (i0 < s0 && i1 < s1) {")
        for i in spec.tiled_inputs:
            k = nout + ins.index(i)
            lines.append(f"      tile{i}[threadIdx.y + r * {TILE_ROWS}][threadIdx.x] = "
                         f"a.in{i}[o{k} + i0 * (index_t)a.strides{k}[0] + i1 * (index_t)a.strides{k}[1]];")
        lines.append("    }\n  }")
        lines.append("  __syncthreads();")
    lines.append("  #pragma unroll")
    lines.append(f"  for (int r = 0; r < {rows}; ++r) {{")
    lines.append(f"    const index_t i0 = i0_base + threadIdx.x, i1 = i1_base + threadIdx.y + r * {TILE_ROWS};")
    lines.append("    if (i0 < s0 && i1 < s1) {")
    loaded = {}
    for pos, i in enumerate(ins):
        k = nout + pos
        if i in spec.tiled_inputs:
            loaded[i] = f"tile{i}[threadIdx.x][threadIdx.y + r * {TILE_ROWS}]"
        else:
            loaded[i] = f"a.in{i}[o{k} + i0 * (index_t)a.strides{k}[0] + i1 * (index_t)a.strides{k}[1]]"
    stores = [f"a.out{j}[o{j} + i0 * (index_t)a.strides{j}[0] + i1 * (index_t)a.strides{j}[1]]" for j in range(nout)]
    lines.append(_indent(element_body(binding, spec, loaded, stores), 3))
    lines.append("    }\n  }")
    if spec.tiled_inputs:
        lines.append("  __syncthreads();")
    lines.append("}")
    return lines


def _cuda_rows(binding: Binding, spec: KernelSpec) -> list[str]:
    """Rows that every operand walks densely (or not at all: a broadcast along the row): one block
    per chunk of a row, 16-byte vectors where the row is aligned, one index division per block."""
    v, nout, ins = spec.vec, len(spec.outputs), spec.array_inputs
    chunk = BLOCK * v
    lines = [
        "const index_t inner = (index_t)a.sizes[0];",
        f"const index_t chunks = (inner + {chunk - 1}) / {chunk};",
        "const index_t row = (index_t)blockIdx.x / chunks;",
        f"const index_t i0 = ((index_t)blockIdx.x - row * chunks) * {chunk} + (index_t)threadIdx.x * {v};",
        "index_t rem = row;",
        "index_t " + ", ".join(f"o{k} = 0" for k in range(spec.num_operands)) + ";",
    ]
    for d in range(1, spec.ndim):
        lines.append(f"{{ const index_t idx = rem % (index_t)a.sizes[{d}]; rem /= (index_t)a.sizes[{d}];")
        for k in range(spec.num_operands):
            lines.append(f"  o{k} += idx * (index_t)a.strides{k}[{d}];")
        lines.append("}")
    dense = [(f"a.out{j}", spec.outputs[j], f"o{j}") for j in range(nout)]
    dense += [(f"a.in{i}", spec.inputs[i], f"o{nout + pos}") for pos, i in enumerate(ins) if i not in spec.row_broadcast]
    aligned = " && ".join(
        f"(((unsigned long long)({ptr} + {off})) % {v * DTYPES[d].itemsize} == 0)" for ptr, d, off in dense
    ) or "true"
    lines.append(f"if (i0 + {v} <= inner && {aligned}) {{")
    loaded, stores = {}, []
    for pos, i in enumerate(ins):
        k = nout + pos
        if i in spec.row_broadcast:
            lines.append(f"  const {_ctype(spec.inputs[i])} x{i} = a.in{i}[o{k}];")
            loaded[i] = f"x{i}"
        else:
            vec_t = f"jm::vec<{_ctype(spec.inputs[i])}, {v}>"
            lines.append(f"  const {vec_t} x{i} = *reinterpret_cast<const {vec_t}*>(a.in{i} + o{k} + i0);")
            loaded[i] = f"x{i}.v[k]"
    for j, d in enumerate(spec.outputs):
        lines.append(f"  jm::vec<{_ctype(d)}, {v}> y{j};")
        stores.append(f"y{j}.v[k]")
    lines.append(f"  #pragma unroll\n  for (int k = 0; k < {v}; ++k) {{")
    lines.append(_indent(element_body(binding, spec, loaded, stores), 2))
    lines.append("  }")
    for j, d in enumerate(spec.outputs):
        lines.append(f"  *reinterpret_cast<jm::vec<{_ctype(d)}, {v}>*>(a.out{j} + o{j} + i0) = y{j};")
    lines.append("} else {")
    lines.append(f"  for (index_t j = i0; j < inner && j < i0 + {v}; ++j) {{")
    loaded = {i: (f"a.in{i}[o{nout + pos}]" if i in spec.row_broadcast else f"a.in{i}[o{nout + pos} + j]")
              for pos, i in enumerate(ins)}
    body = element_body(binding, spec, loaded, [f"a.out{j}[o{j} + j]" for j in range(nout)])
    lines.append(_indent(body, 2))
    lines.append("  }")
    lines.append("}")
    return lines


def render_cuda(binding: Binding, spec: KernelSpec) -> tuple[str, int]:
    """CUDA source of one specialization, and the line where the user's code starts."""
    text, user_start = _header(binding, spec, "cuda")
    if spec.path == CONTIGUOUS:
        body, threads = _cuda_contiguous(binding, spec), BLOCK
    elif spec.path == STRIDED:
        body, threads = _cuda_strided(binding, spec), BLOCK
    elif spec.path == ROWS:
        body, threads = _cuda_rows(binding, spec), BLOCK
    else:
        body, threads = _cuda_tiled(binding, spec), TILE * TILE_ROWS
    index_t = "long long" if spec.index64 else "int"
    text += _prefix_locals(
        f'extern "C" __global__ void __launch_bounds__({threads}) {KERNEL_NAME}(const Args a) {{\n'
        f"  typedef {index_t} index_t;\n{_indent(body, 1)}\n}}\n"
    )
    return text, user_start


def render_host(binding: Binding, spec: KernelSpec) -> tuple[str, int]:
    """Host C++ source of one specialization: an OpenMP loop over the same body."""
    text, user_start = _header(binding, spec, "host")
    nout = len(spec.outputs)
    ins = spec.array_inputs
    if spec.path == CONTIGUOUS:
        body = element_body(binding, spec, {i: f"a.in{i}[i]" for i in ins}, [f"a.out{j}[i]" for j in range(nout)])
        loop = [
            "#pragma omp parallel for schedule(static) if (n > 32768)",
            "for (index_t i = 0; i < n; ++i) {",
            _indent(body, 1),
            "}",
        ]
    else:
        body = element_body(binding, spec, {i: f"a.in{i}[o{nout + p}]" for p, i in enumerate(ins)},
                            [f"a.out{j}[o{j}]" for j in range(nout)])
        inner = [
            "const index_t inner = (index_t)a.sizes[0];",
            "const index_t rows = n / inner;",
            "#pragma omp parallel for schedule(static) if (n > 32768)",
            "for (index_t row = 0; row < rows; ++row) {",
            _indent(_offsets(spec, "row * inner", 1), 1),
            "  for (index_t j = 0; j < inner; ++j) {",
            _indent(body, 2),
            "\n".join(f"    o{k} += (index_t)a.strides{k}[0];" for k in range(spec.num_operands)),
            "  }",
            "}",
        ]
        loop = inner
    text += _prefix_locals(
        f'extern "C" void {KERNEL_NAME}(const Args* args) {{\n'
        "  const Args& a = *args;\n"
        "  typedef int64_t index_t;\n"
        "  const index_t n = (index_t)a.n;\n"
        f"{_indent(loop, 1)}\n}}\n"
    )
    return text, user_start
