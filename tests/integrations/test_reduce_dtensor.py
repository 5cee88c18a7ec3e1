"""Reductions of DTensors: each rank reduces its shards, partials of a sharded reduced dim are
gathered and folded; results are compared with torch and with the eager call on `full_tensor()`.

The cases run in real processes (gloo on the CPU), in a world of 2 ranks and one of 3, so that
shards are even and uneven (7 rows over 2 or 3 ranks, 1 row over 2: one rank holds nothing), with
the runner of test_dtensor.py: one process group a world, each case reported back as one test.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.distributed as dist

if not dist.is_available():
    pytest.skip("torch was built without torch.distributed", allow_module_level=True)

from test_dtensor import cpu_worlds, floats  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor  # noqa: E402

import jiter_magic  # noqa: E402
from jiter_magic import ValuesIndices  # noqa: E402

SQ = "template <typename T> T sq(T x) { return x * x; }\n"
ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
LARGER = "template <typename T> T larger(T a, T b) { return a > b ? a : b; }\n"
MEAN = "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
MUL = "template <typename T> T mul(T x, T y, T a) { return a * x * y; }\n"
# NaN wins, as torch.max's does, then the larger value, then the smaller index (ties: the first).
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")

SUM_SQ = jiter_magic.create_reduction_fn(SQ + ADD, 0, map="sq", combine="add")
AMAX = jiter_magic.create_reduction_fn(LARGER, float("-inf"), combine="larger")
AVERAGE = jiter_magic.create_reduction_fn(ADD + MEAN, 0, combine="add", finalize="mean")
DOT = jiter_magic.create_reduction_fn(MUL + ADD, 0, map="mul", combine="add", a=1.0)
MAX_WITH_INDEX = jiter_magic.create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
WITH_BACKWARD = jiter_magic.create_reduction_fn(SQ + ADD, 0, map="sq", combine="add").def_backward(
    "template <typename T> void sq_bwd(T x, T result, T g, T& gx) { gx = 2 * x * g; }")


# ----------------------------------------------------------------------------- checks
def assert_reduced(result: DTensor, expected: torch.Tensor, placements: tuple) -> None:
    """A DTensor result: its placements, and global shape, dtype, stride and values as expected."""
    assert isinstance(result, DTensor), type(result)
    assert tuple(result.placements) == placements, result.placements
    assert result.shape == expected.shape and result.dtype == expected.dtype, (result.shape, result.dtype,
                                                                               expected.shape, expected.dtype)
    assert result.stride() == expected.contiguous().stride(), result.stride()
    torch.testing.assert_close(result.full_tensor(), expected)


def assert_max(found: ValuesIndices, x: torch.Tensor, placements: tuple, dim=None, keepdim=False) -> None:
    """Values and indices as torch.max gives them (of the flattened tensor for dim=None), ties included."""
    assert isinstance(found, ValuesIndices)
    if dim is None:
        shape = (1,) * x.ndim if keepdim else ()
        expected = (x.max().reshape(shape), x.argmax().reshape(shape))
    else:
        expected = tuple(x.max(dim=dim, keepdim=keepdim))
    assert_reduced(found.values, expected[0], placements)
    assert_reduced(found.indices, expected[1], placements)


# ----------------------------------------------------------------------------- cases: run in every rank
def case_sharded_reduced_dim(mesh, device):
    full = floats(7, 4, device=device)
    x = distribute_tensor(full, mesh, [Shard(0)])  # 4 + 3 rows, or 3 + 3 + 1
    assert_reduced(SUM_SQ(x, dim=0), (full * full).sum(0), (Replicate(),))
    assert_reduced(AMAX(x, dim=0), full.amax(0), (Replicate(),))
    assert_reduced(AVERAGE(x, dim=0), full.mean(0), (Replicate(),))  # divided by 7, not a shard's count
    assert_reduced(AVERAGE(x, dim=0, keepdim=True), full.mean(0, keepdim=True), (Replicate(),))
    assert_reduced(SUM_SQ(x), (full * full).sum(), (Replicate(),))  # dim=None
    assert_reduced(AVERAGE(x, dim=(0, 1), keepdim=True), full.mean((0, 1), keepdim=True), (Replicate(),))
    assert_reduced(AVERAGE(x, dim=-2), AVERAGE(full, dim=0), (Replicate(),))  # as the eager call
    rows = distribute_tensor(floats(7, device=device), mesh, [Shard(0)])
    assert_reduced(AVERAGE(rows), rows.full_tensor().mean(), (Replicate(),))


def case_empty_shards(mesh, device):
    one = distribute_tensor(floats(1, 3, device=device), mesh, [Shard(0)])  # only rank 0 holds a row
    assert one.to_local().shape[0] == (1 if mesh.get_rank() == 0 else 0)
    assert_reduced(AVERAGE(one, dim=0), one.full_tensor().mean(0), (Replicate(),))
    assert_reduced(AMAX(one, dim=0), one.full_tensor().amax(0), (Replicate(),))
    assert_max(MAX_WITH_INDEX(one, dim=0), one.full_tensor(), (Replicate(),), dim=0)
    four = distribute_tensor(floats(4, device=device) - 3, mesh, [Shard(0)])  # 2 + 2 (+ 0 on a third rank)
    assert_reduced(AMAX(four, dim=0), four.full_tensor().amax(0), (Replicate(),))
    assert_max(MAX_WITH_INDEX(four, dim=0), four.full_tensor(), (Replicate(),), dim=0)
    none = distribute_tensor(torch.zeros(0, 3, device=device), mesh, [Shard(0)])  # nothing anywhere: the identity
    assert_reduced(SUM_SQ(none, dim=0), torch.zeros(3, device=device), (Replicate(),))


def case_non_reduced_sharded_dim_stays_sharded(mesh, device):
    full = floats(7, 5, device=device)
    x = distribute_tensor(full, mesh, [Shard(0)])
    result = SUM_SQ(x, dim=1)
    assert_reduced(result, (full * full).sum(1), (Shard(0),))
    assert result.to_local().shape == x.to_local().shape[:1]  # computed where the rows are
    assert_reduced(AVERAGE(x, dim=1, keepdim=True), full.mean(1, keepdim=True), (Shard(0),))
    cube = floats(4, 7, 3, device=device)
    y = distribute_tensor(cube, mesh, [Shard(1)])
    assert_reduced(AMAX(y, dim=0), cube.amax(0), (Shard(0),))  # dim 1 is the result's dim 0
    assert_reduced(AMAX(y, dim=(0, 2)), cube.amax((0, 2)), (Shard(0),))
    assert_reduced(AMAX(y, dim=(0, 2), keepdim=True), cube.amax((0, 2), keepdim=True), (Shard(1),))
    assert_reduced(AVERAGE(y, dim=(0, 1)), cube.mean((0, 1)), (Replicate(),))
    assert_max(MAX_WITH_INDEX(y, dim=2), cube, (Shard(1),), dim=2)


def case_replicate_and_partial_inputs(mesh, device):
    full = floats(7, 3, device=device)
    x = distribute_tensor(full, mesh, [Replicate()])
    assert_reduced(SUM_SQ(x, dim=0), (full * full).sum(0), (Replicate(),))
    assert_max(MAX_WITH_INDEX(x, dim=1), full, (Replicate(),), dim=1)
    pending = DTensor.from_local(full * (mesh.get_rank() + 1), mesh, [Partial()])
    total = pending.full_tensor()
    # sum of squares of the summed values, not the sum of each rank's sums of squares
    assert_reduced(SUM_SQ(pending, dim=0), (total * total).sum(0), (Replicate(),))
    assert_reduced(SUM_SQ(pending), (total * total).sum(), (Replicate(),))
    assert pending.placements == (Partial(),)


def case_dtype_and_accumulator(mesh, device):
    halves = floats(7, 4, device=device, dtype=torch.float16) * 30
    x = distribute_tensor(halves, mesh, [Shard(0)])
    expected = SUM_SQ(halves, dim=0)  # float16, summed in float32 as one call does
    assert expected.dtype == torch.float16
    assert_reduced(SUM_SQ(x, dim=0), expected, (Replicate(),))
    assert_reduced(SUM_SQ(x, dim=0, dtype=torch.float64), (halves.double() ** 2).sum(0), (Replicate(),))
    ints = distribute_tensor(torch.arange(7, device=device), mesh, [Shard(0)])
    assert_reduced(SUM_SQ(ints), (torch.arange(7) ** 2).sum(), (Replicate(),))
    assert_reduced(AVERAGE(ints, dtype=torch.float64), torch.arange(7, dtype=torch.float64).mean(), (Replicate(),))


def case_several_inputs_are_lined_up(mesh, device):
    a, b = floats(7, 3, device=device), floats(7, 3, device=device) + 2
    x = distribute_tensor(a, mesh, [Shard(0)])
    y = distribute_tensor(b, mesh, [Shard(1)])  # redistributed to x's Shard(0)
    assert_reduced(DOT(x, y, dim=0, a=2.0), (2 * a * b).sum(0), (Replicate(),))
    assert_reduced(DOT(x, y, dim=1), (a * b).sum(1), (Shard(0),))
    row = distribute_tensor(floats(3, device=device), mesh, [Replicate()])  # broadcast along dim 0
    assert_reduced(DOT(x, row, dim=0), (a * row.full_tensor()).sum(0), (Replicate(),))


def case_max_with_index_ties_across_shards(mesh, device):
    line = torch.zeros(7, device=device)
    line[[1, 3, 5, 6]] = 5.0  # the maximum on every shard of 2 or 3 ranks: the first (1) wins
    x = distribute_tensor(line, mesh, [Shard(0)])
    assert_max(MAX_WITH_INDEX(x, dim=0), line, (Replicate(),), dim=0)
    assert_max(MAX_WITH_INDEX(x), line, (Replicate(),))
    late = torch.zeros(7, device=device)
    late[[5, 6]] = 9.0  # only on the last shards
    assert_max(MAX_WITH_INDEX(distribute_tensor(late, mesh, [Shard(0)]), dim=0, keepdim=True), late,
               (Replicate(),), dim=0, keepdim=True)
    grid = torch.zeros(3, 7, device=device)
    grid[2, 4] = grid[1, 6] = grid[2, 0] = 1.0  # flat indices 18, 13, 14: 13 (dims (0, 1), sharded along 1)
    y = distribute_tensor(grid, mesh, [Shard(1)])
    assert_max(MAX_WITH_INDEX(y), grid, (Replicate(),))
    assert_max(MAX_WITH_INDEX(y, keepdim=True), grid, (Replicate(),), keepdim=True)
    assert_max(MAX_WITH_INDEX(y, dim=1), grid, (Replicate(),), dim=1)
    tall = distribute_tensor(grid.T.contiguous(), mesh, [Shard(0)])
    assert_max(MAX_WITH_INDEX(tall, dim=0), grid.T.contiguous(), (Replicate(),), dim=0)


def case_two_dim_mesh(mesh, device):
    mesh2 = init_device_mesh(device, (mesh.size(), 1), mesh_dim_names=("rows", "cols"))
    full = floats(7, 5, device=device)
    x = distribute_tensor(full, mesh2, [Shard(0), Shard(1)])
    assert_reduced(AVERAGE(x, dim=0), full.mean(0), (Replicate(), Shard(0)))
    assert_reduced(AVERAGE(x, dim=1), full.mean(1), (Shard(0), Replicate()))
    assert_reduced(AVERAGE(x), full.mean(), (Replicate(), Replicate()))
    twice = distribute_tensor(full, mesh2, [Shard(0), Shard(0)])  # one dim split by both mesh dims
    assert_reduced(SUM_SQ(twice, dim=0), (full * full).sum(0), (Replicate(), Replicate()))
    assert_max(MAX_WITH_INDEX(twice, dim=0), full, (Replicate(), Replicate()), dim=0)
    flipped = init_device_mesh(device, (1, mesh.size()))
    y = distribute_tensor(full, flipped, [Replicate(), Shard(1)])
    assert_reduced(AMAX(y, dim=0), full.amax(0), (Replicate(), Shard(0)))
    assert_max(MAX_WITH_INDEX(y, dim=1), full, (Replicate(), Replicate()), dim=1)


def case_refusals_on_every_rank(mesh, device):
    x = distribute_tensor(floats(7, 3, device=device), mesh, [Shard(0)])
    with pytest.raises(jiter_magic.DimensionError):
        SUM_SQ(x, dim=2)
    with pytest.raises(jiter_magic.InvalidArgumentError, match="appears twice"):
        MAX_WITH_INDEX(x, dim=(0, 0))
    with pytest.raises(jiter_magic.InvalidArgumentError, match="out= is not supported with DTensor inputs"):
        SUM_SQ(x, dim=0, out=distribute_tensor(torch.zeros(3, device=device), mesh, [Replicate()]))
    with pytest.raises(jiter_magic.UnknownKwargError):
        DOT(x, x, b=1.0)
    with pytest.raises(jiter_magic.ArgumentTypeError, match="the inputs of a reduction are arrays"):
        DOT(x, 2.0)
    with pytest.raises(jiter_magic.DeviceError, match="plain torch.Tensor among DTensors"):
        DOT(x, torch.ones(7, 3, device=device))
    with pytest.raises(jiter_magic.BindError):
        SUM_SQ(x, x)
    with pytest.raises(jiter_magic.ShapeError):
        DOT(x, distribute_tensor(torch.ones(4, device=device), mesh, [Shard(0)]))
    with pytest.raises(jiter_magic.DTypeError):
        SUM_SQ(x, dtype="no-such-dtype")
    with pytest.raises(jiter_magic.ArgumentTypeError, match="keepdim must be True or False, got str"):
        SUM_SQ(x, dim=0, keepdim="no")  # never read as bool("no"), which is True
    empty = distribute_tensor(torch.zeros(0, 3, device=device), mesh, [Shard(0)])
    with pytest.raises(jiter_magic.DimensionError, match="leaves no element to give"):
        MAX_WITH_INDEX(empty, dim=0)  # no value to give, as torch.max refuses
    tracked = distribute_tensor(floats(7, 3, device=device), mesh, [Shard(0)]).requires_grad_()
    with pytest.raises(jiter_magic.GradientError, match="has no backward"):
        SUM_SQ(tracked, dim=0)
    with pytest.raises(jiter_magic.GradientError, match="reductions of DTensors have no autograd yet"):
        WITH_BACKWARD(tracked, dim=0)
    with torch.no_grad():
        assert_reduced(WITH_BACKWARD(tracked, dim=0), (tracked.full_tensor() ** 2).sum(0), (Replicate(),))
    # no rank was left waiting: a collective still works on every rank
    assert_reduced(SUM_SQ(x, dim=0), (x.full_tensor() ** 2).sum(0), (Replicate(),))


CASES: dict[str, Callable] = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


# ----------------------------------------------------------------------------- worlds of 2 and 3 ranks
two_ranks, three_ranks, test_two_cpu_ranks, test_three_cpu_ranks = cpu_worlds(__name__, list(CASES))
