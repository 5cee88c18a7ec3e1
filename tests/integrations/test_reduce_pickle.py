"""Reductions pickle by what made them and rebuild in another process (from the disk cache)."""
from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from jiter_magic import ReductionFunction, create_reduction_fn

ROOT = Path(__file__).resolve().parents[2]
SCALED = "template <typename T> T scaled(T x, T a) { return a * x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
SCALED_BWD = "template <typename T> void scaled_bwd(T x, T a, T result, T g, T& gx) { gx = 2 * a * x * g; }"
ZERO_BWD = "template <typename T> void zero_bwd(T x, T a, T result, T g, T& gx) { gx = 0; }"


def mean_of_scaled(**kwargs) -> ReductionFunction:
    return create_reduction_fn(SCALED + ADD + MEAN, 0, "scaled", combine="add", finalize="mean", **kwargs)


def test_a_round_trip_keeps_what_made_it():
    fn = mean_of_scaled(a=2.0).def_backward(SCALED_BWD)
    again = pickle.loads(pickle.dumps(fn))
    assert isinstance(again, ReductionFunction) and again is not fn
    assert (again.code, again.identity, again.kwargs, again.name) == (fn.code, 0, {"a": 2.0}, "scaled")
    assert (again.binding.combine.name, again.binding.finalize.name) == ("add", "mean")
    assert again.backward is not None and again.backward.code == SCALED_BWD
    assert again.specializations == []  # never loaded kernels
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = again(x, dim=1)
    assert result.dtype == np.float32
    np.testing.assert_allclose(result, fn(x, dim=1))
    np.testing.assert_allclose(result, (2 * x * x).mean(1))
    plain = pickle.loads(pickle.dumps(create_reduction_fn(ADD, float("-inf"), combine="add")))
    assert plain.identity == float("-inf") and plain.binding.map is None and plain.backward is None


def test_another_process_rebuilds_it_from_the_disk_cache(tmp_path, fresh_cache):
    fn = mean_of_scaled(a=3.0)
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    expected = fn(x, dim=0)  # compiled here, stored in the disk cache
    assert fn.specializations[0].cache_event == "compiled"
    (tmp_path / "fn.pickle").write_bytes(pickle.dumps(fn))
    child = textwrap.dedent(f"""
        import json, pickle, numpy as np
        fn = pickle.loads(open({str(tmp_path / "fn.pickle")!r}, "rb").read())
        out = fn(np.arange(12, dtype=np.float64).reshape(3, 4), dim=0)
        print(json.dumps([out.tolist(), str(out.dtype), fn.specializations[0].cache_event]))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JITER_MAGIC_CACHE_DIR": str(fresh_cache)}
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [expected.tolist(), "float64", "disk"]  # same values, the kernel from disk


def _reduce_in_worker(args):
    fn, n = args
    return fn(np.arange(float(n)), a=2.0).tolist(), os.getpid()


@pytest.mark.slow
def test_a_spawned_worker_pool_runs_it():
    fn = mean_of_scaled(a=1.0)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_reduce_in_worker, [(fn, n) for n in (1, 2, 3)])
    assert [values for values, _ in results] == [0.0, 1.0, 10.0 / 3]
    assert all(pid != os.getpid() for _, pid in results)


def test_unpickling_an_equal_state_reuses_the_function_unless_it_changed_since():
    data = pickle.dumps(mean_of_scaled(a=2.0).def_backward(SCALED_BWD))
    first = pickle.loads(data)
    assert pickle.loads(data) is first  # parsed, bound and planned once
    first.def_backward(ZERO_BWD)  # changed since: the next unpickling makes the pickled one again
    second = pickle.loads(data)
    assert second is not first and second.backward.code == SCALED_BWD
    assert first.backward.code == ZERO_BWD
    second.kwargs["a"] = 5.0  # the kwargs its calls would use
    third = pickle.loads(data)
    assert third is not second and third.kwargs == {"a": 2.0}
    second.def_backward(None)
    assert pickle.loads(data) is third
    others = [mean_of_scaled(a=2), mean_of_scaled(a=2.0), create_reduction_fn(SCALED + ADD, 0, combine="add", a=2.0)]
    rebuilt = [pickle.loads(pickle.dumps(fn)) for fn in others]
    assert len({id(fn) for fn in rebuilt + [third]}) == 4  # an int default, no backward, no finalize: all differ
    assert type(rebuilt[0].kwargs["a"]) is int
