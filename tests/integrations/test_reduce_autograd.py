"""A reduction's def_backward: its gradient as an elementwise functor of each input element, the
result and the incoming gradient, under torch autograd (CPU), checked against torch's gradients."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jiter_magic  # noqa: E402
from jiter_magic import BindError, GradientError, create_reduction_fn  # noqa: E402

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
ROOT = "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n"
MUL = "template <typename T> T mul(T x, T y) { return x * y; }\n"
SCALED = "template <typename T> T scaled(T x, T a) { return a * x * x; }\n"
SQ_BWD = "template <typename T> void sq_bwd(T x, T result, T g, T& gx) { gx = 2 * x * g; }"
NORM_BWD = "template <typename T> void norm_bwd(T x, T norm, T g, T& gx) { gx = norm == 0 ? T(0) : x / norm * g; }"
MUL_BWD = "template <typename T> void mul_bwd(T x, T y, T result, T g, T& gx, T& gy) { gx = y * g; gy = x * g; }"
# The extra `a` is bound by name, wherever it is declared.
SCALED_BWD = "template <typename T> void scaled_bwd(T x, T a, T result, T g, T& gx) { gx = 2 * a * x * g; }"


def sum_sq():
    return create_reduction_fn(SQ + ADD, 0, map="sq", combine="add").def_backward(SQ_BWD)


def norm():
    return create_reduction_fn(SQ + ADD + ROOT, 0, map="sq", combine="add", finalize="root").def_backward(NORM_BWD)


def _double(*shape, requires_grad=True):
    return torch.rand(*shape, dtype=torch.float64, requires_grad=requires_grad)


@pytest.mark.parametrize("dim", [None, 1, -1, (0, 2), (2, 0, 1), ()])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_of_squares_gradcheck_and_torch_gradients(dim, keepdim):
    fn = sum_sq()
    x = _double(2, 3, 4)
    assert torch.autograd.gradcheck(lambda x: fn(x, dim=dim, keepdim=keepdim), (x,))
    weights = torch.rand(fn(x, dim=dim, keepdim=keepdim).shape, dtype=torch.float64)
    (ours,) = torch.autograd.grad((fn(x, dim=dim, keepdim=keepdim) * weights).sum(), x)
    (theirs,) = torch.autograd.grad(((x * x).sum(dim=dim, keepdim=keepdim) * weights).sum(), x)
    assert ours.dtype == torch.float64 and ours.shape == x.shape
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize(("dim", "keepdim"), [(None, False), (-1, True), ((0, 1), False), (1, False)])
def test_a_norm_with_finalize_has_torchs_gradient(dim, keepdim):
    fn = norm()
    x = _double(3, 5) + 0.1
    assert torch.autograd.gradcheck(lambda x: fn(x, dim=dim, keepdim=keepdim), (x,))
    expected = torch.linalg.vector_norm(x, dim=dim, keepdim=keepdim)
    result = fn(x, dim=dim, keepdim=keepdim)
    torch.testing.assert_close(result, expected)
    (ours,) = torch.autograd.grad(result.sum(), x)
    (theirs,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(ours, theirs)


def test_two_inputs_broadcast_and_each_gradient_is_summed_to_its_input():
    fn = create_reduction_fn(MUL + ADD, 0, combine="add").def_backward(MUL_BWD)
    x, y = _double(3, 4), _double(4)  # y broadcast along dim 0
    for dim, keepdim in [(1, False), (0, True), (None, False), ((0, 1), True)]:
        assert torch.autograd.gradcheck(lambda x, y: fn(x, y, dim=dim, keepdim=keepdim), (x, y))
    fn(x, y, dim=1).sum().backward()
    assert x.grad.shape == (3, 4) and y.grad.shape == (4,)
    torch.testing.assert_close(x.grad, y.detach().expand(3, 4))
    torch.testing.assert_close(y.grad, x.detach().sum(0))
    y_only = torch.rand(4, dtype=torch.float64, requires_grad=True)
    fn(torch.rand(3, 4, dtype=torch.float64), y_only).backward()  # an input not requiring grad gets none
    assert y_only.grad.shape == (4,)


def test_the_backward_takes_the_calls_extras_by_name():
    fn = create_reduction_fn(SCALED + ADD, 0, combine="add", a=2.0).def_backward(SCALED_BWD)
    x = _double(4, 3)
    assert torch.autograd.gradcheck(lambda x: fn(x, dim=0), (x,))
    assert torch.autograd.gradcheck(lambda x: fn(x, dim=0, a=-1.5), (x,))  # the call's value, not the default
    (grad,) = torch.autograd.grad(fn(x, a=3.0), x)
    torch.testing.assert_close(grad, 6.0 * x.detach())


def test_dtype_keeps_each_inputs_gradient_dtype():
    fn = sum_sq()
    x = torch.rand(3, 4, dtype=torch.float32, requires_grad=True)
    result = fn(x, dim=1, dtype=torch.float64)
    assert result.dtype == torch.float64 and result.grad_fn is not None
    result.sum().backward()
    assert x.grad.dtype == torch.float32
    torch.testing.assert_close(x.grad, 2 * x.detach())
    half = torch.rand(8, dtype=torch.float16, requires_grad=True)
    result = fn(half)  # float16 result, float32 accumulator
    assert result.dtype == torch.float16
    result.backward()
    assert half.grad.dtype == torch.float16
    torch.testing.assert_close(half.grad, 2 * half.detach())
    with pytest.raises(GradientError, match="its result is int64, which cannot carry a gradient"):
        fn(x, dtype=torch.int64)
    with torch.no_grad():
        assert fn(x, dtype=torch.int64).dtype == torch.int64


def test_out_under_autograd_is_refused_as_torch_refuses_it():
    fn = sum_sq()
    x = _double(3, 4)
    out = torch.empty(3, dtype=torch.float64)
    with pytest.raises(GradientError, match=r"functions with out=\.\.\. arguments don't support automatic differentiation"):
        fn(x, dim=1, out=out)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.sum(x, dim=1, out=out)  # torch's own error, for comparison
    with torch.no_grad():
        assert fn(x, dim=1, out=out) is out
    torch.testing.assert_close(out, (x.detach() ** 2).sum(1))
    fn(x.detach(), dim=1, out=out)  # nothing requires grad: out= is fine


def test_empty_reductions_and_unused_results_get_zero_gradients():
    fn = sum_sq()
    empty = _double(0, 3)
    result = fn(empty, dim=0)
    torch.testing.assert_close(result.detach(), torch.zeros(3, dtype=torch.float64))
    result.sum().backward()
    assert empty.grad.shape == (0, 3)
    x = _double(3, 3)
    ((fn(x, dim=1) * torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)).sum()).backward()
    torch.testing.assert_close(x.grad[1:], torch.zeros(2, 3, dtype=torch.float64))


def test_a_second_order_gradient_raises_instead_of_coming_back_wrong():
    fn = sum_sq()
    x = _double(4)
    (gx,) = torch.autograd.grad(fn(x), x, create_graph=True)
    torch.testing.assert_close(gx.detach(), 2 * x.detach())
    with pytest.raises(GradientError, match="second-order"):
        torch.autograd.grad(gx.sum(), x)


def test_without_a_backward_an_input_requiring_grad_is_refused_and_none_removes_it():
    fn = sum_sq()
    fn.def_backward(None)
    assert fn.backward is None
    x = _double(3)
    with pytest.raises(GradientError, match=r"sq has no backward.*sq\.def_backward\(code_string\)"):
        fn(x)
    with torch.no_grad():
        assert fn(x).grad_fn is None
    assert fn.def_backward(SQ_BWD) is fn and fn.backward is not None
    assert fn(x).grad_fn is not None
    np.testing.assert_allclose(fn(np.arange(3.0)), 5.0)  # arrays without autograd: the plain call


def test_a_backward_of_the_wrong_shape_is_a_bind_error():
    fn = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
    with pytest.raises(BindError, match=r"the backward of sq must take its 1 input\(s\) \['x'\], then the result, then "
                                        r"its gradient: 3 array parameters"):
        fn.def_backward("template <typename T> void bad(T x, T g, T& gx) { gx = g; }")
    with pytest.raises(BindError, match="the backward of sq"):  # one output an input
        fn.def_backward("template <typename T> void bad(T x, T r, T g, T& gx, T& gy) { gx = g; gy = g; }")
    with pytest.raises(BindError, match=r"the backward of scaled: keyword argument 'a' names no parameter"):
        create_reduction_fn(SCALED + ADD, 0, combine="add", a=1.0).def_backward(SQ_BWD)
    assert fn.backward is None
    assert isinstance(jiter_magic.GradientError("x"), RuntimeError)
