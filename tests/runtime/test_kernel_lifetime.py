"""Loaded kernels are shared process-wide and unloaded when no function needs them: re-creating a
function in a loop, or dropping many distinct functions, leaves memory mappings and RSS flat."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jiter_magic.runtime.loader import POOL_LIMIT

SCRIPT = r"""
import gc, json, sys
import numpy as np
import jiter_magic

def maps():
    return sum(1 for _ in open("/proc/self/maps"))

def rss_kib():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 1024

code = "template <typename T> T lifetime(T x) { return x + T(1); }"
jiter_magic.create_jit_fn(code)(np.ones(3))
from jiter_magic.native import call_path as fast_call
fast_call.wait(600)  # the C call path's module is loaded once a process, not once a kernel
gc.collect()
start = {"maps": maps(), "rss": rss_kib()}
for _ in range(20000):  # a create_jit_fn in a loop, or a notebook cell run again and again
    fn = jiter_magic.create_jit_fn(code)
    assert fn(np.ones(3)).tolist() == [2.0, 2.0, 2.0]
gc.collect()
recreated = {"maps": maps(), "rss": rss_kib(), "event": fn.specializations[-1].cache_event,
             "compiles": jiter_magic.cache_stats()["compiles"]}
distinct = int(sys.argv[1])
one = maps()
fns = []
for i in range(distinct):
    f = jiter_magic.create_jit_fn(f"template <typename T> T d{i}(T x) {{ return x + T({i}); }}")
    assert f(np.ones(2)).tolist() == [1.0 + i] * 2
    fns.append(f)
loaded = maps()
del fns, f
gc.collect()
print(json.dumps({"start": start, "recreated": recreated, "before_distinct": one, "loaded": loaded,
                  "dropped": maps()}))
"""


@pytest.mark.slow
def test_recreated_and_dropped_functions_leave_mappings_and_rss_flat(tmp_path):
    distinct = POOL_LIMIT + 16
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "JITER_MAGIC_CACHE_DIR": str(tmp_path),
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(distinct)], capture_output=True, text=True,
                            env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    start, recreated = report["start"], report["recreated"]
    # 20,000 re-creations reuse the one loaded kernel: nothing compiled or mapped again.
    assert recreated["event"] == "memory" and recreated["compiles"] == 1
    assert recreated["maps"] - start["maps"] <= 2
    assert recreated["rss"] - start["rss"] < 8 * 1024  # KiB
    # Each distinct kernel maps a few regions while its function lives ...
    per_kernel = (report["loaded"] - report["before_distinct"]) / distinct
    assert 1 <= per_kernel <= 16
    # ... and once they are dropped, only the bounded pool of recent kernels stays mapped.
    kept = (report["dropped"] - report["before_distinct"]) / per_kernel
    assert kept <= POOL_LIMIT + 1
    assert report["dropped"] < report["loaded"]


TRIM_SCRIPT = r"""
import ctypes, ctypes.util, sys
from jiter_magic.runtime.backends import heap

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, (ctypes.c_size_t,), (ctypes.c_void_p,)

def rss_mib():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

blocks = [libc.malloc(512) for _ in range(200000)]  # ~100 MiB of small blocks, as loading many kernels leaves
for block in blocks:
    ctypes.memset(block, 1, 512)
pinned = libc.malloc(512)  # above them all: plain free() cannot shrink the heap past it
for block in blocks:
    libc.free(block)
freed = rss_mib()
for _ in range(heap.UNLOADS_PER_TRIM):  # unloading this many kernels trims the heap once
    heap.kernel_unloaded()
print(freed, rss_mib())
"""


def test_unloading_kernels_hands_freed_heap_memory_back():
    """After UNLOADS_PER_TRIM unloads, the free pages left in the heap go back to the system."""
    result = subprocess.run([sys.executable, "-c", TRIM_SCRIPT], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr[-2000:]
    freed, trimmed = map(float, result.stdout.split())
    assert freed > 80  # MiB: the blocks were freed, yet the process still holds them
    assert trimmed < freed - 60


def test_a_kernel_being_unloaded_can_no_longer_be_found_by_another_thread(monkeypatch):
    """Unloading happens after Python cleared the kernel's weak references: while its library is
    being closed (the GIL released), no other thread may take it from the loader's weak registry
    and run unmapped code (a __del__ would run before the references are cleared, and did crash)."""
    import gc

    import numpy as np

    import jiter_magic
    from jiter_magic.runtime import loader
    from jiter_magic.runtime.backends import heap
    from jiter_magic.state import RUNTIME

    jiter_magic.clear_cache(memory=True, disk=False)  # every other test's kernels unloaded first
    gc.collect()
    fn = jiter_magic.create_jit_fn("template <typename T> T unload_race(T x) { return x * T(3); }")
    assert fn(np.ones(2)).tolist() == [3.0, 3.0]
    pool = RUNTIME.part(loader.KernelPool)
    keys = [key for key in pool.live_keys() if key[1] is fn._calls.loader.binding]
    assert len(keys) == 1
    seen_while_unloading = []
    monkeypatch.setattr(heap, "kernel_unloaded", lambda: seen_while_unloading.append(pool.held(keys[0])))
    del fn
    jiter_magic.clear_cache(memory=True, disk=False)  # the pool lets go of it too
    gc.collect()
    assert seen_while_unloading == [None]  # unloaded once, and no longer to be found meanwhile
