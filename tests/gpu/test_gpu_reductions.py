"""Reductions on a CUDA GPU against torch's: every kernel shape (a warp or a block a row, columns,
dense runs, the two-stage grid), dtypes, layouts, empty inputs, `out=`, `dtype=`, CuPy arrays,
determinism.

Marked `gpu`; skipped without one.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from jiter_magic import create_reduction_fn  # noqa: E402
from jiter_magic.planning.reduce_spec import BLOCK_ROWS, COLUMNS, DENSE_RUNS, GRID, WARP_ROWS  # noqa: E402

pytestmark = pytest.mark.gpu

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MAX = "template <typename T> T larger(T a, T b) { return (a != a || a > b) ? a : b; }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
SUM = create_reduction_fn(ADD, 0, combine="add")
SUMSQ = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
AMAX = create_reduction_fn(MAX, float("-inf"), combine="larger")
AVERAGE = create_reduction_fn(ADD + MEAN, 0, combine="add", finalize="mean")
TOLERANCE = {torch.float16: 3e-3, torch.bfloat16: 2e-2, torch.float32: 1e-4, torch.float64: 1e-10}


def sample(shape, dtype):
    if dtype is torch.bool:
        return torch.rand(shape, device="cuda") > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 50, shape, device="cuda").to(dtype)
    return torch.randn(shape, device="cuda", dtype=torch.float64).to(dtype)


def check(result, expected):
    assert result.dtype == expected.dtype and result.shape == expected.shape and result.is_cuda
    if expected.dtype.is_floating_point:
        tol = TOLERANCE[expected.dtype]
        torch.testing.assert_close(result.double(), expected.double(), rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(result, expected)


SHAPES = [  # (shape, dim, the kernel shape it takes)
    ((4096, 1000), 1, WARP_ROWS), ((512, 8192), 1, BLOCK_ROWS), ((8192, 512), 0, COLUMNS),
    ((1 << 22,), None, GRID), ((3, 1_000_001), 1, GRID), ((64, 33, 65), (0, 2), GRID),
]


@pytest.mark.parametrize(("shape", "dim", "path"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.bool, torch.uint8], ids=str)
def test_every_kernel_shape_against_torch(shape, dim, path, dtype):
    x = sample(shape, dtype)
    wide = x.double() if dtype.is_floating_point else x.long()
    result_dtype = dtype if dtype.is_floating_point else torch.int64
    expected = (wide * wide).sum() if dim is None else (wide * wide).sum(dim)
    check(SUMSQ(x, dim=dim), expected.to(result_dtype))
    assert SUMSQ.specializations[-1].spec.path == path
    expected_max = x.amax() if dim is None else x.amax(dim)
    check(AMAX(x, dim=dim), expected_max.to(result_dtype))


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)], ids=str)
def test_non_contiguous_broadcast_and_keepdim(dim):
    base = sample((40, 50, 60), torch.float32)
    for x in (base.transpose(0, 2), base[:, ::3, 1::2], sample((1, 50, 1), torch.float32).expand(40, 50, 60)):
        expected = (x * x).sum() if dim is None else (x * x).sum(dim, keepdim=True)
        check(SUMSQ(x, dim=dim, keepdim=dim is not None), expected)


def test_mean_empty_out_and_dtype():
    x = sample((300, 700), torch.float16)
    check(AVERAGE(x, dim=1), x.mean(1))
    empty = sample((5, 0), torch.float32)
    check(SUM(empty, dim=1), empty.sum(1))
    out = torch.empty(700, device="cuda", dtype=torch.float32)
    assert SUM(x, dim=0, dtype=torch.float32, out=out) is out
    check(out, x.sum(0, dtype=torch.float32))


def test_deterministic_across_calls():
    for x, dim in ((sample((1 << 24,), torch.float32), None), (sample((8192, 4096), torch.float32), 0),
                   (sample((4096, 4096), torch.float32), 1)):
        first = SUMSQ(x, dim=dim)
        assert all(torch.equal(SUMSQ(x, dim=dim), first) for _ in range(5))


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1 << 20, dtype=cupy.float32).reshape(1024, 1024) / 1024
    result = SUMSQ(x, dim=1)
    assert isinstance(result, cupy.ndarray)
    cupy.testing.assert_allclose(result, (x * x).sum(axis=1), rtol=1e-5)


KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")


@pytest.mark.parametrize(("shape", "dim", "path"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.int64], ids=str)
def test_max_with_indices_on_every_kernel_shape(shape, dim, path, dtype):
    from jiter_magic import create_multi_output_reduction_fn

    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    x = torch.randint(0, 5, shape, device="cuda").to(dtype)  # many ties: the first index must win
    values, indices = argmax(x, dim=dim)
    assert argmax.specializations[-1].spec.path == path and argmax.specializations[-1].spec.indexed
    if dim is None:
        assert int(indices) == int(torch.argmax(x)) and values.item() == x.max().item()
    elif isinstance(dim, tuple):
        flat = x.permute(1, 0, 2).reshape(x.shape[1], -1)
        assert torch.equal(indices, flat.argmax(1)) and torch.equal(values, flat.amax(1))
    else:
        expected = x.max(dim=dim)
        assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)
    assert values.dtype == dtype and indices.dtype == torch.int64 and indices.is_cuda


def test_max_with_indices_nan_out_and_repeats():
    from jiter_magic import create_multi_output_reduction_fn

    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    x = torch.randn(300, 5000, device="cuda")
    x[7, 4000] = x[7, 4100] = float("nan")
    values, indices = torch.empty(300, device="cuda"), torch.empty(300, device="cuda", dtype=torch.int64)
    argmax(x, dim=1, out=(values, indices))
    expected = x.max(dim=1)
    assert torch.equal(indices, expected.indices) and values[7].isnan() and int(indices[7]) == 4000
    assert all(torch.equal(argmax(x, dim=1).indices, indices) for _ in range(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int8], ids=str)
def test_grid_vector_loads_against_torch(dtype):
    # A full reduction of a dense array and a few long aligned rows read vectors; an offset view does not.
    flat = sample((1 << 22,), dtype)
    few = sample((3, 1 << 20), dtype)
    for x, dim, vec in ((flat, None, 16 // flat.element_size()), (few, 1, 16 // few.element_size()),
                        (flat[1:-7], None, 1)):
        wide = x.double() if dtype.is_floating_point else x.long()
        result_dtype = dtype if dtype.is_floating_point else torch.int64
        expected = (wide * wide).sum() if dim is None else (wide * wide).sum(dim)
        check(SUMSQ(x, dim=dim), expected.to(result_dtype))
        built = {(b.spec.path, b.spec.vec, b.spec.inputs) for b in SUMSQ.specializations}
        assert (GRID, min(vec, 8), (str(dtype).removeprefix("torch."),)) in built, built


@pytest.mark.parametrize(("shape", "dim", "hot"), [((512, 4096), 1, "HotPlan"), ((300, 70), 1, "HotPlan"),
                                                   ((4096, 64), 0, "HotPlan"), ((1 << 20,), None, "function")])
def test_the_hot_path_on_a_gpu(shape, dim, hot):
    """A call keyed like one before runs as a C HotPlan on the current stream (runtime/reduce_hot.py);
    a grid reduction over several blocks (two launches) as a Python function writing pointers."""
    fn = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
    x = sample(shape, torch.float32)
    check(fn(x, dim=dim), (x * x).sum(dim) if dim is not None else (x * x).sum())
    assert [type(run).__name__ for run in fn._calls.hot.values()] == [hot]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # launched on the side stream, as torch's own ops would be
        y = sample(shape, torch.float32)
        results = [fn(y, dim=dim) for _ in range(3)]
    side.synchronize()
    for result in results:
        check(result, (y * y).sum(dim) if dim is not None else (y * y).sum())
    assert torch.equal(results[0], results[2])  # deterministic, also on the hot path
    outs = [torch.empty_like(results[0]) for _ in range(3)]
    before = fn.call_counts.hot
    with torch.cuda.stream(side):  # into out=: the general path once, then a hot path of its own
        side.wait_stream(torch.cuda.current_stream())
        for out in outs:
            assert fn(y, dim=dim, out=out) is out
    side.synchronize()
    assert fn.call_counts.hot - before == 2 and all(torch.equal(out, results[0]) for out in outs)


@pytest.mark.parametrize(("dtype", "width"), [(torch.float16, 2), (torch.bfloat16, 2), (torch.int16, 2),
                                              (torch.uint8, 4), (torch.int8, 4), (torch.bool, 4)], ids=str)
def test_columns_of_narrow_dtypes_read_several_at_once(dtype, width):
    """1- and 2-byte columns: each thread folds `width` neighbouring columns read as one 4-byte access
    (kernels/reduce_cuda.py `_column_width`), against torch, also into a strided out= and with indices;
    a kept size that is not a multiple of the width, or a misaligned view, reads one at a time."""
    from jiter_magic import create_multi_output_reduction_fn

    def spec_of(x, **options):  # the spec a call took: a fresh function's one build
        fresh = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
        check(fresh(x, **options), SUMSQ(x, **options))
        return fresh.specializations[-1].spec

    wide = torch.float64 if dtype.is_floating_point else torch.int64
    result_dtype = dtype if dtype.is_floating_point else torch.int64
    for shape, dim in (((2000, 96), 0), ((7, 300, 128), (0, 1)), ((30, 11, 64), 1)):
        x = sample(shape, dtype)
        check(SUMSQ(x, dim=dim, keepdim=True), (x.to(wide) ** 2).sum(dim, keepdim=True).to(result_dtype))
        spec = spec_of(x, dim=dim, keepdim=True)
        assert spec.path == COLUMNS and spec.vec == width, spec
    x = sample((2000, 96), dtype)
    out = torch.empty(96, 2, device="cuda", dtype=result_dtype)[:, 1]  # every other element
    assert SUMSQ(x, dim=0, out=out) is out
    check(out, (x.to(wide) ** 2).sum(0).to(result_dtype))
    for odd in (sample((500, 67), dtype), sample((500, 65), dtype)[:, 1:]):
        check(SUMSQ(odd, dim=0), (odd.to(wide) ** 2).sum(0).to(result_dtype))
        assert spec_of(odd, dim=0).vec == 1
    if dtype is torch.bool:
        return
    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    ties = torch.randint(0, 3, (3000, 128), device="cuda").to(dtype)  # many ties: the first index must win
    values, indices = argmax(ties, dim=0)
    assert argmax.specializations[-1].spec.vec == width
    expected = ties.max(dim=0)
    assert torch.equal(indices, expected.indices) and torch.equal(values, expected.values)


@pytest.mark.parametrize("first", ["torch", "cupy"])
@pytest.mark.parametrize("kind", ["elementwise", "reduction"])
def test_results_never_depend_on_the_library_of_an_earlier_call_on_the_gpu(kind, first):
    """A float16 array with a 0-d float64 one on the GPU, in torch then CuPy or the reverse: each
    library's own promotion (torch keeps float16, CuPy's NEP 50 rules give float64), whatever ran first."""
    cupy = pytest.importorskip("cupy")
    import jiter_magic

    code = ("template <typename T> T gpu_scale(T x, T y) { return x * y; }\n"
            f"template <typename T> T gpu_add(T a, T b) {{ return a + b; }} // {kind} {first}\n")
    fn = (jiter_magic.create_jit_fn(code.split("\n")[0]) if kind == "elementwise" else
          create_reduction_fn(code, 0, "gpu_scale", combine="gpu_add"))
    x = cupy.arange(12, dtype=cupy.float16).reshape(3, 4)
    y = cupy.asarray(2.0)
    calls = {"torch": lambda: fn(torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda"),
                                 **({} if kind == "elementwise" else {"dim": 1})),
             "cupy": lambda: fn(x, y, **({} if kind == "elementwise" else {"dim": 1}))}
    want = {"torch": torch.float16, "cupy": cupy.dtype(cupy.float64)}
    for library in (first, "cupy" if first == "torch" else "torch"):
        for _ in range(2):
            result = calls[library]()
            assert result.dtype == want[library]
            expected = (x.astype(cupy.float64) * 2.0)
            expected = expected if kind == "elementwise" else expected.sum(1)
            cupy.testing.assert_allclose(cupy.asarray(result).astype(cupy.float64), expected)


# Issue 42 item 7: a few long rows spread over several blocks (the grid path), rows made of several
# dense runs (dense_runs), and reductions with indices, whose loads are unrolled.


def _argmax():
    from jiter_magic import create_multi_output_reduction_fn

    return create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")


def _spec(fn):
    """The spec of a function's latest build."""
    return fn.specializations[-1].spec


def _sums_against_torch(x, dim, keepdim=False):
    """Sums of squares, maxima and means of a fresh function each, against torch's; the specs built."""
    wide = x.double() if x.dtype.is_floating_point else x.long()
    result_dtype = x.dtype if x.dtype.is_floating_point else torch.int64
    sumsq, amax = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add"), create_reduction_fn(
        MAX, float("-inf"), combine="larger")
    check(sumsq(x, dim=dim, keepdim=keepdim), (wide * wide).sum(dim, keepdim=keepdim).to(result_dtype))
    check(amax(x, dim=dim, keepdim=keepdim), wide.amax(dim, keepdim=keepdim).to(result_dtype))
    if x.dtype.is_floating_point:
        mean = create_reduction_fn(ADD + MEAN, 0, combine="add", finalize="mean")
        check(mean(x, dim=dim, keepdim=keepdim), wide.mean(dim, keepdim=keepdim).to(result_dtype))
    return _spec(sumsq), _spec(amax)


@pytest.mark.parametrize(("shape", "dim", "dtype", "vec"), [
    ((64, 1 << 22), -1, torch.float32, 4),  # item 7's shape: 64 blocks a row
    ((64, 1 << 16), 1, torch.float32, 4),
    ((100, 70001), 1, torch.float32, 1),  # a row length no vector divides
    ((64, 1 << 16), 1, torch.bfloat16, 8),
    ((200, 1 << 17), 1, torch.int32, 4),
    ((130, 1 << 16), 1, torch.float64, 2),
], ids=str)
def test_a_few_long_rows_spread_over_several_blocks(shape, dim, dtype, vec):
    x = sample(shape, dtype)
    for spec in _sums_against_torch(x, dim):
        assert (spec.path, spec.vec) == (GRID, vec), spec


def test_a_few_long_rows_offset_views_keepdim_out_and_indices():
    base = sample((130, (1 << 17) + 8), torch.float32)
    for x, vec in ((base[:, 8:], 4), (base[:, 1:-3], 1)):  # 32 bytes in: aligned; 4 bytes in: not
        for spec in _sums_against_torch(x, 1, keepdim=True):
            assert (spec.path, spec.vec) == (GRID, vec), spec
    out = torch.empty(130, 3, device="cuda")[:, 1]
    assert SUMSQ(base, dim=1, out=out) is out
    check(out, (base.double() ** 2).sum(1).float())
    argmax = _argmax()
    for dtype in (torch.float32, torch.bfloat16, torch.int8):
        ties = torch.randint(0, 5, (64, (1 << 17) + 64), device="cuda").to(dtype)  # the first index must win
        values, indices = argmax(ties, dim=1)
        assert _spec(argmax).path == GRID and _spec(argmax).indexed
        expected = ties.max(dim=1)
        assert torch.equal(indices, expected.indices) and torch.equal(values, expected.values)


@pytest.mark.parametrize(("shape", "dim", "run"), [
    ((64, 512, 8192), (0, 2), 8192),  # item 7's shape: runs of 8192, 64 a row
    ((8, 40, 1024), (0, 2), 1024),
    ((9, 300, 1030), (0, 2), 1030),  # a run length few vectors divide
    ((8, 64, 32, 1024), (0, 2, 3), 32 * 1024),  # dims 2 and 3 coalesced into one run
    ((16, 300, 2, 2048), (0, 2, 3), 2 * 2048),
    ((3, 100, 4096), (0, 2), 4096),  # 3 runs a row, a block each
    ((4, 4096, 1024), (0, 2), 1024),  # one block a row (4 runs) stores the result: one launch
], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.uint8], ids=str)
def test_dense_runs_against_torch(shape, dim, run, dtype):
    if shape == (64, 512, 8192) and dtype is not torch.float32:
        pytest.skip("item 7's shape runs in float32 only")
    x = sample(shape, dtype)
    if dtype is torch.float16:  # sums of squares of up to 2^18 elements: below float16's largest value
        x = x / 64
    # 16-byte loads where the run length and every stride are multiples of the vector.
    vec = min(16 // x.element_size(), 8)
    width = vec if run % vec == 0 and all(s % vec == 0 for s in x.stride()[:-1]) else 1
    for spec in _sums_against_torch(x, dim):
        assert (spec.path, spec.vec) == (DENSE_RUNS, width), spec


def test_dense_runs_of_views_keepdim_out_determinism_and_the_hot_path():
    base = sample((9, 300, 2048), torch.float32)
    # A narrower view (runs of 1032 in rows of 2048), the kept dim first (strides 2048, 614400, 1).
    for x, dim, vec in ((base[:, :, :1032], (0, 2), 4), (base.permute(1, 0, 2), (1, 2), 4),
                        (base[:, :, 1:1031], (0, 2), 1)):
        for spec in _sums_against_torch(x, dim, keepdim=True):
            assert (spec.path, spec.vec) == (DENSE_RUNS, vec), spec
    out = torch.empty(300, 2, device="cuda")[:, 0]
    assert SUMSQ(base, dim=(0, 2), out=out) is out
    check(out, (base.double() ** 2).sum((0, 2)).float())
    for x, hot in ((base, "function"), (sample((4, 4096, 1024), torch.float32), "HotPlan")):
        fn = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
        first = fn(x, dim=(0, 2))
        assert all(torch.equal(fn(x, dim=(0, 2)), first) for _ in range(3))  # deterministic, also when hot
        # Two launches (partials between) from Python, or with one block a row a C HotPlan.
        assert [type(run).__name__ for run in fn._calls.hot.values()] == [hot]
        assert _spec(fn).path == DENSE_RUNS
        check(first, (x.double() ** 2).sum((0, 2)).float())


@pytest.mark.parametrize(("shape", "dim"), [((8, 40, 1024), (0, 2)), ((9, 300, 1030), (0, 2)),
                                            ((8, 64, 32, 1024), (0, 2, 3))], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8], ids=str)
def test_dense_runs_with_indices(shape, dim, dtype):
    argmax = _argmax()
    x = torch.randint(0, 5, shape, device="cuda").to(dtype)  # many ties: the first index must win
    if dtype.is_floating_point:
        x[3, 7, 1] = float("nan")  # a NaN wins, the first of them
        x[5, 7, 2] = float("nan")
    values, indices = argmax(x, dim=dim)
    assert _spec(argmax).path == DENSE_RUNS and _spec(argmax).indexed
    flat = x.movedim(1, 0).reshape(x.shape[1], -1)  # the kept dim first, the reduced ones in order
    expected = flat.max(dim=1)
    assert torch.equal(indices, expected.indices)
    torch.testing.assert_close(values, expected.values, rtol=0, atol=0, equal_nan=True)
    if dtype.is_floating_point:
        assert int(indices[7]) == int(flat[7].isnan().nonzero()[0])


def test_item_7_argmax_shapes_against_torch():
    argmax = _argmax()
    x = sample((4096, 65536), torch.bfloat16)  # columns, two a thread
    values, indices = argmax(x, dim=0)
    assert (_spec(argmax).path, _spec(argmax).vec) == (COLUMNS, 2)
    expected = x.max(dim=0)
    assert torch.equal(indices, expected.indices) and torch.equal(values, expected.values)
    del x, values, indices, expected
    x = sample((1 << 28,), torch.float32)  # the grid path, 1024 blocks
    values, indices = argmax(x)
    assert (_spec(argmax).path, _spec(argmax).vec) == (GRID, 4)
    assert int(indices) == int(torch.argmax(x)) and values.item() == x.max().item()


@pytest.mark.parametrize(("shape", "dim", "path", "vec"), [
    ((3001, 130), 0, COLUMNS, 2),  # thread rows of 375 and 376 steps: the unrolled loop's remainder
    ((3001, 131), 0, COLUMNS, 1),
    (((1 << 22) + 24,), None, GRID, 8),  # 2 or 3 steps a thread
    (((1 << 20) + 3,), None, GRID, 1),
    ((300, 5003), 1, BLOCK_ROWS, 1),
    ((300, 8200), 1, BLOCK_ROWS, 8),  # 4 or 5 steps a thread
    ((300, 1001), 1, WARP_ROWS, 1),
    ((300, 1000), 1, WARP_ROWS, 8),
], ids=str)
def test_unrolled_folds_with_indices_of_odd_sizes(shape, dim, path, vec):
    argmax = _argmax()
    x = torch.randint(0, 7, shape, device="cuda").to(torch.bfloat16)
    values, indices = argmax(x, dim=dim)
    assert (_spec(argmax).path, _spec(argmax).vec) == (path, vec)
    if dim is None:
        assert int(indices) == int(torch.argmax(x)) and values.item() == x.max().item()
    else:
        expected = x.max(dim=dim)
        assert torch.equal(indices, expected.indices) and torch.equal(values, expected.values)


def _first_maxima(x, dim):
    """torch's values and indices of the first maximum (a NaN's where there is one) over `dim`."""
    if dim is None:
        index = torch.argmax(x)
        return x.view(-1)[index], index
    if isinstance(dim, tuple):  # dims (0, 2) of a 3-d array: the kept dim first, the reduced ones in order
        found = x.movedim(1, 0).reshape(x.shape[1], -1).max(dim=1)
    else:
        found = x.max(dim=dim)
    return found.values, found.indices


def test_argmax_either_side_of_32_bit_loop_indices():
    """Below 2^31 elements reduced a thread's loop carries a 32-bit index, from 2^31 a 64-bit one:
    the last element's index comes back right either side (2 GiB of int8 each)."""
    if torch.cuda.mem_get_info()[0] < 5 << 30:
        pytest.skip("needs 5 GiB of free GPU memory")
    for count in ((1 << 31) - 8, 1 << 31):
        x = torch.zeros(count, dtype=torch.int8, device="cuda")
        x[count // 3], x[-1] = 99, 100
        argmax = _argmax()
        values, indices = argmax(x, dim=None)
        assert (values.item(), indices.item()) == (100, count - 1)
        assert _spec(argmax).index32 == (count < 1 << 31)
        del x, values, indices
        torch.cuda.empty_cache()


@pytest.mark.parametrize("variant", [{}, {"INDEXED_INDEX32": 0}, {"INDEXED_LOADS": 0}, {"INDEXED_LOADS": 2},
                                     {"INDEXED_LOADS": 8},
                                     {"INDEXED_COLUMN_BYTES": 8}, {"INDEXED_COLUMN_BYTES": 16},
                                     {"INDEXED_MIN_BLOCKS": 8}, {"INDEXED_MAX_GRID_BLOCKS": 792}], ids=str)
def test_swept_variants_of_argmax_against_torch(variant, monkeypatch):
    """bench/sweep_reduce.py's variants of the kernels with indices (kernels/reduce_cuda.py,
    reduce_cuda_loads.py) give torch's values and first indices on every path, with batches'
    remainders, ties and NaNs."""
    from jiter_magic.kernels import reduce_cuda, reduce_cuda_loads

    for name, value in variant.items():
        monkeypatch.setattr(reduce_cuda_loads if hasattr(reduce_cuda_loads, name) else reduce_cuda, name, value)
    for shape, dim in (((3001, 136), 0), (((1 << 22) + 24,), None), ((300, 8200), 1), ((300, 1000), 1),
                       ((9, 300, 1030), (0, 2))):
        argmax = _argmax()  # a fresh function: built under the variant
        x = torch.randint(0, 7, shape, device="cuda").to(torch.bfloat16)
        x.view(-1)[[4099, 70001]] = float("nan")
        values, indices = argmax(x, dim=dim)
        expected_values, expected_indices = _first_maxima(x, dim)
        assert torch.equal(indices, expected_indices), (shape, dim, _spec(argmax).describe())
        assert _spec(argmax).index32 == variant.get("INDEXED_INDEX32", 1)
        torch.testing.assert_close(values, expected_values, rtol=0, atol=0, equal_nan=True)
