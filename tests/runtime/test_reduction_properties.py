"""Property tests: integer sums and maxima over any dims of any strided view equal torch's exactly.

Integer results leave no rounding to excuse a difference, so these pin the layout planning (dims,
coalescing, the kept and reduced walks, keepdim, `out=` strides) and both host loops.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jiter_magic import create_reduction_fn

torch = pytest.importorskip("torch")

ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MAX = "template <typename T> T larger(T a, T b) { return a > b ? a : b; }\n"
SUM = create_reduction_fn(ADD, 0, combine="add")
AMAX = create_reduction_fn(MAX, float("-inf"), combine="larger")
PROPERTIES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def views(draw):
    """An int64 tensor of 0 to 4 dims, permuted, sliced with steps and perhaps broadcast."""
    ndim = draw(st.integers(0, 4))
    shape = [draw(st.integers(0 if ndim else 1, 9)) for _ in range(ndim)]
    count = 1
    for size in shape:
        count *= size
    x = torch.arange(count).reshape(shape) * 7 % 23 - 11
    if ndim:
        x = x.permute(draw(st.permutations(range(ndim))))
        steps = [draw(st.integers(1, 3)) for _ in range(ndim)]
        x = x[tuple(slice(None, None, s) for s in steps)]
        axis = draw(st.integers(0, ndim - 1))
        if x.shape[axis] and draw(st.booleans()):  # one slice along `axis`, read 5 times (stride 0)
            x = x.narrow(axis, 0, min(1, x.shape[axis])).expand(*[n if d != axis else 5
                                                                    for d, n in enumerate(x.shape)])
    return x


@st.composite
def dims(draw, ndim):
    if draw(st.booleans()) or ndim == 0:
        return None
    chosen = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(d - ndim if draw(st.booleans()) else d for d in chosen)


@PROPERTIES
@given(data=st.data())
def test_integer_sums_equal_torch(data):
    x = data.draw(views())
    dim = data.draw(dims(x.dim()))
    keepdim = data.draw(st.booleans())
    expected = x.sum() if dim is None else x.sum(dim=dim, keepdim=keepdim)
    result = SUM(x) if dim is None else SUM(x, dim=dim, keepdim=keepdim)
    assert result.dtype == expected.dtype and torch.equal(result, expected)
    if dim is not None and x.numel():
        out = torch.empty(tuple(expected.shape) + (2,), dtype=torch.int64)[..., 0]  # a strided out=
        SUM(x, dim=dim, keepdim=keepdim, out=out)
        assert torch.equal(out, expected)
        if all(x.shape[d] for d in dim):  # torch refuses the max of an empty slice
            assert torch.equal(AMAX(x, dim=dim, keepdim=keepdim), x.amax(dim=dim, keepdim=keepdim))
