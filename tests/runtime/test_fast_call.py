"""The C-level call path (native/loader.py, call_path.py, fast_call.cpp, torch_fast_call.cpp): built at install,
loaded at a process's first call, used, and the same results and errors as the Python path it replaces on the
hot path and in launches. test_fast_call_processes.py: in new processes; test_native_build.py: wheels built
where it cannot be built."""
from __future__ import annotations

import os
import re
import sysconfig
import threading

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic.errors import IntegerDivisionError, LaunchError
from jiter_magic.native import call_path as fast_call

HAS_HEADERS = os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h"))
pytestmark = pytest.mark.skipif(not HAS_HEADERS, reason="Python.h is not installed, so the install could not build "
                                                         "the C call path (the Python path runs)")
AXPY = "template <typename T> T fc_axpy(T x, T y, T alpha) { return -x + alpha * y; }"


def hot_plan(function, *args):
    """The plan the hot path uses for `args`, after enough calls to give it its C hot path."""
    for _ in range(3):
        function(*args)
    key = function._calls._fast_keys[type(args[0])](args)
    return function._calls.plans.get(key[0])


def test_the_modules_are_loaded_for_the_session():
    assert fast_call.load() is not None
    assert fast_call.status() == "loaded" and fast_call.torch_status() == "loaded"
    assert fast_call.current().torch.module is not None and fast_call.current().torch_module() is fast_call.current().torch.module
    f = jiter_magic.create_jit_fn(AXPY, alpha=1)
    plan = hot_plan(f, torch.rand(3), torch.rand(3))
    assert type(plan.allocators[0]).__name__ == "Allocator"  # at::empty_strided, from C++


def test_a_storage_shrunk_under_a_planned_view_is_refused_on_the_hot_path():
    from jiter_magic.errors import UnsupportedArrayError

    f = jiter_magic.create_jit_fn(AXPY, alpha=1)
    base = torch.rand(64)
    view, other = base[8:40], torch.rand(32)
    plan = hot_plan(f, view, other)
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan"
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
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan"
    from_c = f(a, b)
    plan.native_calls.default = None  # the same plan on the Python path
    from_python = f(a, b)
    assert from_c.dtype == from_python.dtype == dtype
    assert from_c.shape == from_python.shape and from_c.stride() == from_python.stride()
    assert torch.equal(from_c, from_python)


def test_hot_path_in_c_with_several_outputs_and_numpy():
    g = jiter_magic.create_multi_output_jit_fn(
        "template <typename T> void fc_two(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", 2)
    x, y = np.linspace(0, 1, 1001), np.linspace(2, 3, 1001)
    plan = hot_plan(g, x, y)
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan"
    s, d = g(x, y)
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(d, x - y)
    one = jiter_magic.create_multi_output_jit_fn("template <typename T> void fc_one(T x, T& o) { o = x * 3; }", 1)
    plan = hot_plan(one, torch.ones(5, dtype=torch.int32))
    result = one(torch.ones(5, dtype=torch.int32))
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan" and isinstance(result, torch.Tensor)  # one output: the tensor
    assert result.tolist() == [3] * 5 and result.dtype == torch.int32


def test_faults_raise_through_the_c_path_and_the_next_call_works():
    divide = jiter_magic.create_jit_fn("template <typename T> T fc_div(T x, T y) { return x / y; }")
    x, ones, zeros = torch.arange(10), torch.ones(10, dtype=torch.int64), torch.zeros(10, dtype=torch.int64)
    plan = hot_plan(divide, x, ones)
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan"
    for _ in range(2):
        with pytest.raises(IntegerDivisionError, match="fc_div: integer division or remainder by zero"):
            divide(x, zeros)  # the same key as the plan above: the C hot plan runs it
    assert divide(x, ones).tolist() == list(range(10))
    scaled = jiter_magic.create_jit_fn("template <typename T> T fc_mod(T x, T m) { return x % m; }", m=0)
    with pytest.raises(IntegerDivisionError):
        scaled(x, m=0)  # kwargs: the general path, launched by the kernel's C launcher
    assert scaled(x, m=4).tolist() == [v % 4 for v in range(10)]


def test_the_c_key_refuses_what_the_general_path_must_see():
    key = fast_call.current().torch.module.torch_key
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
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan"
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
        plan.native_calls.default([a.data_ptr()])
    with pytest.raises(TypeError):
        plan.native_calls.default((a.data_ptr(), a.data_ptr()))
    native = plan.launcher.native
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
        fast_call.current().loaded_core().Kernel(1, False, (1, 1, 1), 0, None, "x")
    assert fast_call.current().kernel(1, False, (1, 1, 1), 0, None, "x") is None


def test_a_module_older_than_its_source_is_refused():
    """An editable install: a C++ source edited after the install built its module (the report
    holds the digest of what was compiled) leaves the Python path until `pip install -e .` again."""
    from jiter_magic.native.loader import build_report, check_source_unchanged

    built = build_report()["_fast_call"]
    assert built["source"] == "fast_call.cpp" and len(built["sha256"]) == 64
    check_source_unchanged(built)  # the source as it was built: no complaint
    with pytest.raises(LaunchError, match=re.escape("native/fast_call.cpp or native/vectorcall_type.h changed since "
                                                    "the install built it: pip install -e . builds it again")):
        check_source_unchanged({**built, "sha256": "0" * 64})


def test_a_module_older_than_the_header_both_sources_include_is_refused(tmp_path, monkeypatch):
    """The digest covers native/vectorcall_type.h too: an edit there leaves the module stale as well."""
    from jiter_magic.native import loader

    built = loader.build_report()["_fast_call"]
    for name in ("fast_call.cpp", "vectorcall_type.h"):
        with open(os.path.join(loader.HERE, name), "rb") as source:
            (tmp_path / name).write_bytes(source.read())
    monkeypatch.setattr(loader, "HERE", str(tmp_path))
    loader.check_source_unchanged(built)  # copies of what was built: no complaint
    with open(tmp_path / "vectorcall_type.h", "a") as header:
        header.write("// edited\n")
    with pytest.raises(LaunchError, match="changed since the install built it"):
        loader.check_source_unchanged(built)


def test_a_torch_module_built_for_another_torch_is_refused():
    """ATen's C++ ABI binds the module to the torch it was compiled against: a wheel built in an
    environment with another torch (pip's wheel cache, say) leaves the Python key, and says so."""
    from jiter_magic.native.loader import build_report, check_same_torch

    made_for = build_report()["_torch_call"]
    assert made_for["built"] is True and made_for["torch"]["version"] == torch.__version__
    check_same_torch(made_for)  # this one: no complaint
    other = {**made_for, "torch": {**made_for["torch"], "version": "2.0.0", "git": "0123456789abcdef"}}
    with pytest.raises(LaunchError, match=re.escape(f"built for torch 2.0.0 (git 0123456789) and this process has torch "
                                                    f"{torch.__version__} (git {torch.version.git_version[:10]})")):
        check_same_torch(other)


def test_the_python_hot_path_refuses_a_storage_shrunk_under_a_planned_view_too(monkeypatch):
    from jiter_magic.arrays import adapter_for
    from jiter_magic.errors import UnsupportedArrayError

    adapter = adapter_for(torch.zeros(1))  # the torch adapter as it is where its C module is not loaded
    monkeypatch.setattr(adapter, "native", None)
    monkeypatch.setattr(adapter, "key_checks_storage", False)
    monkeypatch.setattr(adapter, "pointer", torch.Tensor.data_ptr)
    f = jiter_magic.create_jit_fn(AXPY, alpha=1)
    base = torch.rand(64)
    view, other = base[8:40], torch.rand(32)
    plan = hot_plan(f, view, other)
    assert plan.native_calls is None  # a plan with a storage check never runs in C: the Python hot path
    assert plan.checks.storage is not None
    base.untyped_storage().resize_(100)
    with pytest.raises(UnsupportedArrayError, match="holds only 100 bytes"):
        f(view, other)
    assert torch.equal(f(other, other * 2), other)


def test_c_objects_made_without_init_raise_instead_of_crashing():
    core, torch_module = fast_call.current().loaded_core(), fast_call.current().torch.module
    hot, kernel, allocator = core.HotPlan, core.Kernel, torch_module.Allocator
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
