"""Golden sources: the generated kernel of one spec a path, pinned in checked-in files.

Any change to code generation shows here as a diff of `tests/golden/`. After an intended
change, regenerate them with `JITER_MAGIC_REGEN_GOLDEN=1 pytest tests/kernels/test_golden_sources.py`
and review the diff. A second check walks every generated kernel and requires each name it
declares or uses (outside the user's code, member accesses and C++/CUDA built-ins) to carry
the reserved `jm_` prefix, so no generated name can shadow or be broken by a user's.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from jiter_magic.codegen.names import KERNEL_FILE
from jiter_magic.frontend.bind import bind
from jiter_magic.frontend.parse import parse_functor
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.kernels.host import BlockedParams
from jiter_magic.kernels.render import render
from jiter_magic.kernels.rows import RowsParams
from jiter_magic.kernels.tiled import TiledParams
from jiter_magic.planning.spec import KernelSpec, PathParams

GOLDEN = Path(__file__).parents[1] / "golden"
REGENERATE = os.environ.get("JITER_MAGIC_REGEN_GOLDEN") == "1"

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
MULTI = "template <typename T> void sum_diff(T x, T y, T& sum, T& diff) { sum = x + y; diff = x - y; }"

# name: (code, kwargs, num_outputs, target, spec)
CASES = {
    "cuda_contiguous": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float32", "float32"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="contiguous", ndim=1, params=ContiguousParams(vec=4))),
    "cuda_rows": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float32", "float32"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="rows", ndim=2, params=RowsParams(vec=4, row_broadcast=(1,)))),
    "cuda_tiled": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float32", "float16"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="tiled", ndim=3, params=TiledParams(runs=1, tiled_inputs=(0,)))),
    "cuda_tiled_packed": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float16", "float16"), scalar_inputs=(False, False), outputs=("float16",), compute="float32",
        extras=("float64",), path="tiled", ndim=3, params=TiledParams(runs=2, tiled_inputs=(1,), pack=2))),
    "cuda_tiled_packed_half": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("int8", "int8"), scalar_inputs=(False, False), outputs=("int8",), compute="int8",
        extras=("int64",), path="tiled", ndim=3, params=TiledParams(runs=2, tiled_inputs=(1,), pack=4))),
    "cuda_tiled_vector": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float16", "float32"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="tiled", ndim=3, params=TiledParams(tiled_inputs=(1,), vec=4))),
    "cuda_strided_int32": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float16", "float32"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="strided", ndim=3, params=PathParams())),
    "cuda_strided_int64": (AXPY, ["alpha"], None, "cuda", KernelSpec(
        inputs=("float64", "float64"), scalar_inputs=(False, True), outputs=("float64",), compute="float64",
        extras=("complex128",), path="strided", ndim=2, index64=True, params=PathParams())),
    "cuda_multi_output": (MULTI, [], 2, "cuda", KernelSpec(
        inputs=("int32", "int32"), scalar_inputs=(False, False), outputs=("int32", "int64"), compute="int32",
        extras=(), path="contiguous", ndim=1, params=ContiguousParams(vec=4))),
    "host_contiguous": (AXPY, ["alpha"], None, "cpu", KernelSpec(
        inputs=("bfloat16", "float32"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="contiguous", ndim=1, index64=True, params=ContiguousParams(vec=1))),
    "host_strided": (MULTI, [], 2, "cpu", KernelSpec(
        inputs=("float32", "float32"), scalar_inputs=(True, False), outputs=("float32", "float32"),
        compute="float32", extras=(), path="strided", ndim=2, index64=True, params=PathParams())),
    "host_rows": (AXPY, ["alpha"], None, "cpu", KernelSpec(
        inputs=("float32", "int8"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="rows", ndim=2, index64=True, params=RowsParams(vec=1, row_broadcast=(1,)))),
    "host_blocked": (AXPY, ["alpha"], None, "cpu", KernelSpec(
        inputs=("float32", "float16"), scalar_inputs=(False, False), outputs=("float32",), compute="float32",
        extras=("float64",), path="blocked", ndim=3, index64=True, params=BlockedParams(tiled_inputs=(1,)))),
}


def _render(name: str) -> str:
    code, kwargs, num_outputs, target, spec = CASES[name]
    return render(bind(parse_functor(code), kwargs, num_outputs), spec, target)


def _suffix(name: str) -> str:
    return ".cu" if CASES[name][3] == "cuda" else ".cpp"


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_source_matches_golden_file(name):
    source = _render(name)
    path = GOLDEN / (name + _suffix(name))
    if REGENERATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(source)
    assert path.exists(), f"no golden file {path}; run with JITER_MAGIC_REGEN_GOLDEN=1 to create it"
    assert source == path.read_text(), (
        f"the generated source of {name} changed; if intended, regenerate with JITER_MAGIC_REGEN_GOLDEN=1 "
        "and review the diff of tests/golden/"
    )


# Words a generated kernel may use without the prefix: C++ keywords and types, the fixed-width
# integer names, CUDA built-ins and pragma words.
ALLOWED = frozenset("""
    extern C void const typedef int long unsigned struct alignas if else for return static_cast reinterpret_cast
    static_assert sizeof __builtin_offsetof try catch volatile asm std exception atomic write sigjmp_buf sigsetjmp
    bool float double char short __global__ __launch_bounds__ __shared__ __syncthreads __umulhi
    pragma unroll omp parallel schedule static line
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
""".split())
_IDENTIFIER = re.compile(r"(?<![\w.])(?:::)?([A-Za-z_]\w*)")


def _unprefixed_names(kernel: str, functor_name: str) -> set[str]:
    """Identifiers in the generated part that are neither prefixed, allowed nor member accesses."""
    text = re.sub(r'"[^"]*"', '""', kernel)  # string literals ('extern "C"', #line file names)
    text = re.sub(r"(?:\.|->)\s*\w+", "", text)  # member accesses are checked where the members are declared
    names = set(_IDENTIFIER.findall(text))
    return {n for n in names if not n.startswith("jm_") and n not in ALLOWED and n != functor_name}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_generated_name_carries_the_prefix(name):
    source = _render(name)
    kernel = source.split(f'"{KERNEL_FILE}"\n', 1)[1]  # everything after the user's code
    functor = parse_functor(CASES[name][0]).name
    assert _unprefixed_names(kernel, functor) == set()
    assert "jm::" not in kernel  # the prelude's user-facing namespace: a macro named like its members would reach it
    assert "struct jm_Args {" in kernel
    members = re.findall(r"alignas\(\d+\) [^;]*?(\w+)(?:\[\d+\])?;", kernel.split("};")[0])
    assert "jm_n" in members and all(m.startswith("jm_") for m in members), members


def test_the_name_check_catches_an_unprefixed_local():
    assert _unprefixed_names("const jm_index_t n = jm_a.jm_n; jm_o0 += idx;", "f") == {"n", "idx"}
