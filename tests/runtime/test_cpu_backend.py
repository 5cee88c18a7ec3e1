"""The core test matrix on the CPU backend (host C++), against torch eager and NumPy.

Modelled on torch's own test/test_jiterator.py (every dtype pair on contiguous 3x3 and on an
`as_strided` non-contiguous + broadcast layout, extra args, bool args, helpers, 1/5/8 inputs,
1/4/8 outputs), extended to what jiter_magic adds: 16 inputs, 0-dim, empty, negative strides,
weak Python scalars, out=, NumPy inputs, binding by name, and the seed's three examples.
Jitted functions live at module level so a specialization compiles once for the whole module.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic import create_jit_fn, create_multi_output_jit_fn

from reference import (  # tests/ is on sys.path (pytest's rootdir conftest)
    DTYPES,
    NUMPY_DTYPES,
    assert_matches,
    name,
    random_array,
    random_tensor,
    reference,
    result_type,
)

# torch's test_jiterator functor, with alpha != beta so swapped operands are caught.
FUSED = "template <typename T> T my_fused_kernel(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"
fused = create_jit_fn(FUSED, alpha=2, beta=-3)


def fused_ref(x, y, alpha, beta):
    return alpha * x + beta * y


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def pair_id(pair) -> str:
    return f"{name(pair[0])}-{name(pair[1])}"


PAIRS = list(itertools.product(DTYPES, DTYPES))
NUMPY_PAIRS = list(itertools.product(NUMPY_DTYPES, NUMPY_DTYPES))


# ----------------------------------------------------------------------------- every dtype pair
@pytest.mark.slow
@pytest.mark.parametrize("dtypes", PAIRS, ids=pair_id)
def test_all_dtype_contiguous(dtypes):
    g = gen(1)
    a = random_tensor((3, 3), dtypes[0], g)
    b = random_tensor((3, 3), dtypes[1], g)
    a_before, b_before = a.clone(), b.clone()
    result = fused(a, b)
    assert result.dtype == torch.result_type(a, b)
    assert_matches(result, reference(fused_ref, a, b, extras={"alpha": 2, "beta": -3}))
    assert torch.equal(a, a_before) and torch.equal(b, b_before)


@pytest.mark.slow
@pytest.mark.parametrize("dtypes", PAIRS, ids=pair_id)
def test_all_dtype_noncontiguous(dtypes):
    g = gen(2)
    # torch's own layout: a transposed 3x3 with a broadcast (3, 1) column.
    a = random_tensor((9,), dtypes[0], g).as_strided([3, 3], [1, 3])
    b = random_tensor((9,), dtypes[1], g).as_strided([3, 1], [1, 3])
    result = fused(a, b)
    assert result.dtype == torch.result_type(a, b)
    assert result.shape == (3, 3)
    assert_matches(result, reference(fused_ref, a, b, extras={"alpha": 2, "beta": -3}))
    # An expanded row with a stepped slice, and a transpose with an expanded column (same kernel).
    c = random_tensor((1, 3), dtypes[0], g).expand(3, 3)
    d = random_tensor((3, 6), dtypes[1], g)[:, ::2]
    assert_matches(fused(c, d), reference(fused_ref, c, d, extras={"alpha": 2, "beta": -3}))
    e = random_tensor((4, 3), dtypes[0], g).t()
    f = random_tensor((3, 1), dtypes[1], g).expand(3, 4)
    assert_matches(fused(e, f), reference(fused_ref, e, f, extras={"alpha": 2, "beta": -3}))


@pytest.mark.slow
@pytest.mark.parametrize("dtypes", NUMPY_PAIRS, ids=pair_id)
def test_all_numpy_dtype_pairs(dtypes):
    g = gen(3)
    a = random_array((3, 3), dtypes[0], g)
    b = random_array((3, 3), dtypes[1], g)
    result = fused(a, b)
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.result_type(a, b)
    assert_matches(result, reference(fused_ref, a, b, extras={"alpha": 2, "beta": -3}))
    # Negative strides and a transpose: a 2-d strided layout.
    c, d = a[::-1], b.T
    result = fused(c, d)
    assert result.dtype == np.result_type(a, b)
    assert_matches(result, reference(fused_ref, c, d, extras={"alpha": 2, "beta": -3}))


# ----------------------------------------------------------------------------- extra arguments
fused_default = create_jit_fn(FUSED, alpha=1, beta=1)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=name)
@pytest.mark.parametrize("alpha", [-1, 2.0, None])
@pytest.mark.parametrize("beta", [3, -4.2, None])
def test_extra_args(dtype, alpha, beta):
    g = gen(4)
    a = random_tensor((3,), dtype, g)
    b = random_tensor((3,), dtype, g)
    extras = {}
    if alpha is not None:
        extras["alpha"] = alpha
    if beta is not None:
        extras["beta"] = beta
    result = fused_default(a, b, **extras)
    expected = reference(fused_ref, a, b, extras={"alpha": 1, "beta": 1, **extras})
    assert_matches(result, expected)
    # The defaults are not changed by an overriding call.
    assert_matches(fused_default(a, b), reference(fused_ref, a, b, extras={"alpha": 1, "beta": 1}))


@pytest.mark.slow
def test_extra_args_integer_dtypes():
    g = gen(5)
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool, torch.complex64):
        a = random_tensor((4,), dtype, g)
        b = random_tensor((4,), dtype, g)
        for extras in ({}, {"alpha": 3}, {"alpha": -2, "beta": 5}, {"beta": 2.0}):
            expected = reference(fused_ref, a, b, extras={"alpha": 1, "beta": 1, **extras})
            assert_matches(fused_default(a, b, **extras), expected)


def test_one_element_tensor_as_extra_arg():
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([0.5, 0.25, 2.0])
    result = fused_default(a, b, alpha=torch.tensor([2.0]), beta=np.array(3.0))
    assert_matches(result, 2.0 * a + 3.0 * b)


@pytest.mark.parametrize("is_train", [True, False])
def test_bool_extra_args(is_train):
    code = "template <typename T> T conditional(T x, T mask, bool is_train) { return is_train ? x * mask : x; }"
    fn = create_jit_fn(code, is_train=False)
    g = gen(6)
    a = random_tensor((3,), torch.float32, g)
    b = random_tensor((3,), torch.float32, g)
    expected = a * b if is_train else a
    assert_matches(fn(a, b, is_train=is_train), expected)
    assert_matches(fn(a, b), a)  # default False


def test_kwargs_bind_by_name_not_dict_order():
    fn = create_jit_fn("template <typename T> T f(T x, T a, T b) { return x * a - b; }", b=2.0, a=1.0)
    x = torch.tensor([3.0, 4.0, -1.0])
    assert_matches(fn(x), x * 1.0 - 2.0)
    assert_matches(fn(x, a=5.0), x * 5.0 - 2.0)
    assert_matches(fn(x, b=-1.0, a=0.5), x * 0.5 + 1.0)
    assert fn.binding.input_names == ("x",)


def test_extra_arg_between_inputs():
    fn = create_jit_fn("template <typename T> T f(T x, T scale, T y) { return x - scale * y; }", scale=3)
    x = torch.tensor([1.0, 2.0])
    y = torch.tensor([10.0, 20.0])
    assert_matches(fn(x, y), x - 3 * y)


# ----------------------------------------------------------------------------- helpers and seeds
def test_multiple_functors():
    code = """
    template <typename T> T fn(T x, T mask) { return x * mask; }
    template <typename T> T main_fn(T x, T mask, T y) { return fn(x, mask) + y; }
    """
    jitted = create_jit_fn(code)
    g = gen(7)
    a, b, c = (random_tensor((3,), torch.float32, g) for _ in range(3))
    assert jitted.name == "main_fn"
    assert_matches(jitted(a, b, c), a * b + c)


def test_seed_example_1():
    code_string = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
    jitted_fn = create_jit_fn(code_string, alpha=1.0)
    a = torch.rand(3)
    b = torch.rand(3)
    # invoke jitted function like a regular python function
    result = jitted_fn(a, b, alpha=3.14)
    assert_matches(result, reference(lambda x, y, alpha: -x + alpha * y, a, b, extras={"alpha": 3.14}))
    assert_matches(jitted_fn(a, b), -a + b)


def test_seed_example_2():
    code_string = (
        "template <typename T> T util_fn(T x, T y) { return ::sin(x) + ::cos(y); }"
    )
    code_string += "template <typename T> T my_kernel(T x, T y, T val) { return ::min(val, util_fn(x, y)); }"
    jitted_fn = create_jit_fn(code_string, val=0.0)
    a = torch.rand(3)
    b = torch.rand(3)
    # invoke jitted function like a regular python function
    result = jitted_fn(a, b)  # using default val=0.0
    expected = torch.minimum(torch.tensor(0.0), torch.sin(a) + torch.cos(b))
    assert_matches(result, expected)
    # With a val that lets the helper win somewhere.
    a = torch.tensor([0.0, 1.5, -1.5])
    b = torch.tensor([3.0, 0.0, 0.5])
    result = jitted_fn(a, b, val=0.5)
    assert_matches(result, torch.minimum(torch.tensor(0.5), torch.sin(a) + torch.cos(b)))
    assert result.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=name)
def test_seed_example_2_other_dtypes(dtype):
    code_string = "template <typename T> T util_fn(T x, T y) { return ::sin(x) + ::cos(y); }"
    code_string += "template <typename T> T my_kernel(T x, T y, T val) { return ::min(val, util_fn(x, y)); }"
    jitted_fn = create_jit_fn(code_string, val=0.0)
    g = gen(21)
    a = random_tensor((7,), dtype, g)
    b = random_tensor((7,), dtype, g)
    expected = reference(lambda x, y, val: torch.minimum(val, torch.sin(x) + torch.cos(y)), a, b,
                         extras={"val": 0.5})
    assert_matches(jitted_fn(a, b, val=0.5), expected)


def test_cuda_math_functions_on_the_host():
    code = "template <typename T> T math_fn(T x) { return ::exp(x) + ::max(x, 0) - ::sqrt(::fabs(x)); }"
    jitted = create_jit_fn(code)
    for dtype in (torch.float32, torch.float64, torch.float16):
        x = random_tensor((6,), dtype, gen(22))
        expected = reference(lambda v: torch.exp(v) + torch.clamp(v, min=0) - torch.sqrt(torch.abs(v)), x)
        assert_matches(jitted(x), expected)


def test_complex_helpers_on_the_host():
    jitted = create_jit_fn("template <typename T> T cfn(T z, T w) { return exp(z) * conj(w) + T(z.real(), w.imag()); }")
    for dtype in (torch.complex64, torch.complex128):
        z = random_tensor((5,), dtype, gen(23)) / 4
        w = random_tensor((5,), dtype, gen(24))
        expected = torch.exp(z) * torch.conj(w) + torch.complex(z.real, w.imag)
        assert_matches(jitted(z, w), expected)


def test_non_template_entry_and_int_parameter():
    g = create_jit_fn("float g(float x, float y) { return x - y; }")
    x = torch.tensor([1.5, 2.5], dtype=torch.float64)
    y = torch.tensor([0.25, 1.0], dtype=torch.float64)
    assert_matches(g(x, y), x - y)
    power = "template <typename T> T power(T x, int n) { T r = 1; for (int i = 0; i < n; ++i) r *= x; return r; }"
    h = create_jit_fn(power, n=3)
    assert_matches(h(torch.tensor([2.0, -3.0])), torch.tensor([8.0, -27.0]))
    assert_matches(h(torch.tensor([2, 3]), n=4), torch.tensor([16, 81]))


def test_seed_example_3_torch_library_cpu():
    def real_gelu(x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))

    a = torch.tensor([-1.5, -0.25, 0.0, 0.3, 2.0])
    assert not torch.allclose(torch.nn.functional.gelu(a), torch.nn.functional.relu(a))

    code_string = "template <typename T> T my_gelu(T a) { return a > 0 ? a : 0; }"
    my_gelu = create_jit_fn(code_string)
    my_lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "Overriding a previously registered kernel"
            my_lib.impl("aten::gelu", my_gelu, "CPU")
        # torch.nn.GELU and torch.nn.function.gelu are now overridden
        assert torch.allclose(torch.nn.functional.gelu(a), torch.nn.functional.relu(a))
        assert torch.equal(torch.nn.GELU()(a), torch.relu(a))
        out = torch.nn.functional.gelu(a.double())
        assert out.dtype == torch.float64
        assert torch.equal(out, torch.relu(a.double()))
    finally:
        my_lib._destroy()
        del my_lib
    # The real gelu is back for everybody else.
    assert not torch.allclose(torch.nn.functional.gelu(a), torch.nn.functional.relu(a))
    torch.testing.assert_close(torch.nn.functional.gelu(a), real_gelu(a))


# ----------------------------------------------------------------------------- arity
@pytest.mark.slow
@pytest.mark.parametrize("num_inputs", [1, 5, 8, 16])
def test_various_num_inputs(num_inputs):
    g = gen(8)
    inputs = [random_tensor((3,), torch.float32, g) * 10 for _ in range(num_inputs)]
    input_string = ",".join([f"T i{i}" for i in range(num_inputs)])
    # Alternate signs and weights so every input must land in its own place.
    function_body = " + ".join([f"({i + 1}) * i{i}" for i in range(num_inputs)])
    code_string = f"template <typename T> T my_kernel({input_string}) {{ return {function_body}; }}"
    jitted = create_jit_fn(code_string)
    expected = reference(lambda *xs: sum((i + 1) * x for i, x in enumerate(xs)), *inputs)
    assert_matches(jitted(*inputs), expected)


def test_sixteen_inputs_mixed_dtypes_and_layouts():
    n = 16
    code = "template <typename T> T k({}) {{ return {}; }}".format(
        ", ".join(f"T i{i}" for i in range(n)), " - ".join(f"i{i}" for i in range(n)))
    jitted = create_jit_fn(code)
    g = gen(9)
    dtypes = [torch.int8, torch.int16, torch.int32, torch.float32] * 4
    inputs = []
    for i, d in enumerate(dtypes):
        t = random_tensor((4, 5), d, g)
        if i % 3 == 1:
            t = random_tensor((5, 4), d, g).t()
        elif i % 3 == 2:
            t = random_tensor((1, 5), d, g).expand(4, 5)
        inputs.append(t)

    def ref(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total - x
        return total

    result = jitted(*inputs)
    assert result.dtype == torch.float32
    assert_matches(result, reference(ref, *inputs))


@pytest.mark.parametrize("num_outputs", [1, 4, 8])
def test_various_num_outputs(num_outputs):
    g = gen(10)
    x = random_tensor((3,), torch.float32, g)
    y = random_tensor((3,), torch.float32, g)
    output_string = ", ".join([f"T& out{i}" for i in range(num_outputs)])
    function_body = "".join(f"out{i} = a * {i} - b;\n" for i in range(num_outputs))
    code_string = f"template <typename T> void my_kernel(T a, T b, {output_string}) {{ {function_body} }}"
    jitted = create_multi_output_jit_fn(code_string, num_outputs)
    result = jitted(x, y)
    expected = reference(lambda a, b: tuple(a * i - b for i in range(num_outputs)), x, y, num_outputs=num_outputs)
    if num_outputs == 1:  # one output comes back as the tensor itself, as torch's jiterator returns it
        assert isinstance(result, torch.Tensor)
        result = (result,)
    assert isinstance(result, tuple) and len(result) == num_outputs
    assert_matches(result, expected)


def test_multi_output_promotes_and_broadcasts():
    code = "template <typename T> void sum_diff(T a, T b, T& s, T& d) { s = a + b; d = a - b; }"
    jitted = create_multi_output_jit_fn(code, 2)
    g = gen(11)
    a = random_tensor((2, 3), torch.int16, g)
    b = random_tensor((3,), torch.float16, g)
    s, d = jitted(a, b)
    assert s.dtype == d.dtype == torch.float16
    expected = reference(lambda x, y: (x + y, x - y), a, b, num_outputs=2)
    assert_matches((s, d), expected)
    # NumPy: NEP 50 promotion (int16 with float16 -> float32).
    s, d = jitted(a.numpy(), b.numpy())
    assert s.dtype == d.dtype == np.float32
    assert_matches((s, d), reference(lambda x, y: (x + y, x - y), a.numpy(), b.numpy(), num_outputs=2))


def test_multi_output_out_tuple():
    code = "template <typename T> void sum_diff(T a, T b, T& s, T& d) { s = a + b; d = a - b; }"
    jitted = create_multi_output_jit_fn(code, 2)
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([0.5, -0.5])
    s = torch.empty(2, 2, dtype=torch.float64)
    d = torch.empty(2, 2).t()  # a transposed output
    result = jitted(a, b, out=(s, d))
    assert result[0] is s and result[1] is d
    assert_matches(s, (a + b).double())
    assert_matches(d.contiguous(), a - b)
    with pytest.raises(TypeError):
        jitted(a, b, out=(s,))


# ----------------------------------------------------------------------------- 0-dim, empty, strides
fn_xy = create_jit_fn("template <typename T> T f(T x, T y) { return x * y + y; }")


def xy_ref(x, y):
    return x * y + y


def test_zero_dim_inputs():
    a = torch.tensor(2.5)
    b = torch.tensor(-3, dtype=torch.int32)
    result = fn_xy(a, b)
    assert result.shape == () and result.dtype == torch.float32
    assert_matches(result, reference(xy_ref, a, b))
    # 0-dim NumPy arrays keep their dtype (they are arrays under NEP 50).
    result = fn_xy(np.array(2.5, np.float32), np.array(4, np.int64))
    assert isinstance(result, np.ndarray) and result.shape == ()
    assert result.dtype == np.float64
    assert result == 2.5 * 4 + 4


def test_zero_dim_with_dimensioned():
    a = torch.tensor(2.0, dtype=torch.float64)  # 0-dim ranks below a dimensioned tensor of the same category
    b = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    result = fn_xy(a, b)
    assert result.dtype == torch.result_type(a, b) == torch.float16
    assert_matches(result, reference(xy_ref, a, b))
    c = torch.tensor(3, dtype=torch.int64)
    d = torch.tensor([1, 2, 3], dtype=torch.int8)
    result = fn_xy(c, d)
    assert result.dtype == torch.int8
    assert_matches(result, reference(xy_ref, c, d))


def test_zero_dim_with_two_dims_higher_category():
    # A 0-dim tensor of a higher category decides the category (int32 x 0-dim float64 -> float64).
    a = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    b = torch.tensor(2.5, dtype=torch.float64)
    result = fn_xy(a, b)
    assert result.dtype == torch.result_type(a, b) == torch.float64
    assert_matches(result, reference(xy_ref, a, b))


@pytest.mark.parametrize("shapes", [((0,), (0,)), ((0, 3), (3,)), ((2, 0, 4), (1, 1, 4)), ((0,), ())])
def test_empty_inputs_compile_nothing(shapes):
    # A code string used nowhere else, so nothing for it can be in any cache.
    jitted = create_jit_fn("template <typename T> T never_compiled(T x, T y) { return x / y + T(7); }")
    a = torch.empty(shapes[0], dtype=torch.float16)
    b = torch.empty(shapes[1], dtype=torch.int64)
    before = jiter_magic.cache_stats()["compiles"]
    result = jitted(a, b)
    assert isinstance(result, torch.Tensor)
    assert result.shape == torch.broadcast_shapes(shapes[0], shapes[1])
    assert result.dtype == torch.float16
    npres = jitted(a.numpy(), b.numpy())
    assert isinstance(npres, np.ndarray) and npres.shape == result.shape and npres.dtype == np.float64
    assert jiter_magic.cache_stats()["compiles"] == before
    assert jitted.specializations == []


def test_empty_multi_output():
    jitted = create_multi_output_jit_fn(
        "template <typename T> void never_compiled2(T a, T& o0, T& o1) { o0 = a; o1 = -a; }", 2)
    before = jiter_magic.cache_stats()["compiles"]
    o0, o1 = jitted(torch.empty(3, 0, dtype=torch.int32))
    assert o0.shape == o1.shape == (3, 0) and o0.dtype == o1.dtype == torch.int32
    assert jiter_magic.cache_stats()["compiles"] == before


def test_negative_strides_numpy_2d():
    g = gen(12)
    a = random_array((4, 5), np.float32, g)
    b = random_array((4, 5), np.int16, g)
    cases = [(a[::-1], b), (a[:, ::-1], b[::-1]), (a[::-2, ::-1], b[1::2, ::-1]), (a[::-1].T, b.T),
             (a[::-1, :1], b[:, ::-1])]
    for x, y in cases:
        result = fn_xy(x, y)
        assert result.dtype == np.float32
        assert_matches(result, reference(xy_ref, x, y))
        # The NumPy expression itself, as a second reference.
        np.testing.assert_allclose(result, (x * y + y).astype(np.float32), rtol=1.3e-6, atol=1e-5)


def test_negative_strides_numpy_3d_and_output_order():
    g = gen(13)
    a = random_array((2, 3, 4), np.float64, g)[::-1, :, ::-1]
    b = random_array((3, 1), np.float64, g)[::-1]
    result = fn_xy(a, b)
    np.testing.assert_allclose(result, a * b + b, rtol=1e-12)


def test_negative_strides_numpy_1d():
    a = np.arange(1, 7, dtype=np.float64)
    result = fn_xy(a[::-1], a[::2].repeat(2))
    np.testing.assert_array_equal(result, a[::-1] * a[::2].repeat(2) + a[::2].repeat(2))


def test_stepped_1d_torch():
    a = torch.arange(1.0, 13.0)
    x, y = a[::2], a[1::2]
    assert_matches(fn_xy(x, y), x * y + y)


def test_overlapping_input_views():
    base = torch.arange(1.0, 11.0)
    x = base.as_strided((3, 4), (2, 1))  # rows overlap in memory
    y = base.as_strided((3, 4), (1, 2))
    assert_matches(fn_xy(x, y), x * y + y)


def test_channels_last_output_keeps_memory_order():
    g = gen(14)
    x = random_tensor((2, 3, 4, 5), torch.float32, g).contiguous(memory_format=torch.channels_last)
    y = random_tensor((2, 3, 4, 5), torch.float32, g).contiguous(memory_format=torch.channels_last)
    result = fn_xy(x, y)
    assert_matches(result, x * y + y)
    assert result.is_contiguous(memory_format=torch.channels_last)


def test_large_enough_for_threads():
    # More than the OpenMP threshold (32768 elements), contiguous and strided.
    g = gen(15)
    x = random_tensor((300, 400), torch.float32, g)
    y = random_tensor((300, 400), torch.float32, g)
    assert_matches(fn_xy(x, y), x * y + y)
    assert_matches(fn_xy(x.t(), y[:, :1].t()), x.t() * y[:, :1].t() + y[:, :1].t())


# ----------------------------------------------------------------------------- weak scalars
@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.uint8, torch.int32, torch.float16,
                                   torch.bfloat16, torch.float64, torch.complex64], ids=name)
@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1 - 2j], ids=["bool", "int", "float", "complex"])
def test_weak_python_scalar(dtype, scalar):
    g = gen(16)
    t = random_tensor((2, 3), dtype, g)
    expected_dtype = torch.result_type(t, scalar)
    if expected_dtype is torch.complex32:  # half with a complex scalar: no supported dtype to compute in
        with pytest.raises(jiter_magic.DTypeError):
            fn_xy(t, scalar)
        return
    result = fn_xy(t, scalar)
    assert result.dtype == expected_dtype
    assert_matches(result, reference(xy_ref, t, scalar))
    # Scalar first.
    result = fn_xy(scalar, t)
    assert result.dtype == torch.result_type(t, scalar)
    assert_matches(result, reference(xy_ref, scalar, t))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float16, np.float32, np.complex64])
@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1 - 2j], ids=["bool", "int", "float", "complex"])
def test_weak_python_scalar_numpy(dtype, scalar):
    g = gen(17)
    arr = random_array((2, 3), dtype, g)
    result = fn_xy(arr, scalar)
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.result_type(arr, scalar)  # NEP 50: the scalar is weak
    assert_matches(result, reference(xy_ref, arr, scalar))


def test_only_scalars_is_an_error():
    with pytest.raises(TypeError):
        fn_xy(1.0, 2.0)


# ----------------------------------------------------------------------------- out=
def test_out_same_dtype():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([2.0, -1.0])
    out = torch.full((2, 2), 99.0)
    result = fn_xy(a, b, out=out)
    assert result is out
    assert_matches(out, a * b + b)


@pytest.mark.parametrize("pair", [
    (torch.float32, torch.float64), (torch.int32, torch.int64), (torch.int32, torch.float32),
    (torch.int16, torch.int8), (torch.float16, torch.complex64), (torch.bool, torch.int16),
    (torch.float32, torch.bfloat16),
], ids=lambda p: f"{name(p[0])}-into-{name(p[1])}")
def test_out_safe_cast(pair):
    source, target = pair
    g = gen(18)
    a = random_tensor((3, 2), source, g)
    b = random_tensor((3, 2), source, g)
    out = torch.zeros((3, 2), dtype=target)
    result = fn_xy(a, b, out=out)
    assert result is out and out.dtype == target
    assert_matches(out, reference(xy_ref, a, b, out_dtypes=[target]))


@pytest.mark.parametrize("pair", [
    (torch.float32, torch.int32), (torch.complex64, torch.float64), (torch.int32, torch.bool),
    (torch.float16, torch.uint8),
], ids=lambda p: f"{name(p[0])}-into-{name(p[1])}")
def test_out_forbidden_cast(pair):
    source, target = pair
    a = torch.ones((2, 2), dtype=source)
    out = torch.full((2, 2), 7, dtype=target)
    before = out.clone()
    with pytest.raises(jiter_magic.DTypeError) as info:
        fn_xy(a, a, out=out)
    assert isinstance(info.value, TypeError)
    assert torch.equal(out, before)


def test_out_numpy_rules():
    a = np.array([1, 2, 3], dtype=np.int32)
    out = np.zeros(3, dtype=np.float64)
    assert fn_xy(a, a, out=out) is out
    np.testing.assert_array_equal(out, a * a + a)
    with pytest.raises(jiter_magic.DTypeError):
        fn_xy(a, a, out=np.zeros(3, dtype=np.uint32))  # same_kind forbids signed -> unsigned
    with pytest.raises(jiter_magic.DTypeError):
        fn_xy(a.astype(np.float64), a, out=np.zeros(3, dtype=np.int64))


def test_out_wrong_shape():
    a = torch.ones(3, 4)
    for shape in [(4, 3), (12,), (1, 4), (3, 4, 1)]:
        out = torch.zeros(shape)
        with pytest.raises(jiter_magic.ShapeError) as info:
            fn_xy(a, a, out=out)
        assert isinstance(info.value, ValueError)
        assert torch.equal(out, torch.zeros(shape))


def test_out_wrong_library_or_count():
    a = torch.ones(3)
    with pytest.raises(jiter_magic.DeviceError):
        fn_xy(a, a, out=np.zeros(3, np.float32))
    with pytest.raises(TypeError):
        fn_xy(a, a, out=(torch.zeros(3), torch.zeros(3)))


def test_out_aliasing_an_input_exactly():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([[2.0, 2.0], [-1.0, 0.5]])
    expected = a * b + b
    result = fn_xy(a, b, out=a)
    assert result is a
    assert_matches(a, expected)
    # A non-contiguous view aliased exactly, and NumPy.
    base = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    view = base.t()
    expected = view * 3.0 + 3.0
    fn_xy(view, 3.0, out=view)
    assert_matches(view, expected)
    n = np.array([1.0, 2.0, 3.0, 4.0])
    fn_xy(n, n, out=n)
    np.testing.assert_array_equal(n, [2.0, 6.0, 12.0, 20.0])


def test_out_partial_overlap_is_an_error():
    t = torch.arange(1.0, 6.0)
    before = t.clone()
    with pytest.raises(jiter_magic.ShapeError):
        fn_xy(t[:4], t[:4], out=t[1:])
    assert torch.equal(t, before)
    m = torch.arange(1.0, 10.0).reshape(3, 3)
    with pytest.raises(ValueError):
        fn_xy(m, m, out=m.t())  # same memory, other layout
    n = np.arange(1.0, 6.0)
    with pytest.raises(ValueError):
        fn_xy(n[1:], n[1:], out=n[:4])
    np.testing.assert_array_equal(n, np.arange(1.0, 6.0))


def test_out_empty_torch():
    a = torch.empty(0).as_strided((2, 0), (2, 1))
    out = torch.empty(2, 0)
    torch.add(a, torch.ones(1), out=out)  # torch accepts it
    result = fn_xy(a, torch.ones(1), out=out)
    assert result is out and result.shape == (2, 0)


def test_out_empty_numpy():
    out = np.empty((2, 0))
    np.add(np.empty((2, 0)), 1.0, out=out)  # NumPy accepts it
    result = fn_xy(np.empty((2, 0)), np.ones(1), out=out)
    assert result is out and result.shape == (2, 0)


def test_out_expanded_is_an_error():
    out = torch.zeros(1, 3).expand(2, 3)
    with pytest.raises(ValueError):
        fn_xy(torch.ones(2, 3), torch.ones(2, 3), out=out)


# ----------------------------------------------------------------------------- errors at the boundary
def test_numpy_inputs_return_numpy():
    a = np.array([[1, 2], [3, 4]], dtype=np.int8)
    b = np.array([1.5, -2.0], dtype=np.float32)
    result = fn_xy(a, b)
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.result_type(a, b) == np.float32
    np.testing.assert_allclose(result, a * b + b)


@pytest.mark.parametrize("scalar", [np.float32(2.0), np.int64(3), np.True_], ids=["float32", "int64", "bool"])
def test_numpy_scalar_input(scalar):
    arr = np.array([1.0, -2.0, 0.5], dtype=np.float16)
    result = fn_xy(scalar, arr)
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.result_type(scalar, arr)
    assert_matches(result, reference(xy_ref, np.asarray(scalar), arr))


def test_buffer_protocol_input():
    import array

    buf = array.array("d", [1.0, 2.0, 3.0])
    result = fn_xy(buf, np.array([2.0, 2.0, 2.0]))
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, [4.0, 6.0, 8.0])


def test_mixing_torch_and_numpy_is_a_device_error():
    with pytest.raises(jiter_magic.DeviceError):
        fn_xy(torch.ones(3), np.ones(3))
    with pytest.raises(jiter_magic.DeviceError):
        fn_xy(np.ones(3), torch.ones(3))


def test_wrong_number_of_inputs():
    with pytest.raises(TypeError):
        fn_xy(torch.ones(3))
    with pytest.raises(TypeError):
        fn_xy(torch.ones(3), torch.ones(3), torch.ones(3))
    with pytest.raises(TypeError):
        fused(torch.ones(3), torch.ones(3), torch.ones(3))  # extras are not positional


def test_unknown_call_kwarg_is_key_error():
    with pytest.raises(KeyError, match="gamma"):
        fused(torch.ones(3), torch.ones(3), gamma=1.0)
    with pytest.raises(KeyError):
        fn_xy(torch.ones(3), torch.ones(3), x=1.0)  # an input is not a kwarg


def test_unknown_creation_kwarg_is_type_error():
    with pytest.raises(TypeError) as info:
        create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }", gamma=1.0)
    assert "gamma" in str(info.value)
    assert "x" in str(info.value) and "y" in str(info.value)


def test_shapes_that_do_not_broadcast():
    with pytest.raises(jiter_magic.ShapeError):
        fn_xy(torch.ones(3), torch.ones(4))


def test_forced_backend():
    jitted = create_jit_fn("template <typename T> T f(T x, T y) { return x * y + y; }")
    jitted.backend = "cuda"
    with pytest.raises(jiter_magic.DeviceError):
        jitted(torch.ones(2, 2), torch.ones(2, 2))
    jitted.backend = "cpu"
    assert_matches(jitted(torch.ones(2, 2), torch.full((2, 2), 3.0)), torch.full((2, 2), 6.0))


def test_result_type_helper_matches_torch():
    # The reference's n-ary promotion agrees with torch.result_type on pairs (the base of this file).
    for d1, d2 in PAIRS:
        a, b = torch.ones(2, dtype=d1), torch.ones((), dtype=d2)
        assert result_type(a, b) == torch.result_type(a, b)
