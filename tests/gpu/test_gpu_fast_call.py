"""The C call path on a GPU (backends/fast_call.cpp): hot plans against torch's jiterator, the
context of a thread that has none, the caller's stream (CUDA graph capture), launch errors.

Marked `gpu`; skipped without one. bench/run_gpu.sh runs it, and test_gpu.py once more with
JITER_MAGIC_FAST_CALL=0 for the Python path.
"""
from __future__ import annotations

import ctypes
import threading

import pytest

torch = pytest.importorskip("torch")

import jiter_magic  # noqa: E402
from jiter_magic.errors import LaunchError  # noqa: E402
from jiter_magic.native import call_path as fast_call  # noqa: E402

pytestmark = pytest.mark.gpu
AXPY = "template <typename T> T gfc_axpy(T x, T y, T alpha) { return x * alpha + y; }"
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]


@pytest.fixture(autouse=True)
def loaded():
    if fast_call.wait(300) is None:
        pytest.fail(f"the C call path did not load on the GPU machine: {fast_call.status()}")


def _hot(function, *args):
    for _ in range(3):
        result = function(*args)
    key = function._calls._fast_keys[type(args[0])](args)
    plan = function._calls.plans.get(key[0])
    assert type(getattr(plan.native_calls, "default", None)).__name__ == "HotPlan"
    return result


def _values(shape, dtype):
    if dtype is torch.bool:
        return torch.rand(shape, device="cuda") > 0.5
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(1, 10, shape, device="cuda").to(dtype)
    return (torch.rand(shape, device="cuda", dtype=torch.float64) + 0.5).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "odd-size", "misaligned", "transposed", "broadcast"])
def test_hot_plans_match_torch_jiterator(dtype, layout):
    ours = jiter_magic.create_jit_fn(AXPY, alpha=2)
    ref = torch.cuda.jiterator._create_jit_fn(AXPY, alpha=2)
    a, b = _values((257, 129), dtype), _values((257, 129), dtype)
    a, b = {"contiguous": (a, b), "odd-size": (a.view(-1)[:33023], b.view(-1)[:33023]),
            "misaligned": (a.view(-1)[1:33151], b.view(-1)[3:33153]), "transposed": (a.t(), b.t()),
            "broadcast": (a, b[:1])}[layout]
    result = _hot(ours, a, b)
    expected = ref(a, b)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    torch.testing.assert_close(result, expected, atol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 0,
                               rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 0)


def test_hot_plans_with_several_outputs():
    two = jiter_magic.create_multi_output_jit_fn(
        "template <typename T> void gfc_two(T x, T y, T& s, T& d) { s = x + y; d = x - y; }", 2)
    x, y = torch.rand(1 << 20, device="cuda"), torch.rand(1 << 20, device="cuda")
    s, d = _hot(two, x, y)
    assert torch.equal(s, x + y) and torch.equal(d, x - y)


def _current_context() -> int:
    found = ctypes.c_void_p()
    assert ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(found)) == 0
    return found.value or 0


def test_a_thread_without_a_current_context_launches_in_the_kernels_own():
    f = jiter_magic.create_jit_fn(AXPY, alpha=0.5)
    a, b = torch.rand(4096, device="cuda"), torch.rand(4096, device="cuda")
    _hot(f, a, b)
    plan = f._calls.plans.get(f._calls._fast_keys[torch.Tensor]((a, b))[0])
    out = torch.empty_like(a)
    packed = plan.launcher.pack(out.data_ptr(), a.data_ptr(), b.data_ptr(), 4096, 0.5, *plan.geometry)
    stream = torch.cuda.current_stream().cuda_stream
    driver = ctypes.CDLL("libcuda.so.1")
    seen: dict = {}

    def work() -> None:
        assert driver.cuCtxSetCurrent(None) == 0  # as in a thread no CUDA call has touched yet
        seen["before"] = _current_context()
        plan.launcher.native.launch(packed, plan.grid, stream)
        seen["after"] = _current_context()
        seen["results"] = [f(a, b) for _ in range(3)]

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    torch.cuda.synchronize()
    assert seen["before"] == 0 and seen["after"] == 0  # made current for the launch, then put back
    torch.testing.assert_close(out, a * 0.5 + b)
    for result in seen["results"]:
        torch.testing.assert_close(result, a * 0.5 + b)


def test_hot_plans_launch_on_the_current_stream_and_are_captured_by_cuda_graphs():
    f = jiter_magic.create_jit_fn(AXPY, alpha=3.0)
    a, b = torch.rand(1 << 16, device="cuda"), torch.rand(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _hot(f, a, b)  # a plan made on the side stream: the stream is asked for on every call
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # a launch on any other stream would fail the capture
        captured = f(a, b)
    a.copy_(torch.full_like(a, 2.0))
    b.copy_(torch.full_like(b, 5.0))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, torch.full_like(a, 11.0))


def test_a_launch_error_is_a_launch_error_and_the_next_call_works():
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    a = torch.rand(100, device="cuda")
    _hot(f, a, a)
    key = f._calls._fast_keys[torch.Tensor]((a, a))
    plan = f._calls.plans.get(key[0])
    native = plan.launcher.native
    packed = plan.launcher.pack(a.data_ptr(), a.data_ptr(), a.data_ptr(), 100, 1.0, *plan.geometry)
    with pytest.raises(LaunchError, match=r"gfc_axpy: cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE"):
        native.launch(packed, (0, 1, 1), torch.cuda.current_stream().cuda_stream)
    torch.testing.assert_close(f(a, a), a + a)


@pytest.mark.parametrize("fast_call_path", ["1", "0"])
def test_a_disk_hit_on_torch_tensors_never_imports_cupy(tmp_path, fast_call_path):
    """Loading a kernel from the disk cache and launching it on torch CUDA tensors needs only the
    driver (cuda_driver.py: the module's load and, until the C call path is loaded or where it is
    turned off, the launch) and NVRTC's version (found as CuPy finds NVRTC): importing all of CuPy
    would cost the first call about 0.1 s. A contiguous call imports no other CUDA path."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, time, torch, jiter_magic\n"
        "x = torch.arange(1000.0, device='cuda')\n"
        "torch.cuda.synchronize()\n"
        "start = time.perf_counter()\n"
        "fn = jiter_magic.create_jit_fn('template <typename T> T gfc_no_cupy(T x, T a) { return a * x; }', a=3.0)\n"
        "y = fn(x)\n"
        "torch.cuda.synchronize()\n"
        "seconds = time.perf_counter() - start\n"
        "assert torch.equal(y, 3 * x)\n"
        "others = ('tiled', 'tile_code', 'rows', 'strided', 'render')\n"
        "print(fn.specializations[-1].cache_event, 'cupy' in sys.modules,\n"
        "      any('jiter_magic.kernels.' + name in sys.modules for name in others), seconds)\n"
    )
    env = {**os.environ, "JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache"), "JITER_MAGIC_FAST_CALL": fast_call_path}
    events = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        events.append(done.stdout.split())
    # ... nor a CUDA path other than the contiguous one, nor the renderer.
    assert events[0][:1] == ["compiled"] and events[1][:3] == ["disk", "False", "False"], events


@pytest.mark.parametrize("path", ["C", "Python"])
def test_a_cuda_storage_shrunk_under_a_planned_view_is_refused_on_the_hot_path(path, monkeypatch):
    from jiter_magic.arrays import adapter_for
    from jiter_magic.arrays.torch import _fast_key_of
    from jiter_magic.errors import UnsupportedArrayError

    if path == "Python":  # the torch adapter as it is where its C module is not loaded
        adapter = adapter_for(torch.zeros(1))
        monkeypatch.setattr(adapter, "native", None)
        monkeypatch.setattr(adapter, "key_checks_storage", False)
        monkeypatch.setattr(adapter, "pointer", torch.Tensor.data_ptr)
    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    base = torch.rand(1 << 16, device="cuda")
    view, other = base[8:1 << 15], torch.rand((1 << 15) - 8, device="cuda")
    if path == "Python":
        for _ in range(3):
            f(view, other)
        # A key read in Python checks no storage, so its plan never runs in C (a C hot plan would
        # skip the storage check): the Python hot path checks it on every call.
        assert f._calls.plans.get(_fast_key_of(2)((view, other))[0]).native_calls is None
    else:
        _hot(f, view, other)
    base.untyped_storage().resize_(1024)  # 256 floats left under a view that reads 32,760
    with pytest.raises(UnsupportedArrayError, match="holds only 1024 bytes"):
        f(view, other)
    torch.cuda.synchronize()
    torch.testing.assert_close(f(other, other), other * 2)


def test_an_inference_tensor_as_cuda_out_is_refused_outside_inference_mode():
    """A CUDA `out=` plan made inside `torch.inference_mode()` never writes an inference tensor
    outside it (torch refuses that in-place update): the hot path's own check, before the launch."""
    from jiter_magic.errors import GradientError

    f = jiter_magic.create_jit_fn(AXPY, alpha=1.0)
    x, y = torch.ones(1000, device="cuda"), torch.full((1000,), 2.0, device="cuda")
    with torch.inference_mode():
        out = torch.zeros(1000, device="cuda")
        for _ in range(3):
            assert f(x, y, alpha=3.0, out=out) is out
    torch.cuda.synchronize()
    assert out.is_inference() and torch.equal(out, torch.full((1000,), 5.0, device="cuda"))
    for _ in range(2):
        with pytest.raises(GradientError, match="inference tensor outside inference mode"):
            f(x, y, alpha=7.0, out=out)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((1000,), 5.0, device="cuda"))  # nothing was written
    normal = torch.zeros(1000, device="cuda")
    assert torch.equal(f(x, y, alpha=7.0, out=normal), torch.full((1000,), 9.0, device="cuda"))
