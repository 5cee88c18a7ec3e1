"""Traps on the CPU: a breakpoint (SIGTRAP) and floating-point traps a functor enables become
KernelFaultError, integer division stays IntegerDivisionError, and no kernel thread keeps a
floating-point environment a functor changed."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import jiter_magic
from jiter_magic import create_jit_fn

# A breakpoint instruction: int3 on x86 (the thread stops past it), brk on Arm (it stops at it).
BREAKPOINT = create_jit_fn(
    "template <typename T> T trap_breakpoint(T x) {\n"
    "  if (x > T(2)) {\n"
    "#if defined(__x86_64__) || defined(__i386__)\n"
    '    asm volatile("int3");\n'
    "#elif defined(__aarch64__)\n"
    '    asm volatile("brk #0");\n'
    "#endif\n"
    "  }\n"
    "  return x + T(1);\n"
    "}")
FP_DIVIDE = create_jit_fn("#include <fenv.h>\n"
                          "template <typename T> T trap_fdiv(T x, T y) { feenableexcept(FE_DIVBYZERO); return x / y; }")
FP_INVALID = create_jit_fn("#include <fenv.h>\n#include <cmath>\n"
                           "template <typename T> T trap_invalid(T x) { feenableexcept(FE_INVALID); return std::sqrt(x); }")
# Changes the environment without faulting: traps enabled and the rounding mode turned upward.
CHANGES_FENV = create_jit_fn("#include <fenv.h>\n"
                             "template <typename T> T fenv_changer(T x) { feenableexcept(FE_OVERFLOW); "
                             "fesetround(FE_UPWARD); return x; }")
# What each kernel thread finds: the traps enabled, and whether rounding is to nearest.
READS_FENV = create_jit_fn("#include <fenv.h>\n"
                           "template <typename T> T fenv_reader(T x) { "
                           "return T(fegetexcept() + (fegetround() == FE_TONEAREST ? 0 : 1000)); }")
PLAIN_DIVIDE = create_jit_fn("template <typename T> T plain_div(T x, T y) { return x / y; }")
X86_OR_ARM = pytest.mark.skipif(os.uname().machine not in ("x86_64", "i686", "aarch64"),
                                reason="a breakpoint instruction of x86 or Arm")
# Floating-point traps are an x86 feature here: Arm cores mostly lack them (feenableexcept fails).
X86 = pytest.mark.skipif(os.uname().machine not in ("x86_64", "i686"), reason="floating-point traps of x86")
SIZES = pytest.mark.parametrize("size", [5, 200_000])  # serial, and split over OpenMP threads


def _environment_is_default(size: int = 200_000) -> None:
    """No trap enabled and rounding to nearest, in the calling thread and in every kernel thread."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    assert libm.fegetexcept() == 0
    seen = READS_FENV(np.zeros(size))
    assert seen.dtype == np.float64 and np.all(seen == 0.0), np.unique(seen)


def _plain_division_works() -> None:
    result = PLAIN_DIVIDE(np.array([1.0, -1.0, 0.0, 6.0]), np.array([0.0, 0.0, 0.0, 3.0]))
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, [np.inf, -np.inf, np.nan, 2.0])
    assert PLAIN_DIVIDE(np.array([7], np.int32), np.array([2], np.int32)).tolist() == [3]


@X86_OR_ARM
@SIZES
def test_a_breakpoint_trap_raises_kernel_fault_error_naming_the_function(size):
    with pytest.raises(jiter_magic.KernelFaultError, match=r"^trap_breakpoint: the functor raised SIGTRAP") as info:
        BREAKPOINT(np.arange(size, dtype=np.float32))
    assert isinstance(info.value, RuntimeError)
    result = BREAKPOINT(np.arange(3, dtype=np.int64))  # the next call works
    assert result.dtype == np.int64 and result.tolist() == [1, 2, 3]
    _plain_division_works()


@X86
@SIZES
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_enabled_division_by_zero_trap_raises_kernel_fault_error_naming_it(size, dtype):
    x = np.ones(size, dtype)
    y = np.full(size, 2, dtype)
    y[size // 2] = 0
    with pytest.raises(jiter_magic.KernelFaultError,
                       match=r"^trap_fdiv: the functor raised SIGFPE \(floating-point division by zero\)") as info:
        FP_DIVIDE(x, y)
    assert not isinstance(info.value, ZeroDivisionError)  # not an integer division
    result = FP_DIVIDE(x, np.full(size, 2, dtype))
    assert result.dtype == dtype and np.all(result == dtype(0.5))
    _environment_is_default()
    _plain_division_works()


@X86
def test_an_enabled_invalid_operation_trap_names_it():
    with pytest.raises(jiter_magic.KernelFaultError, match=r"SIGFPE \(invalid floating-point operation\)"):
        FP_INVALID(np.array([4.0, -1.0]))
    np.testing.assert_array_equal(FP_INVALID(np.array([4.0, 9.0])), [2.0, 3.0])
    _environment_is_default()


@X86
@SIZES
def test_a_functor_that_changes_the_environment_leaves_no_thread_changed(size):
    result = CHANGES_FENV(np.arange(size, dtype=np.float64))
    assert result.dtype == np.float64 and np.array_equal(result, np.arange(size, dtype=np.float64))
    _environment_is_default()
    _plain_division_works()  # no trap left on: 1 / 0 is inf again


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_by_zero_is_still_integer_division_error(dtype):
    with pytest.raises(jiter_magic.IntegerDivisionError, match=r"^plain_div: integer division or remainder by zero"):
        PLAIN_DIVIDE(np.array([1, 2], dtype), np.array([1, 0], dtype))
    _plain_division_works()


@pytest.mark.parametrize("signum", [signal.SIGTRAP, signal.SIGSEGV])
def test_a_trap_or_a_sent_signal_outside_any_kernel_still_ends_the_process(signum):
    """Outside a kernel the guard passes a signal on: a SIGTRAP or a signal sent with kill, which
    would not come again by itself, is raised anew under the previous (default) action."""
    code = ("import os, numpy, jiter_magic\n"
            "fn = jiter_magic.create_jit_fn('template <typename T> T f(T x) { return x; }')\n"
            "print(fn(numpy.ones(2)).tolist(), flush=True)\n"
            f"os.kill(os.getpid(), {int(signum)})\n"
            "print('survived', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "[1.0, 1.0]"
    assert result.returncode == -signum
