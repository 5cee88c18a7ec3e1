"""The C-level call path (backends/fast_call.py, fast_call.cpp): built, cached, used, and the same
results and errors as the Python path it replaces on the hot path and in launches."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import threading

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.errors import IntegerDivisionError, LaunchError
from jiter_magic.native import loader as fast_call

HAS_HEADERS = os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h"))
pytestmark = pytest.mark.skipif(not HAS_HEADERS, reason="Python.h is not installed, so the C call path cannot be "
                                                         "built here (the Python path runs)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AXPY = "template <typename T> T fc_axpy(T x, T y, T alpha) { return -x + alpha * y; }"


def hot_plan(function, *args):
    """The plan the hot path uses for `args`, after enough calls to give it its C hot path."""
    for _ in range(3):
        function(*args)
    key = function._dispatch._fast_keys[type(args[0])](args)
    return function._dispatch.plans.get(key[0])


def test_the_modules_are_loaded_for_the_session():
    assert fast_call.wait(300) is not None
    assert fast_call.status() == "loaded" and fast_call.torch_status() == "loaded"
    assert fast_call.torch_key() is not None
    f = jiter_magic.create_jit_fn(AXPY, alpha=1)
    plan = hot_plan(f, torch.rand(3), torch.rand(3))
    assert type(plan.allocators[0]).__name__ == "Allocator"  # at::empty_strided, from C++


def test_a_storage_shrunk_under_a_planned_view_is_refused_on_the_hot_path():
    from jiter_magic.errors import UnsupportedArrayError

    f = jiter_magic.create_jit_fn(AXPY, alpha=1)
    base = torch.rand(64)
    view, other = base[8:40], torch.rand(32)
    plan = hot_plan(f, view, other)
    assert type(plan.hot).__name__ == "HotPlan"
    base.untyped_storage().resize_(100)  # 25 floats left: the view reaches float 40
    with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
        f(view, other)
    assert torch.equal(f(other, other * 2), other)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8, torch.int64, torch.bool,
                                   torch.complex64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast", "sliced", "scalar-shaped"])
def test_hot_path_in_c_matches_the_python_path(dtype, layout):
    f = jiter_magic.create_jit_fn(AXPY, alpha=2)
    base = torch.arange(-30, 42).reshape(8, 9).to(dtype)
    other = (torch.arange(72).reshape(8, 9) % 5).to(dtype)
    a, b = {
        "contiguous": (base, other),
        "transposed": (base.t(), other.t()),
        "broadcast": (base, other[:1]),
        "sliced": (base[1:, ::2], other[1:, ::2]),
        "scalar-shaped": (base[0, 0], other[0, 0]),
    }[layout]
    plan = hot_plan(f, a, b)
    assert type(plan.hot).__name__ == "HotPlan"
    from_c = f(a, b)
    plan.hot = None  # the same plan on the Python path
    from_python = f(a, b)
    assert from_c.dtype == from_python.dtype == dtype
    assert from_c.shape == from_python.shape and from_c.stride() == from_python.stride()
    assert torch.equal(from_c, from_python)


def test_hot_path_in_c_with_several_outputs_and_numpy():
    g = jiter_magic.create_multi_output_jit_fn(
        "template <typename T> void fc_two(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", 2)
    x, y = np.linspace(0, 1, 1001), np.linspace(2, 3, 1001)
    plan = hot_plan(g, x, y)
    assert type(plan.hot).__name__ == "HotPlan"
    s, d = g(x, y)
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(d, x - y)
    one = jiter_magic.create_multi_output_jit_fn("template <typename T> void fc_one(T x, T& o) { o = x * 3; }", 1)
    plan = hot_plan(one, torch.ones(5, dtype=torch.int32))
    result = one(torch.ones(5, dtype=torch.int32))
    assert type(plan.hot).__name__ == "HotPlan" and isinstance(result, torch.Tensor)  # one output: the tensor
    assert result.tolist() == [3] * 5 and result.dtype == torch.int32


def test_faults_raise_through_the_c_path_and_the_next_call_works():
    divide = jiter_magic.create_jit_fn("template <typename T> T fc_div(T x, T y) { return x / y; }")
    x, ones, zeros = torch.arange(10), torch.ones(10, dtype=torch.int64), torch.zeros(10, dtype=torch.int64)
    plan = hot_plan(divide, x, ones)
    assert type(plan.hot).__name__ == "HotPlan"
    for _ in range(2):
        with pytest.raises(IntegerDivisionError, match="fc_div: integer division or remainder by zero"):
            divide(x, zeros)  # the same key as the plan above: the C hot plan runs it
    assert divide(x, ones).tolist() == list(range(10))
    scaled = jiter_magic.create_jit_fn("template <typename T> T fc_mod(T x, T m) { return x % m; }", m=0)
    with pytest.raises(IntegerDivisionError):
        scaled(x, m=0)  # kwargs: the general path, launched by the kernel's C launcher
    assert scaled(x, m=4).tolist() == [v % 4 for v in range(10)]


def test_the_c_key_refuses_what_the_general_path_must_see():
    key = fast_call.torch_key()
    x = torch.rand(4, 3)
    plain = key((x, x))
    assert isinstance(plain[0], bytes) and plain[1] == [x.data_ptr(), x.data_ptr()]
    assert key((x, x.clone()))[0] == plain[0]  # same layout, dtype and alignment: the same key
    assert key((x, x.t().contiguous().t()))[0] != plain[0]  # strides differ
    assert key((x, x[:, :2]))[0] != plain[0]
    assert key((x, x.double()))[0] != plain[0]
    assert key((x, x.view(-1)[1:]))[0] != key((x, x.view(-1)[:11]))[0]  # the pointer's alignment
    assert key((x, x.clone().requires_grad_())) is None
    assert key((x, torch._neg_view(x))) is None
    assert key((x, torch.rand(3, dtype=torch.complex64).conj())) is None
    assert key((x, torch.nn.Parameter(x))) is None  # it requires grad
    assert key((x, torch.nn.Parameter(x, requires_grad=False)))[0] != plain[0]  # its own type in the key

    class Sub(torch.Tensor):
        pass

    assert key((x, x.as_subclass(Sub))) is None
    assert key((x, 1.0)) is None and key((x, np.ones(3))) is None
    assert key((x, x.to_sparse())) is None  # no storage: the general path says what is wrong
    freed = torch.rand(8)
    view = freed[2:]
    freed.untyped_storage().resize_(0)
    assert key((x, view)) is None  # a pointer in the first page: the general path refuses it


def test_calls_from_many_threads_share_one_hot_plan():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.5)
    a, b = torch.rand(5000), torch.rand(5000)
    expected = -a + 1.5 * b
    plan = hot_plan(f, a, b)
    assert type(plan.hot).__name__ == "HotPlan"
    failures: list[str] = []

    def work() -> None:
        for _ in range(200):
            if not torch.allclose(f(a, b), expected):
                failures.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_c_objects_check_their_arguments():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    a = torch.rand(6)
    plan = hot_plan(f, a, a)
    with pytest.raises(TypeError, match="a hot plan takes one list of 2 input pointers"):
        plan.hot([a.data_ptr()])
    with pytest.raises(TypeError):
        plan.hot((a.data_ptr(), a.data_ptr()))
    native = plan.launcher.native()
    with pytest.raises(TypeError, match=r"launch\(args: bytes, grid: tuple, stream: int\)"):
        native.launch("not bytes", (1, 1, 1), 0)


def _has_driver() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_has_driver(), reason="this machine has a CUDA driver")
def test_without_a_driver_cuda_kernels_keep_the_python_launch():
    with pytest.raises(LaunchError, match="the fast call path has no CUDA driver"):
        fast_call.module.Kernel(1, False, (1, 1, 1), 0, None, "x")
    assert fast_call.kernel(1, False, (1, 1, 1), 0, None, "x") is None


def _output_lines(script: str, env: dict) -> list[str]:
    environment = {**os.environ, "PYTHONPATH": ROOT}
    environment.pop(fast_call.DIR_VARIABLE, None)  # these children build into their own cache, unless told
    environment.update(env)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def _run(script: str, env: dict) -> dict:
    return json.loads(_output_lines(script, env)[-1])


CHILD = """
import json, torch, jiter_magic
from jiter_magic.native import loader as fast_call
from jiter_magic.compilers import cxx
fast_call.wait(120)
f = jiter_magic.create_jit_fn("template <typename T> T fc_child(T x, T y) { return x * y + 1; }")
a = torch.arange(6.0)
for _ in range(3):
    out = f(a, a)
plan = next(p for p in f._dispatch.plans.values())
print(json.dumps({"status": fast_call.status(), "torch_status": fast_call.torch_status(), "values": out.tolist(),
                  "hot": type(plan.hot).__name__, "stats": jiter_magic.cache_stats()}))
"""


@pytest.mark.slow
def test_turned_off_the_python_path_gives_the_same_results(tmp_path):
    found = _run(CHILD, {"JITER_MAGIC_FAST_CALL": "0", "JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    assert found["status"] == "off" and found["hot"] == "NoneType"
    assert found["values"] == [v * v + 1.0 for v in range(6)]


@pytest.mark.slow
def test_a_loading_thread_that_cannot_start_leaves_the_python_path(tmp_path):
    """Where no thread can be started (the interpreter finalizing, a thread limit: made to fail
    here), the call still returns its result on the Python path, and the status says why."""
    script = CHILD.replace("fast_call.wait(120)\n", """
def no_thread(function, args):
    raise RuntimeError("can't start new thread")
fast_call.start_new_thread = no_thread
""").replace('print(json.dumps({', 'print(json.dumps({"settled": fast_call.settled(), "waited": fast_call.wait(5), ')
    found = _run(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    assert found["values"] == [v * v + 1.0 for v in range(6)]
    assert found["hot"] == "NoneType" and found["settled"] is True and found["waited"] is None
    assert found["status"] == found["torch_status"] == \
        "unavailable: the loading thread could not start: can't start new thread"


@pytest.mark.slow
def test_the_module_is_cached_on_disk_apart_from_the_kernels(tmp_path):
    env = {"JITER_MAGIC_CACHE_DIR": str(tmp_path)}
    first = _run(CHILD, env)
    assert first["status"] == "loaded" and first["hot"] == "HotPlan"
    assert first["values"] == [v * v + 1.0 for v in range(6)]
    stored = sorted((tmp_path / fast_call.NAMESPACE).rglob("*.bin"), key=lambda p: p.stat().st_size)
    assert len(stored) == 2  # the C module and the torch one
    assert first["stats"]["entries"] == 2  # the kernel and the host fault guard, not the modules
    # A second process loads it from the disk cache: with the compiler made to fail, and no Python
    # headers to be found (only a build asks for them), it still loads.
    no_compiler = "cxx.CxxCompiler.compile = lambda *a, **k: (_ for _ in ()).throw(RuntimeError('compiled'))\n"
    no_headers = "fast_call._python_headers = lambda: (_ for _ in ()).throw(OSError('no Python.h here'))\n"
    second = _run(CHILD.replace("fast_call.wait(120)\n", no_compiler + no_headers + "fast_call.wait(120)\n"), env)
    assert second["status"] == second["torch_status"] == "loaded" and second["hot"] == "HotPlan"
    # Cleared caches keep it (it is no kernel); a corrupt entry is discarded and rebuilt.
    stored[0].write_bytes(stored[0].read_bytes()[:-10])
    third = _run(CHILD, env)
    assert third["status"] == "loaded" and third["stats"]["corrupt_entries"] == 1
    assert len(list((tmp_path / fast_call.NAMESPACE).rglob("*.bin"))) == 2


@pytest.mark.slow
def test_a_new_process_loads_both_modules_after_its_first_result(tmp_path):
    """With both modules in the disk cache, a thread loads them once the first call has returned:
    a load (a dlopen, the torch module's against libtorch) holds the interpreter for milliseconds,
    which that call would wait for. The first call runs on the Python path (its launch through the
    driver, never through CuPy); once the modules load, plans heat as usual."""
    script = CHILD.replace("fast_call.wait(120)\n", """
order = []
original_load, original_result = fast_call._load, fast_call.first_result
fast_call._load = lambda name, *rest: (order.append("load " + name), original_load(name, *rest))[1]
first = []  # the modules' states when the first result is announced (the thread may load them at once)
fast_call.first_result = lambda: (order.append("result"), first.extend([fast_call.status(), fast_call.torch_status()]),
                                  original_result())[2]
""").replace("for _ in range(3):\n    out = f(a, a)\n", """
out = f(a, a)
first.append(type(next(iter(f._dispatch.plans.values())).hot).__name__)
fast_call.wait(120)
for _ in range(3):
    out = f(a, a)
""").replace('print(json.dumps({', 'print(json.dumps({"first": first, "order": order, ')
    found = _run(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path), fast_call.DIR_VARIABLE: os.environ[fast_call.DIR_VARIABLE]})
    assert found["first"] == ["not started", "not started", "NoneType"]
    assert found["order"][:3] == ["result", "load jm_fast_call", "load jm_torch_call"]
    assert found["status"] == found["torch_status"] == "loaded" and found["hot"] == "HotPlan"
    assert found["values"] == [v * v + 1.0 for v in range(6)]


# The parent's part after the fork: the child's exit checked, then the held load let go.
FORK_END = """_, code = os.waitpid(child, 0)
assert code == 0, code
gate.set()
fast_call.wait(120)
"""


def _forked_child_report(script: str, tmp_path) -> dict:
    """What the forked child printed (after "child "), the parent having run to its end too."""
    lines = _output_lines(script.replace('print(json.dumps({', 'print("parent", json.dumps({'),
                          {"JITER_MAGIC_CACHE_DIR": str(tmp_path), fast_call.DIR_VARIABLE: os.environ[fast_call.DIR_VARIABLE]})
    assert any(line.startswith("parent") for line in lines)
    return json.loads(next(line for line in lines if line.startswith("child "))[len("child "):])


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_before_the_modules_load_loads_them_itself(tmp_path):
    """A child forked between the first result and the modules' load (held back here) has none of
    its parent's threads: it starts its own load, and its plans heat as usual."""
    script = CHILD.replace("fast_call.wait(120)\n", """
import os, threading
gate = threading.Event()
original = fast_call._load_all
fast_call._load_all = lambda: (gate.wait(120), original())
""").replace("for _ in range(3):\n    out = f(a, a)\n", """
out = f(a, a)
child = os.fork()
if child == 0:
    gate.set()
    fast_call.wait(120)
    for _ in range(3):
        out = f(a, a)
    plan = next(p for p in f._dispatch.plans.values())
    print("child", json.dumps(dict(status=fast_call.status(), torch_status=fast_call.torch_status(),
                                   values=out.tolist(), hot=type(plan.hot).__name__)), flush=True)
    os._exit(0)
""" + FORK_END)
    found = _forked_child_report(script, tmp_path)
    assert found["status"] == found["torch_status"] == "loaded" and found["hot"] == "HotPlan"
    assert found["values"] == [v * v + 1.0 for v in range(6)]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_loading_thread_runs_on_counts_it_finished(tmp_path):
    """A child forked after both modules loaded but before the parent's loading thread returned
    (held here) has no such thread: it counts as finished there, so the child's `wait` returns at
    once, its plans are settled and they heat."""
    script = CHILD.replace("fast_call.wait(120)\n", """
import os, threading, time
gate = threading.Event()
original = fast_call._load_all
fast_call._load_all = lambda: (original(), gate.wait(120))
""").replace("for _ in range(3):\n    out = f(a, a)\n", """
out = f(a, a)
deadline = time.monotonic() + 120
while (fast_call.status(), fast_call.torch_status()) != ("loaded", "loaded") and time.monotonic() < deadline:
    time.sleep(0.01)
assert not fast_call.settled()  # the parent's thread is still held
child = os.fork()
if child == 0:
    began = time.monotonic()
    fast_call.wait(60)
    waited = time.monotonic() - began
    settled = fast_call.settled()
    for _ in range(3):
        out = f(a, a)
    plan = next(p for p in f._dispatch.plans.values())
    print("child", json.dumps(dict(waited=waited, settled=settled, values=out.tolist(),
                                   hot=type(plan.hot).__name__)), flush=True)
    os._exit(0)
""" + FORK_END)
    found = _forked_child_report(script, tmp_path)
    assert found["settled"] is True and found["waited"] < 5
    assert found["hot"] == "HotPlan" and found["values"] == [v * v + 1.0 for v in range(6)]


@pytest.mark.slow
def test_the_loading_thread_counts_as_running_as_soon_as_it_is_started(tmp_path):
    """The new thread may run before `start_new_thread` returns: from then on no other thread may
    see the load settled (a function made then would never hear of it, and `wait` not wait)."""
    script = CHILD.replace("fast_call.wait(120)\n", """
real_start, seen = fast_call.start_new_thread, []
def starting(function, args):
    ident = real_start(function, args)
    seen.append(fast_call.settled())  # what another thread would see at this moment
    return ident
fast_call.start_new_thread = starting
""").replace("for _ in range(3):\n    out = f(a, a)\n", """
out = f(a, a)
fast_call.wait(120)
for _ in range(3):
    out = f(a, a)
""").replace('print(json.dumps({', 'print(json.dumps({"seen": seen, ')
    found = _run(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path), fast_call.DIR_VARIABLE: os.environ[fast_call.DIR_VARIABLE]})
    assert found["seen"] == [False]
    assert found["status"] == found["torch_status"] == "loaded" and found["hot"] == "HotPlan"


# A child forked at the point a test holds the load: it waits for its own loads, calls three times,
# and reports its modules' states and its plans' hot paths; then the parent's end (FORK_END).
FORK_AND_REPORT = """child = os.fork()
if child == 0:
    fast_call.wait(60)
    for _ in range(3):
        out = f(a, a)
    hot = sorted({type(p.hot).__name__ for p in f._dispatch.plans.values()})
    print("child", json.dumps(dict(status=fast_call.status(), torch_status=fast_call.torch_status(),
                                   values=out.tolist(), hot=hot)), flush=True)
    os._exit(0)
""" + FORK_END


def _assert_the_child_loaded_and_heated(found: dict) -> None:
    assert found["status"] == found["torch_status"] == "loaded" and "HotPlan" in found["hot"]
    assert found["values"] == [v * v + 1.0 for v in range(6)]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_before_a_load_is_announced_announces_it(tmp_path):
    """A child forked after the torch module was put in place but before the parent's thread
    announced it (held here), with a function whose key was bound to the Python key while that
    module loaded: the child announces it again, and the function's plans heat there."""
    script = CHILD.replace("fast_call.wait(120)\n", """
import os, threading
installing, install_gate, announcing, gate = (threading.Event() for _ in range(4))
original_install, original_announce = fast_call._install_torch, fast_call._announce
def held_install(loaded):
    installing.set()
    install_gate.wait(120)
    original_install(loaded)
parent = os.getpid()
def held_announce():
    if fast_call.torch_module is not None and os.getpid() == parent:  # the child's own announcement goes on
        announcing.set()
        gate.wait(120)
    original_announce()
fast_call._install_torch, fast_call._announce = held_install, held_announce
""").replace("for _ in range(3):\n    out = f(a, a)\n", """
out = f(a, a)
assert installing.wait(120)
out = f(a, a)  # binds the Python key: the torch module is not in place yet
install_gate.set()
assert announcing.wait(120)
assert fast_call.torch_status() == "loaded"
""" + FORK_AND_REPORT)
    _assert_the_child_loaded_and_heated(_forked_child_report(script, tmp_path))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_with_a_module_in_place_but_not_marked_loaded_counts_it_loaded(tmp_path):
    """A child forked after the core module was put in place but before it was marked loaded
    (held here): the module is there in the child, so its status reads loaded and plans heat."""
    script = CHILD.replace("fast_call.wait(120)\n", """
import os, threading
installed, gate = threading.Event(), threading.Event()
original_install, parent = fast_call._install_core, os.getpid()
def held_install(loaded):
    original_install(loaded)
    if os.getpid() == parent:
        installed.set()
        gate.wait(120)
fast_call._install_core = held_install
""").replace("for _ in range(3):\n    out = f(a, a)\n", """
out = f(a, a)
assert installed.wait(120)
assert fast_call.status() == "building" and fast_call.module is not None
""" + FORK_AND_REPORT)
    _assert_the_child_loaded_and_heated(_forked_child_report(script, tmp_path))


@pytest.mark.slow
def test_torch_imported_after_the_first_load_still_gets_its_module(tmp_path):
    """A process that used jiter_magic (NumPy arrays) before it imported torch: the loading thread
    has finished without the torch module; torch's adapter, once made, loads it, and calls of
    torch tensors heat on the C key."""
    script = """
import json, sys
import numpy as np
import jiter_magic
from jiter_magic.native import loader as fast_call
f = jiter_magic.create_jit_fn("template <typename T> T fc_late(T x, T y) { return x * y + 1; }")
a = np.arange(6.0)
f(a, a)
fast_call.wait(120)
before = [fast_call.status(), fast_call.torch_status(), "torch" in sys.modules]
import torch
t = torch.arange(6.0)
f(t, t)
fast_call.wait(120)
for _ in range(3):
    out = f(t, t)
hot = sorted(type(p.hot).__name__ for p in f._dispatch.plans.values())  # NumPy's, torch's (and its Python key's)
print(json.dumps({"before": before, "after": fast_call.torch_status(), "hot": hot, "values": out.tolist()}))
"""
    found = _run(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path), fast_call.DIR_VARIABLE: os.environ[fast_call.DIR_VARIABLE]})
    assert found["before"] == ["loaded", "not started", False]
    assert found["after"] == "loaded" and found["hot"].count("HotPlan") == 2
    assert found["values"] == [v * v + 1.0 for v in range(6)]


def test_a_process_ending_during_a_load_leaves_no_file_behind(tmp_path):
    """The exit stops the daemon loading thread wherever it is: a load's private file is removed
    at exit all the same (the load held here with its file written)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    script = """
import importlib.machinery, os, threading, numpy as np, jiter_magic
from jiter_magic.native import loader as fast_call
held = threading.Event()
real_loader = importlib.machinery.ExtensionFileLoader
def holding_loader(name, path):
    held.set()
    threading.Event().wait()  # for good: the exit finds the thread here
importlib.machinery.ExtensionFileLoader = holding_loader
f = jiter_magic.create_jit_fn("template <typename T> T fc_exit(T x) { return x + 1; }")
f(np.arange(3.0))
assert held.wait(120)
print(sorted(os.listdir(os.environ["TMPDIR"])))
"""
    lines = _output_lines(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(folder),
                                   fast_call.DIR_VARIABLE: os.environ[fast_call.DIR_VARIABLE]})
    assert "jiter_magic-jm_fast_call-" in lines[-1]  # the file existed while the load was held
    assert [p.name for p in folder.iterdir() if p.name.startswith("jiter_magic-jm_")] == []


@pytest.mark.slow
def test_waiting_for_the_modules_does_not_wait_for_a_first_result(tmp_path):
    """`fast_call.wait()` in a process that has launched nothing loads both modules at once (with
    the load's own wait for a first result made longer than the child's time limit)."""
    script = ("import json, torch\nfrom jiter_magic.native import loader as fast_call\n"
              "fast_call.FIRST_RESULT_WAIT = 3600\nfast_call.wait()\n"
              "print(json.dumps([fast_call.status(), fast_call.torch_status()]))\n")
    environment = {**os.environ, "PYTHONPATH": ROOT, "JITER_MAGIC_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["loaded", "loaded"]


@pytest.mark.parametrize("route", ["inputs", "out="])
def test_a_key_bound_while_a_module_loads_is_bound_again(monkeypatch, route):
    """The loading thread announces a module while a call binds its key function (read, then
    stored): the stored binding may predate the module, so it is dropped and read again."""
    from jiter_magic.arrays import adapter_for

    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    adapter = adapter_for(torch.zeros(1))
    original = adapter.fast_key_for

    def racing(count):
        found = original(count)
        fast_call._announce()  # as the thread would, between the read and the store
        return found

    monkeypatch.setattr(adapter, "fast_key_for", racing)
    a = torch.arange(4.0)
    if route == "out=":
        out = torch.empty(4)
        f(a, a, out=out)
        assert torch.equal(out, torch.zeros(4)) and adapter not in f._dispatch._out_keys
    else:
        assert torch.equal(f(a, a), torch.zeros(4)) and torch.Tensor not in f._dispatch._fast_keys
    monkeypatch.setattr(adapter, "fast_key_for", original)
    f(a, a)
    assert torch.Tensor in f._dispatch._fast_keys  # bound for good once nothing loads meanwhile


@pytest.mark.slow
def test_a_build_that_cannot_happen_leaves_the_python_path(tmp_path):
    """No Python.h, and the modules not in the cache: no builder process starts, and calls take the
    Python path (only a build asks for the headers: a load from the cache does not)."""
    script = CHILD.replace("fast_call.wait(120)\n",
                           "fast_call._python_headers = lambda: (_ for _ in ()).throw(OSError('no Python.h here'))\n"
                           "fast_call._build_in_own_process = lambda name: (_ for _ in ()).throw(AssertionError('started'))\n"
                           "fast_call.wait(120)\n")
    found = _run(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path), fast_call.DIR_VARIABLE: str(tmp_path / "modules")})
    assert found["status"] == "unavailable: no Python.h here" and found["hot"] == "NoneType"
    assert found["torch_status"] == "not started"  # it needs the core module
    assert found["values"] == [v * v + 1.0 for v in range(6)]


def test_a_failed_build_reports_its_reason_in_one_line(tmp_path):
    """The builder process prints why it failed, not a traceback: the asking process shows that
    line as the C call path's status."""
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), fast_call.DIR_VARIABLE: str(tmp_path / "modules"),
           "JITER_MAGIC_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "jiter_magic.native.build", "jm_fast_call"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "Traceback" not in done.stderr
    assert "needs a C++ compiler" in done.stderr and "no-such-compiler" in done.stderr


@pytest.mark.slow
def test_the_modules_can_live_in_a_cache_directory_of_their_own(tmp_path):
    shared = os.environ[fast_call.DIR_VARIABLE]  # set by conftest: this session's cache, where they are built
    no_compiler = "cxx.CxxCompiler.compile = lambda *a, **k: (_ for _ in ()).throw(RuntimeError('compiled'))\n"
    script = CHILD.replace("fast_call.wait(120)\n", no_compiler + "fast_call.wait(120)\n")
    script = script.replace("f = jiter_magic", "cxx.CxxCompiler.compile = ORIGINAL\nf = jiter_magic").replace(
        "from jiter_magic.compilers import cxx\n", "from jiter_magic.compilers import cxx\nORIGINAL = cxx.CxxCompiler.compile\n")
    found = _run(script, {"JITER_MAGIC_CACHE_DIR": str(tmp_path / "own"), fast_call.DIR_VARIABLE: shared})
    assert found["status"] == found["torch_status"] == "loaded" and found["hot"] == "HotPlan"
    assert found["values"] == [v * v + 1.0 for v in range(6)]
    assert not (tmp_path / "own" / fast_call.NAMESPACE).exists()


def test_the_python_hot_path_refuses_a_storage_shrunk_under_a_planned_view_too():
    from jiter_magic.errors import UnsupportedArrayError

    f = jiter_magic.create_jit_fn(AXPY, alpha=1)
    base = torch.rand(64)
    view, other = base[8:40], torch.rand(32)
    from jiter_magic.arrays.torch import _fast_key_of

    f._dispatch._fast_keys[torch.Tensor] = _fast_key_of(2)  # the key in Python, as without the C path
    plan = hot_plan(f, view, other)
    plan.hot = None  # the Python hot path
    assert plan.room is not None
    base.untyped_storage().resize_(100)
    with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
        f(view, other)
    assert torch.equal(f(other, other * 2), other)


def test_c_objects_made_without_init_raise_instead_of_crashing():
    hot, kernel, allocator = fast_call.module.HotPlan, fast_call.module.Kernel, fast_call.torch_module.Allocator
    with pytest.raises(TypeError):
        hot.__new__(hot)([1])
    with pytest.raises(TypeError, match="never initialized"):
        kernel.__new__(kernel).launch(b"", (1, 1, 1), 0)
    with pytest.raises(TypeError):
        allocator.__new__(allocator)()
    with pytest.raises(ValueError, match="needs a function address"):
        kernel(0, True, (1, 1, 1), 0, print, "x")
    with pytest.raises(ValueError, match="on_fault"):
        kernel(1, True, (1, 1, 1), 0, None, "x")
    with pytest.raises(TypeError, match="torch.dtype and a torch.device"):
        allocator((2,), (1,), "float32", torch.device("cpu"))
    with pytest.raises(ValueError, match="differ in length"):
        allocator((2, 3), (1,), torch.float32, torch.device("cpu"))
    made = allocator((2, 3), (1, 2), torch.float64, torch.device("cpu"))()
    assert made.shape == (2, 3) and made.stride() == (1, 2) and made.dtype == torch.float64
