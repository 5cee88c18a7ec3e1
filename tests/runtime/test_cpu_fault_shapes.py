"""Every host loop shape guards every fault the same way (kernels/host_guard.py).

Elementwise: the contiguous, blocked, rows and strided loops. Reductions: rows folded whole, a row
split over the threads, the fold of the threads' partials, the columns loop and a strided fold;
the fault in the map, the combine or the finalize. Each fault kind the guard handles: a thrown
std::exception, a thrown int, an integer division by zero, a null read, `__builtin_trap()`, and a
floating-point trap the functor enabled. Each raises its documented error, the process goes on,
the calling thread's floating-point environment is as it was, and the next call is right.

The kind of a fault comes from the data (a negative value that encodes it), so one compile a
shape serves every kind. Sizes are past the parallel threshold, so the fault happens on an
OpenMP worker thread when the bad element sits in the last thread's share.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re

import numpy as np
import pytest

import jiter_magic
from jiter_magic import create_jit_fn, create_reduction_fn
from jiter_magic.runtime.inspection import example_spec

HURT = r"""
#include <stdexcept>
#include <fenv.h>
// A fault of kind k: 1 a std::exception, 2 a thrown int, 3 an integer division by zero, 4 a null
// read, 5 __builtin_trap(), 6 a floating-point division by zero with its trap enabled.
template <typename T> T shape_hurt(T v, int kind) {
  volatile int zero = 0;
  volatile T* volatile nowhere = nullptr;
  switch (kind) {
    case 1: throw std::runtime_error("hurt on purpose");
    case 2: throw 7;
    case 3: return T(kind / zero);
    case 4: return *nowhere;
    case 5: __builtin_trap();
    case 6: { feenableexcept(FE_DIVBYZERO); volatile double one = 1.0, none = 0.0; return T(one / none); }
  }
  return v;
}
"""
ELEMENTWISE = create_jit_fn(HURT + "template <typename T> T shape_map(T x, T y) { "
                                   "return y < T(0) ? shape_hurt(x, -(int)y) : x + y; }")
# Each role faults on a range of values of its own: the map on elements below -1e9, the combine on
# two values below -1e5 (two such elements met), the finalize on a result between -1e5 and -10.
REDUCTION = create_reduction_fn(
    HURT + "template <typename T> T shape_elem(T x) { return x < T(-1e9) ? shape_hurt(x, int(-1e9 - x)) : x; }\n"
           "template <typename T> T shape_add(T a, T b) {\n"
           "  return a < T(-1e5) && b < T(-1e5) && b > T(-1e9) ? shape_hurt(a, int(-1e5 - b)) : a + b; }\n"
           "template <typename T> T shape_fin(T a, int64_t n) {\n"
           "  return a < T(-10) && a > T(-1e5) ? shape_hurt(a, int(-10 - a)) : a; }",
    0, map="shape_elem", combine="shape_add", finalize="shape_fin")

X86 = os.uname().machine in ("x86_64", "i686")
KINDS = [
    pytest.param(1, jiter_magic.KernelFaultError, r"threw a C\+\+ exception: hurt on purpose", id="std-exception"),
    pytest.param(2, jiter_magic.KernelFaultError, "an exception that is not a std::exception", id="thrown-int"),
    pytest.param(3, jiter_magic.IntegerDivisionError, "integer division or remainder by zero", id="int-division"),
    pytest.param(4, jiter_magic.KernelFaultError, r"raised SIG(SEGV|BUS) \(an invalid memory access", id="null-read"),
    pytest.param(5, jiter_magic.KernelFaultError, r"raised SIG(ILL|TRAP)", id="trap"),
    pytest.param(6, jiter_magic.KernelFaultError, r"raised SIGFPE \(floating-point division by zero\)",
                 id="fp-trap", marks=pytest.mark.skipif(not X86, reason="floating-point traps of x86")),
]
LIBM = ctypes.CDLL(ctypes.util.find_library("m"))


def _no_trap_left() -> None:
    """The calling thread's floating-point environment: no trap enabled (the guard restored it)."""
    assert LIBM.fegetexcept() == 0


# ----------------------------------------------------------------------------- elementwise
def _elementwise_inputs(shape: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs (x, y) of `shape`'s loop, 120,000 elements (y's >= 0), and the array y reads."""
    rng = np.random.default_rng(seed)
    x = rng.random((300, 400))
    if shape == "contiguous":
        y = rng.random((300, 400))
        return x, y, y
    if shape == "blocked":  # y walks the second loop dimension densely, the output the first
        base = rng.random((400, 300))
        return x, base.T, base.T
    if shape == "rows":  # y broadcast along the rows: step 0 across them, 1 along them
        row = rng.random(400)
        return x, np.broadcast_to(row, (300, 400)), row
    base = rng.random((300, 800))  # strided: step 2 along the rows
    return x, base[:, ::2], base[:, ::2]


ELEMENTWISE_SHAPES = ["contiguous", "blocked", "rows", "strided"]


@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES)
@pytest.mark.parametrize("where", ["first", "last"])  # the calling thread's share, a worker's
@pytest.mark.parametrize(("kind", "error", "message"), KINDS)
def test_a_fault_in_each_elementwise_shape_raises_and_the_next_call_works(shape, where, kind, error, message):
    x, bad, written = _elementwise_inputs(shape, kind)
    written[(0 if where == "first" else -1,) * written.ndim] = -kind
    with pytest.raises(error, match=rf"^shape_map: .*{message}") as info:
        ELEMENTWISE(x, bad)
    assert isinstance(info.value, jiter_magic.JiterError) and isinstance(info.value, RuntimeError)
    assert example_spec(ELEMENTWISE._calls, (x, bad), "cpu", {}).path == shape
    _no_trap_left()
    x, y, _ = _elementwise_inputs(shape, kind)  # the same function, good inputs: right again
    result = ELEMENTWISE(x, y)
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, x + y)


# ----------------------------------------------------------------------------- reductions
def _reduction_case(shape: str, make) -> tuple[np.ndarray, dict, str]:
    """Data made by `make(shape)` for the loop `shape`, the call's keywords, the loop's path."""
    if shape == "rows":  # many rows, each folded whole by one thread
        return make((4000, 64)), {"dim": 1}, "host"
    if shape in ("split", "partials"):  # one long row split over the threads
        return make(100_000), {}, "host"
    if shape == "columns":  # a sum over the leading dim: columns folded together
        return make((2000, 64)), {"dim": 0}, "host_columns"
    return make((2000, 400))[:, ::2], {"dim": 1}, "host"  # strided: a fold with step 2


def _spoil(data: np.ndarray, shape: str, role: str, kind: int, where: str) -> None:
    """Writes into `data` (zeros, so every sum is exact) what makes `role` fault with `kind`."""
    end = 0 if where == "first" else -1
    corner = (end,) * data.ndim
    if role == "map":
        data[corner] = -(1e9 + kind)
    elif role == "finalize":
        data[corner] = -(10 + kind)
    elif shape == "partials":  # one element in the first thread's share, one in the last's
        data[0] = data[-1] = -(1e5 + kind)
    else:  # two elements of one row, in one thread's share: the combine of its own fold
        step = 1 if end == 0 else -1
        axis = 0 if shape == "columns" else data.ndim - 1
        second = list(corner)
        second[axis] += step
        data[corner] = data[tuple(second)] = -(1e5 + kind)


REDUCTION_CASES = [(shape, role, where) for shape in ("rows", "split", "columns", "strided")
                   for role in ("map", "combine", "finalize") for where in ("first", "last")]
REDUCTION_CASES.append(("partials", "combine", "both ends"))


@pytest.mark.parametrize(("shape", "role", "where"), REDUCTION_CASES)
@pytest.mark.parametrize(("kind", "error", "message"), KINDS)
def test_a_fault_in_each_reduction_shape_raises_and_the_next_call_works(shape, role, where, kind, error, message):
    bad, keywords, path = _reduction_case(shape, np.zeros)
    _spoil(bad, shape, role, kind, where)
    with pytest.raises(error, match=rf"^shape_elem: .*{message}") as info:
        REDUCTION(bad, **keywords)
    assert isinstance(info.value, jiter_magic.JiterError) and isinstance(info.value, RuntimeError)
    assert path in {built.spec.path for built in REDUCTION.specializations}
    _no_trap_left()
    data, _, _ = _reduction_case(shape, np.random.default_rng(kind).random)
    result = REDUCTION(data, **keywords)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, data.sum(axis=keywords.get("dim")), rtol=1e-12)


def test_every_parallel_region_of_every_host_kernel_is_the_guarded_one():
    """The generated side of the one mechanism: each host kernel's `jm_kernel` calls its body under
    the guard, and each `#pragma omp parallel` opens a region whose threads set the guard up first."""
    from jiter_magic.codegen.names import KERNEL_FILE
    from jiter_magic.kernels.host_guard import PARALLEL

    sources = [ELEMENTWISE.source(*_elementwise_inputs(shape, 0)[:2], backend="cpu") for shape in ELEMENTWISE_SHAPES]
    sources += [REDUCTION.source("float64", path=path, kept_ndim=kept, reduced_ndim=reduced)
                for path in ("host", "host_columns") for kept in (1, 2) for reduced in (1, 2)]
    for source in sources:
        kernel = source[source.index(f'"{KERNEL_FILE}"'):]  # the generated part, past the user's code
        regions = [m.start() for m in re.finditer(r"#pragma omp", kernel)]
        parallel = [start for start in regions if kernel.startswith("#pragma omp parallel", start)]
        assert parallel and all(kernel.startswith(PARALLEL, start) for start in parallel)
        for start in parallel:  # the region's first statements: its share, then the guard
            head = kernel[start:kernel.index("sigsetjmp(", start)]
            assert head.count(";") <= 12 and "jm_share(" in head and "jm_fault_jump;" in head
        # No other OpenMP construct than the guarded regions and their status writes.
        assert len(regions) == 2 * len(parallel) + 1 and kernel.count("#pragma omp atomic write") == len(parallel) + 1
        entry = kernel[kernel.index('extern "C" int jm_kernel'):]
        assert "sigsetjmp(jm_jump, 0)" in entry and "jm_failed = jm_body(*jm_args" in entry
