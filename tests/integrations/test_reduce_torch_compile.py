"""torch.compile, torch.export and fake tensors of reductions: a call is one torch operator in the graph.

Every test compares with the eager call on the same inputs: values, dtypes, shapes and strides
(the operator's fake implementation must allocate what the eager call returns).
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from torch_compile_helpers import GraphRecorder, assert_compiled_gradients_are_eager, causes  # noqa: E402 - tests/torch_compile_helpers.py
from torch_compile_helpers import same as same_as_eager  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic import (  # noqa: E402
    ArgumentTypeError,
    BindError,
    DimensionError,
    DTypeError,
    GradientError,
    ShapeError,
    UnknownKwargError,
    create_reduction_fn,
)

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
ROOT = "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
MUL = "template <typename T> T mul(T x, T y, T a) { return a * x * y; }\n"

SUM_SQ = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add").def_backward(
    "template <typename T> void sq_bwd(T x, T result, T g, T& gx) { gx = 2 * x * g; }")
NORM = create_reduction_fn(SQ + ADD + ROOT, 0, map="sq", combine="add", finalize="root").def_backward(
    "template <typename T> void norm_bwd(T x, T norm, T g, T& gx) { gx = x / norm * g; }")
DOT = create_reduction_fn(MUL + ADD, 0, combine="add", a=1.0).def_backward(
    "template <typename T> void dot_bwd(T x, T y, T a, T r, T g, T& gx, T& gy) { gx = a * y * g; gy = a * x * g; }")
AVERAGE = create_reduction_fn(ADD + MEAN, 0, combine="add", finalize="mean")  # no backward


def same(result, expected) -> None:
    same_as_eager(result, expected, 1e-5)  # sums of float32 rounded in another order than torch's


CALLS = {
    "all": lambda x, y: SUM_SQ(x),
    "dim": lambda x, y: SUM_SQ(x, dim=1),
    "negative-dim-keepdim": lambda x, y: NORM(x, dim=-1, keepdim=True),
    "dim-tuple": lambda x, y: AVERAGE(x, dim=(0, 2)),
    "dim-tuple-keepdim": lambda x, y: SUM_SQ(x, dim=(2, 0), keepdim=True),
    "dtype": lambda x, y: SUM_SQ(x, dim=0, dtype=torch.float64),
    "dtype-name": lambda x, y: AVERAGE(x, dim=1, dtype="float64"),
    "ints": lambda x, y: SUM_SQ((x * 10).to(torch.int32), dim=1),
    "half": lambda x, y: NORM(x.half(), dim=2),
    "two-inputs-broadcast": lambda x, y: DOT(x, y, dim=-1),
    "extra-override": lambda x, y: DOT(x, y, dim=(0, 1), a=-2.5),
    "transposed": lambda x, y: SUM_SQ(x.transpose(0, 2), dim=1),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_one_operator_without_graph_breaks_gives_what_eager_gives(case):
    x, y = torch.rand(3, 4, 5), torch.rand(5)
    call = CALLS[case]
    recorder = GraphRecorder()
    result = torch.compile(call, backend=recorder, fullgraph=True)(x, y)
    same(result, call(x, y))
    assert len(recorder.graphs) == 1
    (operator,) = recorder.operators()
    assert operator.startswith(("jiter_magic.sq_", "jiter_magic.mul_", "jiter_magic.add_"))


@pytest.mark.slow
def test_inductor_gives_what_eager_gives():
    def model(x, y):
        return SUM_SQ(x, dim=1).sin() + AVERAGE(x, dim=(1,), dtype=torch.float32) * DOT(x, y, dim=1, a=0.5)

    x, y = torch.rand(6, 7), torch.rand(7)
    same(torch.compile(model, fullgraph=True)(x, y), model(x, y))


@pytest.mark.parametrize("dynamic", [False, True])
def test_dynamic_shapes(dynamic):
    recorder = GraphRecorder()
    compiled = torch.compile(lambda t, k: DOT(t, t, dim=1, keepdim=True, a=k), backend=recorder, dynamic=dynamic,
                             fullgraph=True)
    for n, k in ((5, 0.5), (7, 1.5), (11, -2.0)):
        x = torch.rand(n, 3)
        same(compiled(x, k), DOT(x, x, dim=1, keepdim=True, a=k))
    assert len(recorder.graphs) == (1 if dynamic else 3)


def test_the_names_of_operators_follow_what_made_the_function_and_its_backward():
    import pickle

    x = torch.rand(4)
    fresh = create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")  # SUM_SQ without its backward
    rebuilt = pickle.loads(pickle.dumps(SUM_SQ))
    names = []
    for fn in (SUM_SQ, fresh, rebuilt):
        recorder = GraphRecorder()
        torch.compile(lambda t: fn(t), backend=recorder, fullgraph=True)(x)
        names += recorder.operators()
    assert names[0].startswith("jiter_magic.sq_")
    assert names[1] != names[0] and names[2] == names[0]


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_gradients_under_compile_equal_the_eager_backward(backend):
    def loss(x, y):
        return (NORM(x, dim=1) * DOT(x, y, dim=(0, 1), a=1.5)).sum() + SUM_SQ(y, keepdim=True).sum()

    x0, y0 = torch.rand(4, 3, dtype=torch.float64) + 0.1, torch.rand(3, dtype=torch.float64)
    assert_compiled_gradients_are_eager(loss, (x0, y0), backend)  # y is broadcast: its gradient summed to (3,)


def test_gradcheck_through_a_compiled_reduction():
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.rand(4, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda a, b: DOT(a, b, dim=0, a=2.0), backend="aot_eager", fullgraph=True)
    assert torch.autograd.gradcheck(compiled, (x, y))


def test_a_reduction_without_backward_refuses_inputs_requiring_grad_under_compile():
    x = torch.rand(5, requires_grad=True)
    with pytest.raises(GradientError, match="add has no backward"):  # a graph break: the eager call's error
        torch.compile(lambda t: AVERAGE(t), backend="aot_eager")(x)
    with pytest.raises(RuntimeError, match=r"raised exception GradientError\('add has no backward"):
        torch.compile(lambda t: AVERAGE(t), backend="aot_eager", fullgraph=True)(x)  # Dynamo's error, naming ours
    with torch.no_grad():
        same(torch.compile(lambda t: AVERAGE(t), backend="aot_eager", fullgraph=True)(x), AVERAGE(x.detach()))


@pytest.mark.parametrize("fullgraph", [False, True])
def test_out_under_compile_is_written_checked_and_refused_under_autograd(fullgraph):
    torch._dynamo.reset()  # no code compiled by the other parameter's run (with graph breaks) serves this one
    x = torch.rand(3, 4)
    out = torch.empty(3)
    compiled = torch.compile(lambda t, o: SUM_SQ(t, dim=1, out=o), backend="aot_eager", fullgraph=fullgraph)
    assert compiled(x, out) is out
    torch.testing.assert_close(out, (x * x).sum(1))
    expected = {ShapeError: r"out= has shape \(\w+,\), but the result", DTypeError: "out= has dtype float64, but the "
                "result is float32; pass dtype=float64", GradientError: "out=... arguments don't support automatic "
                "differentiation"}
    wrong = {ShapeError: (x, torch.empty(4)), DTypeError: (x, torch.empty(3, dtype=torch.float64)),
             GradientError: (x.clone().requires_grad_(), out)}
    for error, args in wrong.items():
        with pytest.raises(error if not fullgraph else RuntimeError, match=expected[error]):
            compiled(*args)


def test_errors_under_compile_are_the_eager_errors():
    x = torch.rand(3, 4)
    with pytest.raises(DimensionError, match=r"dim 2 is out of range for a 2-d input: expected a dim in \[-2, 1\]"):
        torch.compile(lambda t: SUM_SQ(t, dim=2), backend="eager")(x)  # a graph break runs it eagerly
    with pytest.raises(RuntimeError, match=r"raised exception DimensionError\('dim 2 is out of range"):
        torch.compile(lambda t: SUM_SQ(t, dim=2), backend="eager", fullgraph=True)(x)
    with pytest.raises(UnknownKwargError, match="b is not declared"):
        torch.compile(lambda t: DOT(t, t, b=1.0), backend="eager")(x)
    with pytest.raises(ArgumentTypeError, match="keepdim must be True or False, got str"):
        torch.compile(lambda t: SUM_SQ(t, dim=0, keepdim="no"), backend="eager")(x)  # never bool("no")
    with pytest.raises(BindError, match=r"mul takes 2 input array\(s\) \['x', 'y'\], got 1"):
        torch.compile(lambda t: DOT(t), backend="eager")(x)
    with pytest.raises(RuntimeError) as info:  # torch's TorchRuntimeError, caused by ours in the fake operator
        torch.compile(lambda s, t: DOT(s, t), backend="eager", fullgraph=True)(torch.rand(3), torch.rand(4))
    assert any(isinstance(e, ShapeError) for e in causes(info.value))
    with pytest.raises(RuntimeError) as info:
        torch.compile(lambda t: SUM_SQ(t), backend="eager", fullgraph=True)(torch.ones(2, dtype=torch.complex64))
    assert any(isinstance(e, DTypeError) for e in causes(info.value))


LAYOUTS = {
    "contiguous": (lambda: torch.rand(3, 4), {"dim": 1}),
    "transposed": (lambda: torch.rand(4, 3).t(), {"dim": 0, "keepdim": True}),
    "channels-last": (lambda: torch.rand(2, 3, 4, 5).to(memory_format=torch.channels_last), {"dim": (1, 3)}),
    "zero-dim": (lambda: torch.tensor(2.0), {}),
    "empty": (lambda: torch.rand(0, 3), {"dim": 0}),
    "expanded": (lambda: torch.rand(3, 1).expand(3, 5), {"dim": -1, "dtype": torch.float64}),
    "bool": (lambda: torch.ones(4, dtype=torch.bool), {}),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_fake_implementation_allocates_what_eager_returns(layout):
    from torch._subclasses.fake_tensor import FakeTensorMode

    make, options = LAYOUTS[layout]
    x = make()
    expected = SUM_SQ(x, **options)
    result = SUM_SQ(FakeTensorMode().from_tensor(x), **options)
    assert type(result).__name__ == "FakeTensor"
    assert (result.dtype, result.shape, result.stride()) == (expected.dtype, expected.shape, expected.stride())


def test_torch_export_records_the_operator():
    class Model(torch.nn.Module):
        def forward(self, a, b):
            return DOT(a, b, dim=1, a=2.0) + 1

    a, b = torch.rand(4, 3), torch.rand(3)
    program = torch.export.export(Model(), (a, b))
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert any(t.startswith("jiter_magic.mul_") for t in targets)
    torch.testing.assert_close(program.module()(a, b), 2 * (a * b).sum(1) + 1)


def test_register_torch_operators_registers_the_reductions_operator_and_its_backwards():
    import jiter_magic

    fresh = create_reduction_fn(MUL + ADD, 0, combine="add", a=3.0).def_backward(
        "template <typename T> void mul_bwd(T x, T y, T a, T r, T g, T& gx, T& gy) { gx = a * y * g; gy = a * x * g; }")
    (name,) = jiter_magic.register_torch_operators(fresh)
    assert name.startswith("mul_") and hasattr(torch.ops.jiter_magic, name)
    x, y = torch.rand(2, 3), torch.rand(3)
    torch.testing.assert_close(getattr(torch.ops.jiter_magic, name)(x, y, torch.tensor(3.0, dtype=torch.float64),
                                                                      [1], False, None), fresh(x, y, dim=1))
    recorder = GraphRecorder()
    torch.compile(lambda s, t: fresh(s, t, dim=1), backend=recorder, fullgraph=True)(x, y)
    assert recorder.operators() == [f"jiter_magic.{name}"]
    with pytest.raises(jiter_magic.InvalidArgumentError, match="takes jitted functions"):
        jiter_magic.register_torch_operators(len)


KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_reduction_with_indices_is_one_operator_of_two_results(dynamic):
    from jiter_magic import ValuesIndices, create_multi_output_reduction_fn

    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    recorder = GraphRecorder()

    def call(x):
        values, indices = argmax(x, dim=1, keepdim=True)
        return values * 2, indices + 1, argmax(x).indices  # used in the graph, and the flat index

    compiled = torch.compile(call, backend=recorder, dynamic=dynamic, fullgraph=True)
    for rows in (4, 6):
        x = torch.randint(0, 3, (rows, 9)).float()  # ties: the first index
        values, indices, flat = compiled(x)
        expected = torch.max(x, dim=1, keepdim=True)
        assert torch.equal(values, expected.values * 2) and torch.equal(indices, expected.indices + 1)
        assert indices.dtype == torch.int64 and int(flat) == int(torch.argmax(x))
    assert all(name.startswith("jiter_magic.keep_max_") for name in recorder.operators())
    eager = torch.compile(lambda x: argmax(x, dim=0), backend="inductor", fullgraph=True)(torch.rand(5, 3))
    assert isinstance(eager, ValuesIndices)


def test_a_reduction_with_indices_writes_out_pairs_and_refuses_grad_under_compile():
    from jiter_magic import create_multi_output_reduction_fn

    argmax = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
    x = torch.rand(4, 6)
    values, indices = torch.empty(4), torch.empty(4, dtype=torch.int64)
    compiled = torch.compile(lambda t, v, i: argmax(t, dim=1, out=(v, i)), backend="aot_eager", fullgraph=True)
    compiled(x, values, indices)
    expected = torch.max(x, dim=1)
    assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)
    with pytest.raises(GradientError, match="keep_max has no backward"):
        torch.compile(lambda t: argmax(t, dim=1), backend="aot_eager")(x.requires_grad_())
    argmax.def_backward("template <typename T> void max_bwd(T x, T value, T g, T& gx) { gx = g; }")
    with pytest.raises(RuntimeError, match="gradients of a reduction with indices under torch.compile"):
        torch.compile(lambda t: argmax(t, dim=1), backend="aot_eager", fullgraph=True)(x)
    values = torch.compile(lambda t: argmax(t, dim=1).values, backend="aot_eager")(x)  # a graph break: eager
    values.sum().backward()
    assert torch.equal(x.grad, torch.nn.functional.one_hot(expected.indices, 6).float())
    with pytest.raises(DimensionError, match="no element to give"):
        torch.compile(lambda t: argmax(t, dim=1), backend="aot_eager")(torch.rand(3, 0))


FRESH_DYNAMIC = """
import sys
first, kind = sys.argv[1], sys.argv[2]
if first == "jiter_magic":
    import jiter_magic
import torch
import jiter_magic
from torch._dynamo.testing import CompileCounter
if kind == "reduction":
    fn = jiter_magic.create_reduction_fn("template <typename T> T add(T a, T b) { return a + b; }", 0, combine="add")
    call = lambda x: fn(x, dim=1)
else:
    fn = jiter_magic.create_jit_fn("template <typename T> T twice(T a) { return a + a; }")
    call = fn
counter = CompileCounter()
compiled = torch.compile(lambda x: call(x) * 2, backend=counter, dynamic=True)
shapes = [tuple(compiled(torch.ones(n, n + 1)).shape) for n in (3, 5, 2)]
print(counter.frame_count, shapes)
"""


@pytest.mark.slow
@pytest.mark.parametrize("first", ["torch", "jiter_magic"])
@pytest.mark.parametrize("kind", ["reduction", "elementwise"])
def test_dynamic_shapes_compile_one_graph_in_a_fresh_process(first, kind, tmp_path):
    """As torch.sum under torch.compile(dynamic=True): one graph for every shape, whichever of torch
    and jiter_magic a process imports first (the second graph came from a guard on how jiter_magic
    asks whether Dynamo traces, which the first eager call changed)."""
    import subprocess
    import sys

    env = {**os.environ, "JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", FRESH_DYNAMIC, first, kind], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [(3,), (5,), (2,)] if kind == "reduction" else [(3, 4), (5, 6), (2, 3)]
    assert done.stdout.strip().splitlines()[-1] == f"1 {rows}"


def test_dim_traced_as_an_argument_compiles_under_fullgraph():
    """A dim passed into the compiled function becomes a symbolic int once Dynamo has seen two
    values; the reduction specializes on it as torch.sum does, with no graph break."""
    from torch._dynamo.testing import CompileCounter

    fn = jiter_magic.create_reduction_fn("template <typename T> T add(T a, T b) { return a + b; }", 0,
                                         combine="add")
    counter = CompileCounter()
    compiled = torch.compile(lambda x, d: fn(x, dim=d), fullgraph=True, backend=counter)
    x = torch.arange(6.0).reshape(2, 3)
    for dim in (0, 1, -1, (0, 1)):
        torch.testing.assert_close(compiled(x, dim), x.sum(dim=dim))
    assert 1 <= counter.frame_count <= 4  # one graph a distinct dim at most, as torch.sum's
