"""No host loop keeps more than a few KiB on a thread's stack (kernels/host_guard.py).

The blocked loop's tile buffers (up to 128 KiB a thread) and a split reduction's partials live on
the heap: the calls run on a Python thread made with `threading.stack_size(32768)`, and in a fresh
process with `OMP_STACKSIZE=16K` (the OpenMP workers' stacks), with two and three transposed
float32, float64 and complex128 inputs, right against NumPy (each of these ended the process with
SIGSEGV while the tiles were on the stack). And the compiler's own count (-fstack-usage) of every
function of every host loop shape stays within STACK_BOUND.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from jiter_magic import create_jit_fn, create_multi_output_reduction_fn, create_reduction_fn

TWO = create_jit_fn("template <typename T> T stack_two(T a, T b, T c) { return a + T(2) * b - c; }")
THREE = create_jit_fn("template <typename T> T stack_three(T a, T b, T c, T d) { return a + T(2) * b - c + d * d; }")
SUM = create_reduction_fn("template <typename T> T stack_add(T a, T b) { return a + b; }", 0, combine="stack_add")
KEEP_MAX = create_multi_output_reduction_fn(
    "template <typename T> void stack_keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
    "  const bool take_b = b > a || (b == a && ib < ia); value = take_b ? b : a; index = take_b ? ib : ia; }",
    combine="stack_keep_max")
DTYPES = [np.float32, np.float64, np.complex128]
STACK_BOUND = 2048  # bytes a generated function may keep on its stack
# Serial (every element on the calling thread), and past the parallel threshold (OpenMP workers too).
SHAPES = [(40, 50), (300, 400)]


def _inputs(count: int, shape: tuple[int, int], dtype, seed: int) -> list[np.ndarray]:
    """One C-ordered input, then `count` transposed ones: the blocked loop's call."""
    rng = np.random.default_rng(seed)

    def draw(rows: int, cols: int) -> np.ndarray:
        values = rng.standard_normal((rows, cols))
        if np.dtype(dtype).kind == "c":
            values = values + 1j * rng.standard_normal((rows, cols))
        return values.astype(dtype)

    return [draw(*shape)] + [draw(*shape[::-1]).T for _ in range(count)]


def _expected(arrays: list[np.ndarray]) -> np.ndarray:
    a, b, c, *rest = arrays
    return a + 2 * b - c + (rest[0] * rest[0] if rest else 0)


def _check_blocked_calls() -> None:
    """Every blocked call of this module's grid, against NumPy."""
    for count, fn in ((2, TWO), (3, THREE)):
        for dtype in DTYPES:
            for shape in SHAPES:
                arrays = _inputs(count, shape, dtype, seed=count)
                result = fn(*arrays)
                assert result.dtype == dtype and result.shape == shape
                np.testing.assert_allclose(result, _expected(arrays), rtol=1e-5 if dtype == np.float32 else 1e-12)


def _check_reductions() -> None:
    """The split row, rows, columns and with-indices reductions, against NumPy."""
    data = np.random.default_rng(3).standard_normal(200_000)
    np.testing.assert_allclose(SUM(data), data.sum(), rtol=1e-10)
    table = data.reshape(2000, 100)
    np.testing.assert_allclose(SUM(table, dim=0), table.sum(axis=0), rtol=1e-10)
    np.testing.assert_allclose(SUM(table, dim=1), table.sum(axis=1), rtol=1e-10)
    values, indices = KEEP_MAX(data)
    assert values == data.max() and indices == data.argmax()


def test_every_loop_runs_on_a_python_thread_with_a_32_kib_stack():
    _check_blocked_calls()  # compiled here, on a thread with the usual stack
    _check_reductions()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            _check_blocked_calls()
            _check_reductions()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failures.append(exc)

    previous = threading.stack_size(32768)
    try:
        thread = threading.Thread(target=run)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    assert not failures, failures
    assert {s.spec.path for s in TWO.specializations} == {"blocked"}


@pytest.mark.parametrize("stack", ["16K", "96K"])
def test_every_loop_runs_with_small_openmp_worker_stacks(stack):
    """A fresh process (libgomp reads OMP_STACKSIZE when it starts) with two OpenMP threads."""
    _check_blocked_calls()  # compiled by this process: the child finds them in the disk cache
    _check_reductions()
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import test_cpu_stack as here\n"
            "here._check_blocked_calls(); here._check_reductions(); print('right', flush=True)\n")
    env = {**os.environ, "OMP_STACKSIZE": stack, "OMP_NUM_THREADS": "2", "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "right"


def _stack_use(source: str) -> dict[str, int]:
    """Bytes of stack each function of `source` keeps, as the host compiler counts them."""
    from jiter_magic.runtime.backends.cpu import compiler

    cxx = compiler()
    options = [o for o in cxx.options() if o != "-shared" and not o.startswith("-l")]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "kernel.cpp")
        path.write_text(source)
        subprocess.run([cxx.cxx, *options, "-fstack-usage", "-c", str(path), "-o", str(Path(folder, "kernel.o"))],
                       check=True, capture_output=True)
        usage = Path(folder, "kernel.su").read_text()
    found = {}
    for line in usage.splitlines():
        where, size, _kind = line.rsplit("\t", 2)
        found[where] = int(size)
    return found


def _host_sources() -> dict[str, str]:
    """A source of every host loop shape, each with its widest types."""
    rows, cols = (300, 400), (400, 300)
    wide = [np.zeros(rows, np.complex128)] + [np.zeros(cols, np.complex128).T for _ in range(3)]
    narrow = [np.zeros(rows, np.float32)] + [np.zeros(cols, np.float32).T for _ in range(3)]
    dense = np.zeros(rows, np.complex128)
    sources = {
        "blocked complex128": THREE.source(*wide, backend="cpu"),
        "blocked float32": THREE.source(*narrow, backend="cpu"),
        "contiguous": THREE.source(dense, dense, dense, dense, backend="cpu"),
        "rows": THREE.source(dense, dense, np.zeros(400, np.complex128), dense, backend="cpu"),
        "strided": THREE.source(dense, dense, np.zeros((300, 800), np.complex128)[:, ::2], dense, backend="cpu"),
    }
    for path in ("host", "host_columns"):
        sources[f"reduction {path}"] = SUM.source("float64", path=path, kept_ndim=2, reduced_ndim=2)
        sources[f"indexed reduction {path}"] = KEEP_MAX.source("float64", path=path, kept_ndim=2, reduced_ndim=2)
    return sources


def test_no_host_loop_keeps_more_than_a_few_kib_on_its_stack():
    sources = _host_sources()
    assert "jm_tile" in sources["blocked complex128"] and "jm_tile3" in sources["blocked float32"]
    for name, source in sources.items():
        usage = _stack_use(source)
        generated = {where: size for where, size in usage.items() if "jm_" in where}
        assert any("jm_kernel" in where for where in generated), (name, usage)
        assert max(generated.values()) <= STACK_BOUND, (name, generated)


def test_a_kernel_without_its_scratch_memory_raises_launch_error():
    """The status a kernel returns where its buffers could not be allocated (host_guard.NO_MEMORY)."""
    import jiter_magic
    from jiter_magic.kernels.host_guard import NO_MEMORY
    from jiter_magic.runtime.backends.fault_guard import raise_fault

    with pytest.raises(jiter_magic.LaunchError, match=r"^stack_two: the host kernel could not allocate its scratch "
                                                      r"buffers .*out of memory"):
        raise_fault(NO_MEMORY, "stack_two")
