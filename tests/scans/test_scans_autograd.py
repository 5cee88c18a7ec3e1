"""Scans under torch autograd: `def_backward(callable)`, its gradients checked numerically
(float64 gradcheck), summed over broadcast dims and cast to the inputs' dtypes, and its errors."""
from __future__ import annotations

import pickle

import pytest
from scan_gradients import cummax, cumsum, cumsum_backward, ema, linear, linear_backward

from jiter_magic import create_scan_fn
from jiter_magic.errors import ArgumentTypeError, BindError, GradientError

torch = pytest.importorskip("torch")
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


def _float64(*shape, low=-1.0):
    return (torch.rand(*shape, dtype=torch.float64) * (1 - low) + low).requires_grad_()


@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
@pytest.mark.parametrize("dim", [0, -1])
def test_cumsum_gradcheck(dim, reverse, exclusive):
    x = _float64(4, 7)
    assert torch.autograd.gradcheck(lambda t: cumsum(t, dim=dim, reverse=reverse, exclusive=exclusive), (x,))


@pytest.mark.parametrize(("reverse", "exclusive"), FLAGS)
def test_linear_recurrence_gradcheck_of_both_results(reverse, exclusive):
    a, b = _float64(3, 6, low=0.5), _float64(3, 6)
    assert torch.autograd.gradcheck(lambda a, b: linear(a, b, dim=1, reverse=reverse, exclusive=exclusive), (a, b))


def test_values_with_indices_send_each_gradient_to_its_index_as_torch_cummax():
    x = _float64(3, 7)
    assert torch.autograd.gradcheck(lambda t: cummax(t, dim=1, reverse=True).values, (x,))
    cummax(x, dim=0).values.sum().backward()
    expected = x.detach().clone().requires_grad_()
    torch.cummax(expected, 0).values.sum().backward()
    torch.testing.assert_close(x.grad, expected.grad)


def test_an_output_without_gradient_gets_zeros_and_values_match_torch():
    a, b = _float64(2, 5, low=0.5), _float64(2, 5)
    _, h = linear(a, b, dim=1)
    h.sum().backward()  # the products got no gradient: the backward takes zeros for it
    ha = a.detach().clone().requires_grad_()
    hb = b.detach().clone().requires_grad_()
    state, states = torch.zeros(2, dtype=torch.float64), []
    for t in range(5):
        state = ha[:, t] * state + hb[:, t]
        states.append(state)
    torch.stack(states, 1).sum().backward()
    torch.testing.assert_close(a.grad, ha.grad)
    torch.testing.assert_close(b.grad, hb.grad)


def test_broadcast_inputs_get_gradients_of_their_shapes():
    a, b = _float64(1, 6, low=0.5), _float64(3, 6)
    assert torch.autograd.gradcheck(lambda a, b: linear(a, b, dim=-1)[1], (a, b))
    products, h = linear(a, b, dim=-1)
    (products.sum() + h.sum()).backward()
    assert a.grad.shape == (1, 6) and b.grad.shape == (3, 6)


def test_gradients_are_cast_to_the_inputs_dtypes():
    x = torch.rand(3, 4, requires_grad=True)
    result = cumsum(x, dim=1, dtype=torch.float64)
    assert result.dtype == torch.float64
    result.backward(torch.ones(3, 4, dtype=torch.float64))
    assert x.grad.dtype == torch.float32
    torch.testing.assert_close(x.grad, torch.arange(4, 0, -1, dtype=torch.float32).expand(3, 4))


def test_a_backward_may_give_none_and_receives_the_normalized_options():
    seen = {}
    fn = create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }", 0, combine="add")
    fn.def_backward(lambda x, result, grad, **options: seen.update(options))  # gives None: no gradient
    x = torch.rand(2, 3, requires_grad=True)
    fn(x, dim=-1, reverse=True).sum().backward()
    assert seen == {"dim": 1, "reverse": True, "exclusive": False} and x.grad is None


def test_extras_reach_the_backward_by_name():
    seen = {}

    def backward(x, products, h, grad_products, grad_h, *, dim, reverse, exclusive, decay):
        seen["decay"] = decay
        return grad_h * (1 - decay)

    ema.def_backward(backward)
    try:
        x = torch.rand(2, 3, requires_grad=True)
        ema(x, dim=1, decay=0.25)[1].sum().backward()
        assert seen == {"decay": 0.25} and x.grad.shape == (2, 3)
    finally:
        ema.def_backward(None)


def test_def_backward_checks_and_removes():
    fn = create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }", 0, combine="add")
    assert fn.backward is None
    assert fn.def_backward(cumsum_backward) is fn and fn.backward is cumsum_backward
    with pytest.raises(BindError, match="Python callable, not a code string"):
        fn.def_backward("template <typename T> void bwd(T x, T r, T g, T& gx) { gx = g; }")
    with pytest.raises(ArgumentTypeError, match="takes a Python callable"):
        fn.def_backward(3)
    assert fn.def_backward(None).backward is None
    x = torch.rand(3, requires_grad=True)
    with pytest.raises(GradientError, match="has no backward.*def_backward"):
        fn(x, dim=0)
    with torch.no_grad():
        torch.testing.assert_close(fn(x, dim=0), torch.cumsum(x, 0))


def test_refusals_out_integers_wrong_counts_and_second_order():
    x = torch.rand(3, 4, requires_grad=True)
    with pytest.raises(GradientError, match="out="):
        cumsum(x, dim=1, out=torch.empty(3, 4))
    with pytest.raises(GradientError, match="int64, which cannot carry a gradient"):
        cumsum(x, dim=1, dtype=torch.int64)
    wrong = create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }", 0, combine="add")
    wrong.def_backward(lambda x, r, g, **options: (g, g))
    with pytest.raises(GradientError, match="one gradient an input"):
        wrong(x, dim=1).sum().backward()
    y = cumsum(x.double(), dim=1)
    (grad,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
    with pytest.raises(GradientError, match="differentiable once"):
        grad.sum().backward()


def test_pickling_keeps_a_module_level_backward_and_refuses_a_lambda():
    again = pickle.loads(pickle.dumps(linear))
    assert again.backward is linear_backward
    a, b = _float64(2, 4, low=0.5), _float64(2, 4)
    assert torch.autograd.gradcheck(lambda a, b: again(a, b, dim=1)[1], (a, b))
    fn = create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }", 0, combine="add")
    fn.def_backward(lambda x, r, g, **options: g)
    with pytest.raises(ArgumentTypeError, match="cannot be pickled.*top level"):
        pickle.dumps(fn)
    assert pickle.loads(pickle.dumps(fn.def_backward(None))).backward is None
