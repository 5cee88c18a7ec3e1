"""fn.def_backward: a jitted function's gradient as another functor, under torch autograd (CPU)."""
from __future__ import annotations

import pickle
import warnings

import pytest

torch = pytest.importorskip("torch")

import jiter_magic  # noqa: E402

SQUARE_AXPY = "template <typename T> T sq_axpy(T x, T y, T a) { return a * x * x + y; }"
SQUARE_AXPY_BWD = "template <typename T> void sq_axpy_bwd(T x, T y, T a, T g, T& gx, T& gy) { gx = 2 * a * x * g; gy = g; }"
SINCOS = "template <typename T> void sincos(T x, T& s, T& c) { s = ::sin(x); c = ::cos(x); }"
SINCOS_BWD = "template <typename T> void sincos_bwd(T x, T gs, T gc, T& gx) { gx = gs * ::cos(x) - gc * ::sin(x); }"


def _double(*shape, requires_grad=True):
    return torch.rand(*shape, dtype=torch.float64, requires_grad=requires_grad)


def _expected_gx(x, y):
    """d/dx of sum(a*x*x + y) with a = 1."""
    return 2 * x.detach()


def test_gradcheck_with_extras_and_broadcasting():
    fn = jiter_magic.create_jit_fn(SQUARE_AXPY, a=2.0).def_backward(SQUARE_AXPY_BWD)
    assert fn.backward is not None and fn.backward.name == "sq_axpy_bwd"
    x, y = _double(3, 4), _double(4)  # y is broadcast along the first dimension
    assert torch.autograd.gradcheck(lambda x, y: fn(x, y), (x, y))
    assert torch.autograd.gradcheck(lambda x, y: fn(x, y, a=-1.5), (x, y))  # the call's extra, not the default
    out = fn(x, y)
    out.sum().backward()
    assert x.grad.shape == (3, 4) and y.grad.shape == (4,)
    torch.testing.assert_close(x.grad, 4.0 * x.detach())
    torch.testing.assert_close(y.grad, torch.full((4,), 3.0, dtype=torch.float64))  # summed over the 3 rows


def test_several_outputs_and_an_unused_one():
    fn = jiter_magic.create_multi_output_jit_fn(SINCOS, 2).def_backward(SINCOS_BWD)
    x = _double(5)
    assert torch.autograd.gradcheck(lambda x: fn(x), (x,))
    s, _c = fn(x)
    s.sum().backward()  # the cosine's gradient never arrives: zeros stand for it
    torch.testing.assert_close(x.grad, torch.cos(x.detach()))


def test_inputs_that_do_not_require_grad_get_none_and_gradients_keep_each_inputs_dtype():
    fn = jiter_magic.create_jit_fn(SQUARE_AXPY, a=1.0).def_backward(SQUARE_AXPY_BWD)
    x = torch.rand(4, dtype=torch.float32, requires_grad=True)
    y = torch.rand(4, dtype=torch.float64)  # promotes the result to float64
    out = fn(x, y)
    assert out.dtype == torch.float64 and out.grad_fn is not None
    out.sum().backward()
    assert y.grad is None and x.grad.dtype == torch.float32
    torch.testing.assert_close(x.grad, 2 * x.detach())
    scalar = fn(x, 0.5)  # a Python number input gets no gradient, and needs none
    scalar.sum().backward()
    with torch.no_grad():
        assert fn(x, y).grad_fn is None


def test_a_second_order_gradient_raises_instead_of_coming_back_wrong():
    fn = jiter_magic.create_jit_fn(SQUARE_AXPY, a=1.0).def_backward(SQUARE_AXPY_BWD)
    x, y = _double(3), _double(3)
    (gx,) = torch.autograd.grad(fn(x, y).sum(), x, create_graph=True)
    assert gx.grad_fn is not None  # never a gradient autograd would treat as a constant
    torch.testing.assert_close(gx.detach(), _expected_gx(x, y))  # the first-order values are right
    with pytest.raises(jiter_magic.GradientError, match="differentiable once: a second-order gradient"):
        torch.autograd.grad(gx.sum(), x)
    # Mixed with a term torch can differentiate, the whole backward is refused, not half of it.
    (gx,) = torch.autograd.grad(fn(x, y).sum(), x, create_graph=True)
    with pytest.raises(jiter_magic.GradientError, match="second-order"):
        ((gx ** 2).sum() + (x ** 3).sum()).backward()
    # Without create_graph nothing changes: plain first-order gradients.
    (plain,) = torch.autograd.grad(fn(x, y).sum(), x)
    assert plain.grad_fn is None
    torch.testing.assert_close(plain, _expected_gx(x, y))


def test_a_backward_of_the_wrong_shape_is_refused_at_once():
    fn = jiter_magic.create_jit_fn(SQUARE_AXPY, a=1.0)
    with pytest.raises(jiter_magic.BindError, match=r"the backward of sq_axpy must take its 2 input\(s\) \['x', 'y'\], "
                                                      r"then one gradient for each of its 1 output\(s\): 3 array "
                                                      r"parameters besides the extras \['a'\]; bad takes 2"):
        fn.def_backward("template <typename T> void bad(T x, T a, T g, T& gx, T& gy) { gx = g; gy = g; }")
    with pytest.raises(jiter_magic.BindError, match="^the backward of sq_axpy: num_outputs=2"):  # one gradient an input
        fn.def_backward("template <typename T> void bad(T x, T y, T a, T g, T& gx) { gx = g; }")
    with pytest.raises(jiter_magic.BindError, match="^the backward of sq_axpy: keyword argument 'a' names no parameter"):
        fn.def_backward("template <typename T> void bad(T x, T y, T g, T& gx, T& gy) { gx = g; gy = g; }")
    assert fn.backward is None
    x = _double(2)
    with pytest.raises(jiter_magic.GradientError, match=r"^sq_axpy has no backward: give it one with "
                                                        r"sq_axpy\.def_backward\(code_string\)"):
        fn(x, x).sum().backward()


def test_the_backward_travels_with_pickle_and_follows_the_backend():
    fn = jiter_magic.create_jit_fn(SQUARE_AXPY, a=3.0).def_backward(SQUARE_AXPY_BWD)
    fn.backend = "cpu"
    assert fn.backward.backend == "cpu"
    again = pickle.loads(pickle.dumps(fn))
    assert again.backward is not None and again.backward.code == SQUARE_AXPY_BWD and again.backward.backend == "cpu"
    x = _double(3)
    again(x, x.detach()).sum().backward()
    torch.testing.assert_close(x.grad, 6.0 * x.detach())
    assert fn.def_backward(None) is fn and fn.backward is None


def test_a_backward_defined_on_one_unpickled_copy_never_reaches_a_later_unpickling():
    """Issue 29: `g = loads(p); g.def_backward(B2)`, then `loads(p)` gave `g`, and B2's gradient."""
    data = pickle.dumps(jiter_magic.create_jit_fn(SQUARE_AXPY, a=1.0).def_backward(SQUARE_AXPY_BWD))
    changed = pickle.loads(data)
    changed.def_backward("template <typename T> void sq_axpy_bwd2(T x, T y, T a, T g, T& gx, T& gy) "
                         "{ gx = 100 * g; gy = 100 * g; }")
    again = pickle.loads(data)
    assert again is not changed
    x = torch.tensor([2.0, 4.0], dtype=torch.float64, requires_grad=True)
    y = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    again(x, y).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([4.0, 8.0], dtype=torch.float64))  # 2 * a * x
    torch.testing.assert_close(y.grad, torch.ones(2, dtype=torch.float64))
    assert x.grad.dtype == torch.float64


def test_the_seeds_torch_library_override_keeps_working_under_autograd():
    relu = jiter_magic.create_jit_fn("template <typename T> T my_gelu(T a) { return a > 0 ? a : 0; }")
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        library.impl("gelu", relu, "CPU")
    try:
        x = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
        y = torch.nn.functional.gelu(x)
        torch.testing.assert_close(y.detach(), torch.tensor([0.0, 0.5, 2.0]))  # our forward
        y.sum().backward()  # torch's own gelu backward formula
        assert x.grad is not None and x.grad.shape == (3,) and torch.isfinite(x.grad).all()
    finally:
        del library
