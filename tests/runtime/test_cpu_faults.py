"""A functor that faults on the CPU raises a Python exception; the process and the next call go on."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic import create_jit_fn

DIVIDE = create_jit_fn("template <typename T> T fault_div(T x, T y) { return x / y; }")
REMAINDER = create_jit_fn("template <typename T> T fault_rem(T x, T y) { return x % y; }")
NULL_READ = create_jit_fn("template <typename T> T fault_null(T x) { T* p = nullptr; volatile T* q = p; return *q + x; }")
THROWS = create_jit_fn('#include <stdexcept>\n'
                       'template <typename T> T fault_throw(T x) { if (x > T(2)) throw std::runtime_error("x is '
                       'too big"); return x; }')
ALIEN = create_jit_fn("struct Alien {};\ntemplate <typename T> T fault_alien(T x) { if (x > T(2)) throw Alien(); "
                      "return x; }")


def good_call_works() -> None:
    np.testing.assert_array_equal(DIVIDE(np.arange(2, 8), np.arange(1, 7)), np.arange(2, 8) // np.arange(1, 7))
    torch.testing.assert_close(DIVIDE(torch.arange(4.0), 2.0), torch.arange(4.0) / 2)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
@pytest.mark.parametrize("size", [4, 100_003])  # serial, and split over OpenMP threads
def test_integer_division_by_zero_raises_zero_division_error(dtype, size):
    x = np.arange(1, size + 1).astype(dtype)
    y = np.ones(size, dtype)
    y[size // 2] = 0
    for fn in (DIVIDE, REMAINDER):
        with pytest.raises(jiter_magic.IntegerDivisionError, match="integer division or remainder by zero") as info:
            fn(x, y)
        assert isinstance(info.value, ZeroDivisionError) and isinstance(info.value, jiter_magic.JiterError)
        assert info.value.args[0].startswith(fn.name)
    good_call_works()


def test_most_negative_integer_divided_by_minus_one_raises_as_torch_eager_does():
    x, y = torch.tensor([-2**63, 4]), torch.tensor([-1, 2])
    with pytest.raises(ZeroDivisionError):
        DIVIDE(x, y)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # torch eager's own error here...
        torch.tensor([1]) // torch.tensor([0])
    with pytest.raises(RuntimeError, match="integer division"):  # ...which `except RuntimeError` catches for us too
        DIVIDE(torch.tensor([1]), torch.tensor([0]))
    good_call_works()


@pytest.mark.parametrize("size", [3, 200_000])
def test_a_segfault_in_a_functor_raises_a_runtime_error_naming_it(size):
    with pytest.raises(jiter_magic.KernelFaultError, match="fault_null: the functor raised SIGSEGV") as info:
        NULL_READ(np.ones(size))
    assert isinstance(info.value, RuntimeError)
    good_call_works()


def test_a_cpp_exception_in_a_functor_raises_with_its_message():
    with pytest.raises(jiter_magic.KernelFaultError, match="fault_throw: the functor threw a C.. exception: x is too big"):
        THROWS(np.arange(10.0))
    np.testing.assert_array_equal(THROWS(np.arange(3.0)), np.arange(3.0))
    with pytest.raises(jiter_magic.KernelFaultError, match="not a std::exception"):
        ALIEN(np.arange(100_000.0))
    with pytest.raises(jiter_magic.KernelFaultError, match="x is too big"):  # the message is not stale
        THROWS(np.arange(10.0))
    good_call_works()


def test_many_faults_in_a_row_and_from_several_threads_leave_the_process_usable():
    errors: list[BaseException] = []

    def fault_then_compute() -> None:
        for _ in range(20):
            try:
                DIVIDE(np.arange(5), np.zeros(5, np.int64))
            except ZeroDivisionError as exc:
                errors.append(exc)
            good_call_works()

    threads = [threading.Thread(target=fault_then_compute) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(errors) == 80 and all(isinstance(e, jiter_magic.IntegerDivisionError) for e in errors)


def test_macros_of_the_code_string_never_reach_the_generated_kernel():
    """`#define float double` or `#define return throw` act on the user's code only: the kernel
    after it is compiled with every macro of the code string undefined."""
    fn = create_jit_fn("#define float double\ntemplate <typename T> T widened(T x, T y) { return x + y; }")
    result = fn(np.ones(4, np.float32), np.full(4, 2, np.float32))
    assert result.dtype == np.float32 and result.tolist() == [3.0] * 4
    thrower = create_jit_fn("#define return throw\ntemplate <typename T> T macro_return(T x) { return x + T(1); }")
    with pytest.raises(jiter_magic.KernelFaultError, match="not a std::exception"):
        thrower(np.ones(2))  # the user's own `return` became a throw: an exception, not an abort
    assert "#undef float" in fn.source("float32", "float32", backend="cpu")


def test_a_fault_outside_any_kernel_still_ends_the_process_as_before():
    """The guard only catches its own kernels' faults; any other goes to the previous handler."""
    code = ("import ctypes, numpy, jiter_magic\n"
            "fn = jiter_magic.create_jit_fn('template <typename T> T f(T x) { return x; }')\n"
            "print(fn(numpy.ones(2)).tolist(), flush=True)\n"
            "ctypes.string_at(0)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "[1.0, 1.0]"
    assert result.returncode == -11  # SIGSEGV, after Python's faulthandler reported it
    assert "Segmentation fault" in result.stderr or "Fatal Python error" in result.stderr


# ----------------------------------------------------------------------------- code run when a library loads
def test_a_static_initializer_that_throws_is_refused_and_this_process_goes_on():
    fn = create_jit_fn("struct InitThrows { InitThrows() { throw 7; } } init_throws_object;\n"
                       "template <typename T> T init_throws(T x) { return x; }")
    for _ in range(2):  # the verdict is kept: the second call says the same without a new trial
        with pytest.raises(jiter_magic.KernelFaultError,
                           match=r"^init_throws: the code string runs code when its library is loaded .* ended the "
                                 r"trial process with SIGABRT \(terminate called after throwing an instance of 'int'"):
            fn(np.ones(3))
    good_call_works()


def test_a_static_initializer_that_segfaults_is_refused():
    fn = create_jit_fn("struct InitFaults { InitFaults() { volatile int* volatile p = 0; *p = 1; } } init_faults_object;\n"
                       "template <typename T> T init_faults(T x) { return x; }")
    with pytest.raises(jiter_magic.KernelFaultError, match=r"ended the trial process with SIGSEGV.*function-local static"):
        fn(np.ones(3))
    good_call_works()


def test_a_static_destructor_that_segfaults_at_unload_is_refused():
    fn = create_jit_fn("struct ExitFaults { ~ExitFaults() { volatile int* volatile p = 0; *p = 1; } } exit_faults_object;\n"
                       "template <typename T> T exit_faults(T x) { return x; }")
    with pytest.raises(jiter_magic.KernelFaultError, match=r"^exit_faults: .*loaded or unloaded.*SIGSEGV"):
        fn(np.ones(3))


def test_static_initializers_that_work_are_kept():
    """Valid C++ stays valid: a global computed at load time, and <iostream> (a static object in GCC < 13)."""
    fn = create_jit_fn("#include <iostream>\n#include <cmath>\n"
                       "static double computed_scale() { volatile double two = 2.0; return std::sqrt(two * two); }\n"
                       "static const double load_time_scale = computed_scale();\n"
                       "template <typename T> T init_scale(T x) { return x * T(load_time_scale); }")
    result = fn(np.arange(4.0))
    np.testing.assert_array_equal(result, np.arange(4.0) * 2)
    assert result.dtype == np.float64
    from jiter_magic.runtime.backends import fault_guard, load_check

    runtime = fault_guard.ensure_runtime(jiter_magic.runtime.backends.cpu.compiler())
    assert isinstance(load_check.initializer_bytes(runtime), int)
    assert load_check.runs_code_when_loaded(fn.specializations[-1].binary, runtime)
    good_call_works()  # DIVIDE has a specialization now
    assert not load_check.runs_code_when_loaded(DIVIDE.specializations[-1].binary, runtime)


def test_initializer_tables_are_read_from_elf_only():
    from jiter_magic.runtime.backends import load_check

    assert load_check.initializer_bytes(b"") is None
    assert load_check.initializer_bytes(b"\xcf\xfa\xed\xfe" + bytes(60)) is None  # Mach-O
    assert load_check.initializer_bytes(b"\x7fELF\x02\x01\x01" + bytes(9)) is None  # truncated ELF
    assert not load_check.runs_code_when_loaded(b"not a library", b"not a library either")
