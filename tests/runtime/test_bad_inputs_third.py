"""The third catalogue: hostile and edge cases aimed at reductions, their `out=`, their options and
the call history (issue 43), each with its exact outcome, in the first catalogue's table style
(test_bad_inputs.py): `Raises(class, documented base, message pattern)`, raised twice in a row, or
`SAME`, the callable returning (what jiter_magic gave, what torch or NumPy gives). After every row a
good call must still work. Rows of the notebook magic are in tests/notebook/test_reduce_magic.py.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from test_bad_inputs import SAME, TAG, Raises, check  # tests/runtime/test_bad_inputs.py

import jiter_magic
from jiter_magic import (
    ArgumentTypeError,
    BindError,
    GradientError,
    ScalarOverflowError,
    ShapeError,
)

ADD = f"template <typename T> T tc_add(T a, T b) {{ return a + b; }} // {TAG}\n"
SCALE = "template <typename T> T tc_scale(T x, T y) { return x * y; }\n"
KEEP_MAX = ("template <typename T> void tc_keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) "
            "{ if (b > a || (b == a && ib < ia)) { value = b; index = ib; } else { value = a; index = ia; } }\n")


def total() -> jiter_magic.ReductionFunction:
    return jiter_magic.create_reduction_fn(ADD, 0, combine="tc_add")


def scaled_total() -> jiter_magic.ReductionFunction:
    return jiter_magic.create_reduction_fn(SCALE + ADD, 0, "tc_scale", combine="tc_add")


def argmax() -> jiter_magic.ReductionFunction:
    return jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, combine="tc_keep_max")


def matrix() -> torch.Tensor:
    return torch.arange(12, dtype=torch.float32).reshape(3, 4)


def out_partly_overlapping_the_input() -> None:
    x = torch.arange(16, dtype=torch.float32)
    total()(x[:12].view(3, 4), dim=1, out=x[2:5])


def a_values_indices_pair_sharing_memory() -> None:
    shared = torch.zeros(3, dtype=torch.int64)
    argmax()(matrix().long(), dim=1, out=(shared, shared))


def zero_d_float64_keeps_float32() -> tuple:
    x, y = matrix(), torch.tensor(2.0, dtype=torch.float64)
    return scaled_total()(x, y, dim=1), (x * y).sum(1)


def library_history(first: str) -> tuple:
    """A NumPy call and a torch call of the same layout, in either order: each its library's promotion."""
    fn = scaled_total()
    x, y = np.arange(12, dtype=np.float16).reshape(3, 4), np.array(2.0)
    calls = {"numpy": lambda: fn(x, y, dim=1), "torch": lambda: fn(torch.from_numpy(x), torch.from_numpy(y), dim=1)}
    wants = {"numpy": lambda: (x * y).sum(1), "torch": lambda: (torch.from_numpy(x) * torch.from_numpy(y)).sum(1)}
    second = "torch" if first == "numpy" else "numpy"
    got = (calls[first](), calls[second](), calls[first]())
    return (torch.as_tensor(got[0]), torch.as_tensor(got[1]), torch.as_tensor(got[2])), \
        (torch.as_tensor(wants[first]()), torch.as_tensor(wants[second]()), torch.as_tensor(wants[first]()))


def case(case_id: str, make, expect, *marks) -> object:
    return pytest.param(make, expect, id=case_id, marks=marks)


def unpickled_with_kwargs_as_a_list(kind: str) -> None:
    """A pickle made by hand: the state's kwargs a list where a dict belongs."""
    from jiter_magic import function, reduction

    if kind == "elementwise":
        function._unpickle(SCALE, None, ["y"], "auto")
    else:
        reduction._unpickle(SCALE + ADD, 0, "tc_scale", "tc_add", None, ["y"], False, None)


def dask_shapes_that_disagree_with_an_unknown_size(kind: str) -> None:
    """Boolean indexing leaves a size unknown: (nan,) against (5,), which the eager call refuses."""
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.ones(6), chunks=3)
    unknown, other = x[x > 0], da.from_array(np.ones(5), chunks=5)
    if kind == "elementwise":
        jiter_magic.create_jit_fn(SCALE)(unknown, other)
    else:
        scaled_total()(unknown, other, dim=0)


def dask_keepdim_a_string() -> None:
    da = pytest.importorskip("dask.array")
    total()(da.from_array(np.ones((2, 3)), chunks=1), dim=1, keepdim="False")


CASES = [
    case("reduction-out-partly-overlapping-an-input", out_partly_overlapping_the_input,
         Raises(ShapeError, ValueError, r"out= partially overlaps an input")),
    case("reduction-out-expanded-stride-0", lambda: total()(matrix(), dim=1, out=torch.zeros(1).expand(3)),
         Raises(ShapeError, ValueError, r"out= has an expanded \(stride 0\) dimension")),
    case("reduction-values-indices-out-sharing-memory", a_values_indices_pair_sharing_memory,
         Raises(ShapeError, ValueError, r"out= arrays 0 and 1 overlap each other")),
    case("reduction-out-a-leaf-requiring-grad",
         lambda: total()(matrix(), dim=1, out=torch.zeros(3, requires_grad=True)),
         Raises(GradientError, RuntimeError, r"out=\.\.\. arguments don't support automatic differentiation")),
    case("reduction-float32-with-0-d-float64-stays-float32", zero_d_float64_keeps_float32, SAME),
    case("reduction-numpy-then-torch-same-layout", lambda: library_history("numpy"), SAME),
    case("reduction-torch-then-numpy-same-layout", lambda: library_history("torch"), SAME),
    case("reduction-keepdim-a-string", lambda: total()(matrix(), dim=1, keepdim="False"),
         Raises(ArgumentTypeError, TypeError, r"keepdim must be True or False, got str: 'False'")),
    case("reduction-keepdim-an-int", lambda: total()(matrix(), dim=1, keepdim=0),
         Raises(ArgumentTypeError, TypeError, r"keepdim must be True or False, got int: 0")),
    case("reduction-identity-10**400", lambda: jiter_magic.create_reduction_fn(ADD, 10**400, combine="tc_add"),
         Raises(ScalarOverflowError, OverflowError, r"identity 100000000000\.\.\.\(401 digits\) is beyond every "
                                                    r"accumulator's range")),
    case("reduction-map-taking-a-reference",
         lambda: jiter_magic.create_reduction_fn("template <typename T> T tc_sq(T& x) { return x * x; }\n" + ADD, 0,
                                                 "tc_sq", combine="tc_add"),
         Raises(BindError, TypeError, r"the map function must take each element's inputs .* by value .*"
                                      r"tc_sq is: template <typename T> T tc_sq\(T& x\)")),
    *(case(f"{kind}-pickle-made-by-hand-kwargs-a-list", lambda kind=kind: unpickled_with_kwargs_as_a_list(kind),
           Raises(ArgumentTypeError, TypeError, r"the extras' defaults must be a dict of names to numbers, got "
                                                r"list: \['y'\] \(a pickle not made by jiter_magic, or damaged\?\)"))
      for kind in ("elementwise", "reduction")),
    *(case(f"{kind}-dask-shapes-disagree-a-size-unknown", lambda kind=kind: dask_shapes_that_disagree_with_an_unknown_size(kind),
           Raises(ShapeError, ValueError, r"Dask inputs of shapes \(nan,\), \(5,\): a size is unknown .* call "
                                          r"x.compute_chunk_sizes\(\) on the input first"))
      for kind in ("elementwise", "reduction")),
    case("reduction-dask-keepdim-a-string", dask_keepdim_a_string,
         Raises(ArgumentTypeError, TypeError, r"keepdim must be True or False, got str: 'False'")),
]


@pytest.mark.parametrize("make,expect", CASES)
def test_third_catalogue(make, expect):
    check(make, expect)
