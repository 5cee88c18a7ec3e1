"""Jitted functions pickle by what made them and rebuild in another process (from the disk cache)."""
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

import jiter_magic

ROOT = Path(__file__).resolve().parents[2]
AXPY = "template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }"
SUMDIFF = "template <typename T> void sumdiff(T x, T a, T& s, T& d) { s = x + a; d = x - a; }"


def test_a_round_trip_keeps_code_kwargs_outputs_and_backend():
    fn = jiter_magic.create_multi_output_jit_fn(SUMDIFF, 2, a=2.0)
    fn.backend = "cpu"
    again = pickle.loads(pickle.dumps(fn))
    assert isinstance(again, jiter_magic.JitFunction) and again is not fn
    assert (again.code, again.kwargs, again.num_outputs, again.multi_output, again.backend) == (
        fn.code, {"a": 2.0}, 2, True, "cpu")
    s, d = again(np.arange(3.0))
    np.testing.assert_array_equal(s, [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(d, [-2.0, -1.0, 0.0])
    assert s.dtype == np.float64
    one = pickle.loads(pickle.dumps(jiter_magic.create_multi_output_jit_fn(
        "template <typename T> void neg(T x, T& y) { y = -x; }", 1)))
    assert one.multi_output and one.num_outputs == 1
    np.testing.assert_array_equal(one(np.ones(2)), [-1.0, -1.0])  # one output: the array itself, as torch


def test_the_single_output_form_stays_single_and_defaults_travel():
    fn = jiter_magic.create_jit_fn(AXPY, alpha=3)
    again = pickle.loads(pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL))
    assert not again.multi_output and again.kwargs == {"alpha": 3} and again.backend == "auto"
    out = again(np.ones(4, dtype=np.float32), np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(out, [3.0, 4.0, 5.0, 6.0])
    assert out.dtype == np.float32
    assert again.__signature__ == fn.__signature__ and again.__doc__ == fn.__doc__


def test_another_process_rebuilds_it_from_the_disk_cache(tmp_path, fresh_cache):
    fn = jiter_magic.create_jit_fn(AXPY, alpha=2.0)
    expected = fn(np.arange(5.0), np.ones(5))  # compiled here, stored in the disk cache
    assert fn.specializations[0].cache_event == "compiled"
    (tmp_path / "fn.pickle").write_bytes(pickle.dumps(fn))
    child = textwrap.dedent(f"""
        import json, pickle, numpy as np
        fn = pickle.loads(open({str(tmp_path / "fn.pickle")!r}, "rb").read())
        out = fn(np.arange(5.0), np.ones(5))
        print(json.dumps([out.tolist(), fn.specializations[0].cache_event]))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JITER_MAGIC_CACHE_DIR": str(fresh_cache)}
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [expected.tolist(), "disk"]  # same values, the kernel read from disk


def _call_in_worker(args):
    fn, n = args
    return fn(np.arange(float(n)), np.ones(n)).tolist(), os.getpid()


@pytest.mark.slow
def test_a_spawned_worker_pool_runs_it():
    fn = jiter_magic.create_jit_fn(AXPY, alpha=10.0)
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        results = pool.map(_call_in_worker, [(fn, n) for n in (1, 2, 3)])
    assert [values for values, _ in results] == [[1.0], [1.0, 11.0], [1.0, 11.0, 21.0]]
    assert all(pid != os.getpid() for _, pid in results)


def test_unpickling_the_same_function_again_reuses_it_unless_it_changed_since():
    """A Dask worker unpickles the function for every task: once parsed and planned is enough."""
    fn = jiter_magic.create_jit_fn(AXPY, alpha=2.0)
    data = pickle.dumps(fn)
    first = pickle.loads(data)
    assert pickle.loads(data) is first and first is not fn
    np.testing.assert_array_equal(first(np.ones(2), np.ones(2)), [3.0, 3.0])
    first.backend = "cpu"  # changed since: the next unpickling makes a new one with the pickled backend
    second = pickle.loads(data)
    assert second is not first and second.backend == "auto"
    second.def_backward("template <typename T> void axpy_bwd(T x, T y, T alpha, T g, T& gx, T& gy) "
                        "{ gx = alpha * g; gy = g; }")
    third = pickle.loads(data)
    assert third is not second and third.backward is None
    other = pickle.loads(pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=5.0)))
    assert other is not third and other.kwargs == {"alpha": 5.0}


AXPY_BWD = "template <typename T> void axpy_bwd(T x, T y, T alpha, T g, T& gx, T& gy) { gx = alpha * g; gy = g; }"
ZERO_BWD = "template <typename T> void zero_bwd(T x, T y, T alpha, T g, T& gx, T& gy) { gx = 0; gy = 0; }"


def test_an_unpickled_function_is_the_pickled_one_even_after_a_copy_changed():
    data = pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=2.0).def_backward(AXPY_BWD))
    first = pickle.loads(data)
    assert pickle.loads(data) is first  # equal pickles: the same function (parsed, planned once)
    first.def_backward(ZERO_BWD)  # another backward of the same shape: not what was pickled
    second = pickle.loads(data)
    assert second is not first and second.backward is not None and second.backward.code == AXPY_BWD
    assert first.backward is not None and first.backward.code == ZERO_BWD  # the changed copy keeps its own
    assert pickle.loads(data) is second
    second.backward.backend = "cpu"  # the backward's own backend counts too
    third = pickle.loads(data)
    assert third is not second and third.backward is not None and third.backward.backend == "auto"
    third.kwargs["alpha"] = 7.0  # the kwargs its calls would use
    fourth = pickle.loads(data)
    assert fourth is not third and fourth.kwargs == {"alpha": 2.0}
    out = fourth(np.ones(3), np.arange(3.0))
    np.testing.assert_array_equal(out, [2.0, 3.0, 4.0])
    assert out.dtype == np.float64


def test_pickles_differing_in_any_part_of_their_state_are_different_functions():
    base = pickle.loads(pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=2.0)))
    as_int = pickle.loads(pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=2)))
    assert as_int is not base and as_int.kwargs == {"alpha": 2} and type(as_int.kwargs["alpha"]) is int
    with_backward = pickle.loads(pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=2.0).def_backward(AXPY_BWD)))
    assert with_backward is not base and with_backward.backward is not None
    other_backward = pickle.loads(pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=2.0).def_backward(ZERO_BWD)))
    assert other_backward is not with_backward and other_backward.backward.code == ZERO_BWD
    on_cpu = jiter_magic.create_jit_fn(AXPY, alpha=2.0)
    on_cpu.backend = "cpu"
    assert pickle.loads(pickle.dumps(on_cpu)) is not base and pickle.loads(pickle.dumps(on_cpu)).backend == "cpu"
    assert pickle.loads(pickle.dumps(jiter_magic.create_jit_fn(AXPY, alpha=2.0))) is base  # equal: reused


class _OldPickle:
    """Pickles as a jitted function did before `_unpickle`: `_rebuild` with four arguments."""

    def __reduce__(self):
        from jiter_magic.function import _rebuild

        return _rebuild, (AXPY, None, {"alpha": 4.0}, "cpu")


def test_pickles_made_by_older_versions_still_load():
    old = pickle.loads(pickle.dumps(_OldPickle()))
    assert isinstance(old, jiter_magic.JitFunction)
    assert (old.kwargs, old.backend, old.backward) == ({"alpha": 4.0}, "cpu", None)
    out = old(np.ones(2, dtype=np.float32), np.ones(2, dtype=np.float32))
    np.testing.assert_array_equal(out, [5.0, 5.0])
    assert out.dtype == np.float32
