"""Scans of DTensors: shards of other dims scan locally, a shard of the scanned dim carries in the
totals of the shards before it; results are compared with the eager call on `full_tensor()`.

The cases run in real processes (gloo on the CPU), in a world of 2 ranks and one of 3, so that
shards are even and uneven (7 rows over 2 or 3 ranks; 1 row over 2: one rank holds nothing), with
the runner of test_dtensor.py: one process group a world, each case reported back as one test.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.distributed as dist

if not dist.is_available():
    pytest.skip("torch was built without torch.distributed", allow_module_level=True)

from scans.scan_functions import ADD, cummax, cumsum, ema, linear, linear_h, logcumsumexp  # noqa: E402
from test_dtensor import check_on_two_gpus, cpu_worlds, floats  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic import ValuesIndices  # noqa: E402

MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
SCALED = "template <typename T> T scaled(T x, T y, T a) { return a * x * y; }\n"
RUNNING_MEAN = jiter_magic.create_scan_fn(ADD + MEAN, 0, combine="add", finalize="mean")
DOT = jiter_magic.create_scan_fn(SCALED + ADD, 0, map="scaled", combine="add", a=1.0)
WITH_BACKWARD = jiter_magic.create_scan_fn(ADD, 0, combine="add").def_backward(
    lambda x, result, grad, *, dim, reverse, exclusive: torch.flip(torch.cumsum(torch.flip(grad, (dim,)), dim), (dim,)))
FLAGS = [{"reverse": r, "exclusive": e} for r in (False, True) for e in (False, True)]


def assert_scanned(result: DTensor, expected: torch.Tensor, placements: tuple, exact: bool = False) -> None:
    """A DTensor result: its placements, and global shape, dtype, stride and values as expected."""
    assert isinstance(result, DTensor), type(result)
    assert tuple(result.placements) == placements, result.placements
    assert result.shape == expected.shape and result.dtype == expected.dtype, (result.shape, result.dtype,
                                                                               expected.shape, expected.dtype)
    assert result.stride() == expected.contiguous().stride(), result.stride()
    if exact:
        torch.testing.assert_close(result.full_tensor(), expected, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(result.full_tensor(), expected, equal_nan=True)


def assert_all(found, expected, placements: tuple, exact: bool = False) -> None:
    """Each of several results (a tuple, `ValuesIndices` or one DTensor) as expected."""
    pairs = zip(found, expected) if isinstance(expected, tuple) else [(found, expected)]
    for one, want in pairs:
        assert_scanned(one, want, placements, exact)


# ----------------------------------------------------------------------------- cases: run in every rank
def case_sharded_scanned_dim_carries(mesh, device):
    full = floats(7, 4, device=device)
    x = distribute_tensor(full, mesh, [Shard(0)])  # 4 + 3 rows, or 3 + 3 + 1
    for flags in FLAGS:
        for fn in (cumsum, RUNNING_MEAN, logcumsumexp):
            assert_scanned(fn(x, dim=0, **flags), fn(full, dim=0, **flags), (Shard(0),))
        assert_scanned(cumsum(x, dim=-2, **flags), cumsum(full, dim=0, **flags), (Shard(0),))
    assert_scanned(cumsum(x, dim=0), torch.cumsum(full, 0), (Shard(0),))
    ones = distribute_tensor(torch.ones(7, device=device), mesh, [Shard(0)])
    assert_scanned(RUNNING_MEAN(ones, dim=0), torch.ones(7, device=device), (Shard(0),), exact=True)
    assert_scanned(cumsum(ones, dim=0, reverse=True), torch.arange(7.0, 0.0, -1.0, device=device), (Shard(0),))


def case_other_dims_and_replicate_scan_locally(mesh, device):
    full = floats(7, 5, device=device)
    x = distribute_tensor(full, mesh, [Shard(0)])
    result = cumsum(x, dim=1)
    assert_scanned(result, cumsum(full, dim=1), (Shard(0),), exact=True)  # each rank's rows as one call's
    assert result.to_local().shape == x.to_local().shape
    r = distribute_tensor(full, mesh, [Replicate()])
    for flags in FLAGS:
        assert_scanned(RUNNING_MEAN(r, dim=0, **flags), RUNNING_MEAN(full, dim=0, **flags), (Replicate(),), True)


def case_empty_shards(mesh, device):
    one = distribute_tensor(floats(1, 3, device=device), mesh, [Shard(0)])  # only rank 0 holds a row
    for flags in FLAGS:
        assert_scanned(RUNNING_MEAN(one, dim=0, **flags), RUNNING_MEAN(one.full_tensor(), dim=0, **flags), (Shard(0),))
        assert_all(cummax(one, dim=0, **flags), tuple(cummax(one.full_tensor(), dim=0, **flags)), (Shard(0),))
    none = distribute_tensor(torch.zeros(0, 3, device=device), mesh, [Shard(0)])
    assert_scanned(cumsum(none, dim=0), torch.zeros(0, 3, device=device), (Shard(0),))


def case_dtypes_and_several_inputs(mesh, device):
    halves = floats(7, 4, device=device, dtype=torch.float16) * 3
    h = distribute_tensor(halves, mesh, [Shard(0)])
    assert_scanned(cumsum(h, dim=0), cumsum(halves, dim=0), (Shard(0),))  # float16, summed in float32
    assert_scanned(cumsum(h, dim=0, dtype=torch.float64), torch.cumsum(halves.double(), 0), (Shard(0),))
    ints = distribute_tensor(torch.arange(7, device=device), mesh, [Shard(0)])
    assert_scanned(cumsum(ints, dim=0, exclusive=True), cumsum(torch.arange(7, device=device), dim=0, exclusive=True),
                   (Shard(0),), exact=True)
    a, b = floats(7, 3, device=device), floats(7, 3, device=device) + 2
    x, y = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(1)])  # y lined up as x
    assert_scanned(DOT(x, y, dim=0, a=2.0, reverse=True), DOT(a, b, dim=0, a=2.0, reverse=True), (Shard(0),))
    row = distribute_tensor(floats(3, device=device), mesh, [Replicate()])  # broadcast along dim 0
    assert_scanned(DOT(x, row, dim=0), DOT(a, row.full_tensor(), dim=0), (Shard(0),))


def case_linear_recurrence_and_indices(mesh, device):
    a, b = floats(7, 3, device=device).abs() * 0.1 + 0.8, floats(7, 3, device=device).flip(0)
    x, y = distribute_tensor(a, mesh, [Shard(0)]), distribute_tensor(b, mesh, [Shard(0)])
    ties = torch.tensor([1.0, 5, 5, 2, 5, float("nan"), 5], device=device)
    t = distribute_tensor(ties, mesh, [Shard(0)])
    for flags in FLAGS:
        assert_all(linear(x, y, dim=0, **flags), linear(a, b, dim=0, **flags), (Shard(0),))
        alone = linear_h(x, y, dim=0, **flags)  # h alone: the shards carry both values all the same
        assert type(alone) is tuple and len(alone) == 1
        assert_all(alone, (linear(a, b, dim=0, **flags)[1],), (Shard(0),))
        assert_all(linear_h(x, y, dim=1, **flags), (linear(a, b, dim=1, **flags)[1],), (Shard(0),))
        assert_all(ema(y, dim=0, decay=0.7, **flags), ema(b, dim=0, decay=0.7, **flags), (Shard(0),))
        found = cummax(t, dim=0, **flags)
        assert isinstance(found, ValuesIndices)
        assert_all(found, tuple(cummax(ties, dim=0, **flags)), (Shard(0),), exact=True)  # ties as eager
    assert_all(cummax(t, dim=0), tuple(torch.cummax(ties, 0)), (Shard(0),), exact=True)


def case_two_dim_mesh(mesh, device):
    mesh2 = init_device_mesh(device, (mesh.size(), 1), mesh_dim_names=("rows", "cols"))
    full = floats(7, 5, device=device)
    x = distribute_tensor(full, mesh2, [Shard(0), Shard(1)])
    assert_scanned(cumsum(x, dim=0), cumsum(full, dim=0), (Shard(0), Shard(1)))
    assert_scanned(cumsum(x, dim=1, reverse=True), cumsum(full, dim=1, reverse=True), (Shard(0), Shard(1)))
    flipped = init_device_mesh(device, (1, mesh.size()))
    y = distribute_tensor(full, flipped, [Replicate(), Shard(1)])
    assert_scanned(RUNNING_MEAN(y, dim=1), RUNNING_MEAN(full, dim=1), (Replicate(), Shard(1)))


def case_refusals_on_every_rank(mesh, device):
    x = distribute_tensor(floats(7, 3, device=device), mesh, [Shard(0)])
    with pytest.raises(jiter_magic.DimensionError):
        cumsum(x, dim=2)
    with pytest.raises(jiter_magic.ArgumentTypeError, match="needs dim="):
        cumsum(x)
    with pytest.raises(jiter_magic.InvalidArgumentError, match="out= is not supported with DTensor inputs"):
        cumsum(x, dim=0, out=x)
    with pytest.raises(jiter_magic.UnknownKwargError):
        DOT(x, x, dim=0, b=1.0)
    with pytest.raises(jiter_magic.BindError):
        cumsum(x, x, dim=0)
    with pytest.raises(jiter_magic.ArgumentTypeError, match="reverse must be True or False"):
        cumsum(x, dim=0, reverse="no")
    pending = DTensor.from_local(floats(7, 3, device=device), mesh, [Partial()])
    with pytest.raises(jiter_magic.UnsupportedArrayError, match="does not run on a Partial DTensor"):
        cumsum(pending, dim=0)
    tracked = distribute_tensor(floats(7, 3, device=device), mesh, [Shard(0)]).requires_grad_()
    with pytest.raises(jiter_magic.GradientError, match="has no backward"):
        cumsum(tracked, dim=0)
    with pytest.raises(jiter_magic.GradientError, match="scans of DTensors have no autograd yet"):
        WITH_BACKWARD(tracked, dim=0)
    with torch.no_grad():
        assert_scanned(WITH_BACKWARD(tracked, dim=0), torch.cumsum(tracked.full_tensor(), 0), (Shard(0),))
    # no rank was left waiting: a collective still works on every rank
    assert_scanned(cumsum(x, dim=0), cumsum(x.full_tensor(), dim=0), (Shard(0),))


CASES: dict[str, Callable] = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


# ----------------------------------------------------------------------------- worlds of 2 and 3 ranks
two_ranks, three_ranks, test_two_cpu_ranks, test_three_cpu_ranks = cpu_worlds(__name__, list(CASES))


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_with_nccl(tmp_path, monkeypatch):
    check_on_two_gpus(tmp_path, monkeypatch, __name__, list(CASES))
