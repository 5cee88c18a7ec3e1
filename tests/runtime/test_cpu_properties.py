"""Property-based tests of the CPU backend (hypothesis): random shapes, layouts, dtypes and kwargs.

Shapes have 0 to 6 dimensions (sizes 0 and 1 included); inputs are random transposes, stepped
slices (negative steps through NumPy), expands and broadcasts of each other; every result must
equal the reference (torch eager / NumPy semantics, tests/reference.py).

Every new dtype/layout specialization compiles a host shared library (~0.2 s), so the dtypes of
each test come from a small pool and the jitted functions live at module level: the number of
specializations (compiles) stays around 300 while the examples number over 2,000.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jiter_magic import create_jit_fn, create_multi_output_jit_fn

try:
    from .reference import DTYPES, assert_matches, random_tensor, reference, result_type
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    from reference import DTYPES, assert_matches, random_tensor, reference, result_type

# Hundreds of host compiles a test: the whole module is slow (the inner loop leaves it out).
pytestmark = pytest.mark.slow

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# A functor that is not symmetric in its inputs and uses both extras.
CODE = "template <typename T> T prop_kernel(T x, T y, T alpha, T beta) { return alpha * x - y * beta + x * y; }"
prop_fn = create_jit_fn(CODE, alpha=2, beta=-1)


def prop_ref(x, y, alpha, beta):
    return alpha * x - y * beta + x * y


# Same code string as test_cpu_backend's matrix: its specializations are shared through the disk cache.
FUSED = "template <typename T> T my_fused_kernel(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"
fused = create_jit_fn(FUSED, alpha=2, beta=-3)


def fused_ref(x, y, alpha, beta):
    return alpha * x + beta * y


MULTI = "template <typename T> void prop_multi(T a, T b, T& s, T& p) { s = a + b; p = a * b - a; }"
multi_fn = create_multi_output_jit_fn(MULTI, 2)

LAYOUT_DTYPES = (torch.float32, torch.int32, torch.float64)
NUMPY_LAYOUT_DTYPES = (torch.float32, torch.int16, torch.float64)


# ----------------------------------------------------------------------------- strategies
@st.composite
def broadcast_shapes(draw, max_dims: int = 6):
    """Two input shapes of 0-6 dims that broadcast together, and the shape they broadcast to."""
    ndim = draw(st.integers(0, max_dims))
    sizes = st.sampled_from([0, 1, 1, 2, 3, 3, 4])
    shape = tuple(draw(sizes) for _ in range(ndim))
    if 0 in shape and draw(st.integers(0, 3)):  # keep most examples non-empty
        shape = tuple(max(s, 1) for s in shape)
    inputs = []
    for _ in range(2):
        drop = draw(st.integers(0, ndim))  # leading dims the input lacks
        own = list(shape[drop:])
        for axis in range(len(own)):
            if draw(st.integers(0, 4)) == 0:
                own[axis] = 1  # broadcast along this axis
        inputs.append(tuple(own))
    return tuple(torch.broadcast_shapes(*inputs)), inputs


@st.composite
def layouts(draw, ndim: int, negative: bool):
    """How to materialize an input: axis permutation, steps per axis, and which size-1 axes to expand."""
    perm = draw(st.permutations(range(ndim)))
    steps = [draw(st.sampled_from([1, 1, 1, 2, 3] + ([-1, -2] if negative else []))) for _ in range(ndim)]
    offset = draw(st.integers(0, 2))
    expand = [draw(st.booleans()) for _ in range(ndim)]
    return perm, steps, offset, expand


def materialize(shape, target, dtype, layout, generator, use_numpy: bool):
    """An input of `shape` (broadcastable to `target`) with a random memory layout.

    A base buffer is allocated in permuted axis order, padded for the steps (and an offset),
    sliced, permuted back; size-1 axes may be expanded (stride 0) to the target's size.
    """
    perm, steps, offset, expand = layout
    ndim = len(shape)
    base_shape = [shape[p] * abs(steps[p]) + (offset if i == 0 else 0) for i, p in enumerate(perm)]
    base = random_tensor(base_shape, dtype, generator)
    if use_numpy:
        base = base.numpy()
    index = []
    for i, p in enumerate(perm):
        step = steps[p]
        start = offset if i == 0 else 0
        if step > 0:
            index.append(slice(start, start + shape[p] * step, step))
        else:  # NumPy only: a negative step, starting at the far end
            stop = start - 1 if start > 0 else None
            index.append(slice(start + shape[p] * -step - 1, stop, step))
    view = base[tuple(index) + (Ellipsis,)]  # the Ellipsis keeps a 0-d NumPy selection an array, not a scalar
    inverse = [perm.index(axis) for axis in range(ndim)]
    view = view.transpose(inverse) if use_numpy else view.permute(inverse)
    assert tuple(view.shape) == tuple(shape), (view.shape, shape)
    lead = len(target) - ndim
    expanded = [target[lead + a] if shape[a] == 1 and expand[a] else shape[a] for a in range(ndim)]
    if expanded != list(shape):
        view = np.broadcast_to(view, expanded) if use_numpy else view.expand(*expanded)
    return view


def seeds():
    return st.integers(0, 2**31 - 1)


def int_kwargs():
    return st.integers(-5, 5)


# ----------------------------------------------------------------------------- layouts, torch
@settings(max_examples=700, **SETTINGS)
@given(case=broadcast_shapes(), dtypes=st.tuples(st.sampled_from(LAYOUT_DTYPES), st.sampled_from(LAYOUT_DTYPES)),
       data=st.data(), seed=seeds(), alpha=int_kwargs(), beta=int_kwargs())
def test_random_layouts_torch(case, dtypes, data, seed, alpha, beta):
    target, shapes = case
    g = torch.Generator().manual_seed(seed)
    a = materialize(shapes[0], target, dtypes[0], data.draw(layouts(len(shapes[0]), False)), g, False)
    b = materialize(shapes[1], target, dtypes[1], data.draw(layouts(len(shapes[1]), False)), g, False)
    a_before, b_before = a.clone(), b.clone()
    result = prop_fn(a, b, alpha=alpha, beta=beta)
    assert result.dtype == torch.result_type(a, b)
    assert result.shape == target
    assert_matches(result, reference(prop_ref, a, b, extras={"alpha": alpha, "beta": beta}))
    assert torch.equal(a, a_before) and torch.equal(b, b_before)


# ----------------------------------------------------------------------------- layouts, NumPy (negative steps)
@settings(max_examples=500, **SETTINGS)
@given(case=broadcast_shapes(), dtypes=st.tuples(st.sampled_from(NUMPY_LAYOUT_DTYPES),
                                                 st.sampled_from(NUMPY_LAYOUT_DTYPES)),
       data=st.data(), seed=seeds(), alpha=int_kwargs())
def test_random_layouts_numpy(case, dtypes, data, seed, alpha):
    target, shapes = case
    g = torch.Generator().manual_seed(seed)
    a = materialize(shapes[0], target, dtypes[0], data.draw(layouts(len(shapes[0]), True)), g, True)
    b = materialize(shapes[1], target, dtypes[1], data.draw(layouts(len(shapes[1]), True)), g, True)
    result = prop_fn(a, b, alpha=alpha)
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.result_type(a, b)
    assert result.shape == target
    assert_matches(result, reference(prop_ref, a, b, extras={"alpha": alpha, "beta": -1}))
    # NumPy's own expression, on the inputs converted to the common dtype, as a second reference.
    x, y = a.astype(result.dtype), b.astype(result.dtype)
    with np.errstate(all="ignore"):
        expected = alpha * x - y * -1 + x * y
    np.testing.assert_allclose(result, expected, rtol=1e-6 if result.dtype == np.float32 else 1e-12)


# ----------------------------------------------------------------------------- every dtype pair, random kwargs
@settings(max_examples=500, **SETTINGS)
@given(dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)),
       shape=st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple),
       transpose=st.booleans(), seed=seeds(), alpha=int_kwargs(), beta=int_kwargs())
def test_random_dtype_pairs(dtypes, shape, transpose, seed, alpha, beta):
    g = torch.Generator().manual_seed(seed)
    a = random_tensor(shape, dtypes[0], g)
    b = random_tensor(shape, dtypes[1], g)
    if transpose and len(shape) == 2:  # a 2-d strided layout (same kernel as test_cpu_backend's)
        a = random_tensor(shape[::-1], dtypes[0], g).t()
    result = fused(a, b, alpha=alpha, beta=beta)
    assert result.dtype == torch.result_type(a, b)
    assert_matches(result, reference(fused_ref, a, b, extras={"alpha": alpha, "beta": beta}))


# ----------------------------------------------------------------------------- kwarg kinds and values
KWARG = st.one_of(st.integers(-5, 5), st.floats(0.25, 4.5).map(lambda v: round(v, 3)), st.booleans())
fused_kinds = create_jit_fn(FUSED, alpha=1, beta=1)


@settings(max_examples=250, **SETTINGS)
@given(dtype=st.sampled_from([torch.int16, torch.float32, torch.float16, torch.complex128]),
       alpha=KWARG, beta=st.one_of(st.none(), st.integers(-5, 5)), seed=seeds(),
       n=st.integers(1, 40))
def test_random_kwarg_kinds(dtype, alpha, beta, seed, n):
    g = torch.Generator().manual_seed(seed)
    a = random_tensor((n,), dtype, g)
    b = random_tensor((n,), dtype, g)
    extras = {"alpha": alpha} if beta is None else {"alpha": alpha, "beta": beta}
    result = fused_kinds(a, b, **extras)
    assert result.dtype == dtype
    assert_matches(result, reference(fused_ref, a, b, extras={"alpha": 1, "beta": 1, **extras}))


# ----------------------------------------------------------------------------- weak scalars
SCALARS = st.one_of(st.booleans(), st.integers(-4, 4), st.floats(-4, 4, allow_nan=False).map(lambda v: round(v, 2)))


@settings(max_examples=200, **SETTINGS)
@given(dtype=st.sampled_from([torch.bool, torch.int8, torch.float16, torch.float32]), scalar=SCALARS,
       first=st.booleans(), zero_dim=st.booleans(), use_numpy=st.booleans(), seed=seeds())
def test_random_weak_scalars(dtype, scalar, first, zero_dim, use_numpy, seed):
    g = torch.Generator().manual_seed(seed)
    t = random_tensor(() if zero_dim else (3, 2), dtype, g)
    if use_numpy:
        t = t.numpy()
    args = (scalar, t) if first else (t, scalar)
    result = prop_fn(*args)
    expected_dtype = np.result_type(*args) if use_numpy else torch.result_type(t, scalar)
    assert result.dtype == expected_dtype
    assert_matches(result, reference(prop_ref, *args, extras={"alpha": 2, "beta": -1}))


# ----------------------------------------------------------------------------- out=
CASTS = {
    torch.float32: [torch.float32, torch.float64, torch.complex64, torch.float16],
    torch.int32: [torch.int32, torch.int64, torch.float32, torch.int16],
    torch.float64: [torch.float64, torch.float32, torch.complex128],
}


@settings(max_examples=200, **SETTINGS)
@given(case=broadcast_shapes(max_dims=4), dtype=st.sampled_from(sorted(CASTS, key=str)), data=st.data(),
       seed=seeds(), out_perm_seed=st.integers(0, 10**6))
def test_random_out(case, dtype, data, seed, out_perm_seed):
    target, shapes = case
    g = torch.Generator().manual_seed(seed)
    a = materialize(shapes[0], target, dtype, data.draw(layouts(len(shapes[0]), False)), g, False)
    b = materialize(shapes[1], target, dtype, data.draw(layouts(len(shapes[1]), False)), g, False)
    out_dtype = data.draw(st.sampled_from(CASTS[dtype]))
    # An output with its own random axis order.
    perm = list(np.random.default_rng(out_perm_seed).permutation(len(target)))
    out = torch.full([target[p] for p in perm], 7, dtype=out_dtype)
    out = out.permute(tuple(perm.index(i) for i in range(len(target))))
    assert out.shape == target
    result = prop_fn(a, b, out=out)
    assert result is out
    assert_matches(out, reference(prop_ref, a, b, extras={"alpha": 2, "beta": -1}, out_dtypes=[out_dtype]))


# ----------------------------------------------------------------------------- multi-output
@settings(max_examples=150, **SETTINGS)
@given(case=broadcast_shapes(max_dims=5), dtypes=st.tuples(st.sampled_from(LAYOUT_DTYPES),
                                                           st.sampled_from(LAYOUT_DTYPES)),
       data=st.data(), seed=seeds())
def test_random_multi_output(case, dtypes, data, seed):
    target, shapes = case
    g = torch.Generator().manual_seed(seed)
    a = materialize(shapes[0], target, dtypes[0], data.draw(layouts(len(shapes[0]), False)), g, False)
    b = materialize(shapes[1], target, dtypes[1], data.draw(layouts(len(shapes[1]), False)), g, False)
    s, p = multi_fn(a, b)
    assert s.dtype == p.dtype == result_type(a, b)
    assert_matches((s, p), reference(lambda x, y: (x + y, x * y - x), a, b, num_outputs=2))


def test_examples_total_at_least_2000():
    """The property tests above ask for at least 2,000 examples in a CI run (issue 3)."""
    tests = (test_random_layouts_torch, test_random_layouts_numpy, test_random_dtype_pairs,
             test_random_kwarg_kinds, test_random_weak_scalars, test_random_out, test_random_multi_output)
    total = sum(t._hypothesis_internal_use_settings.max_examples for t in tests)
    assert total >= 2000
