"""Jitted functions on DTensors (torch.distributed.tensor): each rank runs the function on its
local shards, after DTensor's own `redistribute` lines the inputs up; results are compared with
the eager call on the `full_tensor()`s.

The two-rank cases run in real processes (gloo on the CPU, NCCL on two GPUs), all of them in one
process group so that CI pays for starting torch and for compiling once; each case reports back
to the parent, which turns it into one test here. Ranks never wait forever: the process group has
a short timeout, the parent a deadline after which it kills what is left.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from importlib import import_module

import numpy as np
import pytest
import torch
import torch.distributed as dist

if not dist.is_available():
    pytest.skip("torch was built without torch.distributed", allow_module_level=True)

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor  # noqa: E402

import jiter_magic  # noqa: E402

ADD = jiter_magic.create_jit_fn("template <typename T> T dt_add(T x, T y) { return x + y; }")
SQUARE = jiter_magic.create_jit_fn("template <typename T> T dt_square(T x) { return x * x; }")
AXPY = jiter_magic.create_jit_fn("template <typename T> T dt_axpy(T x, T y, T a) { return a * x + y; }", a=1.0)
SQUARE_AXPY = jiter_magic.create_jit_fn(
    "template <typename T> T dt_sq_axpy(T x, T y, T a) { return a * x * x + y; }", a=2.0,
).def_backward("template <typename T> void dt_sq_axpy_bwd(T x, T y, T a, T g, T& gx, T& gy) "
               "{ gx = 2 * a * x * g; gy = g; }")
SUM_AND_TWICE = jiter_magic.create_multi_output_jit_fn(
    "template <typename T> void dt_sc(T x, T& s, T& c) { s = x + 1; c = x * 2; }", 2)

RANK_TIMEOUT = timedelta(seconds=30)  # a collective one rank never joins fails instead of hanging
DEADLINE_S = 240  # the parent's limit for a whole two-rank run (compiling included)


# ----------------------------------------------------------------------------- checks used by every case
def assert_like_eager(result: DTensor, expected: torch.Tensor, placements: tuple) -> None:
    """A DTensor result: its placements, and global shape, dtype, stride and values as eager gives."""
    assert isinstance(result, DTensor), type(result)
    assert tuple(result.placements) == placements, result.placements
    assert result.shape == expected.shape and result.dtype == expected.dtype, (result.shape, result.dtype)
    assert result.stride() == expected.stride(), (result.stride(), expected.stride())
    torch.testing.assert_close(result.full_tensor(), expected)


def floats(*shape: int, device: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The same values on every rank."""
    count = 1
    for size in shape:
        count *= size
    return (torch.arange(count, dtype=torch.float64, device=device) * 0.37 - 1.5).reshape(shape).to(dtype)


# ----------------------------------------------------------------------------- cases: run in every rank
def case_shard0_with_shard0(mesh, device):
    x = distribute_tensor(floats(8, device=device), mesh, [Shard(0)])
    y = distribute_tensor(floats(8, device=device) * 2, mesh, [Shard(0)])
    for _ in range(3):  # the later calls too (the call path memoizes by type)
        result = ADD(x, y)
        assert_like_eager(result, ADD(x.full_tensor(), y.full_tensor()), (Shard(0),))
    assert result.to_local().shape == x.to_local().shape


def case_shard0_2d_with_a_broadcast_replicate_row(mesh, device):
    x = distribute_tensor(floats(4, 3, device=device), mesh, [Shard(0)])
    row = distribute_tensor(floats(3, device=device), mesh, [Replicate()])
    assert_like_eager(ADD(x, row), ADD(x.full_tensor(), row.full_tensor()), (Shard(0),))
    assert_like_eager(ADD(row, x), ADD(row.full_tensor(), x.full_tensor()), (Shard(0),))
    assert row.placements == (Replicate(),)


def case_shard1(mesh, device):
    x = distribute_tensor(floats(3, 6, device=device), mesh, [Shard(1)])
    y = distribute_tensor(floats(3, 6, device=device) + 1, mesh, [Shard(1)])
    assert_like_eager(ADD(x, y), ADD(x.full_tensor(), y.full_tensor()), (Shard(1),))
    # a replicated row of full size along the sharded dimension is split locally, not gathered
    row = distribute_tensor(floats(6, device=device), mesh, [Replicate()])
    assert_like_eager(ADD(x, row), ADD(x.full_tensor(), row.full_tensor()), (Shard(1),))


def case_uneven_shards(mesh, device):
    x = distribute_tensor(floats(5, device=device), mesh, [Shard(0)])  # 3 and 2 elements
    result = ADD(x, x)
    assert_like_eager(result, ADD(x.full_tensor(), x.full_tensor()), (Shard(0),))
    assert result.to_local().shape == x.to_local().shape == ((3,) if mesh.get_rank() == 0 else (2,))
    m = distribute_tensor(floats(5, 3, device=device), mesh, [Shard(0)])
    column = distribute_tensor(floats(5, 1, device=device), mesh, [Shard(0)])  # broadcast along dim 1
    assert_like_eager(ADD(m, column), ADD(m.full_tensor(), column.full_tensor()), (Shard(0),))
    one = distribute_tensor(floats(1, device=device), mesh, [Shard(0)])  # one rank holds nothing
    assert_like_eager(SQUARE(one), SQUARE(one.full_tensor()), (Shard(0),))


def case_mismatched_shards_are_redistributed(mesh, device):
    x = distribute_tensor(floats(4, 6, device=device), mesh, [Shard(0)])
    y = distribute_tensor(floats(4, 6, device=device) * 3, mesh, [Shard(1)])
    before = y.to_local().clone()
    assert_like_eager(ADD(x, y), ADD(x.full_tensor(), y.full_tensor()), (Shard(0),))  # the first input's
    assert_like_eager(ADD(y, x), ADD(y.full_tensor(), x.full_tensor()), (Shard(1),))
    assert y.placements == (Shard(1),) and torch.equal(y.to_local(), before)  # the user's input is untouched
    pending = y.redistribute(mesh, [Shard(0)], async_op=True)  # its local tensor: a collective's pending result
    assert_like_eager(ADD(x, pending), ADD(x.full_tensor(), y.full_tensor()), (Shard(0),))
    # sharded along a dimension it is broadcast along: gathered (replicated) for the call
    column = distribute_tensor(floats(1, 6, device=device), mesh, [Shard(1)])
    assert_like_eager(ADD(x, column), ADD(x.full_tensor(), column.full_tensor()), (Shard(0),))


def case_partial_is_reduced_before_the_function(mesh, device):
    base = floats(6, device=device)
    partial = DTensor.from_local(base * (mesh.get_rank() + 1), mesh, [Partial()])
    full = partial.full_tensor()
    torch.testing.assert_close(full, base * sum(range(1, mesh.size() + 1)))
    assert_like_eager(SQUARE(partial), SQUARE(full), (Replicate(),))  # f(a + b), not f(a) + f(b)
    x = distribute_tensor(floats(6, device=device), mesh, [Shard(0)])
    assert_like_eager(ADD(x, partial), ADD(x.full_tensor(), full), (Shard(0),))  # reduce-scattered
    assert partial.placements == (Partial(),)


def case_python_scalar_and_a_keyword_extra(mesh, device):
    x = distribute_tensor(floats(6, device=device), mesh, [Shard(0)])
    y = distribute_tensor(floats(6, device=device) + 4, mesh, [Shard(0)])
    assert_like_eager(AXPY(x, y), AXPY(x.full_tensor(), y.full_tensor()), (Shard(0),))
    assert_like_eager(AXPY(x, y, a=-2.5), AXPY(x.full_tensor(), y.full_tensor(), a=-2.5), (Shard(0),))
    assert_like_eager(AXPY(x, 2.5, a=3.0), AXPY(x.full_tensor(), 2.5, a=3.0), (Shard(0),))
    assert_like_eager(AXPY(0.5, x), AXPY(0.5, x.full_tensor()), (Shard(0),))


def case_several_outputs(mesh, device):
    x = distribute_tensor(floats(5, 2, device=device), mesh, [Shard(0)])
    results = SUM_AND_TWICE(x)
    assert isinstance(results, tuple) and len(results) == 2
    for result, expected in zip(results, SUM_AND_TWICE(x.full_tensor())):
        assert_like_eager(result, expected, (Shard(0),))


def case_dtype_promotion(mesh, device):
    ints = distribute_tensor(torch.arange(6, device=device), mesh, [Shard(0)])
    halves = distribute_tensor(floats(6, device=device), mesh, [Shard(0)])
    result = ADD(ints, halves)
    assert result.dtype == torch.float32
    assert_like_eager(result, ADD(ints.full_tensor(), halves.full_tensor()), (Shard(0),))
    assert_like_eager(ADD(ints, 0.5), ADD(ints.full_tensor(), 0.5), (Shard(0),))  # torch's default float
    assert_like_eager(ADD(ints, 3), ADD(ints.full_tensor(), 3), (Shard(0),))
    assert ADD(ints, 3).dtype == torch.int64


def case_out_dtensors(mesh, device):
    x = distribute_tensor(floats(5, 3, device=device), mesh, [Shard(0)])
    out = distribute_tensor(torch.zeros(5, 3, device=device), mesh, [Shard(0)])
    assert ADD(x, x, out=out) is out
    assert_like_eager(out, ADD(x.full_tensor(), x.full_tensor()), (Shard(0),))
    outs = tuple(distribute_tensor(torch.zeros(5, 3, device=device), mesh, [Shard(0)]) for _ in range(2))
    returned = SUM_AND_TWICE(x, out=outs)
    assert isinstance(returned, tuple) and returned[0] is outs[0] and returned[1] is outs[1]
    for given, expected in zip(outs, SUM_AND_TWICE(x.full_tensor())):
        assert_like_eager(given, expected, (Shard(0),))
    replicated = distribute_tensor(torch.zeros(5, 3, device=device), mesh, [Replicate()])
    with pytest.raises(jiter_magic.InvalidArgumentError, match="out= has placements"):
        ADD(x, x, out=replicated)
    short = distribute_tensor(torch.zeros(4, 3, device=device), mesh, [Shard(0)])
    with pytest.raises(jiter_magic.ShapeError, match=r"out= has global shape \(4, 3\), but the result has"):
        ADD(x, x, out=short)
    assert torch.equal(replicated.full_tensor(), torch.zeros(5, 3, device=device))  # nothing written
    assert_like_eager(ADD(x, x), ADD(x.full_tensor(), x.full_tensor()), (Shard(0),))  # still works


def case_a_plain_tensor_among_dtensors_is_refused(mesh, device):
    x = distribute_tensor(floats(8, device=device), mesh, [Shard(0)])
    before = x.to_local().clone()
    for call in (lambda: ADD(x, torch.ones(8, device=device)), lambda: ADD(torch.ones(8, device=device), x)):
        with pytest.raises(jiter_magic.DeviceError, match="plain torch.Tensor among DTensors") as info:
            call()
        assert "DTensor.from_local" in str(info.value) and "distribute_tensor" in str(info.value)
        assert isinstance(info.value, RuntimeError)  # as torch raises for mixed Tensor and DTensor
    assert torch.equal(x.to_local(), before)
    assert_like_eager(ADD(x, x), ADD(x.full_tensor(), x.full_tensor()), (Shard(0),))


def case_autograd_through_def_backward(mesh, device):
    torch.manual_seed(0)
    full_x, full_y, full_grad = (torch.rand(5, 3, dtype=torch.float64, device=device) for _ in range(3))
    full_row = torch.rand(3, dtype=torch.float64, device=device)
    x = distribute_tensor(full_x, mesh, [Shard(0)]).requires_grad_()
    y = distribute_tensor(full_y, mesh, [Shard(1)]).requires_grad_()  # redistributed: its gradient comes back
    row = distribute_tensor(full_row, mesh, [Replicate()]).requires_grad_()  # broadcast: a Partial gradient
    result = SQUARE_AXPY(SQUARE_AXPY(x, y, a=1.5), row)
    assert result.placements == (Shard(0),) and result.grad_fn is not None
    gradient = distribute_tensor(full_grad, mesh, [Shard(0)])
    result.backward(gradient)

    leaves: tuple[DTensor, ...] = (x, y, row)  # type: ignore[assignment]  # requires_grad_ keeps the DTensor
    eager = [t.full_tensor().detach().requires_grad_() for t in leaves]
    expected = SQUARE_AXPY(SQUARE_AXPY(eager[0], eager[1], a=1.5), eager[2])
    torch.testing.assert_close(result.full_tensor(), expected.detach())
    expected.backward(gradient.full_tensor())
    for given, reference in zip(leaves, eager):
        assert isinstance(given.grad, DTensor)
        torch.testing.assert_close(given.grad.full_tensor(), reference.grad)


CASES: dict[str, Callable] = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


# ----------------------------------------------------------------------------- running the cases in two ranks
def _rank_main(rank: int, world_size: int, init_file: str, backend: str, names: list[str], reports,
               module: str = __name__) -> None:
    """One rank: join the process group, run the cases (the `CASES` of test module `module`),
    report each (traceback or None)."""
    device = "cpu"
    if backend == "nccl":
        os.environ["NCCL_NVLS_ENABLE"] = "0"
        torch.cuda.set_device(rank)
        device = "cuda"
    try:
        dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size,
                                timeout=RANK_TIMEOUT)
        mesh = init_device_mesh(device, (world_size,))
        cases = import_module(module).CASES
        for name in names:
            try:
                cases[name](mesh, device)
                reports.put((rank, name, None))
            except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test
                reports.put((rank, name, traceback.format_exc()))
    except BaseException:  # noqa: BLE001
        reports.put((rank, "<process group>", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_in_ranks(tmp_dir: str, backend: str, names: list[str], world_size: int = 2,
                 module: str = __name__) -> dict[str, list[str]]:
    """Each case's failures (one message a failing rank); a rank that never reported a case
    (it died, or the deadline passed) counts as failing it. The cases are `module`'s `CASES`."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    init_file = os.path.join(tmp_dir, f"rendezvous-{backend}")
    ranks = [context.Process(target=_rank_main, args=(rank, world_size, init_file, backend, names, reports, module),
                             daemon=True) for rank in range(world_size)]
    for process in ranks:
        process.start()
    got: dict[tuple[int, str], str | None] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < world_size * len(names) and time.monotonic() < deadline:
            try:
                rank, name, failure = reports.get(timeout=1.0)
                got[rank, name] = failure
            except queue.Empty:
                if not any(p.is_alive() for p in ranks):
                    break
    finally:
        for process in ranks:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
    failures: dict[str, list[str]] = {name: [] for name in [*names, "<process group>"]}
    for (rank, name), failure in got.items():
        if failure is not None:
            failures[name].append(f"rank {rank}:\n{failure}")
    for name in names:
        for rank in range(world_size):
            if (rank, name) not in got:
                failures[name].append(f"rank {rank} never reported (it died, or passed the {DEADLINE_S} s deadline)")
    return failures


def check_case(failures: dict[str, list[str]], name: str) -> None:
    found = failures["<process group>"] + failures[name]
    assert not found, "\n".join(found)


@pytest.fixture(scope="module")
def gloo_failures(tmp_path_factory):
    return run_in_ranks(str(tmp_path_factory.mktemp("dtensor")), "gloo", list(CASES))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_two_cpu_ranks(gloo_failures, name):
    check_case(gloo_failures, name)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_with_nccl(tmp_path, monkeypatch):
    check_on_two_gpus(tmp_path, monkeypatch, __name__, list(CASES))


def check_on_two_gpus(tmp_path, monkeypatch, module: str, names: list[str]) -> None:
    """A test module's cases in two ranks on two GPUs over NCCL, every rank's failures reported."""
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off; the ranks set it again before init
    failures = run_in_ranks(str(tmp_path), "nccl", names, 2, module)
    found = [f"{name}: {message}" for name, messages in failures.items() for message in messages]
    assert not found, "\n".join(found)


def cpu_worlds(module: str, names: list[str]) -> tuple[Callable, ...]:
    """The fixtures and tests that run a test module's cases in a world of 2 CPU ranks and one of 3
    (gloo), each case one test: the module assigns them to its names `two_ranks, three_ranks,
    test_two_cpu_ranks, test_three_cpu_ranks`, where pytest finds them."""
    @pytest.fixture(scope="module")
    def two_ranks(tmp_path_factory):
        return run_in_ranks(str(tmp_path_factory.mktemp("ranks2")), "gloo", names, 2, module)

    @pytest.fixture(scope="module")
    def three_ranks(tmp_path_factory):
        return run_in_ranks(str(tmp_path_factory.mktemp("ranks3")), "gloo", names, 3, module)

    @pytest.mark.slow
    @pytest.mark.parametrize("name", names)
    def test_two_cpu_ranks(two_ranks, name):
        check_case(two_ranks, name)

    @pytest.mark.slow
    @pytest.mark.parametrize("name", names)
    def test_three_cpu_ranks(three_ranks, name):
        check_case(three_ranks, name)

    return two_ranks, three_ranks, test_two_cpu_ranks, test_three_cpu_ranks


# ----------------------------------------------------------------------------- one rank, in this process
@pytest.fixture
def mesh(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def test_refusals_name_what_was_wrong_and_leave_everything_intact(mesh):
    x = distribute_tensor(torch.arange(6.0), mesh, [Shard(0)])
    with pytest.raises(jiter_magic.DeviceError, match=r"^input 1 is a plain torch.Tensor among DTensors"):
        ADD(x, torch.ones(6))
    with pytest.raises(jiter_magic.UnsupportedArrayError, match=r"^input 0 is a ndarray among DTensors"):
        ADD(np.ones(6), x)
    other = distribute_tensor(torch.arange(6.0), init_device_mesh("cpu", (1, 1)), [Shard(0), Replicate()])
    with pytest.raises(jiter_magic.DeviceError, match="put every DTensor of a call on one DeviceMesh"):
        ADD(x, other)
    with pytest.raises(jiter_magic.UnknownKwargError, match="b is not declared"):
        AXPY(x, x, b=1.0)
    with pytest.raises(jiter_magic.ShapeError, match="cannot be broadcast together"):
        ADD(x, distribute_tensor(torch.ones(4), mesh, [Shard(0)]))
    with pytest.raises(jiter_magic.InvalidArgumentError, match="out= must be DTensors like the inputs"):
        ADD(x, x, out=torch.empty(6))
    with pytest.raises(jiter_magic.BindError, match=r"has 2 output\(s\), but out= gives 1"):
        SUM_AND_TWICE(x, out=x)
    torch.testing.assert_close(x.full_tensor(), torch.arange(6.0))
    result = ADD(x, 1)
    assert isinstance(result, DTensor) and result.placements == (Shard(0),)
    torch.testing.assert_close(result.full_tensor(), torch.arange(6.0) + 1)
    torch.testing.assert_close(ADD(torch.arange(3.0), 1.0), torch.arange(3.0) + 1)  # plain tensors as before


def test_a_zero_dim_dtensor_and_an_error_inside_the_local_call(mesh):
    scalar = distribute_tensor(torch.tensor(2.0), mesh, [Replicate()])
    result = SQUARE(scalar)
    assert isinstance(result, DTensor) and result.shape == () and result.placements == (Replicate(),)
    assert result.full_tensor().item() == 4.0
    divide = jiter_magic.create_jit_fn("template <typename T> T dt_div(T x, T y) { return x / y; }")
    ints = distribute_tensor(torch.arange(4), mesh, [Shard(0)])
    with pytest.raises(jiter_magic.IntegerDivisionError):
        divide(ints, 0)
    torch.testing.assert_close(divide(ints, 2).full_tensor(), torch.arange(4) // 2)
