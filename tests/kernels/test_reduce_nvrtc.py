"""Every generated CUDA reduction kernel compiles with NVRTC for sm_80 and sm_90, with no GPU.

Each case renders a ReductionSpec by hand (each kernel shape, every dtype, vector widths, loop
dims, maps with extras or two inputs, a finalize) and compiles it (compile only). The sources'
`static_assert` on `sizeof(jm_Args)` checks the struct against the packer in each compile.
"""
from __future__ import annotations

import itertools

import pytest

from jiter_magic import create_reduction_fn
from jiter_magic.compilers.nvrtc import NvrtcCompiler
from jiter_magic.planning.reduce_spec import BLOCK_ROWS, COLUMNS, CUDA_PATHS, DENSE_RUNS, GRID, WARP_ROWS

try:
    from cupy.cuda import nvrtc as _cupy_nvrtc  # noqa: F401 - NVRTC through CuPy; works with no GPU
except ImportError:  # pragma: no cover - depends on the installation
    pytest.skip("CuPy's NVRTC binding is not installed", allow_module_level=True)

ARCHES = ("sm_80", "sm_90")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool", "uint8", "int8", "int16")
SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MAX = "template <typename T> T larger(T a, T b) { return (a != a || a > b) ? a : b; }\n"
ROOT = "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n"
DOT = "template <typename T> T scaled(T x, T y, T alpha) { return alpha * x * y; }\n"
PLAIN = "float twice(float x) { return 2.0f * x; }\nfloat plus(float a, float b) { return a + b; }\n"

FUNCTIONS = {
    "sumsq": create_reduction_fn(SQ + ADD, 0, combine="add"),
    "amax": create_reduction_fn(MAX, float("-inf"), combine="larger"),
    "norm": create_reduction_fn(SQ + ADD + ROOT, 0, combine="add", finalize="root"),
    "dot": create_reduction_fn(DOT + ADD, 0, combine="add", alpha=1.0),
    "plain": create_reduction_fn(PLAIN, 0, combine="plus"),
}
_COMPILERS: dict[str, NvrtcCompiler] = {}


def compile_cuda(fn, *dtypes, arch, **spec):
    if arch not in _COMPILERS:
        _COMPILERS[arch] = NvrtcCompiler(arch)
    source = fn.source(*dtypes, **spec)
    result = _COMPILERS[arch].compile(source, fn.name)
    assert result.binary[:4] == b"\x7fELF"
    return source


@pytest.mark.parametrize(("path", "dtype", "arch"), list(itertools.product(CUDA_PATHS, DTYPES, ARCHES)))
def test_every_path_and_dtype_compiles(path, dtype, arch):
    source = compile_cuda(FUNCTIONS["sumsq"], dtype, path=path, arch=arch)
    assert "atomic" not in source  # deterministic: fixed orders, no atomics
    assert "extern \"C\" __global__ void __launch_bounds__(256) jm_kernel(const jm_Args jm_a)" in source


@pytest.mark.parametrize(("name", "path", "arch"), list(itertools.product(FUNCTIONS, CUDA_PATHS, ARCHES)))
def test_maps_extras_finalize_and_plain_functions_compile(name, path, arch):
    fn = FUNCTIONS[name]
    dtypes = ("float32",) * fn.num_inputs
    compile_cuda(fn, *dtypes, path=path, arch=arch)
    if name == "amax":
        compile_cuda(fn, "int32", path=path, arch=arch)  # -inf: the int64 accumulator's lowest


@pytest.mark.parametrize(("path", "dtype", "vec", "arch"), [
    (p, d, v, a) for p in (WARP_ROWS, BLOCK_ROWS, DENSE_RUNS, GRID) for d, v in (("float32", 4), ("float16", 8), ("bfloat16", 8),
                                                                ("float64", 2), ("uint8", 8), ("int64", 2))
    for a in ARCHES])
def test_vector_loads_compile(path, dtype, vec, arch):
    source = compile_cuda(FUNCTIONS["sumsq"], dtype, path=path, vec=vec, arch=arch)
    assert "jm_vec<" in source and f", {vec}>" in source


@pytest.mark.parametrize(("dtype", "width"), [("float16", 2), ("bfloat16", 2), ("int16", 2), ("uint8", 4),
                                              ("int8", 4), ("bool", 4)])
@pytest.mark.parametrize("name", ["sumsq", "amax", "dot"])
@pytest.mark.parametrize("arch", ARCHES)
def test_vector_columns_compile(dtype, width, name, arch):
    """The columns path with `width` neighbouring columns a thread (one 4-byte access), with maps of
    one and two inputs, kept and reduced loop dims of several dims."""
    dtypes = (dtype, dtype) if name == "dot" else (dtype,)
    source = compile_cuda(FUNCTIONS[name], *dtypes, path=COLUMNS, vec=width, kept_ndim=2, reduced_ndim=2, arch=arch)
    assert "jm_vec<" in source and f", {width}> jm_v0" in source and f"jm_acc[{width}]" in source


@pytest.mark.parametrize(("path", "kept", "reduced", "arch"),
                         [(p, k, r, a) for p in (COLUMNS, GRID) for k, r in ((3, 1), (1, 3), (2, 2))
                          for a in ARCHES] + [(p, 3, 1, a) for p in (WARP_ROWS, BLOCK_ROWS) for a in ARCHES]
                         + [(DENSE_RUNS, k, r, a) for k, r in ((1, 2), (3, 2), (2, 3)) for a in ARCHES])
def test_loop_dims_compile(path, kept, reduced, arch):
    compile_cuda(FUNCTIONS["dot"], "float32", "float16", path=path, kept_ndim=kept, reduced_ndim=reduced, arch=arch)


def test_a_compile_error_points_at_the_users_line():
    from jiter_magic.errors import CompileError

    fn = create_reduction_fn(ADD + "template <typename T> T bad(T x) { return x + undefined_name; }\n", 0,
                             combine="add")
    with pytest.raises(CompileError, match="line 2"):
        compile_cuda(fn, "float32", path=GRID, arch="sm_90")


KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")


@pytest.mark.parametrize(("path", "dtype", "arch"),
                         list(itertools.product(CUDA_PATHS, ("float32", "float64", "float16", "int8", "int64"), ARCHES)))
def test_reductions_with_indices_compile(path, dtype, arch):
    from jiter_magic import create_multi_output_reduction_fn

    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    source = compile_cuda(argmax, dtype, path=path, arch=arch)
    assert "jm_shuffle_xor" in source or path == COLUMNS  # a warp's pairs are shuffled member by member
    assert "int64_t* jm_out_index;" in source and "atomic" not in source
    if path in (WARP_ROWS, BLOCK_ROWS, DENSE_RUNS, GRID):
        compile_cuda(argmax, dtype, path=path, vec=2, arch=arch)  # the index of a vector's element
    if path != GRID:  # (the grid path batches its dense rows only, read with vec > 1)
        assert "jm_pick_next(" in source  # a pair's loads in batches: more of them in flight



@pytest.mark.parametrize(("constant", "value"), [("INDEXED_LOADS", 0), ("INDEXED_LOADS", 2), ("INDEXED_LOADS", 8),
                                                 ("INDEXED_MIN_BLOCKS", 8)])
def test_the_swept_variants_of_reductions_with_indices_compile(constant, value, monkeypatch):
    """bench/sweep_reduce.py's variants of the batched loads (reduce_cuda_loads.py; 0: the unrolled
    loop of before) and of the launch bounds, on each path that folds elements of their own
    positions, with vector loads or several columns a thread (INDEXED_COLUMN_BYTES gives 4 and 8)."""
    from jiter_magic import create_multi_output_reduction_fn
    from jiter_magic.kernels import reduce_cuda, reduce_cuda_loads

    module = reduce_cuda_loads if constant == "INDEXED_LOADS" else reduce_cuda
    monkeypatch.setattr(module, constant, value)
    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    cases = [(WARP_ROWS, "float32", 4), (BLOCK_ROWS, "bfloat16", 8), (DENSE_RUNS, "float16", 8), (GRID, "float32", 4),
             (COLUMNS, "bfloat16", 2), (COLUMNS, "bfloat16", 4), (COLUMNS, "int8", 8), (COLUMNS, "float32", 2)]
    for path, dtype, vec in cases:
        source = compile_cuda(argmax, dtype, path=path, vec=vec, arch="sm_90")
        assert ("jm_pick_next(" in source) == (constant != "INDEXED_LOADS" or value > 0)
        assert ("__launch_bounds__(256, 8)" in source) == (constant == "INDEXED_MIN_BLOCKS")


@pytest.mark.parametrize(("path", "vec"), [(WARP_ROWS, 2), (BLOCK_ROWS, 1), (COLUMNS, 2), (COLUMNS, 1),
                                           (DENSE_RUNS, 2), (GRID, 2), (GRID, 1)])
@pytest.mark.parametrize("arch", ARCHES)
def test_32_bit_loop_indices_compile(path, vec, arch):
    """Argmax's loops with 32-bit indices (`index32`, planned where fewer than 2^31 elements are
    reduced): float, half, 8-bit and 64-bit integer elements (an int64 accumulator), 2 a load or
    column where given; the grid's strided shares (vec 1) keep 64-bit indices."""
    from dataclasses import replace

    from jiter_magic import create_multi_output_reduction_fn
    from jiter_magic.kernels.reduce_family import REDUCTION

    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    for dtype in ("float32", "float64", "float16", "int8", "int64"):
        spec = replace(argmax.spec(dtype, path=path, vec=vec, reduced_ndim=2 if path == DENSE_RUNS else 1),
                       index32=True)
        source = REDUCTION.render(argmax.binding, spec, "cuda")
        if arch not in _COMPILERS:
            _COMPILERS[arch] = NvrtcCompiler(arch)
        assert _COMPILERS[arch].compile(source, argmax.name).binary[:4] == b"\x7fELF"
        assert ("jm_pick_narrow(" in source) == (path != GRID or vec > 1)


@pytest.mark.parametrize(("path", "accumulate", "output", "arch"),
                         [(p, acc, out, a) for p in CUDA_PATHS
                          for acc, out in (("float32", "float32"), ("float32", "float16"), ("float64", "float64"),
                                           ("int64", "int8"))
                          for a in ARCHES])
def test_folds_of_given_indices_compile(path, accumulate, output, arch):
    # A Dask tree's fold (integrations/reduce_parts.py): each pair from two inputs, the value and its index.
    from jiter_magic import create_multi_output_reduction_fn
    from jiter_magic.integrations.reduce_parts import tree_parts
    from jiter_magic.kernels.reduce_family import REDUCTION
    from jiter_magic.planning.reduce_spec import ReductionSpec, identity_literal

    binding = tree_parts(create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")).fold.calls.binding
    # Vector loads need one itemsize: 8-byte values with their int64 indices, 2 a load.
    vectors = (1, 2) if path in (WARP_ROWS, BLOCK_ROWS, DENSE_RUNS, GRID) and accumulate != "float32" else (1,)
    for vec in vectors:
        spec = ReductionSpec((accumulate, "int64"), output, accumulate, (), identity_literal(0, accumulate), path=path,
                             kept_ndim=1, reduced_ndim=1, vec=vec, indexed=True, indices_given=True)
        source = REDUCTION.render(binding, spec, "cuda")
        if arch not in _COMPILERS:
            _COMPILERS[arch] = NvrtcCompiler(arch)
        assert _COMPILERS[arch].compile(source, binding.name).binary[:4] == b"\x7fELF"
        assert "const int64_t* jm_in1;" in source and "atomic" not in source
        # Rows (and the runs of dense_runs) read a vector at a time, of one element or more.
        dense = path in (WARP_ROWS, BLOCK_ROWS, DENSE_RUNS) or vec > 1
        index = "(int64_t)(jm_v1.jm_v[jm_e])" if dense else "(int64_t)(jm_a.jm_in1["
        assert index in source  # the index read from the second input, not the element's position
