"""What makes a specialization new, in words: from the specs real calls on the CPU made."""
from __future__ import annotations

import numpy as np
import pytest

import jiter_magic
from jiter_magic.kernels import identity
from jiter_magic.kernels.novelty import differing_facets, novelty

BLEND = "template <typename T> T blend(T x, T y, T w) { return x + w * (y - x); }"


@pytest.fixture(scope="module")
def specs():
    """The specs of one function after calls that differ in one facet each."""
    fn = jiter_magic.create_jit_fn(BLEND, w=0.5)
    x = np.ones((3, 4), np.float32)
    fn(x, x)  # #0 arrays of one shape
    fn(x, 10.0)  # #1 a Python scalar for y
    fn(x, np.ones(4, np.float32))  # #2 a broadcast row
    fn(x.astype(np.float64), x.astype(np.float64))  # #3 other dtypes
    fn(np.ones((4, 3, 5), np.float32).transpose(2, 0, 1)[:, ::2], np.ones((5, 2, 3), np.float32))  # #4 strided, 3-d
    fn(np.ones((3, 5), np.float32).T[::2], np.ones((3, 3), np.float32))  # #5 strided, 2-d
    return [s.spec for s in fn.specializations]


def test_each_call_made_its_own_spec(specs):
    assert len(specs) == len(set(specs)) == 6
    assert identity(specs[0]) == "(float32, float32) -> (float32), contiguous vec1"
    assert identity(specs[1]) == "(float32, scalar float32) -> (float32), contiguous vec1"
    assert identity(specs[3]) == "(float64, float64) -> (float64), contiguous vec1"
    assert identity(specs[4]).endswith("strided 3-d") and identity(specs[5]).endswith("strided 2-d")


def test_the_first_specialization_is_not_new_beside_anything(specs):
    assert novelty(specs[0], []) == ""


def test_a_python_scalar_is_named_as_new_scalar_kinds(specs):
    assert novelty(specs[1], specs[:1]) == "new scalar kinds; #0 is (float32, float32) -> (float32), contiguous vec1"


def test_a_broadcast_is_named_as_a_new_kernel_path_not_a_new_layout(specs):
    assert differing_facets(specs[2], specs[0]) == ["kernel path"]
    assert novelty(specs[2], specs[:2]).startswith("new kernel path; #0 is (float32, float32) -> (float32), contig")


def test_new_dtypes_compare_with_the_nearest_earlier_spec(specs):
    assert novelty(specs[3], specs[:3]) == "new dtypes; #0 is (float32, float32) -> (float32), contiguous vec1"


def test_the_same_path_with_other_loop_dimensions_is_a_new_layout(specs):
    assert novelty(specs[5], specs[:5]) == "new layout; #4 is (float32, float32) -> (float32), strided 3-d"


def test_several_facets_are_named_together(specs):
    assert differing_facets(specs[4], specs[1]) == ["scalar kinds", "kernel path"]
    assert novelty(specs[4], [specs[1]]).startswith("new scalar kinds and kernel path; #0 is ")
    wide = specs[4]._replace(index64=not specs[4].index64)
    assert differing_facets(wide, specs[4]) == ["index width"]


def test_a_spec_built_again_says_which_earlier_one_it_equals(specs):
    assert novelty(specs[2], specs) == "the same as #2"
