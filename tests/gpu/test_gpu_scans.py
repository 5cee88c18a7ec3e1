"""Scans on a CUDA GPU against torch's: every kernel path (a warp a row, a block a row, a thread a
column, a few long rows a block a tile with a look-back), dtypes, layouts, reverse, exclusive, out=,
cummax with indices, a linear recurrence against a float64 loop (and its h alone, as the whole
scan's h), CuPy arrays, and the same result every run; the look-back path forced onto short and odd
rows, and a row of more than 2^31 elements.

Marked `gpu`; skipped without one.
"""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scans"))
from scan_functions import (  # noqa: E402
    ADD,
    AFFINE,
    KEEP_MAX,
    cummax,
    cummin,
    cumprod,
    cumsum,
    linear,
    logcumsumexp,
)

from jiter_magic import ValuesIndices, create_multi_output_scan_fn, create_scan_fn  # noqa: E402
from jiter_magic.errors import ShapeError  # noqa: E402
from jiter_magic.kernels import scan_cuda, scan_lookback  # noqa: E402
from jiter_magic.planning.scan_plan import BLOCK_SCAN, COLUMN_SCAN, LOOKBACK_SCAN, WARP_SCAN  # noqa: E402

pytestmark = pytest.mark.gpu

TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-4, torch.float64: 1e-10}
# (shape, dim) of each path: short rows, long rows, a leading dim, a few very long rows.
PATHS = {WARP_SCAN: ((300, 700), -1), BLOCK_SCAN: ((600, 20000), 1), COLUMN_SCAN: ((900, 300), 0),
         LOOKBACK_SCAN: ((3, 1 << 20), -1)}


def sample(shape, dtype, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    if dtype is torch.bool:
        return torch.rand(shape, device="cuda", generator=generator) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-3, 4, shape, device="cuda", generator=generator).to(dtype)
    return torch.randn(shape, device="cuda", generator=generator, dtype=torch.float64).to(dtype)


def check(result, expected, scale=1.0):
    assert result.dtype == expected.dtype and result.shape == expected.shape and result.is_cuda
    if expected.dtype.is_floating_point:
        tol = TOLERANCE[expected.dtype] * scale
        torch.testing.assert_close(result.double(), expected.double(), rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(result, expected)


def last_path(fn):
    return fn.specializations[-1].spec.path


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32, torch.uint8])
def test_cumsum_on_each_path(path, dtype):
    shape, dim = PATHS[path]
    x = sample(shape, dtype)
    reference = torch.cumsum(x.double() if dtype.is_floating_point else x, dim)
    scale = 30.0 if path == LOOKBACK_SCAN else 3.0  # long float sums: differently grouped roundings
    check(cumsum(x, dim=dim), reference.to(torch.cumsum(x[:1], dim).dtype), scale)
    assert last_path(cumsum) == path


@pytest.mark.parametrize("path", list(PATHS))
def test_reverse_exclusive_and_determinism(path):
    shape, dim = PATHS[path]
    x = sample(shape, torch.int64)
    flipped = torch.flip(torch.cumsum(torch.flip(x, [dim]), dim), [dim])
    check(cumsum(x, dim=dim, reverse=True), flipped)
    check(cumsum(x, dim=dim, exclusive=True), torch.cumsum(x, dim) - x)
    check(cumsum(x, dim=dim, exclusive=True, reverse=True), flipped - x)
    y = sample(shape, torch.float32)
    first = cumsum(y, dim=dim)
    for _ in range(3):
        assert torch.equal(first, cumsum(y, dim=dim))


# Counts around the tiles of a thread's 16 elements (a warp's 512, a block's 4096), the look-back's
# tiles of 32 elements a thread (8192) and the column path's segments, for a 4-byte state: small
# integers, so every float sum is exact and the result must equal torch's bit for bit (a float16
# input accumulates in float32, rounded once).
EDGES = [((600, n), 1) for n in (511, 512, 513, 1024, 1025, 4095, 4096, 4097, 8193)] + \
    [((3, n), 1) for n in (8191, 16383, 16384, 16385, 24577, 61447)] + \
    [((n, 300), 0) for n in (63, 64, 65, 900, 4097)]


@pytest.mark.parametrize(("shape", "dim"), EDGES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_tile_edges_of_each_threads_elements(shape, dim, dtype):
    from scan_functions import ADD

    from jiter_magic import create_scan_fn
    from jiter_magic.kernels.scan_cuda import LOOKBACK_SCAN, SMALL_ITEMS, items_of
    from jiter_magic.kernels.scan_lookback import TILE_ITEMS

    fresh = create_scan_fn(ADD, 0, combine="add")  # its own specializations: the last is this call's
    x = torch.randint(-3, 4, shape, device="cuda").to(dtype)
    exact = torch.cumsum(x.double(), dim)
    flipped = torch.flip(torch.cumsum(torch.flip(x.double(), [dim]), dim), [dim])
    for reverse, exclusive, expected in ((False, False, exact), (True, False, flipped),
                                         (False, True, exact - x.double()), (True, True, flipped - x.double())):
        got = fresh(x, dim=dim, reverse=reverse, exclusive=exclusive)
        assert got.dtype == dtype and torch.equal(got, expected.to(dtype)), (shape, reverse, exclusive)
    spec = fresh.specializations[-1].spec
    assert items_of(spec) == (TILE_ITEMS if spec.path == LOOKBACK_SCAN else SMALL_ITEMS), spec.path


@pytest.mark.parametrize("path", list(PATHS))
def test_cummax_cummin_cumprod_logcumsumexp(path):
    shape, dim = PATHS[path]
    x = torch.randint(0, 50, shape, device="cuda").float()
    x.view(-1)[7] = float("nan")
    for fn, reference in ((cummax, torch.cummax), (cummin, torch.cummin)):
        got, want = fn(x, dim=dim), reference(x, dim)
        assert isinstance(got, ValuesIndices)
        check(got.values, want.values)
        check(got.indices, want.indices)
    y = sample(shape, torch.float32)
    check(logcumsumexp(y, dim=dim), torch.logcumsumexp(y.double(), dim).float(), 10.0)
    z = 1 + sample(shape, torch.float64) * 1e-3
    check(cumprod(z, dim=dim), torch.cumprod(z, dim), 1e3)


def sequential(a, b, dim):
    a, b = a.double().movedim(dim, -1).cpu(), b.double().movedim(dim, -1).cpu()
    h, out = torch.zeros(a.shape[:-1], dtype=torch.float64), torch.empty(a.shape, dtype=torch.float64)
    for t in range(a.shape[-1]):
        h = a[..., t] * h + b[..., t]
        out[..., t] = h
    return out.movedim(-1, dim)


@pytest.mark.parametrize(("shape", "dim"), [((64, 3000), -1), ((2, 200000), -1), ((5000, 40), 0), ((16, 500), -1)])
def test_linear_recurrence_matches_a_float64_loop(shape, dim):
    a = torch.rand(shape, device="cuda") * 0.1 + 0.9
    b = torch.randn(shape, device="cuda")
    _, h = linear(a, b, dim=dim)
    torch.testing.assert_close(h.double().cpu(), sequential(a, b, dim), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("shape", "path"), [((16, 500), WARP_SCAN), ((64, 3000), BLOCK_SCAN), ((2, 20000), LOOKBACK_SCAN)])
def test_a_float64_pair_over_whole_and_ragged_tiles(shape, path):
    """A staged state of 16 bytes (8 elements a thread): each path's rows end in whole tiles, read
    without guards, and a ragged last one, forward and reversed."""
    a = torch.rand(shape, device="cuda", dtype=torch.float64) * 0.1 + 0.9
    b = torch.randn(shape, device="cuda", dtype=torch.float64)
    fresh = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine")
    _, h = fresh(a, b, dim=1)
    assert last_path(fresh) == path
    torch.testing.assert_close(h.cpu(), sequential(a, b, 1), rtol=1e-9, atol=1e-9)
    _, h = fresh(a, b, dim=1, reverse=True)
    flipped = torch.flip(sequential(torch.flip(a, [1]), torch.flip(b, [1]), 1), [1])
    torch.testing.assert_close(h.cpu(), flipped, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("path", "shape", "dim"), [(path, *PATHS[path]) for path in PATHS]
                         + [(COLUMN_SCAN, (1 << 16, 8), 0), (LOOKBACK_SCAN, (1 << 22,), 0)])  # split columns, one row
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_h_alone_is_the_whole_scans_h_on_each_path(path, shape, dim, dtype):
    a, b = (torch.rand(shape, device="cuda", dtype=torch.float64) * 0.2 + 0.8).to(dtype), sample(shape, dtype, 2)
    # A fresh function: `last_path` names the last kernel built, which another case's may have been.
    alone = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(1,))
    for reverse, exclusive in ((False, False), (True, False), (False, True), (True, True)):
        (h,) = alone(a, b, dim=dim, reverse=reverse, exclusive=exclusive)
        assert last_path(alone) == path
        _, whole = linear(a, b, dim=dim, reverse=reverse, exclusive=exclusive)
        assert h.dtype == dtype and torch.equal(h, whole)  # the same kernel path and state: the same bits
    out = torch.empty_like(b)
    assert alone(a, b, dim=dim, out=(out,))[0] is out and torch.equal(out, linear(a, b, dim=dim)[1])


def test_layouts_out_and_empty():
    x = sample((40, 30, 50), torch.float32)
    for view, dim in ((x.transpose(0, 2), 1), (x[:, ::2], -1), (x.permute(1, 2, 0), 0), (x, 1)):
        check(cumsum(view, dim=dim), torch.cumsum(view, dim))
    out = torch.empty(40, 30, 50, device="cuda")
    assert cumsum(x, dim=2, out=out) is out
    check(out, torch.cumsum(x, 2))
    empty = torch.empty(0, 5, device="cuda")
    check(cumsum(empty, dim=1), torch.cumsum(empty, 1))


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((100, 1000)).astype(cupy.float32)
    got = cumsum(x, dim=1)
    assert isinstance(got, cupy.ndarray)
    cupy.testing.assert_allclose(got, cupy.cumsum(x, axis=1), rtol=1e-4, atol=1e-3)


def test_a_scans_panel_shows_its_cuda_kernel_and_the_gpu():
    """The one panel of every kind, for a scan run on the GPU: where calls run, the CUDA kernel built,
    its own PTX (no host kernel's counterpart)."""
    pytest.importorskip("ipywidgets")
    from jiter_magic.notebook import widgets
    from jiter_magic.runtime.inspection import cuda_device_name

    shape, dim = PATHS[WARP_SCAN]
    linear(sample(shape, torch.float32), sample(shape, torch.float32, seed=1), dim=dim)
    shown = widgets.panel(linear, "linear")
    try:
        assert shown.header.value.startswith("<b>linear</b> scan: combine affine")
        assert f"runs on the inputs&#x27; device ({cuda_device_name()}, or the CPU)" in shown.header.value
        assert any(label.startswith(f"#{index} cuda: scan (float32, float32) -> 2 x float32") and WARP_SCAN in label
                   for label, index in shown.choice.options)
        shown.choice.value = next(index for label, index in shown.choice.options if " cuda: " in label)
        shown.tabs.selected_index = widgets.KERNEL_TAB
        shown.view.value = "PTX (CUDA)"
        assert shown.source.value.startswith(f"<p>PTX for {shown.arch.value}: ") and ".entry" in shown.source.value
    finally:
        shown.close()


TILE = scan_cuda.BLOCK * (scan_lookback.TILE_ITEMS or scan_cuda.ITEMS)  # a look-back tile of 4-byte states
# Rows of 1 element, a tile less one, one, one more, 6 tiles (a count no power of two), 38, 1001.
FORCED_COUNTS = (1, TILE - 1, TILE, TILE + 1, 5 * TILE + 3, 37 * TILE + 11, 1000 * TILE + 1)


@pytest.fixture
def forced(monkeypatch):
    """Fresh functions whose calls all take the look-back path, whatever their shape (the path's
    choice replaced, the kernel real; fresh, so that no other test's plan is reused or kept)."""
    monkeypatch.setattr(scan_cuda, "choose_path", lambda layout, inputs, pointers: (LOOKBACK_SCAN, 1, 1))
    return (create_scan_fn(ADD, 0, combine="add"),
            create_multi_output_scan_fn(KEEP_MAX, float("-inf"), combine="keep_max"),
            create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine"))


@pytest.mark.parametrize("count", FORCED_COUNTS)
@pytest.mark.parametrize("rows", [1, 3])
def test_look_back_forced_on_short_and_odd_rows(forced, count, rows):
    add, keep_max, _ = forced
    x = sample((rows, count), torch.int64)
    flipped = torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])
    check(add(x, dim=1), torch.cumsum(x, 1))
    assert last_path(add) == LOOKBACK_SCAN
    check(add(x, dim=1, reverse=True), flipped)
    check(add(x, dim=1, exclusive=True), torch.cumsum(x, 1) - x)
    check(add(x, dim=1, exclusive=True, reverse=True), flipped - x)
    ties = torch.randint(0, 4, (rows, count), device="cuda").float()  # many equal values: the later wins
    got, want = keep_max(ties, dim=1), torch.cummax(ties, 1)
    check(got.values, want.values)
    check(got.indices, want.indices)
    column = sample((count, rows), torch.int32)  # a scan along dim 0: strided rows
    check(add(column, dim=0), torch.cumsum(column, 0))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64, torch.uint8])
def test_look_back_forced_dtypes(forced, dtype):
    add = forced[0]
    x = sample((2, 37 * TILE + 11), dtype)
    reference = torch.cumsum(x.double() if dtype.is_floating_point else x, 1)
    check(add(x, dim=1), reference.to(torch.cumsum(x[:, :1], 1).dtype), 30.0)


def test_look_back_forced_linear_recurrence(forced):
    affine = forced[2]
    a = torch.rand(2, 20 * TILE + 5, device="cuda") * 0.1 + 0.9
    b = torch.randn(2, 20 * TILE + 5, device="cuda")
    _, h = affine(a, b, dim=1)
    torch.testing.assert_close(h.double().cpu(), sequential(a, b, 1), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("shape", "forcing"), [((1 << 24,), False), ((5, 300001), False), ((3, 5 * TILE + 3), True)])
def test_look_back_is_bit_equal_run_to_run(request, shape, forcing):
    # A fresh function either way: `last_path` names the last kernel built, and the shared `cumsum`
    # may plan this shape on a kernel an earlier test built (it read column_scan on the first H100 run).
    add = request.getfixturevalue("forced")[0] if forcing else create_scan_fn(ADD, 0, combine="add")
    x = sample(shape, torch.float32)
    first = add(x, dim=-1)
    assert last_path(add) == LOOKBACK_SCAN
    for _ in range(5):
        assert torch.equal(first, add(x, dim=-1))
    check(first, torch.cumsum(x.double(), -1).float(), 100.0)


def test_a_row_of_more_than_2_31_elements():
    count = (1 << 31) + 5  # int8 in, int64 out: 19 GB
    torch.cuda.empty_cache()  # memory the allocator keeps from earlier tests counts as taken
    if torch.cuda.mem_get_info()[0] < 24 << 30:
        pytest.skip("needs 24 GiB of free GPU memory")
    x = torch.ones(count, dtype=torch.int8, device="cuda")
    x[-3:] = 3
    got = cumsum(x, dim=0)
    assert last_path(cumsum) == LOOKBACK_SCAN and got.dtype == torch.int64
    step = 1 << 28
    for start in range(0, count - 3, step):  # 1, 2, 3, ... in pieces, not a second 17 GB array
        end = min(start + step, count - 3)
        assert torch.equal(got[start:end], torch.arange(start + 1, end + 1, device="cuda"))
    assert got[-3:].tolist() == [count - 3 + 3, count - 3 + 6, count - 3 + 9]
    del got
    x[-3:] = 1
    backward = cumsum(x, dim=0, reverse=True, exclusive=True)
    assert backward[0].item() == count - 1 and backward[(1 << 31) + 1].item() == 3 and backward[-1].item() == 0


@pytest.mark.parametrize(("shape", "dim", "path"), [((3, 1 << 20), -1, LOOKBACK_SCAN), ((1 << 16, 8), 0, COLUMN_SCAN)],
                         ids=["look-back", "split columns"])
def test_two_launch_scans_run_hot_from_their_second_call(shape, dim, path):
    """A look-back scan (flags zeroed, then tiles) and split columns (segment folds, then scans)
    launch twice; a call keyed like one before runs both launches from its hot path (a Python
    function writing pointers, as a grid reduction's), on the current stream, with the same bits."""
    add = create_scan_fn(ADD, 0, combine="add")
    affine = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(1,))
    x, a = sample(shape, torch.float32), torch.rand(shape, device="cuda") * 0.1 + 0.9
    first, (first_h,) = add(x, dim=dim), affine(a, x, dim=dim)
    assert last_path(add) == path and last_path(affine) == path
    assert [type(run).__name__ for run in add._calls.hot.values()] == ["function"]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # launched on the side stream, as torch's own ops would be
        again = [(add(x, dim=dim), affine(a, x, dim=dim)[0]) for _ in range(3)]
    side.synchronize()
    assert (add.call_counts.hot, affine.call_counts.hot) == (3, 3)
    assert all(torch.equal(total, first) and torch.equal(h, first_h) for total, h in again)
    check(first, torch.cumsum(x.double(), dim).float(), 30.0)


@pytest.mark.parametrize(("shape", "dim", "path"), [((3, 1 << 20), -1, LOOKBACK_SCAN), ((1 << 16, 8), 0, COLUMN_SCAN),
                                                   ((300, 700), -1, WARP_SCAN)],
                         ids=["look-back", "split columns", "one launch"])
def test_out_calls_run_hot_from_their_second_call(shape, dim, path):
    """A call into given out= tensors is keyed by its inputs and outputs together: from its second
    call it launches from its hot path (every launch of its plan, on the current stream), writes
    the same bits into the tensors given and bumps their versions; a partial overlap is refused."""
    add = create_scan_fn(ADD, 0, combine="add")
    x = sample(shape, torch.float32)
    first = add(x, dim=dim)
    assert last_path(add) == path
    outs = [torch.empty_like(x) for _ in range(3)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for out in outs:
            assert add(x, dim=dim, out=out) is out and out._version == 1
    side.synchronize()
    assert add.call_counts.hot == 2
    assert all(torch.equal(out, first) for out in outs)
    base = torch.zeros(x.numel() + 64, device="cuda")
    with pytest.raises(ShapeError, match="partially overlaps an input"):
        add(base[:x.numel()].view(shape), dim=dim, out=base[64:].view(shape))
    assert not base.any()


def test_cupy_arrays_on_the_look_back_path():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((2, 50000)).astype(cupy.float32)
    got = cumsum(x, dim=1)
    assert isinstance(got, cupy.ndarray) and last_path(cumsum) == LOOKBACK_SCAN
    cupy.testing.assert_allclose(got, cupy.cumsum(x.astype(cupy.float64), axis=1), rtol=1e-4, atol=1e-3)


# Gradients and torch.compile on CUDA: the CPU tests' twins (tests/scans/test_scans_autograd.py,
# test_scans_compile.py), with the backwards of tests/scans/scan_gradients.py.

@pytest.mark.parametrize(("reverse", "exclusive"), [(False, False), (True, True)])
def test_gradcheck_of_cumsum_and_linear_recurrence_on_cuda(reverse, exclusive):
    import scan_gradients as grads

    x = torch.rand(4, 9, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: grads.cumsum(t, dim=1, reverse=reverse, exclusive=exclusive), (x,))
    a = (torch.rand(1, 9, device="cuda", dtype=torch.float64) * 0.5 + 0.5).requires_grad_()
    b = torch.randn(3, 9, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b: grads.linear(a, b, dim=-1, reverse=reverse, exclusive=exclusive), (a, b))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_scans_and_gradients_on_cuda(backend):
    import scan_gradients as grads
    from torch_compile_helpers import assert_compiled_gradients_are_eager, same

    def model(x, a, b):
        products, h = grads.linear(a, b, dim=1, reverse=True)
        return grads.cumsum(x, dim=1, exclusive=True).sin().sum() + (h * products).sum()

    x, b = (torch.rand(64, 700, device="cuda", dtype=torch.float64) for _ in range(2))
    a = torch.rand(1, 700, device="cuda", dtype=torch.float64) * 0.5 + 0.5
    assert_compiled_gradients_are_eager(model, (x, a, b), backend)
    y = torch.randn(600, 20000, device="cuda")
    compiled = torch.compile(lambda t, decay: grads.ema(t, dim=-1, decay=decay)[1], backend=backend, fullgraph=True)
    for decay in (0.9, 0.5):
        same(compiled(y, decay), grads.ema(y, dim=-1, decay=decay)[1], 1e-5)
