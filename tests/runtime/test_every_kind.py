"""What every kind of jitted function does alike, by construction: an elementwise function, a
reduction and a scan share the facade, the loader and the call state (kernel_function.py,
runtime/loader.py, runtime/calls.py), so each test here runs on every kind."""
from __future__ import annotations

import gc
import pickle
import warnings

import numpy as np
import pytest

import jiter_magic
from jiter_magic import CacheWarning, DeviceError, InvalidArgumentError, Specialization
from jiter_magic.cache import disk as cache_module

torch = pytest.importorskip("torch")

SCALE = "template <typename T> T scale(T x, T y) { return x * y; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"


def make(kind: str, tag: str = "") -> jiter_magic.JitFunction | jiter_magic.ReductionFunction:
    """A function of `kind` of two inputs, its code string unique to the test through `tag`."""
    code = SCALE + ADD + f"// {tag}\n"
    if kind == "elementwise":
        return jiter_magic.create_jit_fn(code.replace(ADD, ""))
    if kind == "scan":
        return jiter_magic.create_scan_fn(code, 0, "scale", combine="add")
    return jiter_magic.create_reduction_fn(code, 0, "scale", combine="add")


def call(fn, x, y):
    return fn(x, y) if isinstance(fn, jiter_magic.JitFunction) else fn(x, y, dim=1)


def expected(kind: str, x, y):
    return x * y if kind == "elementwise" else (x * y).cumsum(1) if kind == "scan" else (x * y).sum(1)


KINDS = ["elementwise", "reduction", "scan"]


@pytest.fixture
def inputs():
    return torch.arange(12, dtype=torch.float32).reshape(3, 4), torch.full((3, 4), 2.0)


@pytest.mark.parametrize("kind", KINDS)
def test_clear_cache_of_memory_makes_the_next_call_a_disk_hit(kind, inputs, fresh_cache):
    fn = make(kind, "clear")
    torch.testing.assert_close(call(fn, *inputs), expected(kind, *inputs))
    assert [s.cache_event for s in fn.specializations] == ["compiled"]
    jiter_magic.clear_cache(memory=True, disk=False)
    gc.collect()
    torch.testing.assert_close(call(fn, *inputs), expected(kind, *inputs))
    assert [s.cache_event for s in fn.specializations] == ["compiled", "disk"]
    assert fn.specializations[0].cache_key == fn.specializations[1].cache_key


@pytest.mark.parametrize("kind", KINDS)
def test_call_counts_count_every_call_once(kind, inputs):
    fn = make(kind, "counts")
    assert (fn.call_counts.hot, fn.call_counts.general) == (0, 0)
    for _ in range(5):
        torch.testing.assert_close(call(fn, *inputs), expected(kind, *inputs))
    counts = fn.call_counts
    assert counts.general >= 1 and counts.hot + counts.general == 5
    counts.hot += 100  # a copy: the function's own counts are not changed by it
    assert fn.call_counts.hot + fn.call_counts.general == 5


@pytest.mark.parametrize("kind", KINDS)
def test_compile_builds_ahead_of_a_call_and_the_call_uses_it(kind, inputs, fresh_cache):
    fn = make(kind, "compile")
    built = fn.compile("float32", "float32", backend="cpu")
    assert isinstance(built, Specialization) and built.backend == "cpu" and built.cache_event == "compiled"
    assert fn.compile("float32", "float32", backend="cpu") is built  # found, not built again
    assert fn.specializations == [built]
    torch.testing.assert_close(call(fn, *inputs), expected(kind, *inputs))
    assert fn.specializations == [built]  # the call's kernel is the one compiled
    with pytest.raises(InvalidArgumentError, match="backend must be 'cuda' or 'cpu'"):
        fn.compile(backend="tpu")


@pytest.mark.parametrize("kind", KINDS)
def test_listeners_hear_of_each_build_and_its_start(kind, inputs):
    fn = make(kind, "listeners")
    started, built = [], []
    fn.add_start_listener(lambda spec, device: started.append((spec, device)))
    fn.add_listener(built.append)
    call(fn, *inputs)
    call(fn, *inputs)
    assert [s.spec for s in built] == [spec for spec, _ in started] and len(built) == 1
    assert started[0][1] == -1 and built == fn.specializations
    text = fn.describe_build(built[0].spec, -1)
    assert text.startswith(f"{fn.name} #1 for ") and text.endswith("(the same as #0)") and "on the CPU" in text


@pytest.mark.parametrize("kind", KINDS)
def test_an_equal_function_shares_the_loaded_kernel(kind, inputs):
    first = make(kind, "pool")
    call(first, *inputs)
    second = make(kind, "pool")
    torch.testing.assert_close(call(second, *inputs), expected(kind, *inputs))
    assert second.specializations[0].cache_event == "memory"
    assert second.specializations[0].cache_key == first.specializations[0].cache_key


@pytest.mark.parametrize("kind", KINDS)
def test_a_disk_entry_that_does_not_load_is_built_again_once(kind, inputs, fresh_cache):
    first = make(kind, "unloadable")
    call(first, *inputs)
    key = first.specializations[0].cache_key
    del first
    gc.collect()
    jiter_magic.clear_cache(disk=False)
    cache_module.disk_cache().put("cpu", key, b"not a shared library, valid checksum")
    fn = make(kind, "unloadable")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(call(fn, *inputs), expected(kind, *inputs))
    assert [type(w.message) for w in caught] == [CacheWarning] and "could not be loaded" in str(caught[0].message)
    assert [s.cache_event for s in fn.specializations] == ["compiled"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_backend_refuses_inputs_elsewhere_and_travels_with_a_pickle(kind, inputs):
    fn = make(kind, "backend")
    fn.backend = "cuda"
    with pytest.raises(DeviceError, match="backend='cuda' but its inputs live on the CPU"):
        call(fn, *inputs)
    again = pickle.loads(pickle.dumps(fn))
    assert again.backend == "cuda"
    fn.backend = "auto"
    torch.testing.assert_close(call(fn, *inputs), expected(kind, *inputs))
    with pytest.raises(InvalidArgumentError, match="backend must be 'auto', 'cuda' or 'cpu'"):
        fn.backend = "gpu"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("first", ["torch", "numpy"])
def test_results_never_depend_on_the_library_of_an_earlier_call(kind, first):
    """A float16 array with a 0-d float64 one: torch keeps float16 (a 0-d input does not promote),
    NumPy gives float64 (NEP 50). The same layout called with one library, then the other."""
    fn = make(kind, f"library {first}")
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    y = np.array(2.0)
    calls = {"torch": lambda: call(fn, torch.from_numpy(x), torch.from_numpy(y)), "numpy": lambda: call(fn, x, y)}
    dtypes = {"torch": torch.float16, "numpy": np.dtype(np.float64)}
    for library in (first, "numpy" if first == "torch" else "torch"):
        for _ in range(2):  # the second call of each finds its plan
            result = calls[library]()
            assert result.dtype == dtypes[library]
            np.testing.assert_allclose(np.asarray(result, dtype=np.float64), expected(kind, x.astype(np.float64), 2.0))


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_says_its_kind_of_operation_and_delegated_arrays_run_the_strategy_for_it(kind):
    from jiter_magic.arrays.base import run_delegated

    fn = make(kind, "strategy")
    assert fn.operation == kind
    x = np.ones((2, 3), np.float32)

    class OnlyThisKind:  # a delegating adapter with a strategy for this kind alone
        library = "dask"
        delegates = True
        strategies = {kind: lambda function, args, options, kwargs: (function, args, options, kwargs)}

    options = {"out": None}
    assert run_delegated(OnlyThisKind(), fn, (x, x), options, {"k": 1}) == (fn, (x, x), options, {"k": 1})
    other = make(next(k for k in KINDS if k != kind), "strategy-other")
    with pytest.raises(jiter_magic.UnsupportedArrayError,
                       match=f"a {other.operation} does not run on dask arrays of this kind yet"):
        run_delegated(OnlyThisKind(), other, (x, x), options, {})


@pytest.mark.parametrize("kind", ["elementwise", "reduction"])  # scans have no torch operator yet
def test_each_kinds_torch_operator_is_made_again_from_its_recipe_alone(kind):
    from jiter_magic.integrations.torch_op_parts import rebuilt

    fn = make(kind, "recipe")
    fn.def_backward("template <typename T> void g(T x, T y, T r, T gr, T& gx, T& gy) { gx = gr * y; gy = gr * x; }"
                    if kind == "reduction" else
                    "template <typename T> void g(T x, T y, T gr, T& gx, T& gy) { gx = gr * y; gy = gr * x; }")
    again = rebuilt(fn.recipe, fn.backward.recipe, "cpu")
    assert type(again) is type(fn) and again is not fn
    assert again.recipe == fn.recipe and again.backend == "cpu"
    assert again.backward is not None and again.backward.recipe == fn.backward.recipe
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 2, np.float32)
    np.testing.assert_array_equal(call(again, x, y), expected(kind, x, y))
