"""Issue 29's behaviour on a real GPU: numbers under torch.compile as graph inputs (CUDA inputs,
CPU 0-d tensors for the numbers), complex division as torch's, second-order gradients refused,
and signed overflow on CUDA as NVRTC compiles it (documented: NVRTC takes no -fwrapv).

Marked `gpu`; skipped without one. Run on the H200 by bench/run_gpu.sh.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import jiter_magic  # noqa: E402
from jiter_magic import create_jit_fn  # noqa: E402

pytestmark = pytest.mark.gpu

SCALE = create_jit_fn("template <typename T> T gt_scale(T x, T a) { return a * x; }", a=1.0)
SCALE.def_backward("template <typename T> void gt_scale_bwd(T x, T a, T g, T& gx) { gx = a * g; }")
MUL = create_jit_fn("template <typename T> T gt_mul(T x, T y) { return x * y; }")
DIVIDE = create_jit_fn("template <typename T> T gt_divide(T x, T y) { return x / y; }")
SQUARE = create_jit_fn("template <typename T> T gt_square(T x) { return x * x; }")
SQUARE.def_backward("template <typename T> void gt_square_bwd(T x, T g, T& gx) { gx = T(2) * x * g; }")
VALUES = [1.5, 2.5, -3.25, 7.0, 0.125, 11.0, -0.5, 13.0, 17.0, 19.5]


def _graphs(fn, *tensors, mode=None) -> int:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, mode=mode)
    for value in VALUES:
        torch.testing.assert_close(compiled(*tensors, value), fn(*tensors, value))
    return counters["stats"]["unique_graphs"]


def test_new_extra_and_number_values_reuse_the_cuda_graph_as_plain_torch_does():
    x = torch.randn(1 << 16, device="cuda")
    assert _graphs(lambda t, a: SCALE(t, a=a) + 1, x) == _graphs(lambda t, a: a * t + 1, x) <= 2
    assert _graphs(lambda t, a: MUL(t, a), x) == _graphs(lambda t, a: t * a, x) <= 2


def test_reduce_overhead_mode_gives_the_eager_values_for_every_new_number_and_input():
    """CUDA graphs: a call taking numbers runs between the graphs (it reads them on the host), so
    a replay never launches with the numbers of the capture; a call of tensors alone is captured."""
    with_extra = torch.compile(lambda t, a: SCALE(t, a=a) + 1, mode="reduce-overhead")
    with_number = torch.compile(lambda t, a: MUL(t, a) - 1, mode="reduce-overhead")
    tensors_only = torch.compile(lambda t: SQUARE(t) * 2, mode="reduce-overhead")
    for value in VALUES:
        x = torch.randn(4096, device="cuda")
        torch.testing.assert_close(with_extra(x, value), value * x + 1)
        torch.testing.assert_close(with_number(x, value), value * x - 1)
        torch.testing.assert_close(tensors_only(x), x * x * 2)


def test_compiled_gradients_on_cuda_with_new_extra_values():
    compiled = torch.compile(lambda t, a: SCALE(t, a=a).sum())
    for value in VALUES[:4]:
        x = torch.randn(300, device="cuda", dtype=torch.float64, requires_grad=True)
        compiled(x, value).backward()
        torch.testing.assert_close(x.grad, torch.full_like(x, value))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_division_on_cuda_as_torch(dtype):
    inf, nan = float("inf"), float("nan")
    specials = [1 + 2j, -3 + 0j, 0j, complex(inf, 1), complex(nan, 0), 1e30 + 1e30j, 1e-30 - 2e-30j, 5 - 7j]
    x = torch.tensor([a for a in specials for _ in specials], dtype=dtype, device="cuda")
    y = torch.tensor([b for _ in specials for b in specials] , dtype=dtype, device="cuda")
    y = torch.cat([y, torch.zeros(8, dtype=dtype, device="cuda")])
    x = torch.cat([x, x[:8]])
    got, want = DIVIDE(x, y), x / y
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5 if dtype == torch.complex64 else 1e-12, atol=0)
    assert torch.isinf(DIVIDE(x[:1], torch.zeros(1, dtype=dtype, device="cuda"))).all()


def test_second_order_gradients_on_cuda_raise_gradient_error():
    x = torch.tensor([1.0, 2.0], device="cuda", dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(SQUARE(x).sum(), x, create_graph=True)
    assert gx.grad_fn is not None
    torch.testing.assert_close(gx.detach(), 2 * x.detach())
    with pytest.raises(jiter_magic.GradientError, match="second-order"):
        ((gx ** 2).sum() + (x ** 3).sum()).backward()


def test_signed_overflow_on_cuda_returns_the_wrapped_value():
    """A result returned as T wraps on CUDA too (two's-complement add in PTX): max + 1 is min."""
    inc = create_jit_fn("template <typename T> T gt_inc(T x) { return x + T(1); }")
    for dtype in (torch.int32, torch.int64):
        x = torch.tensor([torch.iinfo(dtype).max], dtype=dtype, device="cuda")
        torch.testing.assert_close(inc(x), x + 1)
