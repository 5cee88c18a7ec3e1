"""torch.compile, torch.export and fake tensors: a jitted call is one torch operator in the graph.

Every test compares with the eager call on the same inputs: values, dtypes, shapes and strides
(the operator's fake implementation must allocate what the eager call returns).
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_compile_helpers import GraphRecorder, assert_compiled_gradients_are_eager, causes, same  # noqa: E402 - tests/torch_compile_helpers.py

import jiter_magic  # noqa: E402
from jiter_magic import GradientError, ShapeError, UnknownKwargError, create_jit_fn, create_multi_output_jit_fn  # noqa: E402

AXPY = create_jit_fn("template <typename T> T axpy(T x, T y, T a) { return a * x + y; }", a=2.0)
AXPY.def_backward("template <typename T> void axpy_bwd(T x, T y, T a, T g, T& gx, T& gy) { gx = a * g; gy = g; }")
MUL = create_jit_fn("template <typename T> T mul(T x, T y) { return x * y; }")
SINCOS = create_multi_output_jit_fn(
    "template <typename T> void sincos(T x, T& s, T& c) { s = sin(x); c = cos(x); }", 2)
SINCOS.def_backward(
    "template <typename T> void sincos_bwd(T x, T gs, T gc, T& gx) { gx = gs * cos(x) - gc * sin(x); }")
NO_GRAD = create_jit_fn("template <typename T> T square(T x) { return x * x; }")


def test_a_compiled_function_holds_each_jitted_call_as_one_operator_without_graph_breaks():
    def model(x, y):
        return AXPY(x, y, a=3.0).sin() + MUL(x, 0.5)

    recorder = GraphRecorder()
    compiled = torch.compile(model, backend=recorder, fullgraph=True)
    x, y = torch.randn(4, 3), torch.randn(3)
    same(compiled(x, y), model(x, y))
    assert len(recorder.graphs) == 1
    operators = recorder.operators()
    assert len(operators) == 2 and all(op.startswith("jiter_magic.") for op in operators)
    assert any(op.startswith("jiter_magic.axpy_") for op in operators)
    assert any(op.startswith("jiter_magic.mul_") for op in operators)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["same-shape", "broadcast-row", "outer", "transposed", "int-plus-float",
                                  "python-scalar", "kwarg-override", "int-only", "bool-and-float64"])
def test_inductor_gives_what_eager_gives(case):
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    calls = {
        "same-shape": lambda: AXPY(x, y),
        "broadcast-row": lambda: AXPY(x, y[0]),
        "outer": lambda: MUL(x[:, :1], y[:1, :]),
        "transposed": lambda: MUL(x.t(), y.t().contiguous()),
        "int-plus-float": lambda: MUL(torch.arange(20, dtype=torch.int32).reshape(5, 4), x),
        "python-scalar": lambda: AXPY(x, 1.5),
        "kwarg-override": lambda: AXPY(x, y, a=-0.25),
        "int-only": lambda: MUL(torch.arange(6), torch.arange(6) + 3),
        "bool-and-float64": lambda: MUL(x > 0, y.double()),
    }
    call = calls[case]
    expected = call()
    same(torch.compile(call, fullgraph=True)(), expected)


@pytest.mark.slow
def test_multi_output_and_out_under_compile():
    x = torch.randn(64)
    s, c = torch.compile(lambda t: SINCOS(t), fullgraph=True)(x)
    es, ec = SINCOS(x)
    same(s, es)
    same(c, ec)
    out = torch.empty(64)
    returned = torch.compile(lambda t, o: AXPY(t, t, out=o), fullgraph=True)(x, out)
    assert returned is out
    torch.testing.assert_close(out, 3 * x)


LAYOUTS = {
    "contiguous": lambda: (torch.randn(3, 4), torch.randn(3, 4)),
    "transposed": lambda: (torch.randn(4, 3).t(), torch.randn(3, 4)),
    "both-transposed": lambda: (torch.randn(4, 3).t(), torch.randn(4, 3).t()),
    "channels-last": lambda: (torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last), torch.randn(5)),
    "column-times-row": lambda: (torch.randn(6, 1), torch.randn(1, 7)),
    "zero-dim": lambda: (torch.tensor(2.0), torch.randn(3)),
    "empty": lambda: (torch.randn(0, 3), torch.randn(3)),
    "sliced": lambda: (torch.randn(8, 8)[::2, 1::3], torch.randn(4, 3)),
    "expanded": lambda: (torch.randn(3, 1).expand(3, 5), torch.randn(3, 5)),
    "int8-half": lambda: (torch.ones(4, dtype=torch.int8), torch.ones(4, dtype=torch.float16)),
    "complex": lambda: (torch.randn(3, dtype=torch.complex64), torch.randn(3)),
    "uint8-bool": lambda: (torch.ones(4, dtype=torch.uint8), torch.ones(4, dtype=torch.bool)),
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_fake_implementation_allocates_what_eager_returns(layout):
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, y = LAYOUTS[layout]()
    expected = MUL(x, y)
    mode = FakeTensorMode()
    result = MUL(mode.from_tensor(x), mode.from_tensor(y))
    assert type(result).__name__ == "FakeTensor"
    assert (result.dtype, result.shape, result.stride()) == (expected.dtype, expected.shape, expected.stride())


def test_the_fake_implementation_follows_the_default_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ints = torch.arange(4, dtype=torch.int32)
        expected = AXPY(ints, 0.1)
        assert expected.dtype == torch.float64
        result = AXPY(FakeTensorMode().from_tensor(ints), 0.1)
        assert result.dtype == torch.float64
        same(torch.compile(lambda t: AXPY(t, 0.1), fullgraph=True)(ints), expected)
    finally:
        torch.set_default_dtype(old)


@pytest.mark.slow
def test_gradients_under_compile_equal_the_eager_backward():
    def loss(x, y):
        s, c = SINCOS(x)
        return (AXPY(s, y, a=0.5) * c).sum()

    x0, y0 = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    assert_compiled_gradients_are_eager(loss, (x0, y0))  # y is broadcast: its gradient summed to (3,)


def test_gradcheck_through_a_compiled_function():
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    y = torch.randn(2, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda a, b: AXPY(a, b, a=1.5), backend="aot_eager", fullgraph=True)
    assert torch.autograd.gradcheck(compiled, (x, y))


def test_a_function_without_backward_refuses_a_gradient_under_compile_and_runs_without_one():
    x = torch.randn(5, requires_grad=True)
    compiled = torch.compile(lambda t: NO_GRAD(t).sum(), fullgraph=True)
    with pytest.raises(RuntimeError) as info:  # Inductor's BackendCompilerFailed, caused by ours
        compiled(x).backward()
    assert any(isinstance(e, GradientError) for e in causes(info.value))
    assert "square has no backward: give it one with square.def_backward(code_string)" in str(info.value)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(lambda t: NO_GRAD(t), fullgraph=True)(x), x.detach() ** 2)


def test_dynamic_shapes_and_extras_do_not_need_a_graph_a_size():
    recorder = GraphRecorder()
    compiled = torch.compile(lambda a, b, k: AXPY(a, b, a=k), backend=recorder, dynamic=True, fullgraph=True)
    for n, k in ((5, 0.5), (7, 1.5), (11, -2.0)):
        a, b = torch.randn(n, 3), torch.randn(3)
        same(compiled(a, b, k), AXPY(a, b, a=k))
    assert len(recorder.graphs) == 1


def test_torch_export_records_the_operator():
    class Model(torch.nn.Module):
        def forward(self, a, b):
            return AXPY(a, b) * 2

    a, b = torch.randn(4, 3), torch.randn(3)
    program = torch.export.export(Model(), (a, b))
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert any(t.startswith("jiter_magic.axpy_") for t in targets)
    torch.testing.assert_close(program.module()(a, b), (2 * a + b) * 2)


def test_errors_under_compile_are_the_eager_errors():
    x = torch.randn(3)
    with pytest.raises(UnknownKwargError, match=r"b is not declared in function definition \(declared: \['a'\]\)"):
        torch.compile(lambda t: AXPY(t, t, b=1.0))(x)  # a graph break runs it eagerly: the eager error
    with pytest.raises(RuntimeError) as info:  # torch's TorchRuntimeError, caused by ours
        torch.compile(lambda s, t: MUL(s, t), fullgraph=True)(torch.randn(3), torch.randn(4))
    assert any(isinstance(e, ShapeError) for e in causes(info.value))
    assert "ShapeError('input shapes (3,), (4,) cannot be broadcast together')" in str(info.value)
    with pytest.raises(jiter_magic.DTypeError, match=r"argument 'a' must be a bool, int, float or complex \(or a 1-"):
        torch.compile(lambda t: AXPY(t, t, a=torch.ones(2)))(x)  # a tensor extra of 2 elements, as eagerly
    torch.testing.assert_close(torch.compile(lambda t: AXPY(t, t), fullgraph=True)(x), 3 * x)


def test_a_functor_named_outside_ascii_gets_an_operator_name_torch_accepts():
    cube = create_jit_fn("template <typename T> T kubus_\u00e4(T x) { return x * x * x; }")
    recorder = GraphRecorder()
    x = torch.randn(6)
    same(torch.compile(lambda t: cube(t), backend=recorder, fullgraph=True)(x), cube(x))
    assert recorder.operators()[0].startswith("jiter_magic.kubus__")


def test_eager_calls_never_touch_the_operators():
    """Outside tracing the call path is the usual one: no operator is registered for a new function."""
    from jiter_magic.integrations import torch_ops
    from jiter_magic.state import RUNTIME

    fresh = create_jit_fn("template <typename T> T only_eager(T x) { return x - 1; }")
    registered = RUNTIME.part(torch_ops.TorchOperators).names_by_digest
    before = dict(registered)
    torch.testing.assert_close(fresh(torch.ones(3)), torch.zeros(3))
    assert registered == before
    assert isinstance(fresh, jiter_magic.JitFunction)


@pytest.mark.gpu
def test_inductor_on_cuda_gives_what_eager_gives_gradients_included():
    def model(a, b):
        s, c = SINCOS(a)
        return AXPY(s, b, a=0.5) * c + AXPY(a.t().contiguous().t(), 2.0)

    a0 = torch.randn(1000, 37, device="cuda", dtype=torch.float64)
    b0 = torch.randn(37, device="cuda", dtype=torch.float64)
    recorder = GraphRecorder()
    torch.compile(model, backend=recorder, fullgraph=True)(a0, b0)
    assert len(recorder.graphs) == 1 and len(recorder.operators()) == 3
    eager = [t.clone().requires_grad_() for t in (a0, b0)]
    expected = model(*eager)
    compiled_inputs = [t.clone().requires_grad_() for t in (a0, b0)]
    result = torch.compile(model, fullgraph=True)(*compiled_inputs)
    same(result.detach(), expected.detach())
    expected.sum().backward()
    result.sum().backward()
    for got, want in zip(compiled_inputs, eager):
        torch.testing.assert_close(got.grad, want.grad)
    half = torch.randn(4097, device="cuda", dtype=torch.float16)
    same(torch.compile(lambda t: MUL(t[1:], 3), fullgraph=True)(half), MUL(half[1:], 3))
    out = torch.empty(64, 64, device="cuda").t()
    x = torch.randn(64, 64, device="cuda")
    assert torch.compile(lambda t, o: AXPY(t, t, out=o), fullgraph=True)(x, out) is out
    torch.testing.assert_close(out, 3 * x)


WARM_CACHE_SCRIPT = """
import torch, jiter_magic
fn = jiter_magic.create_jit_fn("template <typename T> T warm_cube(T x, T a) { return a * x * x * x; }", a=2.0)
fn.def_backward("template <typename T> void warm_cube_bwd(T x, T a, T g, T& gx) { gx = 3 * a * x * x * g; }")
x = torch.linspace(-1, 1, 7, dtype=torch.float64, requires_grad=True)
torch.compile(lambda t: fn(t).sum(), fullgraph=True)(x).backward()
assert torch.allclose(x.grad, 6 * x.detach() ** 2), x.grad
print("ok")
"""


@pytest.mark.slow
def test_a_compiled_backward_loaded_from_torchs_caches_finds_its_operator(tmp_path):
    """In a second process Inductor and AOTAutograd load the compiled backward from their caches
    without tracing it: the backward's operator must exist all the same."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}
    for run in ("cold", "warm"):
        done = subprocess.run([sys.executable, "-c", WARM_CACHE_SCRIPT], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0 and done.stdout.strip() == "ok", (run, done.stderr[-3000:])
    assert any((tmp_path / "inductor").rglob("*")), "Inductor wrote no cache"
