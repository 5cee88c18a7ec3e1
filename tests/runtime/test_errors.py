"""Error types and messages, and that nothing is damaged by an error.

Parse errors are ValueErrors naming the offending text; compile errors on the CPU are
RuntimeErrors whose message points at the user's own lines (not the generated prelude);
bad inputs are TypeErrors. After every error the user's arrays are unchanged, the caches
hold nothing bad, and a following valid call works.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic import create_jit_fn, create_multi_output_jit_fn

PRELUDE_MARKERS = ("typedef", "namespace jm", "#include", "#line", "struct Args", "jm_kernel")


def cache_entries() -> int:
    return jiter_magic.cache_stats()["entries"]


# ----------------------------------------------------------------------------- parse errors
@pytest.mark.parametrize("code", [
    "int x = 3;",
    "",
    "// only a comment, no function",
    "template <typename T> Tmy_kernel(T x) { return x; }",
    "template <typename T> T f(T x) return x;",
    "just some words",
])
def test_no_function_is_a_parse_error_with_the_text(code):
    with pytest.raises(jiter_magic.ParseError) as info:
        create_jit_fn(code)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, jiter_magic.JiterError)
    message = str(info.value)
    assert code.strip() in message
    assert "function" in message  # says what was expected


def test_unclosed_brace_is_a_parse_error_with_the_line():
    code = "template <typename T>\nT f(T x) {\n  return x;\n"
    with pytest.raises(ValueError) as info:
        create_jit_fn(code)
    assert "line 2" in str(info.value)


def test_torch_malformed_name_is_rejected_by_the_first_call_at_the_latest():
    # torch's test_invalid_function_name: "my _kernel" is not a valid declaration. A parser may take
    # "T my" as a two-word return type; then the compiler must reject it with the user's line.
    code = "template <typename T> T my _kernel(T x) { return x; }"
    try:
        fn = create_jit_fn(code)
    except ValueError:
        return
    with pytest.raises(jiter_magic.CompileError) as info:
        fn(torch.ones(2))
    assert "line 1" in str(info.value)


# ----------------------------------------------------------------------------- compile errors
ONE_LINE = "template <typename T> T bad_one_line(T x, T y) { return x + undefined_name * y; }"
MULTI_LINE = (
    "template <typename T>\n"
    "T bad_multi_line(T x, T y) {\n"
    "  T z = x + undefined_thing;\n"
    "  return z * y;\n"
    "}\n"
)


def compile_error(code: str, *args) -> jiter_magic.CompileError:
    fn = create_jit_fn(code)
    with pytest.raises(jiter_magic.CompileError) as info:
        fn(*args)
    return info.value


def test_compile_error_one_line():
    x, y = torch.ones(3), torch.ones(3)
    error = compile_error(ONE_LINE, x, y)
    assert isinstance(error, RuntimeError) and isinstance(error, jiter_magic.JiterError)
    message = str(error)
    assert "line 1" in message
    assert "undefined_name" in message
    for marker in PRELUDE_MARKERS:
        assert marker not in message, marker
    assert len(message) < 2000  # a log, not the generated source


def test_compile_error_multi_line_points_at_line_3():
    x, y = torch.ones(3), torch.ones(3)
    error = compile_error(MULTI_LINE, x, y)
    message = str(error)
    assert "line 3" in message
    assert "undefined_thing" in message
    for marker in PRELUDE_MARKERS:
        assert marker not in message, marker
    assert error.log and "line 3" in error.log


def test_compile_error_shows_the_offending_line_multi_line():
    error = compile_error(MULTI_LINE, torch.ones(3), torch.ones(3))
    assert "T z = x + undefined_thing;" in str(error)


def test_compile_error_shows_the_offending_line_one_line():
    error = compile_error(ONE_LINE, torch.ones(3), torch.ones(3))
    assert "return x + undefined_name * y;" in str(error)


def test_compile_error_in_a_helper_points_at_its_line():
    code = (
        "template <typename T> T helper(T a) {\n"
        "  return a +* ;\n"
        "}\n"
        "template <typename T> T entry(T x) { return helper(x); }\n"
    )
    error = compile_error(code, torch.ones(2))
    assert "line 2" in str(error)
    for marker in PRELUDE_MARKERS:
        assert marker not in str(error), marker


def test_instantiation_error_maps_to_user_line():
    # Valid template, invalid for float: only the instantiation fails.
    code = "template <typename T>\nT needs_complex(T x) {\n  return x.real();\n}\n"
    error = compile_error(code, torch.ones(2))
    assert "line 3" in str(error)
    # The same functor works for a complex input (the complex type has .real()).
    fn = create_jit_fn(code)
    z = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    torch.testing.assert_close(fn(z), torch.complex(z.real, torch.zeros(2)))


def test_compile_error_leaves_no_cache_entry_and_recovers():
    x = torch.tensor([1.0, 2.0, 3.0])
    y = torch.tensor([4.0, 5.0, 6.0])
    x_before, y_before = x.clone(), y.clone()
    before = jiter_magic.cache_stats()
    fn = create_jit_fn(MULTI_LINE.replace("bad_multi_line", "bad_recover"))
    for _ in range(2):  # the error repeats: nothing half-built was remembered
        with pytest.raises(jiter_magic.CompileError):
            fn(x, y)
    after = jiter_magic.cache_stats()
    assert after["entries"] == before["entries"]
    assert after["compiles"] == before["compiles"]
    assert torch.equal(x, x_before) and torch.equal(y, y_before)
    assert fn.specializations == []
    good = create_jit_fn("template <typename T> T good_after_bad(T x, T y) { return x * y; }")
    torch.testing.assert_close(good(x, y), x * y)
    assert jiter_magic.cache_stats()["entries"] == before["entries"] + 1


# ----------------------------------------------------------------------------- creation errors
def test_creation_errors_are_type_errors():
    with pytest.raises(TypeError, match="gamma"):
        create_jit_fn("template <typename T> T f(T x) { return x; }", gamma=1.0)
    with pytest.raises(TypeError, match="out"):
        create_jit_fn("template <typename T> T f(T x, T out) { return x; }", out=1.0)
    with pytest.raises(TypeError):
        create_jit_fn("template <typename T> void f(T x, T& o) { o = x; }", o=1.0)  # an output is not a kwarg
    with pytest.raises(TypeError):
        create_jit_fn("template <typename T> void f(T x) { }")  # nothing returned, no output
    with pytest.raises(TypeError):
        create_multi_output_jit_fn("template <typename T> void f(T x, T& o) { o = x; }", 2)
    with pytest.raises(TypeError):
        create_multi_output_jit_fn("template <typename T> void f(T x, T& o) { o = x; }", 0)
    with pytest.raises(TypeError):
        create_jit_fn("template <typename T> T f(T x, T a) { return x * a; }", a="abc")
    with pytest.raises(TypeError):
        create_jit_fn("template <typename T> T f(T x) { return x; }", x=1.0)  # no input left


# ----------------------------------------------------------------------------- call errors
scale = create_jit_fn("template <typename T> T scale_fn(T x, T a) { return x * a; }", a=2.0)


def _works_after():
    x = torch.tensor([1.0, -2.0])
    torch.testing.assert_close(scale(x), x * 2)
    n = np.array([1, 2], dtype=np.int32)
    np.testing.assert_array_equal(scale(n, a=3), n * 3)


@pytest.mark.parametrize("bad", [
    ["a", "b"], "abc", None, {"a": 1}, object(),
], ids=["list-of-str", "str", "None", "dict", "object"])  # bytes are a buffer: read as uint8 (test_trust)
def test_bad_input_type_is_a_type_error(bad):
    with pytest.raises(TypeError) as info:
        scale(bad)
    assert type(bad).__name__ in str(info.value)
    _works_after()


@pytest.mark.parametrize("bad", [
    np.array(["a", "b"]), np.ones(3, dtype=np.longdouble), np.ones(3, dtype=">f4"), np.array([None, 1], dtype=object),
], ids=["str-array", "longdouble", "big-endian", "object"])
def test_unsupported_numpy_dtype_is_a_dtype_error(bad):
    with pytest.raises(jiter_magic.DTypeError) as info:
        scale(bad)
    assert isinstance(info.value, TypeError)
    _works_after()


def test_unsupported_torch_dtype_is_a_dtype_error():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "ComplexHalf support is experimental"
        t = torch.ones(3, dtype=torch.complex32)
    with pytest.raises(jiter_magic.DTypeError):
        scale(t)
    _works_after()


def test_bad_kwarg_values_are_type_errors():
    x = torch.ones(3)
    with pytest.raises(TypeError):
        scale(x, a="two")
    with pytest.raises(TypeError):
        scale(x, a=[1.0, 2.0])
    with pytest.raises(TypeError):
        scale(x, a=torch.ones(2))  # only 1-element arrays are .item()-ed
    with pytest.raises(KeyError):
        scale(x, b=1.0)
    _works_after()


def test_unknown_kwarg_prints_plainly_and_suggests_a_close_name():
    fn = create_jit_fn("template <typename T> T suggest_fn(T x, T alpha) { return x * alpha; }", alpha=1.0)
    with pytest.raises(jiter_magic.UnknownKwargError) as info:
        fn(np.ones(2), alpah=2.0)
    message = str(info.value)
    assert isinstance(info.value, KeyError)
    assert message == "alpah is not declared in function definition (declared: ['alpha']); did you mean 'alpha'?"
    with pytest.raises(jiter_magic.UnknownKwargError) as info:
        fn(np.ones(2), zzz=2.0)
    assert str(info.value) == "zzz is not declared in function definition (declared: ['alpha'])"
    assert not str(info.value).startswith(("'", '"'))
    assert fn(np.ones(2), alpha=3.0).tolist() == [3.0, 3.0]


def test_errors_leave_user_arrays_and_plans_intact():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = torch.full((2, 2), 5, dtype=torch.int32)
    x_before, out_before = x.clone(), out.clone()
    with pytest.raises(jiter_magic.DTypeError):
        scale(x, out=out)  # float into int: forbidden
    with pytest.raises(jiter_magic.ShapeError):
        scale(x, out=torch.zeros(3, 2))
    with pytest.raises(jiter_magic.ShapeError):
        scale(x, out=x.t())  # partial overlap
    with pytest.raises(jiter_magic.DeviceError):
        scale(np.ones(2), out=torch.zeros(2))
    with pytest.raises(TypeError):
        scale(x, x)
    assert torch.equal(x, x_before) and torch.equal(out, out_before)
    torch.testing.assert_close(scale(x), x * 2)
    good_out = torch.zeros(2, 2, dtype=torch.float64)
    scale(x, out=good_out)
    torch.testing.assert_close(good_out, (x * 2).double())


def test_read_only_out_is_rejected():
    n = np.ones(3)
    n.flags.writeable = False
    with pytest.raises(ValueError):
        scale(np.ones(3), out=n)
    np.testing.assert_array_equal(n, np.ones(3))


def test_missing_host_compiler_is_a_toolchain_error():
    from jiter_magic.compilers.cxx import CxxCompiler

    with pytest.raises(jiter_magic.ToolchainError) as info:
        CxxCompiler("/nonexistent/bin/c++-missing")
    assert isinstance(info.value, RuntimeError)
    assert "install" in str(info.value)


def test_out_of_range_python_integer_follows_each_library():
    f = jiter_magic.create_jit_fn("template <typename T> T f(T x, T y) { return x + y; }")
    array = np.ones(3, np.int8)
    with pytest.raises(OverflowError, match="300 out of bounds for int8"):
        f(array, 300)  # NumPy 2 raises for a Python int that does not fit
    assert f(array, -100).tolist() == [-99, -99, -99]
    tensor = torch.ones(3, dtype=torch.int8)
    assert f(tensor, 300).tolist() == (tensor + 300).tolist() == [45, 45, 45]  # torch wraps
    assert f(torch.ones(2), 1e300).tolist() == [float("inf")] * 2  # and saturates floats


def test_out_of_range_extra_argument_is_an_overflow_error():
    with pytest.raises(OverflowError, match="int64_t"):
        jiter_magic.create_jit_fn("template <typename T> T f(T x, T a) { return x + a; }", a=2**70)
    f = jiter_magic.create_jit_fn("template <typename T> T f(T x, T a) { return x + a; }", a=1)
    with pytest.raises(OverflowError):
        f(torch.ones(2), a=2**64)
    assert f(torch.ones(2)).tolist() == [2.0, 2.0]


def test_lazy_conj_and_neg_views_are_materialized():
    f = jiter_magic.create_jit_fn("template <typename T> T f(T x) { return x + 1; }")
    z = torch.tensor([1 + 2j, 3 - 4j])
    assert f(z).tolist() == (z + 1).tolist()
    assert f(z.conj()).tolist() == (z.conj() + 1).tolist()
    assert f(z.conj().imag).tolist() == (z.conj().imag + 1).tolist()
    assert f(z.conj()).tolist() == (z.conj() + 1).tolist()  # again, now that plans exist


def test_meta_tensors_are_a_device_error():
    f = jiter_magic.create_jit_fn("template <typename T> T f(T x) { return x + 1; }")
    f(torch.ones(3))
    with pytest.raises(jiter_magic.DeviceError, match="meta"):
        f(torch.ones(3, device="meta"))


def test_out_overlap_is_checked_on_every_call():
    f = jiter_magic.create_jit_fn("template <typename T> T f(T x) { return x + 1; }")
    x, y = torch.arange(10.0), torch.zeros(10)
    f(x[1:], out=y[:-1])
    with pytest.raises(ValueError, match="overlaps"):
        f(x[1:], out=x[:-1])
    assert x.tolist() == list(range(10))
    f(x, out=x)  # exact aliasing is fine
    assert x.tolist() == list(range(1, 11))


def test_debug_variable_saves_the_source_of_a_failed_compile(monkeypatch):
    code = "template <typename T> T debug_me(T x) { return not_declared(x); }"
    quiet = compile_error(code, np.ones(3))
    assert "generated source saved" not in str(quiet)
    monkeypatch.setenv("JITER_MAGIC_DEBUG", "1")
    error = compile_error(code, np.ones(3))
    message = str(error)
    assert "line 1" in message and "not_declared" in message
    path = message.rsplit("generated source saved to ", 1)[1].rstrip(")")
    assert path.endswith(".cpp") and os.path.basename(path).startswith("debug_me-")
    with open(path) as handle:
        assert handle.read() == error.source
    assert "jm_kernel" in error.source and code in error.source


def test_every_user_facing_error_is_a_jiter_error_and_a_standard_type():
    fn = create_jit_fn("template <typename T> T std_types(T x, T alpha) { return x * alpha; }", alpha=1.0)
    add = create_jit_fn("template <typename T> T std_add(T x, T y) { return x + y; }")
    cases = [
        (lambda: create_jit_fn(42), jiter_magic.ArgumentTypeError, TypeError),
        (lambda: fn(np.ones(2), beta=1.0), jiter_magic.UnknownKwargError, KeyError),
        (lambda: setattr(fn, "backend", "tpu"), jiter_magic.InvalidArgumentError, ValueError),
        (lambda: fn.source("float32", path="diagonal"), jiter_magic.InvalidArgumentError, ValueError),
        (lambda: fn.source("float32", backend="tpu"), jiter_magic.InvalidArgumentError, ValueError),
        (lambda: add(np.ones(2, dtype=np.int8), 2**70), jiter_magic.ScalarOverflowError, OverflowError),
        (lambda: create_jit_fn("template <typename T> T f(T x, T k) { return x; }", k=2**70),
         jiter_magic.ScalarOverflowError, OverflowError),
    ]
    for make_error, jiter_type, standard in cases:
        with pytest.raises(jiter_type) as info:
            make_error()
        assert isinstance(info.value, jiter_magic.JiterError) and isinstance(info.value, standard)
    read_only = np.ones(2)
    read_only.setflags(write=False)
    with pytest.raises(jiter_magic.InvalidArgumentError, match="read-only"):
        fn(np.ones(2), out=read_only)
