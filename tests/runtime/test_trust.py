"""Drop-in fidelity and memory safety on the CPU: what torch does, jiter_magic does; what a kernel
cannot read safely is refused before any launch, and the next good call still works."""
from __future__ import annotations

import array
import warnings

import numpy as np
import pytest
import torch

import jiter_magic
from jiter_magic import create_jit_fn, create_multi_output_jit_fn

ADD = create_jit_fn("template <typename T> T trust_add(T x, T y) { return x + y; }")
SCALE = create_jit_fn("template <typename T> T trust_scale(T x, T alpha) { return x * alpha; }", alpha=2.0)


def still_works() -> None:
    x = torch.arange(4.0)
    torch.testing.assert_close(ADD(x, x), 2 * x)
    np.testing.assert_array_equal(ADD(np.arange(3), np.arange(3)), np.arange(0, 6, 2))


# ----------------------------------------------------------------------------- torch's returns and rules
def test_single_output_of_the_multi_output_form_is_the_tensor_itself():
    fn = create_multi_output_jit_fn("template <typename T> void one(T x, T& out) { out = x * 3; }", 1)
    x = torch.arange(5.0)
    result = fn(x)
    assert isinstance(result, torch.Tensor)
    torch.testing.assert_close(result, 3 * x)
    out = torch.empty(5)
    assert fn(x, out=out) is out
    torch.testing.assert_close(out, 3 * x)


@pytest.mark.slow
@pytest.mark.parametrize("default", [torch.float64, torch.float32])
def test_python_floats_follow_torchs_default_dtype(default):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        ints = torch.arange(4, dtype=torch.int32)
        for scalar in (0.5, 1j):
            ours, theirs = ADD(ints, scalar), ints + scalar
            assert ours.dtype == theirs.dtype
            torch.testing.assert_close(ours, theirs)
        assert ADD(torch.ones(2, dtype=torch.float16), 0.5).dtype == torch.float16  # a tensor's dtype wins
    finally:
        torch.set_default_dtype(previous)
    assert ADD(torch.arange(2), 0.5).dtype == (torch.ones(1, dtype=torch.int64) + 0.5).dtype


@pytest.mark.slow
def test_python_integers_wrap_as_torch_does_and_overflow_beyond_64_bits():
    small = torch.ones(3, dtype=torch.int8)
    torch.testing.assert_close(ADD(small, 300), small + 300)  # both wrap to 45
    torch.testing.assert_close(ADD(small, 2**63), small + 2**63)
    with pytest.raises(jiter_magic.ScalarOverflowError, match="out of bounds"):
        ADD(small, 2**64)
    with pytest.raises(OverflowError):
        small + 2**64  # torch's own refusal
    still_works()


# ----------------------------------------------------------------------------- autograd: never a silent gap
def test_inputs_that_require_grad_give_a_result_whose_backward_raises():
    x = torch.arange(3.0, requires_grad=True)
    result = SCALE(x)
    assert result.requires_grad and result.grad_fn is not None
    torch.testing.assert_close(result.detach(), 2 * x.detach())
    with pytest.raises(jiter_magic.GradientError, match="trust_scale has no backward"):
        result.sum().backward()
    with torch.no_grad():
        plain = SCALE(x)
    assert not plain.requires_grad and plain.grad_fn is None
    again = SCALE(x)  # the hot path after a no-grad plan must not drop the grad_fn
    assert again.grad_fn is not None
    assert SCALE(x.detach()).grad_fn is None


def test_out_with_arguments_that_require_grad_is_refused_as_torch_refuses():
    x = torch.arange(3.0, requires_grad=True)
    with pytest.raises(jiter_magic.GradientError, match="out="):
        SCALE(x, out=torch.empty(3))
    leaf = torch.empty(3, requires_grad=True)
    with pytest.raises(jiter_magic.GradientError):
        SCALE(x.detach(), out=leaf)
    with pytest.raises(RuntimeError, match="out="):
        torch.add(x, x, out=torch.empty(3))
    with torch.no_grad():
        out = torch.empty(3)
        assert SCALE(x, out=out) is out
    torch.testing.assert_close(out, 2 * x.detach())


# ----------------------------------------------------------------------------- what a kernel cannot read
def _refused(make, error, match):
    with pytest.raises(error, match=match) as info:
        make()
    assert isinstance(info.value, jiter_magic.JiterError)
    still_works()
    return info.value


def test_sparse_nested_quantized_and_meta_tensors_are_refused_before_a_launch():
    dense = torch.ones(4)
    _refused(lambda: ADD(dense.to_sparse(), dense), jiter_magic.UnsupportedArrayError, "sparse_coo tensors")
    _refused(lambda: ADD(torch.ones(2, 2).to_sparse_csr(), torch.ones(2, 2)), jiter_magic.UnsupportedArrayError,
             "sparse_csr")
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    _refused(lambda: ADD(nested, nested), jiter_magic.UnsupportedArrayError, "nested tensors")
    with warnings.catch_warnings():  # torch warns (once a process) that quantized tensors are deprecated
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.quantize_per_tensor(dense, 0.1, 0, torch.qint8)
    _refused(lambda: ADD(quantized, quantized), jiter_magic.UnsupportedArrayError, "quantized tensors")
    meta = torch.ones(4, device="meta")
    _refused(lambda: ADD(meta, meta), jiter_magic.DeviceError, "'meta'")
    _refused(lambda: ADD(dense, dense.to_sparse()), jiter_magic.UnsupportedArrayError, "sparse")
    _refused(lambda: ADD(dense, dense, out=dense.to_sparse()), jiter_magic.UnsupportedArrayError, "sparse")


def test_a_storage_freed_under_a_view_is_refused_on_the_hot_path_too():
    """FSDP frees a parameter by resizing its storage to nothing; its pointer then lies in the first
    page, which keys the call apart from the live layout's plan, so the check runs again."""
    live = torch.ones(1000)
    torch.testing.assert_close(ADD(live, live), 2 * live)
    torch.testing.assert_close(ADD(live, live), 2 * live)  # the hot path now has this layout's plan
    freed = torch.ones(1000)
    freed.untyped_storage().resize_(0)
    for _ in range(2):
        with pytest.raises(jiter_magic.UnsupportedArrayError,
                           match=r"^this tensor's view reaches byte 4000 of its storage, which holds only 0 bytes"):
            ADD(freed, live)
    offset_view = torch.ones(1010)[10:]  # a view at an offset: needs 4040 bytes of a 4040-byte storage
    offset_view.untyped_storage().resize_(4000)
    with pytest.raises(jiter_magic.UnsupportedArrayError, match="reaches byte 4040 of its storage, which holds only 4000"):
        ADD(offset_view, 1.0)
    empty = torch.ones(0)
    empty.untyped_storage().resize_(0)
    assert ADD(empty, empty).shape == (0,)  # nothing to read: accepted
    still_works()


def test_a_storage_shrunk_under_a_view_is_refused_when_planned_and_on_every_call():
    """Each general call compares each tensor's room (pointer to storage end) with what the plan reads,
    and the hot path's key refuses a view past its storage (the Python hot path: tests/runtime/test_fast_call.py)."""
    live, other = torch.ones(1000), torch.ones(1000)
    for _ in range(2):
        torch.testing.assert_close(ADD(live, other), 2 * live)  # planned, then the hot path
    shrunk = torch.ones(1000)
    shrunk.untyped_storage().resize_(2000)  # same layout, same key: half the bytes it says it has
    for call in (lambda: ADD(shrunk, other), lambda: ADD(shrunk, 1.0), lambda: ADD(other, other, out=shrunk),
                 lambda: SCALE(shrunk, alpha=3.0), lambda: ADD(shrunk, np.float32(1.0))):
        with pytest.raises(jiter_magic.UnsupportedArrayError,
                           match=r"^this tensor's view reaches byte 4000 of its storage, which holds only 2000 bytes"):
            call()
    assert shrunk.untyped_storage().nbytes() == 2000
    offset_view = torch.ones(1010)[10:]  # fits its storage exactly: the same plan accepts it
    torch.testing.assert_close(ADD(offset_view, 1.0), 2 * other)
    offset_view.untyped_storage().resize_(4036)  # four bytes short
    with pytest.raises(jiter_magic.UnsupportedArrayError, match="reaches byte 4040 of its storage, which holds only 4036"):
        ADD(offset_view, 1.0)
    still_works()


def test_fake_tensors_go_through_the_operator_and_are_never_read():
    """A FakeTensor has no memory: its call is the function's torch operator, whose fake
    implementation only allocates the result (tests/integrations/test_torch_compile.py checks it fully)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.ones(4, 2))
    for _ in range(2):  # the general path, then what would be the hot path
        result = ADD(fake, fake.to(torch.float64))
        assert type(result).__name__ == "FakeTensor"
        assert (result.shape, result.dtype, result.stride()) == ((4, 2), torch.float64, (2, 1))
    still_works()


def test_a_dtensor_runs_on_its_local_shard_and_is_never_read_through_its_pointer(tmp_path):
    """A DTensor's data pointer covers one rank's shard: the call runs on `to_local()` shards
    (arrays/torch_dtensor.py; tests/integrations/test_dtensor.py covers placements on two ranks)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        sharded = distribute_tensor(torch.arange(8.0), mesh, [Shard(0)])
        for _ in range(3):  # the general path, then what would be the hot path
            result = ADD(sharded, sharded)
            assert isinstance(result, DTensor) and result.placements == (Shard(0),)
            torch.testing.assert_close(result.full_tensor(), 2 * torch.arange(8.0))
        _refused(lambda: ADD(sharded, torch.arange(8.0)), jiter_magic.DeviceError,
                 "input 1 is a plain torch.Tensor among DTensors")
    finally:
        dist.destroy_process_group()
    still_works()


def test_plain_subclasses_and_parameters_are_read_like_tensors():
    class Tagged(torch.Tensor):
        """A subclass with __torch_function__ only: its storage holds its values."""

    tagged = torch.arange(4.0).as_subclass(Tagged)
    torch.testing.assert_close(ADD(tagged, tagged).as_subclass(torch.Tensor), 2 * torch.arange(4.0))
    weight = torch.nn.Parameter(torch.arange(3.0))
    with torch.no_grad():
        for _ in range(3):  # the hot path too
            torch.testing.assert_close(ADD(weight, weight), 2 * torch.arange(3.0))


def test_masked_arrays_are_refused_and_buffers_are_read_in_their_format():
    masked = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
    _refused(lambda: ADD(masked, masked), jiter_magic.UnsupportedArrayError, "masked arrays")
    result = ADD(bytearray(b"ab"), 1)
    assert result.dtype == np.uint8 and result.tolist() == [98, 99]
    assert ADD(b"\x01\x02", bytearray(b"\x03\x04")).tolist() == [4, 6]
    floats = ADD(array.array("f", [1.0, 2.0]), 0.5)
    assert floats.dtype == np.float32 and floats.tolist() == [1.5, 2.5]
    assert ADD(memoryview(np.arange(3, dtype=np.int16)), 1).tolist() == [1, 2, 3]
