"""Scans under torch.compile: a traced call is one torch operator, its values, dtypes, shapes and
strides those of the eager call; extras are graph inputs (one graph for any value), shapes may be
dynamic, out= is written, and gradients run the scan's backward callable."""
from __future__ import annotations

import pytest
from scan_functions import logcumsumexp
from scan_gradients import cummax, cumsum, ema, linear

import jiter_magic

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402
from torch_compile_helpers import GraphRecorder, assert_compiled_gradients_are_eager, same  # noqa: E402

CALLS = {
    "cumsum": lambda x: cumsum(x, dim=1),
    "reverse-exclusive": lambda x: cumsum(x, dim=0, reverse=True, exclusive=True),
    "dtype": lambda x: cumsum(x, dim=-1, dtype=torch.float64),
    "ints": lambda x: cumsum((x * 10).to(torch.int32), dim=1),
    "logcumsumexp-transposed": lambda x: logcumsumexp(x.t(), dim=1),
    "cummax": lambda x: cummax(x, dim=1),
    "linear": lambda x: linear(x * 0.5 + 0.5, x, dim=1),
    "ema-extra": lambda x: ema(x, dim=0, decay=0.5),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_one_operator_without_graph_breaks_gives_what_eager_gives(case):
    x = torch.rand(5, 6)
    call = CALLS[case]
    recorder = GraphRecorder()
    result, expected = torch.compile(call, backend=recorder, fullgraph=True)(x), call(x)
    results, wanted = (result, expected) if isinstance(result, tuple) else ((result,), (expected,))
    assert type(result) is type(expected) and len(results) == len(wanted)
    for got, want in zip(results, wanted):
        same(got, want, 1e-5)
    assert len(recorder.graphs) == 1 and len(recorder.operators()) == 1


VALUES = [0.9, 0.5, 0.25, 1e-30, 0.75, 1.0, -0.5, 0.125, 2.0, 0.0]  # more than torch's recompile limit (8)


def _graphs(fn, dynamic):
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(fn, backend=counter, fullgraph=True, dynamic=dynamic)
    x = torch.rand(3, 8)
    for value in VALUES if dynamic is None else VALUES[:2]:
        torch.testing.assert_close(compiled(x, value), fn(x, value))
    return counter.frame_count


def test_one_graph_serves_any_extras_value():
    """The extra is a 0-d tensor graph input, never a guard: with dynamic=True one graph serves two
    values; by default, the graphs plain torch needs for a float argument (its first value is
    specialized once), whatever the number of values."""
    assert _graphs(lambda x, decay: ema(x, dim=1, decay=decay)[1], True) == 1
    scan_graphs = _graphs(lambda x, decay: ema(x, dim=1, decay=decay)[1], None)
    plain_graphs = _graphs(lambda x, decay: x * decay, None)
    assert scan_graphs == plain_graphs <= 2


@pytest.mark.parametrize("dynamic", [False, True])
def test_dynamic_shapes(dynamic):
    counter = CompileCounter()
    compiled = torch.compile(lambda x: cumsum(x, dim=-1, reverse=True), backend=counter, dynamic=dynamic,
                             fullgraph=True)
    for n in (5, 7, 11):
        x = torch.rand(3, n)
        same(compiled(x), cumsum(x, dim=-1, reverse=True), 1e-5)
    assert counter.frame_count == (1 if dynamic else 3)


def test_out_is_written_under_compile():
    def call(x, out, products, h):
        cumsum(x, dim=1, out=out)
        linear(x, x, dim=0, out=(products, h))
        return out, products, h

    x = torch.rand(4, 5)
    got = torch.compile(call, backend="aot_eager", fullgraph=True)(x, *(torch.empty(4, 5) for _ in range(3)))
    want = call(x, *(torch.empty(4, 5) for _ in range(3)))
    for g, w in zip(got, want):
        same(g, w, 1e-5)


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_gradients_under_compile_equal_the_eager_backward(backend):
    def loss(x, a, b):
        products, h = linear(a, b, dim=1, reverse=True)
        return cumsum(x, dim=1, exclusive=True).sin().sum() + (h * products).sum() + cummax(x, dim=0).values.sum()

    x, a, b = torch.rand(3, 6, dtype=torch.float64), torch.rand(1, 6, dtype=torch.float64) + 0.5, \
        torch.rand(3, 6, dtype=torch.float64)
    assert_compiled_gradients_are_eager(loss, (x, a, b), backend)  # a is broadcast: its gradient summed to (1, 6)


def test_gradcheck_through_a_compiled_scan():
    x = torch.rand(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.compile(lambda t: cumsum(t, dim=1), backend="aot_eager"), (x,))


def test_gradient_refusals_under_compile():
    """Refused while tracing with the eager call's GradientError (fullgraph: torch names it in its own error)."""
    x = torch.rand(3, 4, requires_grad=True)
    lambda_backward = jiter_magic.create_scan_fn("template <typename T> T add(T a, T b) { return a + b; }", 0,
                                                 combine="add").def_backward(lambda x, r, g, **options: g)
    for call, match in ((lambda t: ema(t, dim=1)[1], "ema has no backward"),
                        (lambda t: cumsum(t, dim=1, out=torch.empty(3, 4)), "functions with out="),
                        (lambda t: lambda_backward(t, dim=1), "define it with def at a module's top level")):
        with pytest.raises(RuntimeError, match=r"raised exception GradientError\(.*" + match):
            torch.compile(call, backend="aot_eager", fullgraph=True)(x)
    with torch.no_grad():  # no gradient needed: its operator takes no backward
        same(torch.compile(lambda t: lambda_backward(t, dim=1), fullgraph=True, backend="aot_eager")(x),
             torch.cumsum(x, 1), 1e-5)


def test_register_torch_operators_takes_a_scan():
    (name,) = jiter_magic.register_torch_operators(linear)
    assert name.startswith("affine_")
