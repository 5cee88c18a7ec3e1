"""render_source + NvrtcCompiler: every generated kernel compiles to a cubin, with no GPU.

Each case builds a KernelSpec by hand, renders the CUDA source and compiles it with NVRTC for
sm_80 and sm_90 (compile only). NVRTC takes ~50 ms a kernel, so the cross product is cut
down: every dtype x both paths x both index widths x both arches, plus targeted mixed cases.
"""
from __future__ import annotations

import os
import re
import struct

import pytest

import jiter_magic  # noqa: E402
import jiter_magic.compilers.nvrtc as nvrtc_module  # noqa: E402
from jiter_magic.codegen.names import KERNEL_NAME, USER_FILE
from jiter_magic.compilers.base import CompileResult
from jiter_magic.compilers.nvrtc import NvrtcCompiler  # noqa: E402
from jiter_magic.errors import CompileError, JiterError
from jiter_magic.frontend.bind import Binding, bind
from jiter_magic.frontend.parse import parse_functor
from jiter_magic.kernels import CUDA_PATHS, describe, path_of
from jiter_magic.kernels.args import args_layout
from jiter_magic.kernels.base import BLOCK
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.kernels.packed_tiles import PACKED_ROWS, packed_tile_elements, packed_tile_index
from jiter_magic.kernels.render import render_source
from jiter_magic.kernels.specialize import resolve_call
from jiter_magic.kernels.tiled import PREFETCH, TILE, WARP, TiledParams, thread_rows, tile_edges, tile_padding
from jiter_magic.kernels.vector_tiles import EDGE as VECTOR_EDGE
from jiter_magic.kernels.vector_tiles import ROWS as VECTOR_ROWS
from jiter_magic.kernels.vector_tiles import VEC
from jiter_magic.planning.dtypes import DTYPES, TORCH_DTYPES, UNSIGNED_WIDE, compute_dtype, promote_types
from jiter_magic.planning.layout import ArrayDesc, Layout
from jiter_magic.planning.spec import CONTIGUOUS, ROWS, STRIDED, TILED, KernelSpec, PathParams

try:
    from cupy.cuda import nvrtc as _cupy_nvrtc  # noqa: F401 - NVRTC through CuPy; works with no GPU
except ImportError:  # pragma: no cover - depends on the installation
    pytest.skip("CuPy's NVRTC binding is not installed", allow_module_level=True)

ARCHES = ("sm_80", "sm_90")
ALL_DTYPES = TORCH_DTYPES + UNSIGNED_WIDE
AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
MULTI = "template <typename T> void f(T x, T y, T& a, T& b) { a = x + y; b = x * y; }"
MULTI3 = "template <typename T> void f(T x, T y, T z, T& a, T& b) { a = x + y * z; b = x * y; }"

_BINDINGS: dict[tuple, Binding] = {}
_COMPILERS: dict[str, object] = {}


def binding(code: str, kwargs=(), num_outputs=None) -> Binding:
    key = (code, tuple(kwargs), num_outputs)
    if key not in _BINDINGS:
        _BINDINGS[key] = bind(parse_functor(code), list(kwargs), num_outputs)
    return _BINDINGS[key]


def compiler(arch: str):
    if arch not in _COMPILERS:
        _COMPILERS[arch] = NvrtcCompiler(arch)
    return _COMPILERS[arch]


def cubin_sm(binary: bytes) -> int:
    """The SM version recorded in a cubin's ELF e_flags (bits 8-15 in the current ABI, 0-7 in the old one)."""
    flags = struct.unpack_from("<I", binary, 48)[0]
    return (flags >> 8) & 0xFF if binary[7] >= 0x41 else flags & 0xFF


def check_source(b: Binding, spec: KernelSpec, source: str, user_start: int) -> None:
    lines = source.splitlines()
    assert lines[user_start - 2] == f'#line 1 "{USER_FILE}"'
    assert "\n".join(lines[user_start - 1:user_start - 1 + b.functor.code.count("\n") + 1]) == b.functor.code
    assert f"typedef {DTYPES[spec.compute].ctype} jm_compute_t;" in source
    threads = WARP * thread_rows(spec) if spec.path == TILED else BLOCK
    assert f"void __launch_bounds__({threads}) {KERNEL_NAME}(const jm_Args jm_a)" in source
    assert ("typedef long long jm_index_t;" if spec.index64 else "typedef int jm_index_t;") in source
    for name in ("jm_n",) + tuple(f"jm_extra{k}" for k in range(len(spec.extras))):
        assert f" {name};" in source
    if spec.path == CONTIGUOUS and spec.array_inputs:
        i = spec.array_inputs[0]
        assert f"jm_vec<{DTYPES[spec.inputs[i]].ctype}, {spec.params.vec}>" in source
    if spec.path == STRIDED and not spec.index64 and spec.ndim > 1:
        assert "__umulhi" in source
    assert ("struct alignas(2 * sizeof(T)) complex" in source) == (spec.needs_complex or "complex" in b.functor.code)


def compile_spec(b: Binding, spec: KernelSpec, arch: str) -> tuple[str, CompileResult]:
    source, user_start = render_source(b, spec, "cuda")
    check_source(b, spec, source, user_start)
    result = compiler(arch).compile(source, "jm_test")
    assert isinstance(result, CompileResult)
    assert isinstance(result.binary, bytes) and len(result.binary) > 1000
    assert result.binary[:4] == b"\x7fELF"
    assert struct.unpack_from("<H", result.binary, 18)[0] == 190  # EM_CUDA
    assert cubin_sm(result.binary) == int(arch[3:])
    assert KERNEL_NAME.encode() in result.binary
    return source, result


def axpy_spec(dtype: str, path: str, ndim: int = 1, vec: int = 1, index64: bool = False) -> KernelSpec:
    """An axpy spec on the contiguous path (vectors of `vec`) or the strided one."""
    params = ContiguousParams(vec=vec) if path == CONTIGUOUS else PathParams()
    return KernelSpec((dtype, dtype), (False, False), (dtype,), compute_dtype(dtype), ("float64",),
                      path=path, ndim=ndim, index64=index64, params=params)


def sensible_vecs(dtype: str) -> list[int]:
    return [v for v in (2, 4, 8) if v * DTYPES[dtype].itemsize <= 16] or [1]


# --------------------------------------------------------------------------- every dtype, both paths, both arches


def _matrix():
    cases = []
    for dtype in ALL_DTYPES:
        vecs = sensible_vecs(dtype)
        variants = [(CONTIGUOUS, 1, max(vecs), False), (CONTIGUOUS, 1, 1, True), (STRIDED, 1, 1, False),
                    (STRIDED, 2, 1, True), (STRIDED, 3, 1, False)]
        if min(vecs) != max(vecs):
            variants.append((CONTIGUOUS, 1, min(vecs), False))
        for arch in ARCHES:
            for path, ndim, vec, index64 in variants:
                label = f"{dtype}-{path}-{'vec' + str(vec) if path == CONTIGUOUS else str(ndim) + 'd'}-" \
                        f"{'i64' if index64 else 'i32'}-{arch}"
                cases.append(pytest.param(dtype, path, ndim, vec, index64, arch, id=label))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("dtype, path, ndim, vec, index64, arch", _matrix())
def test_axpy_every_dtype(dtype, path, ndim, vec, index64, arch):
    spec = axpy_spec(dtype, path, ndim, vec, index64)
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, arch)
    assert "jm_r0 = my_kernel<jm_compute_t>(jm_v0, jm_v1, jm_a.jm_extra0);" in source
    if dtype in ("float16", "bfloat16"):
        assert "jm_to_float(" in source and f"jm_to_{'half' if dtype == 'float16' else 'bfloat16'}(" in source


@pytest.mark.parametrize("vec", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "complex64"])
def test_every_vector_width(dtype, vec):
    # torch uses vec 4 whatever the dtype; wide vectors of wide dtypes must compile too
    compile_spec(binding(AXPY, ["alpha"]), axpy_spec(dtype, CONTIGUOUS, vec=vec), "sm_90")


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("index64", [False, True], ids=["i32", "i64"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "complex128"])
def test_strided_one_dim(dtype, index64, arch):
    # e.g. x[::2]: one coalesced loop that is not unit-stride; sizes/strides are one-element arrays
    source, _ = compile_spec(binding(AXPY, ["alpha"]), axpy_spec(dtype, STRIDED, 1, 1, index64), arch)
    assert "int64_t jm_sizes[1];" in source and "int64_t jm_strides2[1];" in source
    assert "jm_a.jm_strides0[0]" in source


@pytest.mark.parametrize("ndim", [4, 6, 10])
def test_strided_many_dims(ndim):
    source, _ = compile_spec(binding(AXPY, ["alpha"]), axpy_spec("float32", STRIDED, ndim), "sm_80")
    assert f"jm_a.jm_div_mul[{ndim - 2}]" in source and f"jm_a.jm_div_mul[{ndim - 1}]" not in source


TILED_CASES = [
    ("float32", 2, (0,), False), ("float32", 2, (0, 1), True), ("float16", 3, (1,), False),
    ("bfloat16", 2, (0,), True), ("int8", 4, (0,), False), ("float64", 3, (0, 1), False),
    ("complex64", 2, (1,), False), ("complex128", 2, (0,), True), ("bool", 2, (0,), False), ("uint64", 3, (1,), True),
]


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dtype, ndim, tiled, index64", TILED_CASES,
                         ids=[f"{d}-{n}d-tiles{''.join(map(str, t))}-{'i64' if i else 'i32'}" for d, n, t, i in TILED_CASES])
def test_tiled_path(dtype, ndim, tiled, index64, arch):
    spec = KernelSpec((dtype, dtype), (False, False), (dtype,), compute_dtype(dtype), ("float64",),
                      path=TILED, ndim=ndim, index64=index64, params=TiledParams(tiled_inputs=tiled))
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, arch)
    edge0, edge1 = tile_edges(spec)
    assert (edge0, edge1) == (32, 32)
    for i in tiled:
        assert f"__shared__ {DTYPES[dtype].ctype} jm_tile{i}[{edge0}][{edge1 + tile_padding(dtype)}];" in source
    assert source.count("__syncthreads();") == 2
    direct = [i for i in (0, 1) if i not in tiled]  # read in the outputs' order: loaded before the wait
    for i in direct:
        assert f"{DTYPES[dtype].ctype} jm_p{i}[{edge0 // WARP}][{edge1 // thread_rows(spec)}];" in source
    assert len(re.findall(r"jm_p\d+\[", source)) == (3 * len(direct) if PREFETCH else 0)
    assert "div_mul" not in source
    assert f"int64_t jm_sizes[{ndim}];" in source


@pytest.mark.parametrize("dtypes, ndim, runs, rows", [
    (("float32", "float32"), 2, 1, 16), (("float16", "float16"), 2, 1, 8), (("int8", "int8"), 2, 1, 8),
    (("float16", "float32"), 2, 1, 16), (("float64", "float64"), 2, 1, 16), (("float32", "float32"), 3, 1, 4),
    (("float16", "float16"), 4, 1, 4), (("float32", "float32"), 3, 2, 8), (("float16", "float16"), 4, 2, 8),
])
def test_tiled_block_rows_follow_the_loop_dims_and_element_size(dtypes, ndim, runs, rows):
    """Two loop dimensions: 32x16 threads for 4-byte elements and wider, 32x8 for 2-byte and narrower
    (the widest of the outputs and the tiled inputs); batches on grid.z: 32x4, and 32x8 with 32x64
    tiles. The launch bounds and the launcher's block follow (bench/sweep_gpu.py)."""
    spec = KernelSpec(dtypes, (False, False), (dtypes[1],), "float32", ("float64",), path=TILED, ndim=ndim,
                      params=TiledParams(runs=runs, tiled_inputs=(0,)))
    assert thread_rows(spec) == rows
    assert path_of(spec, "cuda").block_of(spec) == (WARP, rows, 1)
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, ARCHES[0])
    assert f"void __launch_bounds__({WARP * rows}) {KERNEL_NAME}(const jm_Args jm_a)" in source
    assert f"jm_thread_y() + jm_r * {rows}" in source
    assert f"jm_tile0[32][{32 * runs + tile_padding(dtypes[0])}];" in source


@pytest.mark.parametrize("channels, wide", [(16, False), (32, False), (127, False), (128, True), (256, True)])
def test_batched_tiles_are_wide_only_where_the_tiled_rows_fill_them(channels, wide):
    """NCHW read as NHWC: 32x64 tiles where a tiled input's rows (the channels) hold at least 128
    elements, 32x32 below (on the H200, 64-wide tiles lose a quarter of the speed at 32 channels);
    two loop dimensions keep 32x32 tiles at any size."""
    torch = pytest.importorskip("torch")
    fn = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    nhwc = torch.rand(2, channels, 5, 7).permute(0, 2, 3, 1)
    dense = torch.rand(2, 5, 7, channels)
    source = fn.source(nhwc, dense, backend="cuda")
    edge1 = 64 if wide else 32
    assert f"jm_tile1[32][{edge1 + 1}];" in source and f"__launch_bounds__({WARP * (8 if wide else 4)})" in source
    square = fn.source(torch.rand(channels, 40).T, torch.rand(40, channels), backend="cuda")
    assert "[32][33];" in square


@pytest.mark.parametrize("dtype, channels, tiled, edge1", [
    ("float64", 128, 3, 32),  # three 32x64 tiles would take 49,920 bytes: 32x32 ones
    ("float64", 64, 3, 32), ("float32", 128, 3, 64),
    ("complex128", 32, 2, 32),  # three 32x32 tiles would take 50,688 bytes: the third input is read directly
])
def test_tiles_fit_in_the_48_kib_of_static_shared_memory(dtype, channels, tiled, edge1):
    torch = pytest.importorskip("torch")
    fn = jiter_magic.create_jit_fn("template <typename T> T f(T a, T b, T c, T d) { return a + b * c - d; }")
    # The output follows `dense`, so the views' rows (16 x 16 = 256 elements, enough for wide tiles) are tiled.
    dense = torch.zeros(2, 16, 16, channels, dtype=getattr(torch, dtype))
    views = [torch.zeros(2, channels, 16, 16, dtype=dense.dtype).permute(0, 2, 3, 1) for _ in range(3)]
    source = fn.source(dense, *views, backend="cuda")
    assert len(re.findall(rf"__shared__ \S+ jm_tile\d\[32\]\[{edge1 + 1}\];", source)) == tiled
    result = compiler(ARCHES[0]).compile(source, "jm_test")  # ptxas refuses more than 48 KiB of static shared memory
    assert result.binary[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", ["bool", "int8", "float16", "bfloat16", "float32", "int64", "complex128"])
@pytest.mark.parametrize("edge", [32, 64])
def test_tile_rows_are_padded_so_a_warp_reading_down_a_column_hits_every_bank(dtype, edge):
    """The outputs' pass reads a tile down a column, one row a lane: rows padded to an odd number of
    4-byte words put the 32 lanes' elements in 32 different banks (8- and 16-byte elements, which
    the hardware serves a half-warp at a time, need only the one element of padding)."""
    size = DTYPES[dtype].itemsize
    row_bytes = (edge + tile_padding(dtype)) * size
    if size <= 4:
        banks = {(lane * row_bytes // 4) % 32 for lane in range(WARP)}
        assert len(banks) == WARP
    assert tile_padding(dtype) == max(1, 4 // size)


PACK_OF = {"bool": 4, "int8": 4, "uint8": 4, "int16": 2, "float16": 2, "bfloat16": 2, "float32": 1, "float64": 1}


@pytest.mark.parametrize("dtype", list(PACK_OF))
def test_narrow_transposes_move_a_4_byte_word_an_access(dtype):
    """1- and 2-byte tiled inputs and outputs move 4 and 2 elements as one 4-byte access, over
    square tiles of 32 * pack elements (a whole tile's branch), and an element at a time at the
    loop's edges; 4-byte dtypes take the vector tiles (below), wider ones keep 32x32 tiles. The kernel
    compiles with NVRTC."""
    torch = pytest.importorskip("torch")
    fn = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    t = torch.zeros(300, 260, dtype=getattr(torch, dtype)).T
    u = torch.zeros(260, 300, dtype=t.dtype)
    pack = PACK_OF[dtype]
    source = fn.source(t, u, backend="cuda")
    if dtype == "float32":
        assert f"jm_tile1[{VECTOR_EDGE * (VECTOR_EDGE + 1)}];" in source
        return
    if pack == 1:
        assert "jm_whole" not in source and re.search(r"jm_tile\d\[32\]\[\d+\];", source)
        return
    rows = PACKED_ROWS[pack]
    assert f"__shared__ alignas(16) {DTYPES[dtype].ctype} jm_tile1[{packed_tile_elements(pack, pack)}];" in source
    assert f"__launch_bounds__({WARP * rows})" in source
    assert f"jm_vec<{DTYPES[dtype].ctype}, {pack}>" in source and "if (jm_whole)" in source
    assert source.count("__syncthreads();") == 4  # two a branch
    result = compiler(ARCHES[0]).compile(source, "jm_test")
    assert result.binary[:4] == b"\x7fELF"


def _pack(arrays: list, outs: list | None = None) -> int:
    """The pack of the tiled kernel a CUDA call on these arrays (ArrayDesc) runs; 0 off the tiled path."""
    spec, _layout = resolve_call(arrays, "torch", "cuda", outs, ("float64",), 1)
    return spec.params.pack if spec.path == TILED else 0


def test_packed_tiles_only_where_every_access_can_be_a_word():
    """Views starting inside a word, odd strides (batch strides too), rows that run backwards,
    mixed widths, loops smaller than a tile, out= inside a word, and tiles that would not fit in
    shared memory keep the unpacked tiles."""
    def half(shape, strides, pointer=1 << 20, dtype="float16"):
        return ArrayDesc(dtype, shape, strides, pointer)

    dense = half((260, 300), (300, 1), 1 << 24)
    assert _pack([dense, half((260, 300), (1, 260))]) == 2
    assert _pack([dense, half((260, 300), (1, 260), (1 << 20) + 2)]) == 1  # starts mid-word
    assert _pack([dense, half((260, 300), (1, 260), (1 << 20) + 4)]) == 2
    assert _pack([dense, half((260, 300), (1, 261))]) == 1  # an odd row stride
    assert _pack([dense, half((260, 300), (-1, 260), (1 << 20) + 518)]) == 1  # the tiled rows run backwards
    assert _pack([half((260, 300), (300, 1), dtype="float32"), half((260, 300), (1, 260))]) == 1  # float32 out
    assert _pack([half((40, 300), (300, 1)), half((40, 300), (1, 40))]) == 2  # 40 rows: a half tile, 64x32
    assert _pack([half((30, 300), (300, 1)), half((30, 300), (1, 30))]) == 1  # 30 rows: less than a half tile
    assert _pack([dense, half((260, 300), (1, 260))], [half((260, 300), (300, 1), (1 << 22) + 2)]) == 1
    assert _pack([dense, half((260, 300), (1, 260))], [half((260, 300), (300, 1), (1 << 22) + 4)]) == 2
    batched = half((3, 260, 300), (300 * 260, 300, 1), 1 << 24)
    assert _pack([batched, half((3, 260, 300), (300 * 260, 1, 260))]) == 2
    assert _pack([batched, half((3, 260, 300), (300 * 260 + 1, 1, 260))]) == 1  # odd batch stride
    byte = [half((260, 300), (1, 260), dtype="int8") for _ in range(3)]
    dense_byte = half((260, 300), (300, 1), 1 << 24, "int8")
    # three 128x128 byte tiles take 53,808 bytes, past the 48 KiB of static shared memory; two fit
    spec, _layout = resolve_call([dense_byte, *byte], "torch", "cuda", None, (), 1)
    assert spec.path == TILED and spec.params.pack == 1
    spec, _layout = resolve_call([dense_byte, *byte[:2], dense_byte], "torch", "cuda", None, (), 1)
    assert spec.path == TILED and spec.params.pack == 4


@pytest.mark.parametrize("pack, runs", [(2, 2), (4, 4), (2, 1), (4, 2)], ids=["2", "4", "2-half", "4-half"])
def test_packed_tile_accesses_hit_every_bank(pack, runs):
    """The whole-tile branch: a warp staging one tile row writes 32 consecutive words (a half tile:
    two rows of 16, on at least 31 banks), and a warp reading its lanes' squares (lane l reads rows
    pack*l .. pack*l + pack - 1, a word of `pack` columns a step) reads 4-byte-aligned words in 32
    different banks: rows are an odd number of words, with one word more after every 32 rows. The
    element branch's reads down a column, one element a lane, hit 32 banks too."""
    size = 4 // pack
    edge0, edge1 = TILE * pack, TILE * runs
    row_words = edge1 // pack
    index = eval("lambda row, column: " + packed_tile_index(pack, runs, "row", "column"))
    for row in range(0, edge0, WARP // row_words):
        words = [index(row + lane // row_words, lane % row_words * pack) * size // 4 for lane in range(WARP)]
        if row_words == WARP:
            assert words == list(range(words[0], words[0] + WARP))
        else:
            assert words[:row_words] == list(range(words[0], words[0] + row_words))
            assert len({w % 32 for w in words}) >= WARP - 1, row
    for column in range(edge1):
        for k in range(pack):
            at = [index(lane * pack + k, column) * size for lane in range(WARP)]
            assert len({(byte // 4) % 32 for byte in at}) == WARP, (column, k)
            if column % pack == 0:
                assert all(byte % 4 == 0 for byte in at), (column, k)
    assert index(edge0 - 1, edge1 - 1) < packed_tile_elements(pack, runs)


def _tile(arrays: list) -> tuple[int, int]:
    """(pack, runs) of the tiled kernel a CUDA call on these arrays (ArrayDesc) runs."""
    spec, _layout = resolve_call(arrays, "torch", "cuda", None, ("float64",), 1)
    assert spec.path == TILED
    return spec.params.pack, spec.params.runs


@pytest.mark.parametrize("dtype, channels, tile", [
    ("int8", 256, (4, 4)), ("int8", 64, (4, 2)), ("int8", 100, (4, 2)), ("int8", 192, (4, 2)),
    ("int8", 200, (4, 4)), ("int8", 384, (4, 4)), ("int8", 60, (1, 1)), ("uint8", 64, (4, 2)),
    ("float16", 64, (2, 2)), ("float16", 32, (2, 1)), ("float16", 96, (2, 1)), ("bfloat16", 40, (2, 1)),
    ("float16", 28, (1, 1)),
])
def test_packed_tiles_are_half_as_wide_where_the_tiled_rows_are_short(dtype, channels, tile):
    """NCHW read as NHWC: 32*pack x 32*runs tiles. Square (runs = pack) where the channels fill one,
    half as wide where they are shorter (64 int8 channels: 33% of a copy's bandwidth unpacked on the
    H200) or a whole number of half tiles and not of square ones; unpacked below half a tile."""
    nhwc = ArrayDesc(dtype, (2, 40, 40, channels), (1600 * channels, 40, 1, 1600), 1 << 20)
    dense = ArrayDesc(dtype, (2, 40, 40, channels), (1600 * channels, 40 * channels, channels, 1), 1 << 24)
    assert _tile([nhwc, dense]) == tile


def test_half_tiles_only_where_the_rows_of_threads_split_their_words(monkeypatch):
    """A half tile's rows are 16 words: with 32 rows of threads (a sweep's setting) a block could
    not split them, so such calls keep the unpacked tiles rather than fail to render."""
    from jiter_magic.kernels import packed_tiles

    def nchw(channels):
        return [ArrayDesc("int8", (2, 40, 40, channels), (1600 * channels, 40, 1, 1600), 1 << 20),
                ArrayDesc("int8", (2, 40, 40, channels), (1600 * channels, 40 * channels, channels, 1), 1 << 24)]

    assert _tile(nchw(64)) == (4, 2) and _tile(nchw(256)) == (4, 4)
    monkeypatch.setitem(packed_tiles.PACKED_BATCHED_ROWS, 4, 32)
    assert _tile(nchw(64)) == (1, 1) and _tile(nchw(256)) == (4, 4)


@pytest.mark.parametrize("dtype", ["int8", "float16"])
@pytest.mark.parametrize("batched", [False, True], ids=["2-d", "batched"])
def test_half_tiles_compile_without_spills(dtype, batched):
    """Half tiles (a warp stages two rows of 16 words) compile with NVRTC, without spills and with
    registers for two blocks an SM, the fence in batched kernels."""
    torch = pytest.importorskip("torch")
    fn = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    dt, pack = getattr(torch, dtype), PACK_OF[dtype]
    channels = 16 * pack + 8
    if batched:
        t, u = torch.zeros(2, channels, 300, dtype=dt).transpose(1, 2), torch.zeros(2, 300, channels, dtype=dt)
    else:
        t, u = torch.zeros(channels, 300, dtype=dt).T, torch.zeros(300, channels, dtype=dt)
    source = fn.source(t, u, backend="cuda")  # the output follows t: u's rows, the channels, are tiled
    assert f"__shared__ alignas(16) {DTYPES[dtype].ctype} jm_tile1[{packed_tile_elements(pack, pack // 2)}];" \
        in source, source[-3000:]
    assert "(jm_tx & 15)" in source and (PACKED_FENCE in source) == batched
    registers, spilled = _ptxas_facts(source)
    assert spilled == 0 and registers * WARP * 8 <= 65536 // 2, registers


PACKED_FENCE = 'asm volatile("" : "+r"(jm_tx), "+r"(jm_ty));'


def _ptxas_facts(source: str) -> tuple[int, int]:
    """(registers a thread, bytes of spill stores and loads) of the kernel, from ptxas's report."""
    c = compiler(ARCHES[0])
    log = c.compile(source, "jm_test", c.options() + ("--ptxas-options=-v",)).log
    registers = re.search(r"Used (\d+) registers", log)
    spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", log)
    assert registers is not None and len(spills) == 2, log
    return int(registers.group(1)), sum(map(int, spills))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [d for d, pack in PACK_OF.items() if pack > 1])
@pytest.mark.parametrize("batched", [False, True], ids=["2-d", "batched"])
def test_packed_kernels_leave_room_for_two_blocks_an_sm(dtype, batched):
    """The packed kernels' speed on the H200 came from occupancy: with registers for two blocks an SM
    (65,536 registers), and no spills, the int8 transpose went from 48% of the copy bandwidth to 89%
    (bench/results/2026-12-02-h200-int8). A 2-d loop renders no batch loop: inside one the compiler
    kept the tile's addresses in registers (int8, 32x16 threads: 128 registers against 54)."""
    torch = pytest.importorskip("torch")
    fn = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    dt = getattr(torch, dtype)
    if batched:
        t, u = torch.zeros(2, 300, 260, dtype=dt).transpose(1, 2), torch.zeros(2, 260, 300, dtype=dt)
    else:
        t, u = torch.zeros(300, 260, dtype=dt).T, torch.zeros(260, 300, dtype=dt)
    source = fn.source(t, u, backend="cuda")
    assert f"jm_vec<{DTYPES[dtype].ctype}, {PACK_OF[dtype]}>" in source
    assert ("jm_batch" in source) == batched
    assert (PACKED_FENCE in source) == batched
    threads = int(re.search(r"__launch_bounds__\((\d+)\)", source).group(1))
    assert threads == WARP * 8
    registers, spilled = _ptxas_facts(source)
    assert spilled == 0
    assert registers * threads <= 65536 // 2, (registers, threads)
    if batched:  # without the fence the compiler holds the tile's addresses across the batch loop
        unfenced, _ = _ptxas_facts(source.replace(PACKED_FENCE, ""))
        assert unfenced > registers


@pytest.mark.parametrize("batches, pack, grid_z", [(3, 4, 2), (64, 2, 32), (3, 1, 3), (200_000, 4, 65535)])
def test_packed_batched_blocks_walk_two_batches(batches, pack, grid_z):
    """A packed kernel's block walks two batches (NCHW int8 read as NHWC 7-10% faster on the H200,
    sweep 22); unpacked tiles keep one a block. grid.z stays within 65535; blocks loop over the rest."""
    spec = KernelSpec(("int8", "int8"), (False, False), ("int8",), "int32", (), path=TILED, ndim=3,
                      params=TiledParams(runs=pack, tiled_inputs=(0,), pack=pack))
    layout = Layout((batches, 256, 256), (1, 256, 65536), (256, 256, batches),
                    ((1, 256, 65536), (256, 1, 65536), (1, 256, 65536)), batches * 65536)
    edge = 32 * pack
    assert path_of(spec, "cuda").grid(spec, layout) == (256 // edge, 256 // edge, grid_z)


def test_tiled_path_mixed_dtypes_scalar_and_two_outputs():
    spec = KernelSpec(("float16", "float32", "int32"), (False, True, False), ("float32", "float16"), "float32", (),
                      path=TILED, ndim=3, params=TiledParams(tiled_inputs=(0,)))
    source, _ = compile_spec(binding(MULTI3, [], 2), spec, "sm_90")
    assert "__shared__ jm_half jm_tile0" in source and "jm_tile2" not in source


# --------------------------------------------------------------------------- mixed input dtypes, scalars, outputs

MIXED = [("float16", "float32"), ("int8", "float64"), ("bool", "complex64"), ("bfloat16", "int64"),
         ("uint8", "int8"), ("float32", "complex128")]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path, ndim, params", [(CONTIGUOUS, 1, ContiguousParams(vec=4)), (STRIDED, 2, PathParams())], ids=["contiguous", "strided"])
@pytest.mark.parametrize("a, b", MIXED, ids=[f"{a}+{b}" for a, b in MIXED])
def test_mixed_input_dtypes(a, b, path, ndim, params, arch):
    common = promote_types(a, b)
    spec = KernelSpec((a, b), (False, False), (common,), compute_dtype(common), ("float64",), path=path, ndim=ndim, params=params)
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, arch)
    assert f"const {DTYPES[a].ctype}* jm_in0;" in source and f"const {DTYPES[b].ctype}* jm_in1;" in source


SCALAR_CASES = [
    ("float32", "float32", (False, True), "float32"),
    ("float32", "float32", (True, False), "float32"),
    ("float16", "float32", (False, True), "float32"),
    ("int64", "int64", (False, True), "int64"),
    ("complex128", "complex128", (False, True), "complex128"),
    ("bool", "bool", (True, False), "bool"),
]


@pytest.mark.parametrize("path, ndim, params", [(CONTIGUOUS, 1, ContiguousParams(vec=2)), (STRIDED, 3, PathParams())], ids=["contiguous", "strided"])
@pytest.mark.parametrize("a, b, scalars, compute", SCALAR_CASES,
                         ids=[f"{a}{'*' if s[0] else ''}+{b}{'*' if s[1] else ''}" for a, b, s, _ in SCALAR_CASES])
def test_scalar_input_by_value(a, b, scalars, compute, path, ndim, params):
    spec = KernelSpec((a, b), scalars, (compute if a != "float16" else "float16",), compute, ("float64",),
                      path=path, ndim=ndim, params=params)
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, "sm_90")
    scalar_index = scalars.index(True)
    array_index = scalars.index(False)
    assert f" jm_scalar{scalar_index};" in source
    assert f"const jm_compute_t jm_v{scalar_index} = jm_a.jm_scalar{scalar_index};" in source  # by value, already compute_t
    assert f"in{scalar_index};" not in source and f"in{array_index};" in source
    assert spec.num_operands == 2


def test_all_inputs_scalar():
    spec = KernelSpec(("float32", "float32"), (True, True), ("float32",), "float32", ("float64",), path=CONTIGUOUS,
                      params=ContiguousParams(vec=1))
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, "sm_80")
    assert "in0" not in source and "in1" not in source


OUTPUT_CASTS = [("float32", "float16"), ("float32", "bfloat16"), ("float32", "int32"), ("float32", "bool"),
                ("float32", "uint8"), ("float32", "float64"), ("float32", "complex64"), ("int32", "float16"),
                ("complex64", "complex128"), ("complex128", "float64"), ("complex64", "float16"),
                ("float64", "bfloat16")]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path, ndim, params", [(CONTIGUOUS, 1, ContiguousParams(vec=4)), (STRIDED, 2, PathParams())], ids=["contiguous", "strided"])
@pytest.mark.parametrize("compute, out", OUTPUT_CASTS, ids=[f"{c}->{o}" for c, o in OUTPUT_CASTS])
def test_output_dtype_differs_from_compute(compute, out, path, ndim, params, arch):
    extra = "complex128" if DTYPES[compute].kind == "c" else "float64"
    spec = KernelSpec((compute, compute), (False, False), (out,), compute, (extra,), path=path, ndim=ndim, params=params)
    source, _ = compile_spec(binding(AXPY, ["alpha"]), spec, arch)
    assert f"{DTYPES[out].ctype}* jm_out0;" in source
    if DTYPES[compute].kind == "c" and DTYPES[out].kind != "c":
        assert "jm_real(jm_r0)" in source


# --------------------------------------------------------------------------- multi-output, many inputs, extras



@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path, ndim, params", [(CONTIGUOUS, 1, ContiguousParams(vec=4)), (STRIDED, 3, PathParams())], ids=["contiguous", "strided"])
@pytest.mark.parametrize("ins, outs, compute", [
    (("float32", "float32"), ("float32", "float32"), "float32"),
    (("float32", "float16"), ("float32", "float16"), "float32"),
    (("complex64", "complex64"), ("complex64", "complex128"), "complex64"),
    (("int8", "int32"), ("int32", "int64"), "int32"),
], ids=["float32", "float32+float16", "complex", "ints"])
def test_multi_output(ins, outs, compute, path, ndim, params, arch):
    spec = KernelSpec(ins, (False, False), outs, compute, (), path=path, ndim=ndim, params=params)
    source, _ = compile_spec(binding(MULTI, [], 2), spec, arch)
    assert "f<jm_compute_t>(jm_v0, jm_v1, jm_r0, jm_r1);" in source
    assert "jm_compute_t jm_r0, jm_r1;" in source
    assert spec.num_operands == 4


def test_multi_output_single_form_void_function():
    b = binding("template <typename T> void f(T x, T& o) { o = x * x; }", [], None)
    spec = KernelSpec(("float64",), (False,), ("float64",), "float64", (), path=STRIDED, ndim=2, index64=True,
                      params=PathParams())
    source, _ = compile_spec(b, spec, "sm_80")
    assert "f<jm_compute_t>(jm_v0, jm_r0);" in source


def n_input_code(n: int) -> str:
    names = [f"x{i}" for i in range(n)]
    return "template <typename T> T f(%s) { return %s; }" % (", ".join(f"T {x}" for x in names), " + ".join(names))


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path, ndim, params", [(CONTIGUOUS, 1, ContiguousParams(vec=4)), (STRIDED, 3, PathParams())], ids=["contiguous", "strided"])
@pytest.mark.parametrize("n", [8, 16])
def test_many_inputs(n, path, ndim, params, arch):
    dtypes = tuple(("float32", "float16", "int32", "bfloat16")[i % 4] for i in range(n))
    spec = KernelSpec(dtypes, (False,) * n, ("float32",), "float32", (), path=path, ndim=ndim, index64=n == 16, params=params)
    source, _ = compile_spec(binding(n_input_code(n)), spec, arch)
    assert f"in{n - 1};" in source
    assert spec.num_operands == n + 1
    if path == STRIDED:
        assert f"strides{n}[" in source


EXTRAS = "template <typename T> T f(T x, bool flag, long long k, double s, T c) { return flag ? x * T(s) + T(k) * c : x; }"


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path, ndim, params", [(CONTIGUOUS, 1, ContiguousParams(vec=2)), (STRIDED, 2, PathParams())], ids=["contiguous", "strided"])
@pytest.mark.parametrize("compute, c_dtype", [("float32", "float64"), ("complex64", "complex128"),
                                              ("complex128", "complex128"), ("int64", "int64")])
def test_extra_args_of_each_kind(compute, c_dtype, path, ndim, params, arch):
    b = binding(EXTRAS, ["s", "flag", "c", "k"])
    assert b.extra_names == ("flag", "k", "s", "c")
    spec = KernelSpec((compute,), (False,), (compute,), compute, ("bool", "int64", "float64", c_dtype),
                      path=path, ndim=ndim, params=params)
    source, _ = compile_spec(b, spec, arch)
    assert "f<jm_compute_t>(jm_v0, jm_a.jm_extra0, jm_a.jm_extra1, jm_a.jm_extra2, jm_a.jm_extra3);" in source
    assert "bool jm_extra0;" in source and "int64_t jm_extra1;" in source and "double jm_extra2;" in source
    assert f"{DTYPES[c_dtype].ctype} jm_extra3;" in source


@pytest.mark.slow
@pytest.mark.parametrize("extra", ["bool", "int64", "float64", "uint8", "float32"])
@pytest.mark.parametrize("compute", ["float32", "int32", "bool"])
def test_extra_arg_converted_to_compute_parameter(compute, extra):
    spec = KernelSpec((compute, compute), (False, False), (compute,), compute, (extra,), path=CONTIGUOUS,
                      params=ContiguousParams(vec=1))
    compile_spec(binding(AXPY, ["alpha"]), spec, "sm_90")


def test_non_template_functor_has_no_template_argument():
    b = binding("__device__ float scale(float x, double s) { return x * (float)s; }", ["s"])
    spec = KernelSpec(("float32",), (False,), ("float32",), "float32", ("float64",), path=CONTIGUOUS,
                      params=ContiguousParams(vec=4))
    source, _ = compile_spec(b, spec, "sm_80")
    assert "jm_r0 = scale(jm_v0, jm_a.jm_extra0);" in source


def test_helpers_comments_and_defines_compile():
    code = (
        "// helpers first\n"
        "#define SQ(v) ((v) * (v))\n"
        "template <typename T> T util_fn(T x, T y) { return ::sin(x) + ::cos(y); }\n"
        "/* the entry */ template <typename T> T my_kernel(T x, T y, T val) { return ::min(val, util_fn(SQ(x), y)); }\n"
    )
    spec = axpy_spec("float32", STRIDED, 2, 1, False)
    source, _ = compile_spec(binding(code, ["val"]), spec, "sm_90")
    assert source.count(code) == 1


def test_user_include_of_cuda_fp16_does_not_clash_with_the_prelude():
    if nvrtc_module.cuda_include_dir() is None:
        pytest.skip("no CUDA headers found")
    b = binding("#include <cuda_fp16.h>\ntemplate <typename T> T f(T x) { return x + T(__half2float(__float2half(1.0f))); }")
    compile_spec(b, KernelSpec(("float32",), (False,), ("float32",), "float32", (), path=CONTIGUOUS,
                               params=ContiguousParams(vec=4)), "sm_80")


# --------------------------------------------------------------------------- Args struct == the Python packer

LAYOUT_SPECS = [
    axpy_spec("float32", CONTIGUOUS, vec=4),
    axpy_spec("complex128", STRIDED, 3, 1, False),
    axpy_spec("int8", STRIDED, 5, 1, True),
    axpy_spec("float64", STRIDED, 1, 1, False),
    axpy_spec("uint16", STRIDED, 3, 1, False),  # odd ndim: uint32 divisor arrays padded to 8 bytes
    KernelSpec(("float32", "float32"), (False, False), ("float32",), "float32", ("float64",), path=TILED, ndim=3,
               params=TiledParams(tiled_inputs=(1,))),
    KernelSpec(("float16", "complex128", "bool"), (False, True, False), ("complex128", "uint8"), "complex128",
               ("bool", "complex128", "int64"), path=STRIDED, ndim=3, params=PathParams()),
    KernelSpec(("bool", "int8"), (True, False), ("int16",), "int16", ("bool", "bool", "float32"), path=CONTIGUOUS,
               params=ContiguousParams(vec=8)),
]


# NVRTC 12's front end has no __builtin_offsetof ("type name is not allowed"), and no <cstddef>; the
# struct's layout follows the same ABI under both, so NVRTC 13 (and g++ for the host path) check it.
needs_offsetof = pytest.mark.skipif(int(nvrtc_module.nvrtc_version().split(".")[0]) < 13,
                                    reason="NVRTC 12 cannot evaluate __builtin_offsetof; checked under NVRTC 13")


def test_the_nvrtc_of_the_installed_extra():
    """tests/run.sh runs this file twice: with the cuda13 extra, and in a venv with the cuda12 one."""
    major = nvrtc_module.nvrtc_version().split(".")[0]
    assert major == os.environ.get("JITER_MAGIC_EXPECT_NVRTC", "13")


@needs_offsetof
@pytest.mark.parametrize("spec", LAYOUT_SPECS, ids=[describe(s) for s in LAYOUT_SPECS])
def test_args_struct_layout_matches_packer(spec):
    n_extras = len(spec.extras)
    n_outs = len(spec.outputs)
    code = "template <typename T> void f(%s) { }" % ", ".join(
        [f"T x{i}" for i in range(len(spec.inputs))] + [f"T e{k}" for k in range(n_extras)]
        + [f"T& o{j}" for j in range(n_outs)])
    b = binding(code, [f"e{k}" for k in range(n_extras)], n_outs)
    source, _ = render_source(b, spec, "cuda")
    layout = args_layout(spec, "cuda")
    checks = [f'static_assert(sizeof(jm_Args) == {layout.packer.size}, "sizeof(jm_Args)");']
    for field in layout.fields:
        checks.append(f'static_assert(__builtin_offsetof(jm_Args, {field.name}) == {field.offset}, "{field.name}");')
    result = compiler("sm_90").compile(source + "\n".join(checks) + "\n", "jm_layout")
    assert result.binary[:4] == b"\x7fELF"
    assert len(layout.fields) >= len(spec.outputs) + len(spec.array_inputs) + 1 + n_extras


@needs_offsetof
def test_args_struct_layout_mismatch_is_detected():
    """The static_assert technique above does fail when an offset is wrong (so the test can fail)."""
    spec = axpy_spec("float32", CONTIGUOUS, vec=4)
    source, _ = render_source(binding(AXPY, ["alpha"]), spec, "cuda")
    with pytest.raises(CompileError) as info:
        compiler("sm_90").compile(source + 'static_assert(__builtin_offsetof(jm_Args, jm_n) == 3, "n_offset");\n', "jm_bad")
    assert "n_offset" in str(info.value)


# --------------------------------------------------------------------------- compiler errors and identity


def test_compile_error_points_at_the_users_line():
    b = binding("template <typename T> T my_kernel(T x, T y) { return undefined_fn(x) + y; }")
    spec = KernelSpec(("float32", "float32"), (False, False), ("float32",), "float32", (), path=CONTIGUOUS,
                      params=ContiguousParams(vec=4))
    source, _ = render_source(b, spec, "cuda")
    with pytest.raises(CompileError) as info:
        compiler("sm_90").compile(source, "jm_bad")
    error = info.value
    message = str(error)
    assert isinstance(error, RuntimeError) and isinstance(error, JiterError)
    assert "line 1" in message
    assert "undefined_fn" in message
    assert "sm_90" in message
    assert "typedef signed char" not in message
    assert "namespace jm" not in message
    assert "jiterator(" not in message  # the raw location was mapped
    assert error.source == source
    assert "undefined_fn" in error.log and "line 1" in error.log


def test_compile_error_on_a_later_line_of_a_multi_line_functor():
    code = "template <typename T>\nT my_kernel(T x, T y) {\n  T z = x;\n  return also_undefined(z) + y;\n}"
    spec = KernelSpec(("float64", "float64"), (False, False), ("float64",), "float64", (), path=STRIDED, ndim=2,
                      index64=True, params=PathParams())
    source, _ = render_source(binding(code), spec, "cuda")
    with pytest.raises(CompileError) as info:
        compiler("sm_80").compile(source, "jm_bad")
    message = str(info.value)
    assert "line 4" in message and "also_undefined" in message
    assert "typedef signed char" not in message


def test_syntax_error_in_non_template_functor():
    b = binding("__device__ float my_kernel(float x) {\n  return x + ;\n}")
    spec = KernelSpec(("float32",), (False,), ("float32",), "float32", (), path=CONTIGUOUS,
                      params=ContiguousParams(vec=1))
    source, _ = render_source(b, spec, "cuda")
    with pytest.raises(CompileError) as info:
        compiler("sm_80").compile(source, "jm_bad")
    assert "line 2" in str(info.value) and "expected an expression" in str(info.value)


def test_compiler_identity_and_options():
    c80 = compiler("sm_80")
    assert c80.arch == "sm_80"
    identity = c80.identity
    assert identity.startswith("nvrtc-") and identity.endswith("-sm_80")
    major, minor = identity.split("-")[1].split(".")
    assert int(major) >= 12 and int(minor) >= 0
    options = c80.options()
    assert options[:4] == ("-arch=sm_80", "-default-device", "--std=c++17", "-DJITER_MAGIC=1")
    assert compiler("sm_90").identity != identity


def test_nvrtc_still_refuses_fwrapv():
    """The host compiler runs with -fwrapv (signed overflow wraps, as in torch); NVRTC has no such
    option, and docs/api.md says so (on CUDA, signed overflow follows NVRTC's rules). Should an NVRTC
    accept it, this fails, so that the CUDA options (and the docs) take it up."""
    c90 = compiler("sm_90")
    assert "-fwrapv" not in c90.options()
    source = 'extern "C" __global__ void jm_probe(int* p) { p[0] = (p[0] + 1) > p[0]; }'
    with pytest.raises(CompileError, match="-fwrapv"):
        c90.compile(source, "jm_probe", c90.options() + ("-fwrapv",))
    assert c90.compile(source, "jm_probe").binary.startswith(b"\x7fELF")  # the probe itself compiles


def test_the_registry_holds_the_cuda_paths_in_order_and_a_spec_finds_its_own():
    """`CUDA_PATHS` is the order a call tries them in; a spec finds its path by name (an unknown name
    is a KeyError) on CUDA and the host's one path on the CPU. The loop's fields are keywords, and a
    path handed another path's record says so instead of misreading it."""
    assert [p.name for p in CUDA_PATHS] == [CONTIGUOUS, TILED, ROWS, STRIDED]
    dtypes = (("float32",), (False,), ("float32",), "float32", ())
    for path in CUDA_PATHS:
        assert path_of(KernelSpec(*dtypes, path=path.name, params=PathParams()), "cuda") is path
    spec = KernelSpec(*dtypes, path="diagonal", params=PathParams())
    with pytest.raises(KeyError, match="no CUDA kernel path named 'diagonal'"):
        path_of(spec, "cuda")
    assert path_of(spec, "cpu").name == "host"
    with pytest.raises(TypeError):
        KernelSpec(*dtypes, CONTIGUOUS, 1, params=ContiguousParams())
    wrong = KernelSpec(*dtypes, path=ROWS, ndim=2, params=ContiguousParams(vec=4))
    with pytest.raises(TypeError, match="a rows spec carries ContiguousParams, not RowsParams"):
        describe(wrong)


# --------------------------------------------------------------------------- vector tiles (4-byte transposes)

def _vector_spec(inputs: tuple[str, ...], tiled: tuple[int, ...], ndim: int, outputs: tuple[str, ...] = ("float32",),
                 index64: bool = False) -> KernelSpec:
    return KernelSpec(inputs, (False,) * len(inputs), outputs, "float32", ("float64",) if len(outputs) == 1 else (),
                      path=TILED, ndim=ndim, index64=index64, params=TiledParams(tiled_inputs=tiled, vec=VEC))


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("inputs, tiled, ndim, index64", [
    (("float32", "float32"), (0,), 2, False), (("float32", "float32"), (1,), 3, False),
    (("int32", "float16"), (0,), 2, True), (("float32", "float32"), (0, 1), 4, False),
    (("float32", "bfloat16"), (0,), 3, True),
])
def test_vector_tiles_compile_without_spills(inputs, tiled, ndim, index64, arch):
    """4-byte transposes over 64x64 tiles with 32x8 threads: each tiled input staged by four 16-byte
    loads a thread, each output stored by four, every direct input loaded before the block waits on
    its tiles (as 16-byte vectors of its own width where a batch allows it, else elementwise); no
    spills, and registers for at least four blocks an SM."""
    code = AXPY if len(inputs) == 2 else MULTI3
    spec = _vector_spec(inputs, tiled, ndim)
    source, _ = compile_spec(binding(code, ["alpha"]), spec, arch)
    assert tile_edges(spec) == (VECTOR_EDGE, VECTOR_EDGE) and thread_rows(spec) == VECTOR_ROWS
    assert f"void __launch_bounds__({WARP * VECTOR_ROWS}) {KERNEL_NAME}(const jm_Args jm_a)" in source
    for i in tiled:
        assert f"__shared__ {DTYPES[inputs[i]].ctype} jm_tile{i}[{VECTOR_EDGE * (VECTOR_EDGE + 1)}];" in source
        assert f"const jm_vec<{DTYPES[inputs[i]].ctype}, 4> jm_staged{i} = " in source
    for i in (i for i in range(len(inputs)) if i not in tiled):
        assert f"jm_vec<{DTYPES[inputs[i]].ctype}, 4> jm_d{i}[4];" in source
    assert "*reinterpret_cast<jm_vec<float, 4>*>(jm_a.jm_out0" in source
    assert source.count("__syncthreads();") == 4  # two a branch: whole tiles and the element fallback
    assert ("jm_batch" in source) == (ndim > 2)
    registers, spilled = _ptxas_facts(source)
    assert spilled == 0
    assert registers * WARP * VECTOR_ROWS * 4 <= 65536, registers


def test_vector_tile_reads_and_writes_of_the_shared_tile_hit_every_bank():
    """A warp's 32 staging writes of one element (4 rows of 8 vectors) and its 32 reads of element k of
    its vectors (8 vectors down 4 columns) fall on 32 different banks of 4-byte words."""
    row = VECTOR_EDGE + 1
    for p in range(4):
        for ty in range(VECTOR_ROWS):
            for k in range(VEC):
                staged = set()
                for tx in range(WARP):
                    r = ty * 4 + (tx >> 3) + (p & 1) * (VECTOR_EDGE // 2)
                    c = ((tx & 7) + (p >> 1) * 8) * VEC
                    staged.add((r * row + c + k) % 32)
                assert len(staged) == 32
                read = set()
                for tx in range(WARP):
                    combo = ty + p * VECTOR_ROWS
                    q, j = (tx & 7) + (combo & 1) * 8, (tx >> 3) + (combo >> 1) * 4
                    read.add(((q * VEC + k) * row + j) % 32)
                assert len(read) == 32


def test_vector_tiles_cover_each_tile_element_once():
    """The staging and the computing passes of a block's 256 threads visit each of the 64x64 elements once."""
    staged, computed = [], []
    for ty in range(VECTOR_ROWS):
        for tx in range(WARP):
            for p in range(4):
                r, c = ty * 4 + (tx >> 3) + (p & 1) * 32, ((tx & 7) + (p >> 1) * 8) * VEC
                staged += [(r, c + k) for k in range(VEC)]
                combo = ty + p * VECTOR_ROWS
                q, j = (tx & 7) + (combo & 1) * 8, (tx >> 3) + (combo >> 1) * 4
                computed += [(q * VEC + k, j) for k in range(VEC)]
    every = sorted((r, c) for r in range(VECTOR_EDGE) for c in range(VECTOR_EDGE))
    assert sorted(staged) == every and sorted(computed) == every


def _vector_of(dense, across) -> int:
    """The tiled kernel's vector for `dense` and `across` (the input read across the outputs' rows)."""
    source = jiter_magic.create_jit_fn(AXPY, alpha=1.0).source(dense, across, backend="cuda")
    assert re.search(r"__shared__ (alignas\(16\) )?\w+ jm_tile1\[", source), "the second input is not tiled"
    return VEC if f"jm_tile1[{VECTOR_EDGE * (VECTOR_EDGE + 1)}];" in source else 1


def test_vector_tiles_only_for_4_byte_tiles_spanning_a_tile_at_16_byte_pointers():
    torch = pytest.importorskip("torch")
    store = torch.zeros(300 * 261 + 8)
    t, u = store[:300 * 260].view(300, 260).T, torch.zeros(260, 300)
    assert _vector_of(u, t) == VEC
    assert _vector_of(u.to(torch.int32), t.to(torch.int32)) == VEC
    assert _vector_of(u.half(), t) == VEC  # the dense input's dtype does not matter
    assert _vector_of(torch.zeros(2, 260, 300), torch.zeros(2, 300, 260).transpose(1, 2)) == VEC  # batched
    assert _vector_of(u, store[1:1 + 300 * 260].view(300, 260).T) == 1  # 4 bytes past 16: no vectors
    assert _vector_of(u, store[:300 * 261].view(300, 261)[:, :260].T) == 1  # rows of 261: strides not 4k
    assert _vector_of(u.double(), t.double()) == 1  # 8-byte elements keep the 32x32 tiles
    assert _vector_of(u.half(), t.half()) == 1  # 2-byte: the packed tiles
    assert _vector_of(torch.zeros(260, 40), torch.zeros(40, 260).T) == 1  # a dimension shorter than a tile
