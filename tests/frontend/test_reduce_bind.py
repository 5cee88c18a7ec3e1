"""Binding a reduction's code string: the named map, combine and finalize, and the errors naming them."""
from __future__ import annotations

import pytest

from jiter_magic import create_reduction_fn
from jiter_magic.errors import ArgumentTypeError, BindError, ParseError
from jiter_magic.frontend.parse import parse_definitions
from jiter_magic.frontend.reduction import bind_reduction

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
AXPY = "template <typename T> T scaled(T x, T y, T alpha) { return alpha * x * y; }\n"


def test_parse_definitions_lists_every_function_in_order():
    names = [f.name for f in parse_definitions(SQ + ADD + MEAN)]
    assert names == ["sq", "add", "mean"]
    assert parse_definitions(SQ + ADD)[1].helper_names == ("sq",)


def test_named_functions():
    binding = bind_reduction(SQ + ADD + MEAN, "sq", "add", "mean", [])
    assert (binding.map.functor.name, binding.combine.name, binding.finalize.name) == ("sq", "add", "mean")
    assert binding.input_names == ("x",) and binding.name == "sq"


def test_default_map_is_the_last_function_neither_combine_nor_finalize():
    helper = "template <typename T> T twice(T x) { return x + x; }\n"
    binding = bind_reduction(helper + SQ + ADD + MEAN, None, "add", "mean", [])
    assert binding.map.functor.name == "sq"


def test_no_map_function_means_each_element_itself():
    binding = bind_reduction(ADD, None, "add", None, [])
    assert binding.map is None and binding.input_names == ("x",) and binding.name == "add"


def test_map_extras_are_bound_by_name():
    binding = bind_reduction(AXPY + ADD, None, "add", None, ["alpha"])
    assert binding.input_names == ("x", "y") and binding.extra_names == ("alpha",)


@pytest.mark.parametrize(("role", "kwargs"), [
    ("combine", {"combine": "plus"}), ("map", {"map": "square", "combine": "add"}),
    ("finalize", {"combine": "add", "finalize": "avg"}),
])
def test_a_missing_function_is_named_with_those_defined(role, kwargs):
    with pytest.raises(BindError, match=rf"{role}='\w+' names no function of the code string; it defines "
                                        r"\['sq', 'add', 'mean'\]"):
        create_reduction_fn(SQ + ADD + MEAN, 0, **kwargs)


def test_a_close_name_is_suggested():
    with pytest.raises(BindError, match="did you mean 'add'"):
        create_reduction_fn(SQ + ADD, 0, combine="ad")


def test_names_must_be_strings():
    with pytest.raises(ArgumentTypeError, match="combine= must name a function"):
        create_reduction_fn(SQ + ADD, 0, combine=len)


def test_combine_and_finalize_take_two_parameters():
    with pytest.raises(BindError, match="combine function must take two parameters"):
        create_reduction_fn(SQ + ADD, 0, map="add", combine="sq")
    with pytest.raises(BindError, match="finalize function must take two parameters .the result and the count"):
        create_reduction_fn(SQ + ADD, 0, combine="add", finalize="sq")
    void = "template <typename T> void put(T a, T& b) { b = a; }\n"
    with pytest.raises(BindError, match="combine function must return its value"):
        create_reduction_fn(void + SQ, 0, combine="put")


def test_kwargs_must_name_map_parameters():
    with pytest.raises(BindError, match="keyword argument 'beta' names no parameter"):
        create_reduction_fn(AXPY + ADD, 0, combine="add", beta=1.0)
    with pytest.raises(BindError, match="need a map function"):
        create_reduction_fn(ADD, 0, combine="add", alpha=1.0)


def test_a_bad_code_string_is_a_parse_error():
    with pytest.raises(ParseError):
        create_reduction_fn("int x;", 0, combine="add")


def test_identity_of_the_wrong_type_at_creation():
    with pytest.raises(ArgumentTypeError, match="identity must be a Python number .* got str"):
        create_reduction_fn(SQ + ADD, "0", combine="add")
