"""GPU parity tests: jiter_magic against torch.cuda.jiterator and torch's native ops on a real GPU.

Marked `gpu`; skipped without one. Run on the H200 by bench/run_gpu.sh.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import jiter_magic  # noqa: E402
from jiter_magic import create_jit_fn, create_multi_output_jit_fn  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
FUSED = "template <typename T> T my_fused_kernel(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"


def _rand(shape, dtype, device="cuda"):
    if dtype is torch.bool:
        return torch.rand(shape, device=device) > 0.5
    if dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        return torch.randint(1, 10, shape, device=device).to(dtype)
    return (torch.rand(shape, device=device, dtype=torch.float64) + 0.5).to(dtype)


def _close(actual, expected):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape
    if expected.dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(actual, expected, atol=1e-2, rtol=1e-2)
    else:
        torch.testing.assert_close(actual, expected)


_torch_fused = None


def _torch_jiterator():
    global _torch_fused
    if _torch_fused is None:
        _torch_fused = torch.cuda.jiterator._create_jit_fn(FUSED, alpha=1, beta=1)
    return _torch_fused


_ours_fused = create_jit_fn(FUSED, alpha=1, beta=1)


@pytest.mark.parametrize("a_dtype,b_dtype", list(itertools.product(DTYPES, DTYPES)))
def test_all_dtype_pairs_contiguous_match_torch_jiterator(a_dtype, b_dtype):
    a, b = _rand((3, 3), a_dtype), _rand((3, 3), b_dtype)
    expected = _torch_jiterator()(a, b)
    _close(_ours_fused(a, b), expected)


@pytest.mark.parametrize("a_dtype,b_dtype", list(itertools.product(DTYPES, DTYPES)))
def test_all_dtype_pairs_noncontiguous_broadcast_match(a_dtype, b_dtype):
    a = _rand((18,), a_dtype).as_strided((3, 3), (3, 1)).T  # transposed
    b = _rand((3,), b_dtype).as_strided((3, 3), (0, 1))  # expanded
    expected = _torch_jiterator()(a, b)
    _close(_ours_fused(a, b), expected)
    c = _rand((4, 6), a_dtype)[::2, ::3]  # stepped slices
    d = _rand((1, 2), b_dtype)
    _close(_ours_fused(c, d), _torch_jiterator()(c, d))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.complex64, torch.int8])
def test_tiled_path_transposed_and_channels_last(dtype):
    ref = _torch_jiterator()
    t = _rand((70, 100), dtype).T  # partial tiles on both dimensions
    u = _rand((100, 70), dtype)
    _close(_ours_fused(t, u), ref(t, u))
    nchw = _rand((3, 40, 17, 9), dtype)
    nhwc_view = nchw.permute(0, 2, 3, 1)
    dense = _rand((3, 17, 9, 40), torch.float32)
    _close(_ours_fused(nhwc_view, dense), ref(nhwc_view, dense))
    _close(_ours_fused(dense, nhwc_view), ref(dense, nhwc_view))
    big = _rand((4, 64, 48), dtype).transpose(1, 2)  # batched transpose, scalar second input
    _close(_ours_fused(big, 2), ref(big, torch.tensor(2, device="cuda")))
    wide = _rand((2, 130, 7, 11), dtype).permute(0, 2, 3, 1)  # channels past two 64-wide tiles, the third partial
    dense_wide = _rand((2, 7, 11, 130), dtype)
    _close(_ours_fused(wide, dense_wide), ref(wide, dense_wide))
    _close(_ours_fused(dense_wide, wide), ref(dense_wide, wide))
    if dtype is torch.float32:  # channels a multiple of 4 and tiles spanning 64x64: 16-byte accesses
        aligned = _rand((2, 128, 8, 16), dtype).permute(0, 2, 3, 1)
        dense_aligned = _rand((2, 8, 16, 128), dtype)
        _close(_ours_fused(aligned, dense_aligned), ref(aligned, dense_aligned))
    many = _rand((70_000, 20, 16), dtype).transpose(1, 2)  # more batches than grid.z holds: blocks loop
    dense_many = _rand((70_000, 16, 20), dtype)
    _close(_ours_fused(many, dense_many), ref(many, dense_many))
    batched = [s.spec for s in _ours_fused.specializations if s.spec.path == "tiled" and s.spec.ndim > 2]
    assert batched, "the batched tiled path was not used"
    if dtype is torch.float32:  # 128 channels: 16 bytes an access; 130 (rows not 16-byte aligned): 4
        assert {s.params.vec for s in batched} == {1, 4}, "the batched vector tiles did not run"
    else:
        assert {s.params.runs for s in batched} == {1, 2}, "32x32 and 32x64 tiles (130 channels) both ran"
    spec = [s.spec for s in _ours_fused.specializations if s.spec.path == "tiled"]
    assert spec, "the tiled path was not used"


PACKED_DTYPES = [torch.float16, torch.bfloat16, torch.int16, torch.int8, torch.uint8, torch.bool]


def _packs(function) -> set[tuple[int, int]]:
    """(pack, runs) of the tiled kernels the function has run."""
    return {(s.spec.params.pack, s.spec.params.runs) for s in function.specializations if s.spec.path == "tiled"}


@pytest.mark.parametrize("dtype", PACKED_DTYPES)
def test_packed_tiles_at_every_alignment_residue_and_tail(dtype):
    """1- and 2-byte transposes move 2 or 4 elements an access (`spec.params.pack`) where pointers and
    strides allow it, and an element at a time where they do not: views starting at every element
    of a 4-byte word, odd row strides, tails on both loop dimensions, misaligned out=, batches of
    NCHW read as NHWC, half-width tiles (rows shorter than a square tile, or a whole number of half
    tiles: 100 and 192 rows of int8). The same values as torch's jiterator."""
    ref, size = _torch_jiterator(), torch.empty((), dtype=dtype).element_size()
    pack = 4 // size
    # (rows, columns) of the transposed views' storage: an even column count packs when the view starts
    # at a whole word (a partial tile left where the other size is odd), an odd one never does.
    packed_sizes = [(130, 203), (256, 257), (129, 128), (200, 130), (50, 130), (96, 200)] if pack == 2 else \
        [(130, 203), (256, 257), (132, 256), (300, 128), (100, 260), (192, 132)]
    store_t, store_u, store_out = (_rand((300 * 260 + 8,), dtype) for _ in range(3))
    packed_seen = set()
    for rows, cols in packed_sizes:
        for offset in range(pack):
            t = store_t[offset:offset + rows * cols].view(rows, cols).T  # row stride `cols`: odd ones never pack
            u = store_u[pack - 1 - offset:pack - 1 - offset + rows * cols].view(cols, rows)
            _close(_ours_fused(t, u), ref(t, u))
            _close(_ours_fused(u, t), ref(u, t))
            out = store_out[offset:offset + rows * cols].view(rows, cols).T
            expected = ref(t, u)
            before = store_out.clone()
            _ours_fused(t, u, out=out)
            _close(out, expected)
            written = torch.zeros(store_out.shape, dtype=torch.bool, device="cuda")
            written[offset:offset + rows * cols] = True
            assert torch.equal(store_out[~written], before[~written]), "out= wrote outside its view"
            packed_seen |= _packs(_ours_fused)
    assert {(pack, pack), (pack, pack // 2)} <= packed_seen, f"square and half {pack}-element tiles did not both run"
    batches = 3
    width = 64 * pack + 8  # even: the outputs' channel stride (3 * width) a multiple of the pack
    for channels in (132, 18 * pack, 48 * pack):  # square tiles; half tiles, the last partial; three half tiles
        nchw = _rand((batches, channels, 3, width), dtype)
        dense = _rand((batches, 3, width, channels), dtype)
        view = nchw.permute(0, 2, 3, 1)
        _close(_ours_fused(view, dense), ref(view, dense))
    batched = {(s.spec.params.pack, s.spec.params.runs) for s in _ours_fused.specializations
               if s.spec.path == "tiled" and s.spec.ndim > 2}
    assert {(pack, pack), (pack, pack // 2)} <= batched, "the batched packed kernels did not run"


def _vectors(function) -> set[int]:
    return {s.spec.params.vec for s in function.specializations if s.spec.path == "tiled"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_vector_tiles_at_every_alignment_residue_and_tail(dtype):
    """4-byte transposes move 16 bytes an access over 64x64 tiles (`spec.params.vec`) where pointers
    and strides allow it, and an element at a time where they do not: views starting at each element
    of 16 bytes, row strides not a multiple of 4, tails on both loop dimensions, misaligned out=,
    direct inputs that cannot be read as vectors (a step, another dtype, a broadcast), batches (NCHW
    read as NHWC), two tiled inputs and two outputs. The same values as torch's jiterator."""
    ref = _torch_jiterator()
    store_t, store_u, store_out = (_rand((300 * 261 + 8,), dtype) for _ in range(3))
    for rows, cols in [(130, 204), (256, 260), (64, 64), (200, 131), (65, 128)]:
        for offset in range(4):
            t = store_t[offset:offset + rows * cols].view(rows, cols).T
            u = store_u[3 - offset:3 - offset + rows * cols].view(cols, rows)
            _close(_ours_fused(u, t), ref(u, t))
            _close(_ours_fused(t, u), ref(t, u))
            out = store_out[offset:offset + rows * cols].view(cols, rows)
            before = store_out.clone()
            _ours_fused(u, t, out=out)
            _close(out, ref(u, t))
            written = torch.zeros(store_out.shape, dtype=torch.bool, device="cuda")
            written[offset:offset + rows * cols] = True
            assert torch.equal(store_out[~written], before[~written]), "out= wrote outside its view"
    assert _vectors(_ours_fused) >= {1, 4}, "vector and element tiles did not both run"
    t = _rand((300, 256), dtype).T
    wide = _rand((256, 600), dtype)
    for direct in (wide[:, ::2], wide[:, :300].half(), _rand((256, 1), dtype).expand(256, 300)):
        _close(_ours_fused(direct, t), ref(direct, t))
    for channels in (64, 130, 256):
        nchw = _rand((3, channels, 9, 16), dtype)
        dense = _rand((3, 9, 16, channels), dtype)
        _close(_ours_fused(dense, nchw.permute(0, 2, 3, 1)), ref(dense, nchw.permute(0, 2, 3, 1)))
    batched = {s.spec.params.vec for s in _ours_fused.specializations if s.spec.path == "tiled" and s.spec.ndim > 2}
    assert 4 in batched, "the batched vector tiles did not run"
    code = "template <typename T> void f(T x, T y, T z, T& a, T& b) { a = x + y * z; b = x * y - z; }"
    both = create_multi_output_jit_fn(code, 2)
    x, y = _rand((260, 300), dtype).T, _rand((260, 300), dtype).T
    z = _rand((300, 260), dtype)
    got, expected = both(z, x, y), torch.cuda.jiterator._create_multi_output_jit_fn(code, 2)(z, x, y)
    for g, e in zip(got, expected):
        _close(g, e)
    assert both.specializations[-1].spec.params.tiled_inputs == (1, 2) and _vectors(both) == {4}


def test_vector_tiles_over_more_than_2_31_elements():
    """A float32 transpose of 46344^2 elements (past 2^31: 64-bit indices) through 16-byte accesses
    (rows of a multiple of 4 elements, so that every row starts 16-byte aligned)."""
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x + 2 * y; }")
    s = 46344
    u = torch.rand(s, s, device="cuda")
    t = torch.rand(s, s, device="cuda").T
    r = f(u, t)
    spec = f.specializations[-1].spec
    assert spec.path == "tiled" and spec.params.vec == 4 and spec.index64
    for rows in (slice(0, 5), slice(s - 5, s), slice(s // 2, s // 2 + 3)):
        torch.testing.assert_close(r[rows], u[rows] + 2 * t[rows])
    del r, u, t


def test_packed_tiles_over_more_than_2_31_elements():
    """A float16 transpose of 46342^2 elements (past 2^31: 64-bit indices) through 2-element accesses."""
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }")
    s = 46342
    t = torch.rand(s, s, device="cuda", dtype=torch.float16).T
    u = torch.rand(s, s, device="cuda", dtype=torch.float16)
    r = f(t, u)
    assert f.specializations[-1].spec.path == "tiled" and f.specializations[-1].spec.params.pack == 2
    assert f.specializations[-1].spec.index64
    assert r.dtype == torch.float16 and r.shape == (s, s)
    assert torch.equal(r, torch.add(t, u))
    del t, u, r
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.complex64])
def test_contiguous_path_at_every_alignment_residue(dtype):
    """Views that start anywhere in a 16-byte line (vectors narrowed, more of them a thread), sizes
    with tails of every kind, outputs misaligned through out=: the same values as torch's jiterator."""
    ref, per_line = _torch_jiterator(), max(1, 16 // torch.empty((), dtype=dtype).element_size())
    sizes = (1, 127, 128 * 16 + 3, 3 * 128 * 16, 100_003)
    x_store, y_store, out_store = (_rand((100_003 + 32,), dtype) for _ in range(3))
    for x_offset in range(per_line):
        for y_offset in sorted({0, x_offset, per_line - 1}):
            for n in sizes:
                x, y = x_store[x_offset:x_offset + n], y_store[y_offset:y_offset + n]
                _close(_ours_fused(x, y), ref(x, y))
        out = out_store[x_offset:x_offset + sizes[-1]]
        _close(_ours_fused(x_store[:sizes[-1]], y_store[1:sizes[-1] + 1], out=out),
               ref(x_store[:sizes[-1]], y_store[1:sizes[-1] + 1]))
    vectors = {s.spec.params.vec for s in _ours_fused.specializations if s.spec.path == "contiguous"
               and s.spec.inputs == (str(dtype)[6:],) * 2}
    assert 1 in vectors and per_line in vectors  # both the narrowest and the full-width vector ran


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.complex128, torch.uint8])
def test_rows_path_broadcast_and_bias(dtype):
    ref = _torch_jiterator()
    cases = [
        (_rand((700, 1), dtype), _rand((1, 1000), torch.float32)),  # outer product
        (_rand((64, 515), dtype), _rand((515,), dtype)),  # bias; odd rows misalign every other row
        (_rand((3, 5, 300), dtype), _rand((5, 1), torch.float64)),  # 3-d, broadcast along rows
        (_rand((5, 3, 600), dtype)[:, 1], _rand((600,), dtype)),  # sliced rows
    ]
    for a, b in cases:
        _close(_ours_fused(a, b), ref(a, b))
        _close(_ours_fused(b, a), ref(b, a))
    big = _rand((9, 1000), dtype)
    _close(_ours_fused(big[:, 1:], 3), ref(big[:, 1:], torch.tensor(3, device="cuda")))  # rows start misaligned
    assert any(s.spec.path == "rows" for s in _ours_fused.specializations)


def test_extra_args_given_overridden_defaulted():
    code = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
    ours = create_jit_fn(code, alpha=1.0)
    ref = torch.cuda.jiterator._create_jit_fn(code, alpha=1.0)
    a, b = _rand((1000,), torch.float32), _rand((1000,), torch.float32)
    _close(ours(a, b), ref(a, b))
    _close(ours(a, b, alpha=3.14), ref(a, b, alpha=3.14))
    _close(ours(a, b, alpha=2), -a + 2 * b)


def test_kwargs_bind_by_name_not_by_order():
    code = "template <typename T> T f(T x, T a, T b) { return x * a - b; }"
    ours = create_jit_fn(code, b=5.0, a=2.0)
    x = _rand((64,), torch.float32)
    _close(ours(x), x * 2.0 - 5.0)


def test_bool_extra_arg():
    code = "template <typename T> T f(T x, bool negate) { return negate ? -x : x; }"
    ours = create_jit_fn(code, negate=False)
    x = _rand((100,), torch.float32)
    _close(ours(x), x)
    _close(ours(x, negate=True), -x)


def test_helper_function_and_seed_examples_verbatim():
    create = create_jit_fn
    code_string = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
    jitted_fn = create(code_string, alpha=1.0)
    a = torch.rand(3, device="cuda")
    b = torch.rand(3, device="cuda")
    result = jitted_fn(a, b, alpha=3.14)
    _close(result, -a + 3.14 * b)

    code_string = "template <typename T> T util_fn(T x, T y) { return ::sin(x) + ::cos(y); }"
    code_string += "template <typename T> T my_kernel(T x, T y, T val) { return ::min(val, util_fn(x, y)); }"
    jitted_fn = create(code_string, val=0.0)
    a = torch.rand(3, device="cuda")
    b = torch.rand(3, device="cuda")
    result = jitted_fn(a, b)
    _close(result, torch.clamp(torch.sin(a) + torch.cos(b), max=0.0))


def test_seed_torch_library_override():
    code_string = "template <typename T> T my_gelu(T a) { return a > 0 ? a : 0; }"
    my_gelu = create_jit_fn(code_string)
    my_lib = torch.library.Library("aten", "IMPL")
    my_lib.impl("aten::gelu", my_gelu, "CUDA")
    try:
        a = torch.rand(3, device="cuda") - 0.5
        assert torch.allclose(torch.nn.functional.gelu(a), torch.nn.functional.relu(a))
    finally:
        my_lib._destroy()
    a = torch.rand(3, device="cuda") - 0.5
    assert not torch.allclose(torch.nn.functional.gelu(a), torch.nn.functional.relu(a))


@pytest.mark.parametrize("num_inputs", [1, 5, 8, 16])
def test_many_inputs(num_inputs):
    params = ", ".join(f"T x{i}" for i in range(num_inputs))
    body = " + ".join(f"x{i}" for i in range(num_inputs))
    code = f"template <typename T> T f({params}) {{ return {body}; }}"
    xs = [_rand((257, 3), torch.float32) for _ in range(num_inputs)]
    ours = create_jit_fn(code)(*xs)
    _close(ours, sum(xs[1:], xs[0]))
    if num_inputs <= 8:
        _close(ours, torch.cuda.jiterator._create_jit_fn(code)(*xs))


@pytest.mark.parametrize("num_outputs", [1, 4, 8])
def test_many_outputs(num_outputs):
    outs = ", ".join(f"T& o{j}" for j in range(num_outputs))
    body = " ".join(f"o{j} = x * {j + 1} + y;" for j in range(num_outputs))
    code = f"template <typename T> void f(T x, T y, {outs}) {{ {body} }}"
    x, y = _rand((1000,), torch.float32), _rand((1000,), torch.float32)
    results = create_multi_output_jit_fn(code, num_outputs)(x, y)
    reference = torch.cuda.jiterator._create_multi_output_jit_fn(code, num_outputs)(x, y)
    # torch returns the tensor itself for one output; so does jiter_magic
    assert isinstance(results, torch.Tensor) == isinstance(reference, torch.Tensor) == (num_outputs == 1)
    reference = reference if isinstance(reference, (tuple, list)) else (reference,)
    results = results if isinstance(results, tuple) else (results,)
    assert len(results) == num_outputs
    for j, (r, ref) in enumerate(zip(results, reference)):
        _close(r, x * (j + 1) + y)
        _close(r, ref)


def test_zero_dim_and_empty():
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x * y; }")
    a, b = torch.tensor(3.0, device="cuda"), torch.tensor(4, device="cuda")
    r = f(a, b)
    assert r.shape == () and r.dtype == torch.float32 and r.item() == 12.0
    before = jiter_magic.cache_stats()["compiles"]
    e = f(torch.empty(0, 3, device="cuda"), torch.empty(3, device="cuda", dtype=torch.float64))
    assert e.shape == (0, 3) and e.dtype == torch.float64 and e.device.type == "cuda"
    assert jiter_magic.cache_stats()["compiles"] == before


def test_python_scalar_is_weak():
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x * y; }")
    h = _rand((100,), torch.float16)
    r = f(h, 2.5)
    assert r.dtype == torch.float16
    _close(r, h * 2.5)
    i = _rand((100,), torch.int32)
    assert f(i, 2.5).dtype == torch.float32
    _close(f(i, 3), i * 3)


def test_out_argument_and_casting():
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }")
    a, b = _rand((64, 3), torch.float32), _rand((3,), torch.float32)
    out = torch.empty(64, 3, device="cuda", dtype=torch.float64)
    r = f(a, b, out=out)
    assert r is out
    _close(out, (a + b).double())
    with pytest.raises(TypeError):
        f(a, b, out=torch.empty(64, 3, device="cuda", dtype=torch.int32))
    with pytest.raises(ValueError):
        f(a, b, out=torch.empty(64, 4, device="cuda"))
    f(a, b, out=a)  # in place
    assert torch.isfinite(a).all()


def test_more_than_2_31_elements():
    n = 2**31 + 4099
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }")
    x = torch.ones(n, dtype=torch.int8, device="cuda")
    y = torch.full((n,), 2, dtype=torch.int8, device="cuda")
    r = f(x, y)
    assert r.dtype == torch.int8 and r.numel() == n
    assert int(r[-1]) == 3 and int(r[0]) == 3 and int(r[2**31 + 5]) == 3
    assert bool((r == 3).all())
    del x, y, r
    # a strided view over more than 2**31 elements (stride 2)
    base = torch.ones(2 * (2**30 + 1025), dtype=torch.int8, device="cuda")
    v = base[::2]
    r = f(v, v)
    assert bool((r == 2).all())
    del base, v, r
    torch.cuda.empty_cache()


def test_side_stream_and_no_sync():
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x * y + 1; }")
    side = torch.cuda.Stream()
    x = torch.empty(1 << 24, device="cuda")
    with torch.cuda.stream(side):
        x.fill_(2.0)  # queued work
        torch.cuda._sleep(50_000_000)  # keep the side stream busy
        x.fill_(3.0)
        r = f(x, x)  # must run after the fills on the same stream
    side.synchronize()
    assert bool((r == 10.0).all())


def test_cuda_graph_capture():
    f = create_jit_fn("template <typename T> T f(T x, T y, T alpha) { return x + alpha * y; }", alpha=2.0)
    x, y = _rand((4096,), torch.float32), _rand((4096,), torch.float32)
    out = torch.empty_like(x)
    f(x, y, out=out)  # warm up: compile and load outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        f(x, y, out=out)
    x.copy_(_rand((4096,), torch.float32))
    graph.replay()
    torch.cuda.synchronize()
    _close(out, x + 2.0 * y)


def test_cupy_inputs():
    cupy = pytest.importorskip("cupy")
    f = create_jit_fn("template <typename T> T f(T x, T y, T alpha) { return x + alpha * y; }", alpha=2.0)
    a = cupy.random.rand(5, 7).astype(cupy.float32)
    b = cupy.arange(7, dtype=cupy.int64)
    r = f(a, b)
    assert isinstance(r, cupy.ndarray) and r.dtype == cupy.float64  # NumPy rules: float32 + int64 -> float64
    cupy.testing.assert_allclose(r, a + 2.0 * b, rtol=1e-6)
    c = cupy.random.rand(9).astype(cupy.float32)[::-2]
    r = f(c, c)
    cupy.testing.assert_allclose(r, 3.0 * c, rtol=1e-6)
    h = cupy.random.rand(33).astype(cupy.float16)
    r = f(h, 2.0)  # weak scalar keeps float16
    assert r.dtype == cupy.float16


def test_cpu_and_cuda_agree_on_random_cases():
    import numpy as np

    f = create_jit_fn("template <typename T> T f(T x, T y, T a) { return a * x - y * y; }", a=1.5)
    rng = np.random.default_rng(0)
    dtypes = [torch.float32, torch.float64, torch.int32, torch.float16, torch.bfloat16, torch.complex64]
    for _ in range(60):
        ndim = int(rng.integers(0, 5))
        shape = tuple(int(s) for s in rng.integers(1, 6, size=ndim))
        da, db = (dtypes[int(i)] for i in rng.integers(0, len(dtypes), 2))
        a = _rand(shape, da, "cpu")
        b = _rand(shape[int(rng.integers(0, ndim + 1)):] if ndim else (), db, "cpu")
        if ndim >= 2 and rng.random() < 0.5:
            a = a.transpose(0, 1)
            b = b if b.dim() < 2 else b.transpose(-1, -2)
        alpha = float(rng.normal())
        try:
            cpu = f(a, b, a=alpha)
        except (ValueError, TypeError):
            continue  # shapes that do not broadcast after the transpose, or float16 + complex (complex32)
        gpu = f(a.cuda(), b.cuda(), a=alpha)
        _close(gpu.cpu(), cpu)


def test_fresh_process_hits_disk_cache_without_nvrtc(tmp_path):
    script = textwrap.dedent(
        """
        import os, sys, torch
        import jiter_magic
        code = "template <typename T> T f(T x, T y) { return x - 2 * y; }"
        fn = jiter_magic.create_jit_fn(code)
        x = torch.rand(1000, device="cuda"); y = torch.rand(1000, device="cuda")
        if sys.argv[1] == "second":
            from cupy.cuda import nvrtc
            def refuse(*a, **k):
                raise AssertionError("NVRTC was called on a disk-cache hit")
            nvrtc.compileProgram = refuse
        r = fn(x, y)
        assert torch.allclose(r, x - 2 * y)
        s = jiter_magic.cache_stats()
        print(sys.argv[1], s["compiles"], s["disk_hits"])
        """
    )
    path = tmp_path / "probe.py"
    path.write_text(script)
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.getcwd())
    first = subprocess.run([sys.executable, str(path), "first"], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["first", "1", "0"]
    second = subprocess.run([sys.executable, str(path), "second"], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["second", "0", "1"]


def test_two_devices_error_or_skip():
    if torch.cuda.device_count() < 2:
        f = create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }")
        with pytest.raises(RuntimeError, match="devices|library|CPU"):
            f(torch.ones(3, device="cuda"), torch.ones(3))
        return
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }")
    with pytest.raises(RuntimeError, match="devices"):
        f(torch.ones(3, device="cuda:0"), torch.ones(3, device="cuda:1"))


class _CudaArrayInterfaceOnly:
    """A foreign CUDA array (as numba's would be): only __cuda_array_interface__."""

    def __init__(self, tensor):
        self._tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


class _DLPackOnly:
    """A foreign CUDA array known only through DLPack."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


def test_foreign_cuda_arrays_and_wide_unsigned():
    cupy = pytest.importorskip("cupy")
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x * y + 1; }")
    a, b = _rand((50,), torch.float32), _rand((50,), torch.float32)
    for wrap in (_CudaArrayInterfaceOnly, _DLPackOnly):
        r = f(wrap(a), wrap(b))
        assert isinstance(r, cupy.ndarray) and r.dtype == cupy.float32
        torch.testing.assert_close(torch.as_tensor(r, device="cuda"), a * b + 1)
    for name in ("uint16", "uint32", "uint64"):
        u = cupy.arange(1, 40, dtype=name)
        r = f(u, u)
        assert r.dtype == cupy.dtype(name)
        cupy.testing.assert_array_equal(r, u * u + 1)


def test_lazy_views_and_long_transposes_on_cuda():
    f = create_jit_fn("template <typename T> T f(T x, T y) { return x * y + x; }")
    z = torch.randn(1000, dtype=torch.complex64, device="cuda")
    _close(f(z.conj(), z), z.conj() * z + z.conj())
    _close(f(z.conj().imag, z.real), z.conj().imag * z.real + z.conj().imag)
    # the second loop dimension needs more than 65535 tiles: not the tiled path, still right
    a = _rand((4_200_000, 16), torch.float32)
    b = _rand((16, 4_200_000), torch.float32).t()
    _close(f(a, b), a * b + a)


def test_malformed_entry_declarations_raise_at_creation_as_torch_does():
    for code in ("template <typename T> T my _kernel(T x) { return x; }",
                 "template <typename T> Tmy_kernel(T x) { return x; }"):
        with pytest.raises(Exception):  # noqa: B017 - torch raises a bare Exception here
            torch.cuda.jiterator._create_jit_fn(code)
        with pytest.raises(jiter_magic.ParseError, match="expected"):
            create_jit_fn(code)


def test_tensor_subclasses_and_layouts_on_cuda_run_their_own_way_or_are_refused_before_a_launch(tmp_path):
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    add = create_jit_fn("template <typename T> T gpu_add(T x, T y) { return x + y; }")
    dense = torch.arange(8.0, device="cuda")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1)
    try:
        sharded = distribute_tensor(dense, init_device_mesh("cuda", (1,)), [Shard(0)])
        for _ in range(3):  # the general path, then what would be the hot path: the local shard, never the pointer
            result = add(sharded, sharded)
            assert isinstance(result, DTensor) and result.placements == (Shard(0),)
            _close(result.full_tensor(), 2 * dense)
    finally:
        dist.destroy_process_group()
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(dense)
    result = add(fake, fake)  # the function's torch operator: its fake implementation, no launch
    assert type(result).__name__ == "FakeTensor" and result.device == dense.device and result.shape == (8,)
    with pytest.raises(jiter_magic.UnsupportedArrayError, match="sparse"):
        add(dense.to_sparse(), dense)
    torch.cuda.synchronize()  # no launch touched memory it should not have: the context is healthy
    _close(add(dense, dense), 2 * dense)


def test_a_storage_freed_or_shrunk_under_a_view_is_refused_on_cuda():
    add = create_jit_fn("template <typename T> T gpu_freed_add(T x, T y) { return x + y; }")
    live = torch.ones(1 << 16, device="cuda")
    _close(add(live, live), 2 * live)  # planned: the next call of this layout takes the hot path
    freed = torch.ones(1 << 16, device="cuda")
    freed.untyped_storage().resize_(0)
    with pytest.raises(jiter_magic.UnsupportedArrayError, match="reaches byte 262144 of its storage, which holds only 0"):
        add(freed, live)
    shrunk = torch.ones((1 << 16) + 8, device="cuda")[8:]
    shrunk.untyped_storage().resize_(64)
    for call in (lambda: add(shrunk, 1.0), lambda: add(shrunk, live, out=torch.empty_like(live))):
        with pytest.raises(jiter_magic.UnsupportedArrayError, match="resized under the view"):
            call()  # general calls compare each tensor's room with what the plan reads
    torch.cuda.synchronize()
    _close(add(live, live), 2 * live)


def test_gradients_are_never_silently_missing_on_cuda():
    scale = create_jit_fn("template <typename T> T gpu_scale(T x, T a) { return x * a; }", a=3.0)
    x = torch.arange(4.0, device="cuda", requires_grad=True)
    with torch.no_grad():
        _close(scale(x), 3 * x.detach())
    result = scale(x)
    assert result.grad_fn is not None
    with pytest.raises(jiter_magic.GradientError, match="gpu_scale has no backward"):
        result.sum().backward()
    with pytest.raises(jiter_magic.GradientError, match="out="):
        scale(x, out=torch.empty(4, device="cuda"))


def test_the_device_is_named_where_a_notebook_user_reads_it():
    from jiter_magic.runtime.inspection import cuda_device_name

    name = cuda_device_name()
    assert name.startswith(f"cuda:{torch.cuda.current_device()}, ") and torch.cuda.get_device_name() in name
    pytest.importorskip("pygments")  # the panel's and the magic's text need the notebook extra
    from jiter_magic.notebook.panel_kinds import kind_of
    from jiter_magic.notebook.report import summary

    fn = create_jit_fn("template <typename T> T gpu_named(T x) { return x + T(1); }")
    fn.compile("float32", backend="cuda")
    line = summary(fn, "gpu_named")
    assert line.startswith("gpu_named: ") and f"for CUDA sm_{torch.cuda.get_device_capability()[0]}" in line
    assert f"({name}), (float32) -> (float32)" in line
    assert kind_of(fn).runs_on(fn) == f"the inputs' device ({name}, or the CPU)"
    fn.backend = "cuda"
    assert kind_of(fn).runs_on(fn) == name


_bench_axpy = create_jit_fn("template <typename T> T gpu_bench_axpy(T x, T y, T alpha) { return x + alpha * y; }",
                            alpha=2.0)


def _sane_gpu_result(r, repeat, moved):
    assert r.device.startswith(f"cuda:{torch.cuda.current_device()} ") and torch.cuda.get_device_name() in r.device
    assert r.repeat == repeat and len(r.samples) == repeat and r.calls_per_sample == 1  # events: one call a sample
    assert r.bytes == moved
    assert 0 < r.min_seconds <= r.median_seconds
    assert r.gbps == pytest.approx(r.bytes / r.median_seconds / 1e9)
    assert r.copy_gbps > 0 and r.fraction == pytest.approx(r.gbps / r.copy_gbps)
    assert 0 < r.fraction < 1.5  # the copy runs near the memory's bandwidth; an elementwise call cannot go far past it


def test_benchmark_times_cuda_tensors_with_events_against_a_copy():
    n = 1 << 24  # 192 MB moved: past the L2 cache
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    r = _bench_axpy.benchmark(x, y, reference=lambda a, b: torch.add(a, b, alpha=2.0), repeat=10)
    _sane_gpu_result(r, 10, 3 * 4 * n)
    assert r.reference_seconds > 0 and r.speedup == pytest.approx(r.reference_seconds / r.median_seconds)
    out = torch.empty(n, dtype=torch.float64, device="cuda")
    r = _bench_axpy.benchmark(x, y, out=out, alpha=3.0, repeat=5)
    _sane_gpu_result(r, 5, 2 * 4 * n + 8 * n)
    torch.testing.assert_close(out, (x + 3.0 * y).double())
    col, row = torch.rand(4096, 1, device="cuda"), torch.rand(1, 4096, device="cuda")
    _sane_gpu_result(_bench_axpy.benchmark(col, row, repeat=5), 5, 4 * 4096 * 2 + 4 * 4096 * 4096)
    with pytest.raises(jiter_magic.DeviceError, match="different devices"):
        _bench_axpy.benchmark(x, torch.rand(n))


def test_benchmark_times_cupy_arrays_with_cupy_events():
    cupy = pytest.importorskip("cupy")
    n = 1 << 24
    x = cupy.random.rand(n, dtype=cupy.float32)
    y = cupy.random.rand(n, dtype=cupy.float32)
    r = jiter_magic.benchmark(_bench_axpy, x, y, reference=lambda a, b: a + 2.0 * b, repeat=10)
    _sane_gpu_result(r, 10, 3 * 4 * n)
    assert r.speedup is not None and r.speedup > 0


def test_sweep_on_cuda_measures_the_copy_at_each_size():
    result = jiter_magic.sweep(_bench_axpy, lambda n: (torch.rand(n, device="cuda"), torch.rand(n, device="cuda")),
                               [1 << 16, 1 << 20, 1 << 24], repeat=5)
    assert [r.bytes for r in result.results] == [12 << 16, 12 << 20, 12 << 24]
    assert all(r.copy_gbps > 0 and r.device.startswith("cuda:") for r in result.results)


def test_def_backward_passes_gradcheck_on_cuda():
    fn = create_jit_fn("template <typename T> T sq_axpy(T x, T y, T a) { return a * x * x + y; }", a=2.0)
    fn.def_backward("template <typename T> void sq_axpy_bwd(T x, T y, T a, T g, T& gx, T& gy) "
                    "{ gx = 2 * a * x * g; gy = g; }")
    x = torch.rand(3, 4, dtype=torch.float64, device="cuda", requires_grad=True)
    y = torch.rand(4, dtype=torch.float64, device="cuda", requires_grad=True)  # broadcast along the rows
    assert torch.autograd.gradcheck(lambda x, y: fn(x, y, a=-0.5), (x, y))
    sincos = create_multi_output_jit_fn("template <typename T> void sc(T x, T& s, T& c) { s = ::sin(x); c = ::cos(x); }",
                                        2)
    sincos.def_backward("template <typename T> void sc_bwd(T x, T gs, T gc, T& gx) "
                        "{ gx = gs * ::cos(x) - gc * ::sin(x); }")
    z = torch.rand(7, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda z: sincos(z), (z,))
    assert all(s.backend == "cuda" for s in fn.backward.specializations + sincos.backward.specializations)
