"""A forked child's calls finish and are right: after a multi-threaded host call (OpenMP's pool
had started), while another thread compiles, and while another builds a reduction's kernels
(a child forked while the C call path's loader lock is held: tests/runtime/test_fast_call.py).

Each case runs in a process of its own (forking the test process, with its threads, would test
pytest as much as jiter_magic). The child arms an alarm: a child that hangs ends with SIGALRM,
and its exit status fails the test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"), pytest.mark.slow]

# The child prints one JSON line and exits 0; the parent prints the child's exit status.
FORK_AND_REPORT = """
def fork_and_report(in_child):
    child = os.fork()
    if child == 0:
        signal.alarm(60)
        try:
            print("child " + json.dumps(in_child()), flush=True)
        finally:
            os._exit(0)
    _, status = os.waitpid(child, 0)
    print("parent " + json.dumps({"status": status}), flush=True)
"""

AFTER_A_BIG_CALL = """
import json, os, signal, numpy as np, jiter_magic
""" + FORK_AND_REPORT + """
f = jiter_magic.create_jit_fn("template <typename T> T fk_big(T x) { return x * 2 + 1; }")
x = np.arange(1 << 22, dtype=np.float32)
assert (f(x) == x * 2 + 1).all()  # many threads: the OpenMP pool has started in the parent
def in_child():
    out = f(x)
    return {"right": bool((out == x * 2 + 1).all()), "again": bool((f(x[:1000]) == x[:1000] * 2 + 1).all())}
fork_and_report(in_child)
assert (f(x) == x * 2 + 1).all()  # the parent's pool still works
print("parent-after " + json.dumps({"right": True}))
"""

DURING_A_COMPILE = """
import json, os, signal, threading, numpy as np, jiter_magic
""" + FORK_AND_REPORT + """
f = jiter_magic.create_jit_fn("template <typename T> T fk_compiling(T x) { return x * 3 - 1; }")
building, release = threading.Event(), threading.Event()
def hold(spec, device):  # runs under the loader's lock, before the compile
    if threading.current_thread() is not threading.main_thread():
        building.set()
        release.wait()
f.add_start_listener(hold)
x = np.arange(10, dtype=np.float64)
worker = threading.Thread(target=lambda: f(x))
worker.start()
building.wait()
def in_child():  # the compiling thread is not in the child: the child builds on its own
    return {"values": f(x).tolist()}
fork_and_report(in_child)
release.set()
worker.join()
print("parent-after " + json.dumps({"values": f(x).tolist()}))
"""

WHILE_A_REDUCTION_BUILDS = """
import json, os, signal, threading, numpy as np, jiter_magic
""" + FORK_AND_REPORT + """
total = jiter_magic.create_reduction_fn("template <typename T> T fk_add(T a, T b) { return a + b; }", 0,
                                        combine="fk_add")
x = np.arange(10, dtype=np.float64)
held, release = threading.Event(), threading.Event()
def build_under_the_lock():  # as a thread building a reduction kernel holds its function's lock
    with total._calls.loader._lock:
        held.set()
        release.wait()
worker = threading.Thread(target=build_under_the_lock)
worker.start()
held.wait()
def in_child():  # the building thread is not in the child: the child builds on its own
    return {"sum": float(total(x)), "rows": total(x.reshape(2, 5), dim=1).tolist()}
fork_and_report(in_child)
release.set()
worker.join()
print("parent-after " + json.dumps({"sum": float(total(x))}))
"""


def _run(script: str, env: dict) -> dict[str, dict]:
    environment = {**os.environ, "PYTHONPATH": ROOT, **env}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=400,
                            env=environment)
    assert result.returncode == 0, result.stderr
    lines = [line.split(" ", 1) for line in result.stdout.strip().splitlines() if " " in line]
    return {who: json.loads(text) for who, text in lines}


def test_a_child_forked_after_a_multi_threaded_call_computes(tmp_path):
    found = _run(AFTER_A_BIG_CALL, {"JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    assert found["parent"] == {"status": 0}  # not killed by the alarm: it did not hang
    assert found["child"] == {"right": True, "again": True}
    assert found["parent-after"] == {"right": True}


def test_a_child_forked_while_another_thread_compiles_builds_on_its_own(tmp_path):
    found = _run(DURING_A_COMPILE, {"JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    expected = [v * 3.0 - 1.0 for v in range(10)]
    assert found["parent"] == {"status": 0}
    assert found["child"] == {"values": expected}
    assert found["parent-after"] == {"values": expected}


def test_a_child_forked_while_a_reduction_builds_builds_on_its_own(tmp_path):
    found = _run(WHILE_A_REDUCTION_BUILDS, {"JITER_MAGIC_CACHE_DIR": str(tmp_path)})
    assert found["parent"] == {"status": 0}  # not killed by the alarm: the child did not wait on the lock
    assert found["child"] == {"sum": 45.0, "rows": [10.0, 35.0]}
    assert found["parent-after"] == {"sum": 45.0}
