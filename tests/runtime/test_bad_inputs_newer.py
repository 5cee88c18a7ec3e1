"""The second catalogue: hostile and edge cases aimed at the newer features (def_backward,
torch.compile and torch.export, pickling, fork, the fault guard, numerics, the benchmark helper,
the magic, the environment variables), each with its exact outcome.

The table style is the first catalogue's (test_bad_inputs.py, whose helpers it uses): each row
is an id, a callable and either `Raises(class, documented base, message pattern)`, raised twice
in a row, or `SAME`, the callable returning (what jiter_magic gave, what torch or the documented
behaviour gives). After every row a good call must still work. Rows that start processes or
compile graphs are marked slow.
"""
from __future__ import annotations

import os
import pickle
import platform
import subprocess
import sys
import tempfile
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from test_bad_inputs import SAME, TAG, Raises, check, jit  # tests/runtime/test_bad_inputs.py

import jiter_magic
from jiter_magic import ArgumentTypeError, GradientError, KernelFaultError, ParseError, SettingWarning

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X86 = platform.machine() in ("x86_64", "AMD64")
SLOW = pytest.mark.slow

SQUARE = "template <typename T> T nw_square(T x) { return x * x; }"
SQUARE_BWD = "template <typename T> void nw_square_bwd(T x, T g, T& gx) { gx = T(2) * x * g; }"
WRONG_BWD = "template <typename T> void nw_square_wrong(T x, T g, T& gx) { gx = T(1000) * g; }"


# ----------------------------------------------------------------------------- gradients
def pickled_backward_stays_the_pickled_one() -> tuple:
    """Unpickle, give the copy another backward, unpickle again: the pickled backward, not the copy's."""
    pickled = pickle.dumps(jit(SQUARE).def_backward(SQUARE_BWD))
    pickle.loads(pickled).def_backward(WRONG_BWD)
    again = pickle.loads(pickled)
    x = torch.tensor([2.0, 4.0], requires_grad=True)
    again(x).sum().backward()
    return x.grad, torch.tensor([4.0, 8.0])


def create_graph_gives_a_gradient_with_a_grad_fn() -> tuple:
    fn = jit(SQUARE).def_backward(SQUARE_BWD)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    return (gx.detach(), gx.grad_fn is not None), (2 * x.detach(), True)


def second_order_mixed_with_a_torch_term() -> None:
    fn = jit(SQUARE).def_backward(SQUARE_BWD)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    ((gx ** 2).sum() + (x ** 3).sum()).backward()  # torch: [35, 76]; never [3, 12] from half of it


# ----------------------------------------------------------------------------- fork
FORK = """
import json, os, signal, sys, threading, numpy as np, jiter_magic
f = jiter_magic.create_jit_fn("template <typename T> T nw_fork(T x) { return x * 2 + 1; }")
x = np.arange(1 << 22, dtype=np.float32)
case = sys.argv[1]
if case == "after-a-big-call":
    f(x)  # many threads: the OpenMP pool has started
else:  # while another thread compiles: it holds the loader's lock at the fork
    building, release = threading.Event(), threading.Event()
    def hold(spec, device):
        if threading.current_thread() is not threading.main_thread():
            building.set()
            release.wait()
    f.add_start_listener(hold)
    worker = threading.Thread(target=lambda: f(x[:10]))
    worker.start()
    building.wait()
child = os.fork()
if child == 0:
    signal.alarm(60)  # a hang ends the child with SIGALRM
    os._exit(0 if (f(x) == x * 2 + 1).all() else 3)
_, status = os.waitpid(child, 0)
if case != "after-a-big-call":
    release.set()
    worker.join()
print(status)
"""


def forked_child(case: str) -> Any:
    def run() -> tuple:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PYTHONPATH": REPO, "JITER_MAGIC_CACHE_DIR": cache}
            done = subprocess.run([sys.executable, "-c", FORK, case], capture_output=True, text=True, timeout=300,
                                  env=env)
        return (done.returncode, done.stdout.strip()), (0, "0")  # the child exited 0: no hang, right values
    return run


# ----------------------------------------------------------------------------- torch.compile and torch.export
def compiled_graphs_for_ten_values() -> tuple:
    from torch._dynamo.utils import counters

    scale = jit("template <typename T> T nw_scale(T x, T a) { return a * x; }", a=1.0)

    def graphs(fn: Any) -> int:
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(fn)
        x = torch.arange(4.0)
        for value in (1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5):  # past the recompile limit, 8
            torch.testing.assert_close(compiled(x, value), value * x)
        return counters["stats"]["unique_graphs"]

    return graphs(lambda t, a: scale(t, a=a)), graphs(lambda t, a: a * t)


EXPORT = """
import sys, torch, jiter_magic
f = jiter_magic.create_jit_fn("template <typename T> T nw_export(T x, T a) { return a * x; }", a=2.0)
class Model(torch.nn.Module):
    def forward(self, x):
        return f(x, a=3.0)
if sys.argv[1] == "save":
    torch.export.save(torch.export.export(Model(), (torch.ones(3),)), sys.argv[2])
else:
    jiter_magic.register_torch_operators(f)
    print(torch.export.load(sys.argv[2]).module()(torch.arange(3.0)).tolist())
"""


def export_loads_in_a_new_process() -> tuple:
    env = {**os.environ, "PYTHONPATH": REPO, "JITER_MAGIC_NOTICE_AFTER": "off"}
    with tempfile.TemporaryDirectory() as folder:
        for step in ("save", "load"):
            done = subprocess.run([sys.executable, "-c", EXPORT, step, os.path.join(folder, "model.pt2")],
                                  capture_output=True, text=True, timeout=300, env=env)
            assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip(), "[0.0, 3.0, 6.0]"


# ----------------------------------------------------------------------------- faults and numerics
INT3 = "template <typename T> T nw_int3(T x) { if (x > T(1)) __asm__ volatile(\"int3\"); return x; }"
FP_TRAP = ("#include <fenv.h>\n"
           "template <typename T> T nw_fp_trap(T x) { feenableexcept(FE_DIVBYZERO); volatile T zero = 0; "
           "return x / zero; }")
MACRO_ENTRY = "#define MAKE(n) template <typename T> T n(T x) { return x; }\nMAKE(nw_macro)"
WRAPS = "template <typename T> T nw_wraps(T x) { return (x + T(1)) > x; }"
# C++ computes int8/int16/uint8 arithmetic in int (integer promotion, docs/api.md): the wrapped
# sum of a narrow type is compared once narrowed back to T.
NARROW_WRAPS = "template <typename T> T nw_narrow_wraps(T x) { return T(x + T(1)) > x; }"
DIVIDE = "template <typename T> T nw_divide(T x, T y) { return x / y; }"


def overflow_wraps_as_torch(dtype: torch.dtype) -> Any:
    def run() -> tuple:
        x = torch.tensor([torch.iinfo(dtype).max, 0], dtype=dtype)
        code = WRAPS if dtype.itemsize >= 4 else NARROW_WRAPS
        return jit(code)(x), ((x + 1) > x).to(dtype)
    return run


def complex_division_by_zero_as_torch() -> tuple:
    x = torch.tensor([1 + 2j, -3 + 0j, 0j], dtype=torch.complex64)
    zero = torch.zeros(3, dtype=torch.complex64)
    return jit(DIVIDE)(x, zero), x / zero


# ----------------------------------------------------------------------------- tools, magic, settings
def benchmark_with_a_number_as_reference() -> None:
    jiter_magic.benchmark(jit(SQUARE), np.arange(4.0), reference=5)


def sweep_of_one_array_an_input() -> tuple:
    result = jiter_magic.sweep(jit(SQUARE), make_inputs=lambda n: np.arange(n, dtype=np.float32), sizes=[256],
                               warmup=1, repeat=2)
    return (result.sizes, len(result.results)), ((256,), 1)


def magic_binding_builtins() -> tuple:
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("jiter_magic")
    try:
        shell.run_cell_magic("jiterator", "__builtins__ --no-panel", SQUARE)
        refused = ""
    except UsageError as exc:
        refused = str(exc)
    later = shell.run_cell("len([1, 2, 3])")  # every later cell still works
    return ("dunder name" in refused, later.result), (True, 3)


def bad_setting_warns_naming_it(variable: str, text: str, read: Any) -> Any:
    def run() -> tuple:
        old = os.environ.get(variable)
        os.environ[variable] = text
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = read()
        finally:
            if old is None:
                del os.environ[variable]
            else:
                os.environ[variable] = old
        named = [str(w.message) for w in caught if issubclass(w.category, SettingWarning) and variable in str(w.message)]
        return (value, len(named)), (read.default, 1)
    return run


def _notice_after() -> Any:
    from jiter_magic import settings

    return settings.NOTICE_AFTER.get()


def _cuda_arch() -> Any:
    from jiter_magic import settings
    from jiter_magic.compilers.nvrtc_archs import checked_arch

    return checked_arch(settings.CUDA_ARCH.get())


_notice_after.default = 0.5  # type: ignore[attr-defined]
_cuda_arch.default = "sm_90"  # type: ignore[attr-defined]


def case(case_id: str, make: Any, expect: Any, *marks: Any) -> Any:
    return pytest.param(make, expect, id=case_id, marks=marks)


CASES = [
    case("pickle-loads-def_backward-loads-again", pickled_backward_stays_the_pickled_one, SAME),
    case("create_graph-gradient-has-a-grad_fn", create_graph_gives_a_gradient_with_a_grad_fn, SAME),
    case("create_graph-second-order-mixed-with-torch", second_order_mixed_with_a_torch_term,
         Raises(GradientError, RuntimeError, r"differentiable once: a second-order gradient")),
    case("fork-after-a-4M-multi-threaded-call", forked_child("after-a-big-call"), SAME, SLOW),
    case("fork-while-another-thread-compiles", forked_child("while-compiling"), SAME, SLOW),
    case("torch.compile-ten-float-values-graphs-as-plain-torch", compiled_graphs_for_ten_values, SAME, SLOW),
    case("torch.export-load-in-a-new-process", export_loads_in_a_new_process, SAME, SLOW),
    case("int3-SIGTRAP", lambda: jit(INT3)(np.arange(4.0)),
         Raises(KernelFaultError, RuntimeError, r"nw_int3.*(SIGTRAP|trap)"),
         pytest.mark.skipif(not X86, reason="int3 is an x86 instruction")),
    case("feenableexcept-division-by-zero", lambda: jit(FP_TRAP)(np.arange(4.0)),
         Raises(KernelFaultError, RuntimeError, r"nw_fp_trap.*division by zero")),
    case("entry-defined-by-a-macro", lambda: jit(MACRO_ENTRY),
         Raises(ParseError, ValueError, r"entry function must be a plain function .*not made by a macro: `MAKE\(nw_macro\)`")),
    *(case(f"overflow-wraps-{str(d).split('.')[1]}", overflow_wraps_as_torch(d), SAME)
      for d in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)),
    case("complex-division-by-zero", complex_division_by_zero_as_torch, SAME),
    case("benchmark-reference-is-a-number", benchmark_with_a_number_as_reference,
         Raises(ArgumentTypeError, TypeError, r"reference must be .*callable.*got int")),
    case("sweep-make_inputs-returns-one-array", sweep_of_one_array_an_input, SAME),
    case("magic-binds-__builtins__", magic_binding_builtins, SAME),
    case("JITER_MAGIC_NOTICE_AFTER=xyz", bad_setting_warns_naming_it("JITER_MAGIC_NOTICE_AFTER", f"xyz{TAG}",
                                                                     _notice_after), SAME),
    case("JITER_MAGIC_NOTICE_AFTER=-3", bad_setting_warns_naming_it("JITER_MAGIC_NOTICE_AFTER", "-3.0000",
                                                                    _notice_after), SAME),
    case("JITER_MAGIC_CUDA_ARCH=sm_bogus", bad_setting_warns_naming_it("JITER_MAGIC_CUDA_ARCH", f"sm_bogus{TAG}",
                                                                       _cuda_arch), SAME),
]


@pytest.mark.parametrize("make,expect", CASES)
def test_newer_features(make, expect):
    check(make, expect)

