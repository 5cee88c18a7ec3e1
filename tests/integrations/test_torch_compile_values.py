"""Numbers under torch.compile are graph inputs, not guards; exported programs load elsewhere.

A keyword extra or a Python-number input of a jitted call reaches its torch operator as a 0-d
tensor (integrations/torch_extras.py), so a compiled function serves any number of values with
the graphs plain torch needs for the same arithmetic, and never meets torch's recompile limit
(8), past which it would fall back to eager without a word. A saved `torch.export` program loads
in a new process once the functions are created again and `register_torch_operators` has run.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import jiter_magic  # noqa: E402
from jiter_magic import create_jit_fn  # noqa: E402

SCALE = create_jit_fn("template <typename T> T scale_by(T x, T a) { return a * x; }", a=1.0)
SCALE.def_backward("template <typename T> void scale_by_bwd(T x, T a, T g, T& gx) { gx = a * g; }")
MUL = create_jit_fn("template <typename T> T times(T x, T y) { return x * y; }")
SHIFT = create_jit_fn("template <typename T> T shift_by(T x, int64_t n, bool flip) { return flip ? -(x + n) : x + n; }",
                      n=1, flip=False)
ROTATE = create_jit_fn("template <typename T> T rotate_by(T x, c10::complex<double> w) { return x * T(w); }",
                       w=1j)
VALUES = [1.5, 2.5, -3.25, 1e-30, 7.0, 1e30, 0.125, 11.0, -0.5, 13.0]  # more than torch's recompile limit


def graphs_made(fn, values, *tensors) -> int:
    """How many graphs Inductor compiles for `fn(*tensors, value)` over `values`, each checked."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn)
    for value in values:
        torch.testing.assert_close(compiled(*tensors, value), fn(*tensors, value))
    return counters["stats"]["unique_graphs"]


def test_new_values_of_an_extra_reuse_the_graph_as_plain_torch_does():
    x = torch.randn(6)
    made = graphs_made(lambda t, a: SCALE(t, a=a) + 1, VALUES, x)
    plain = graphs_made(lambda t, a: a * t + 1, VALUES, x)
    assert made == plain <= 2


def test_new_values_of_a_python_number_input_reuse_the_graph():
    x = torch.randn(6)
    assert graphs_made(lambda t, a: MUL(t, a), VALUES, x) == graphs_made(lambda t, a: t * a, VALUES, x) <= 2


def test_extras_of_every_kind_come_through_the_graph_with_their_values():
    x = torch.arange(4, dtype=torch.float64)
    compiled = torch.compile(lambda t, n, flip: SHIFT(t, n=n, flip=flip), fullgraph=True)
    for n, flip in ((2, False), (3, True), (-(2 ** 40), False)):
        torch.testing.assert_close(compiled(x, n, flip), -(x + n) if flip else x + n)
    z = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex128)
    rotate = torch.compile(lambda t: ROTATE(t, w=0.5 - 2j), fullgraph=True)
    torch.testing.assert_close(rotate(z), z * (0.5 - 2j))


def test_signed_zeros_infinities_and_nan_reach_the_kernel_unchanged():
    x = torch.ones(3, dtype=torch.float64)
    compiled = torch.compile(lambda t, a: SCALE(t, a=a))
    assert math.copysign(1.0, compiled(x, -0.0)[0].item()) == -1.0
    assert compiled(x, float("-inf"))[0].item() == float("-inf")
    assert math.isnan(compiled(x, float("nan"))[0].item())


def test_a_one_element_tensor_extra_is_read_as_its_value_under_compile():
    x = torch.randn(5)
    compiled = torch.compile(lambda t, a: SCALE(t, a=a), fullgraph=True)
    for value in (2.0, -4.0):
        torch.testing.assert_close(compiled(x, torch.tensor([value])), value * x)
    with pytest.raises(RuntimeError) as info:  # torch wraps the error raised while tracing
        compiled(x, torch.tensor(2.0, requires_grad=True))
    assert "argument 'a' requires grad, but extra arguments travel as plain numbers" in str(info.value)


def test_gradients_with_new_extra_values_reuse_the_graph_and_are_right():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(lambda t, a: SCALE(t, a=a).sum())
    for value in VALUES[:5]:
        x = torch.randn(4, dtype=torch.float64, requires_grad=True)
        compiled(x, value).backward()
        torch.testing.assert_close(x.grad, torch.full_like(x, value))
    assert counters["stats"]["unique_graphs"] <= 2


EXPORT = """
import sys, torch, jiter_magic
scale = jiter_magic.create_jit_fn("template <typename T> T scale_by(T x, T a) { return a * x; }", a=1.0)
scale.def_backward("template <typename T> void scale_by_bwd(T x, T a, T g, T& gx) { gx = a * g; }")
times = jiter_magic.create_jit_fn("template <typename T> T times(T x, T y) { return x * y; }")

class Model(torch.nn.Module):
    def forward(self, x, y):
        return scale(x, a=3.0) + times(y, 0.5)

x, y = torch.arange(4.0), torch.ones(4)
if sys.argv[1] == "save":
    torch.export.save(torch.export.export(Model(), (x, y)), sys.argv[2])
    print("saved")
else:
    if sys.argv[1] == "register":
        names = jiter_magic.register_torch_operators(scale, times)
        assert len(names) == 6 and all(isinstance(n, str) for n in names), names  # see register_operators
    program = torch.export.load(sys.argv[2])
    print(program.module()(x, y).tolist())
"""


def test_a_saved_export_loads_in_a_new_process_once_the_operators_are_registered(tmp_path):
    path = str(tmp_path / "model.pt2")
    env = {**os.environ, "JITER_MAGIC_NOTICE_AFTER": "off"}

    def run(step: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(EXPORT), step, path], env=env,
                              capture_output=True, text=True, timeout=300)

    saved = run("save")
    assert saved.returncode == 0 and saved.stdout.strip() == "saved", saved.stderr[-3000:]
    loaded = run("register")
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.strip() == "[0.5, 3.5, 6.5, 9.5]"
    unregistered = run("load")  # without the step, torch cannot resolve the operator: it says which
    assert unregistered.returncode != 0
    assert "jiter_magic.scale_by_" in unregistered.stderr or "jiter_magic.times_" in unregistered.stderr


def test_register_torch_operators_refuses_what_is_no_jitted_function():
    with pytest.raises(jiter_magic.InvalidArgumentError, match="takes jitted functions .*got function"):
        jiter_magic.register_torch_operators(lambda t: t)
    assert all(name.startswith(("scale_by_", "times_")) for name in jiter_magic.register_torch_operators(SCALE, MUL))
