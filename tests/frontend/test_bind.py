"""bind: parameters -> inputs, extra (kwarg) arguments and outputs, by name."""
from __future__ import annotations

import pytest

from jiter_magic.errors import BindError, JiterError
from jiter_magic.frontend.bind import EXTRA, INPUT, OUTPUT, Binding, bind
from jiter_magic.frontend.parse import parse_functor


def make(code: str, kwargs, num_outputs=None) -> Binding:
    return bind(parse_functor(code), list(kwargs), num_outputs)


def bind_error(code: str, kwargs, num_outputs=None) -> str:
    with pytest.raises(BindError) as info:
        make(code, kwargs, num_outputs)
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, JiterError)
    return str(info.value)


AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"


def test_seed_axpy_binding():
    b = make(AXPY, ["alpha"])
    assert b.input_names == ("x", "y")
    assert b.extra_names == ("alpha",)
    assert b.output_names == ()
    assert b.returns_value is True
    assert b.roles == ((INPUT, 0), (INPUT, 1), (EXTRA, 0))
    assert b.num_inputs == 2
    assert b.num_outputs == 1
    assert b.functor.name == "my_kernel"


def test_kwargs_bound_by_name_not_by_order():
    code = "template <typename T> T f(T x, T alpha, T y, T beta) { return alpha * x + beta * y; }"
    b = make(code, ["beta", "alpha"])
    # extras keep the entry function's declaration order, whatever the kwargs order
    assert b.extra_names == ("alpha", "beta")
    assert b.input_names == ("x", "y")
    assert b.roles == ((INPUT, 0), (EXTRA, 0), (INPUT, 1), (EXTRA, 1))
    assert make(code, ["alpha", "beta"]) == b


def test_inputs_in_declaration_order():
    code = "template <typename T> T f(T c, T s, T a, T b) { return a + b + c * s; }"
    b = make(code, ["s"])
    assert b.input_names == ("c", "a", "b")
    assert b.roles == ((INPUT, 0), (EXTRA, 0), (INPUT, 1), (INPUT, 2))
    assert b.num_inputs == 3


def test_no_kwargs_all_inputs():
    b = make(AXPY, [])
    assert b.input_names == ("x", "y", "alpha")
    assert b.extra_names == ()
    assert b.roles == ((INPUT, 0), (INPUT, 1), (INPUT, 2))


def test_unknown_kwarg_lists_parameters():
    message = bind_error(AXPY, ["gamma"])
    assert "'gamma'" in message
    assert "['x', 'y', 'alpha']" in message
    assert "my_kernel(T x, T y, T alpha)" in message


def test_unknown_kwarg_reported_even_with_valid_ones():
    message = bind_error(AXPY, ["alpha", "beta"])
    assert "'beta'" in message


def test_reserved_out_kwarg():
    message = bind_error("template <typename T> T f(T x, T out) { return x + out; }", ["out"])
    assert "'out'" in message and "reserved" in message


def test_kwarg_naming_an_output():
    code = "template <typename T> void f(T x, T& o) { o = x; }"
    message = bind_error(code, ["o"], 1)
    assert "'o'" in message and "output" in message
    message = bind_error(code, ["o"], None)
    assert "'o'" in message


def test_single_output_void_with_one_reference_output():
    b = make("template <typename T> void f(const T& x, T y, T& result) { result = x * y; }", [], None)
    assert b.returns_value is False
    assert b.output_names == ("result",)
    assert b.input_names == ("x", "y")
    assert b.roles == ((INPUT, 0), (INPUT, 1), (OUTPUT, 0))
    assert b.num_outputs == 1


def test_single_output_void_with_two_reference_outputs_rejected():
    message = bind_error("template <typename T> void f(T x, T& a, T& b) { a = x; b = x; }", [], None)
    assert "must return a value" in message
    assert "'void'" in message


def test_single_output_void_without_outputs_rejected():
    message = bind_error("template <typename T> void f(T x) { }", [], None)
    assert "must return a value" in message


def test_single_output_returning_value_with_reference_outputs_rejected():
    message = bind_error("template <typename T> T f(T x, T& o) { o = x; return x; }", [], None)
    assert "['o']" in message
    assert "multi_output" in message


def test_multi_output():
    code = "template <typename T> void f(T x, T& a, T s, T y, T& b) { a = x + y; b = s * x; }"
    b = make(code, ["s"], 2)
    assert b.returns_value is False
    assert b.input_names == ("x", "y")
    assert b.extra_names == ("s",)
    assert b.output_names == ("a", "b")
    assert b.roles == ((INPUT, 0), (OUTPUT, 0), (EXTRA, 0), (INPUT, 1), (OUTPUT, 1))
    assert b.num_outputs == 2
    assert b.num_inputs == 2


def test_multi_output_eight_outputs():
    outs = [f"o{j}" for j in range(8)]
    code = "template <typename T> void f(T x, %s) { %s }" % (
        ", ".join(f"T& {o}" for o in outs), " ".join(f"{o} = x;" for o in outs))
    b = make(code, [], 8)
    assert b.output_names == tuple(outs)
    assert b.roles[1:] == tuple((OUTPUT, j) for j in range(8))


@pytest.mark.parametrize("num_outputs", [1, 3])
def test_multi_output_count_mismatch(num_outputs):
    message = bind_error("template <typename T> void f(T x, T& a, T& b) { a = x; b = x; }", [], num_outputs)
    assert f"num_outputs={num_outputs}" in message
    assert "declares 2" in message
    assert "['a', 'b']" in message


def test_multi_output_form_with_a_value_returning_function_without_references():
    message = bind_error("template <typename T> T f(T x) { return x; }", [], 1)
    assert "num_outputs=1" in message and "declares 0" in message


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_num_outputs_must_be_positive_int(bad):
    message = bind_error("template <typename T> void f(T x, T& a, T& b) { a = x; b = x; }", [], bad)
    assert "positive int" in message
    assert repr(bad) in message


def test_no_inputs_left():
    message = bind_error(AXPY, ["x", "y", "alpha"])
    assert "no input parameter" in message
    assert "my_kernel" in message
    message = bind_error("template <typename T> void f(T s, T& o) { o = s; }", ["s"], 1)
    assert "no input parameter" in message


def test_binding_is_frozen_and_hashable():
    b = make(AXPY, ["alpha"])
    assert hash(b) == hash(make(AXPY, ["alpha"]))
    with pytest.raises(AttributeError):
        b.input_names = ()  # type: ignore[misc]


def test_unicode_and_attributed_parameters_bind_by_name():
    code = ("template <typename T> [[gnu::always_inline]] inline auto größe(T x, [[maybe_unused]] T α, T& ausgabe) "
            "noexcept -> void { ausgabe = α * x; }")
    b = make(code, ["α"], 1)
    assert (b.input_names, b.extra_names, b.output_names) == (("x",), ("α",), ("ausgabe",))
    assert b.roles == ((INPUT, 0), (EXTRA, 0), (OUTPUT, 0))
    assert b.returns_value is False
    assert b.functor.signature == "template <typename T> void größe(T x, T α, T& ausgabe)"
    assert "['x', 'α', 'ausgabe']" in bind_error(code, ["β"], 1)
