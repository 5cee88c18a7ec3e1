"""The C call path in new processes: loaded at a fresh process's first call with an empty cache
(built at install: nothing is built or stored at run time), torch's module when torch comes after
NumPy, turned off, and a child forked while another thread holds the loader's lock."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest

HAS_HEADERS = os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h"))
pytestmark = pytest.mark.skipif(not HAS_HEADERS, reason="Python.h is not installed, so the install could not build "
                                                         "the C call path (the Python path runs)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _output_lines(script: str, env: dict) -> list[str]:
    environment = {**os.environ, "PYTHONPATH": ROOT, **env}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def _run(script: str, env: dict) -> dict:
    return json.loads(_output_lines(script, env)[-1])


CHILD = """
import json, sys, torch, jiter_magic
from jiter_magic.native import call_path as fast_call
before = [fast_call.status(), fast_call.torch_status()]
f = jiter_magic.create_jit_fn("template <typename T> T fc_child(T x, T y) { return x * y + 1; }")
a = torch.arange(6.0)
for _ in range(3):
    out = f(a, a)
plan = next(p for p in f._calls.plans.values())
print(json.dumps({"before": before, "status": fast_call.status(), "torch_status": fast_call.torch_status(),
                  "values": out.tolist(), "hot": type(getattr(plan.native_calls, "default", None)).__name__,
                  "allocator": type(plan.allocators[0]).__name__, "stats": jiter_magic.cache_stats(),
                  "builders": [m for m in sys.modules if m.startswith("jiter_magic.native.build")]}))
"""


@pytest.mark.slow
def test_turned_off_the_python_path_gives_the_same_results(tmp_path):
    found = _run(CHILD, {"JITER_MAGIC_FAST_CALL": "0", "JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    assert found["status"] == "off" and found["hot"] == "NoneType" and found["allocator"] != "Allocator"
    assert found["values"] == [v * v + 1.0 for v in range(6)]


def test_a_fresh_process_with_an_empty_cache_takes_the_c_path_from_its_first_planned_call(tmp_path):
    """The modules were built at install: a new process on a machine whose cache is empty (every
    fresh Colab, Binder or CI session) loads both at its first call, builds nothing and stores
    nothing of them: its first plan is native, its outputs come from at::empty_strided. In the fast
    loop (one process, a few seconds): the point of building the modules at install."""
    found = _run(CHILD, {"JITER_MAGIC_CACHE_DIR": str(tmp_path / "empty")})
    assert found["before"] == ["not loaded yet", "not loaded yet"]
    assert found["status"] == found["torch_status"] == "loaded"
    assert found["hot"] == "HotPlan" and found["allocator"] == "Allocator" and found["builders"] == []
    assert found["values"] == [v * v + 1.0 for v in range(6)]
    assert found["stats"]["entries"] == 2  # the kernel and the host fault guard: no module
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["cpu", "tools"]  # no modules in the cache


NUMPY_FIRST = """
import json, sys, numpy as np, jiter_magic
from jiter_magic.native import call_path as fast_call
f = jiter_magic.create_jit_fn("template <typename T> T fc_numpy(T x, T y) { return x * y + 1; }")
a = np.arange(6.0)
for _ in range(3):
    out = f(a, a)
plan = next(p for p in f._calls.plans.values())
found = {"status": fast_call.status(), "hot": type(getattr(plan.native_calls, "default", None)).__name__,
         "values": out.tolist(), "torch_status": fast_call.torch_status(), "torch_imported": "torch" in sys.modules}
import torch
h = jiter_magic.create_jit_fn("template <typename T> T fc_torch(T x) { return x + 1; }")
t = torch.arange(4.0)
for _ in range(3):
    r = h(t)
hot = next(p for p in h._calls.plans.values())
found.update(late_torch=fast_call.torch_status(), late_hot=type(getattr(hot.native_calls, "default", None)).__name__,
             allocator=type(hot.allocators[0]).__name__, late_values=r.tolist())
print(json.dumps(found))
"""


@pytest.mark.slow
def test_torch_imported_after_the_first_call_still_gets_its_module(tmp_path):
    """A process that used NumPy first never imports torch for it; the torch adapter, made at its
    first torch call, loads the torch module then."""
    found = _run(NUMPY_FIRST, {"JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    assert found["status"] == "loaded" and found["hot"] == "HotPlan" and found["values"] == [v * v + 1.0 for v in range(6)]
    assert found["torch_imported"] is False and found["torch_status"] == "not loaded yet"
    assert found["late_torch"] == "loaded" and found["late_hot"] == "HotPlan" and found["allocator"] == "Allocator"
    assert found["late_values"] == [1.0, 2.0, 3.0, 4.0]


FORK_CHILD = """
import json, os, signal, threading, torch, jiter_magic
from jiter_magic.native import call_path as fast_call
signal.alarm(60)  # a child that hangs on a lock held at the fork ends with SIGALRM, and the test fails
held, release = threading.Event(), threading.Event()
def hold():  # another thread inside a first load of the core module when the process forks
    with fast_call.current().core_module._lock:
        held.set()
        release.wait()
threading.Thread(target=hold, daemon=True).start()
held.wait()
child = os.fork()
if child == 0:
    f = jiter_magic.create_jit_fn("template <typename T> T fc_fork(T x, T y) { return x * y + 1; }")
    a = torch.arange(6.0)
    for _ in range(3):
        out = f(a, a)
    plan = next(p for p in f._calls.plans.values())
    print("child", json.dumps({"status": fast_call.status(), "hot": type(getattr(plan.native_calls, "default", None)).__name__,
                               "values": out.tolist()}), flush=True)
    os._exit(0)
_, code = os.waitpid(child, 0)
release.set()
print("parent", json.dumps({"child_exit": code}))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.slow
def test_a_child_forked_while_another_thread_holds_the_loaders_lock_loads_on_its_own(tmp_path):
    lines = _output_lines(FORK_CHILD, {"JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    child = json.loads(next(line for line in lines if line.startswith("child "))[len("child "):])
    assert json.loads(next(line for line in lines if line.startswith("parent "))[len("parent "):]) == {"child_exit": 0}
    assert child == {"status": "loaded", "hot": "HotPlan", "values": [v * v + 1.0 for v in range(6)]}
