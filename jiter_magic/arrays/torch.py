"""torch tensors: CPU tensors for the host backend, CUDA tensors for the GPU backend."""
from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from jiter_magic.arrays.base import Described, FastKey, new_tuple
from jiter_magic.errors import DeviceError, DTypeError, GradientError, InvalidArgumentError, UnsupportedArrayError
from jiter_magic.native import call_path as fast_call
from jiter_magic.planning.layout import ArrayDesc

NAME_OF = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.float32: "float32", torch.float64: "float64", torch.complex64: "complex64",
    torch.complex128: "complex128", torch.uint16: "uint16", torch.uint32: "uint32", torch.uint64: "uint64",
}
DTYPE_OF = {name: dt for dt, name in NAME_OF.items()}
_raw_stream = torch._C._cuda_getCurrentRawStream if torch.cuda.is_available() else None

# Large CPU outputs go on transparent huge pages (see TorchAdapter.allocator).
HUGE_PAGE_THRESHOLD = 4 << 20
_HUGE = 2 << 20
_MADV_HUGEPAGE = 14


def _load_madvise() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _load_madvise()


def _on_huge_pages(allocate: Callable[[], torch.Tensor], nbytes: int) -> Callable[[], torch.Tensor]:
    def allocate_on_huge_pages() -> torch.Tensor:
        tensor = allocate()
        start = (tensor.data_ptr() + _HUGE - 1) & ~(_HUGE - 1)
        end = (tensor.data_ptr() + nbytes) & ~(_HUGE - 1)
        if end > start and _madvise is not None:
            _madvise(start, end - start, _MADV_HUGEPAGE)
        return tensor

    return allocate_on_huge_pages


_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})
_increment_version = torch.autograd.graph.increment_version


@functools.cache  # a fact about the type, asked on every general-path call
def _storage_backed(kind: type) -> bool:
    """Whether a tensor type's data_ptr() holds its values: no own __torch_dispatch__ (subclasses
    with one may hold a shard or nothing; DTensor, FakeTensor and FunctionalTensor never reach
    this adapter, see arrays/__init__.py)."""
    base = (torch.Tensor, torch._C.TensorBase, object)
    return not any("__torch_dispatch__" in c.__dict__ for c in kind.__mro__ if c not in base)


# The hot path's key of a call with n tensors: `_PART` fields a tensor, in one flat tuple, read
# by a function generated for n (unrolled: no loop, no per-tensor tuple, one pass), so that the
# key costs little more than the attribute reads themselves. A pointer in the first page (a
# storage freed to nothing under the view, as FSDP frees parameters) keys apart (-1), so that
# the general path checks and refuses it. The key carries no storage size (bytes from the pointer to
# the storage's end, see `check_storage`): reading it costs ~0.5 us a tensor, a tenth of a call's
# host cost; a storage resized smaller but not to nothing under a view is caught by the plan's
# `check_storage` on every call instead (docs/safety.md).
_PART = 9
_FIELDS = ("x{i}.dtype, x{i}.shape, x{i}.stride(), p{i} & 15 if p{i} > 4095 else -1, x{i}.device, "
           "x{i}.is_neg(), x{i}.is_conj(), type(x{i}), x{i}.requires_grad")


@functools.cache
def _fast_key_of(count: int) -> Callable[[tuple], FastKey | None]:
    names = [f"x{i}" for i in range(count)]
    pointers = [f"p{i}" for i in range(count)]
    source = "\n".join([
        "def fast_key(args):",
        "    try:",
        f"        {', '.join(names)}, = args",
        *(f"        p{i} = x{i}.data_ptr()" for i in range(count)),
        f"        return ({', '.join(_FIELDS.format(i=i) for i in range(count))},), [{', '.join(pointers)}]",
        "    except (AttributeError, TypeError, RuntimeError):  # not tensors; tensors without storage (sparse)",
        "        return None",
    ])
    scope: dict[str, Any] = {}
    exec(compile(source, f"<jiter_magic fast key of {count} tensors>", "exec"), scope)  # noqa: S102 - our own text
    return scope["fast_key"]


def _bytes_after_pointer(x: torch.Tensor) -> int:
    """Bytes from the tensor's pointer to the end of its storage."""
    storage = x.untyped_storage()
    return storage.data_ptr() + storage.nbytes() - x.data_ptr()


def _check_storage_covers(x: torch.Tensor) -> None:
    """Refuse a view that reaches past its storage: one whose storage was resized smaller after
    the view was made (`untyped_storage().resize_()`, as FSDP frees parameters), which a kernel
    would read out of bounds."""
    if x.numel() == 0:
        return
    last = x.storage_offset() + sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
    needed, held = (last + 1) * x.element_size(), x.untyped_storage().nbytes()
    if needed > held:
        raise UnsupportedArrayError(
            f"this tensor's view reaches byte {needed} of its storage, which holds only {held} bytes (the storage "
            "was resized under the view, e.g. by untyped_storage().resize_() or FSDP freeing a parameter); a "
            "kernel would read outside it: pass a tensor whose storage holds its values")


def _no_cuda_stream(device: int) -> int:
    raise DeviceError("torch was built without CUDA, so it has no CUDA stream")


class TorchAdapter:
    library = "torch"
    rules = "torch"
    delegates = False
    shrinkable = True  # untyped_storage().resize_() under a view (FSDP frees parameters so)
    keys_outputs = True  # its key refuses conj/neg views and tensors requiring grad, as check_output and autograd do

    def __init__(self) -> None:
        # The raw current-stream accessor itself, not a wrapper: the hot path calls it every launch.
        self.stream: Callable[[int], int] = _raw_stream or _no_cuda_stream
        # The C call path's torch module where it loads (native/loader.py): keys, output pointers
        # and allocations read through ATen. Decided once, when the first torch call makes the adapter.
        self.native = fast_call.current().torch_module()
        self.pointer: Callable[[torch.Tensor], int] = \
            torch.Tensor.data_ptr if self.native is None else self.native.data_ptr
        # The C key refuses a view that reaches past its storage itself; the Python key leaves that
        # to the plan's `check_storage`.
        self.key_checks_storage = self.native is not None

    def fast_key(self, args: tuple) -> FastKey | None:
        return self.fast_key_for(len(args))(args)

    def fast_key_for(self, count: int) -> Callable[[tuple], FastKey | None]:
        """The key read from C where the C call path is loaded (bytes: see `torch_key` in
        native/torch_fast_call.cpp; it keys only what a plan may be reused for), else in Python."""
        return _fast_key_of(count) if self.native is None else self.native.torch_key

    def reusable(self, key: tuple | bytes) -> bool:
        """Lazy conj/neg views, inputs requiring grad and subclasses never reuse a plan (the C key
        is None for them)."""
        if self.native is not None:
            return True
        return not (any(key[5::_PART]) or any(key[6::_PART]) or any(key[8::_PART])) and \
            all(kind in _PLAIN for kind in key[7::_PART])

    def materialize(self, x: torch.Tensor) -> torch.Tensor:
        """A tensor whose memory holds its values: lazy conj/neg views resolved; only dense CPU and
        CUDA tensors whose data pointer covers their values accepted, before anything is launched."""
        kind = type(x)
        if kind not in _PLAIN and not _storage_backed(kind):
            raise UnsupportedArrayError(
                f"{kind.__name__} is a tensor subclass with its own dispatch: its data_ptr() does not cover the "
                "values a kernel would read; pass a plain tensor (jiter_magic runs DTensor, FakeTensor and "
                "FunctionalTensor inputs their own way, but no other such subclass)")
        if x.layout is not torch.strided or x.is_nested or x.is_quantized:
            what = "nested" if x.is_nested else "quantized" if x.is_quantized else str(x.layout).replace("torch.", "")
            raise UnsupportedArrayError(f"{what} tensors are not supported; jiter_magic reads dense (strided) "
                                        "tensors: convert with .to_dense(), .dequantize() or torch.stack(...)")
        if x.device.type not in ("cpu", "cuda"):
            raise DeviceError(f"tensors on {x.device.type!r} are not supported; "
                              "jiter_magic runs on CPU and CUDA tensors")
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        return x

    def describe(self, x: torch.Tensor) -> Described:
        dtype, strides, pointer, device = x.dtype, x.stride(), x.data_ptr(), x.get_device()
        alignment = pointer % 16 if pointer > 4095 else -1  # as in the fast key: a freed storage plans apart
        return new_tuple(Described, ((dtype, x.shape, strides, alignment), pointer, device, x, dtype, strides))

    def check_storage(self, arrays: list, extents: tuple[int, ...]) -> None:
        """Refuse (UnsupportedArrayError) a tensor whose plan reaches past the end of its storage."""
        for x, needed in zip(arrays, extents):
            if _bytes_after_pointer(x) < needed:
                _check_storage_covers(x)

    def normalize(self, described: Described) -> ArrayDesc:
        """Once a plan: the array as planning sees it, after checking its storage covers it."""
        _check_storage_covers(described.array)
        try:
            name = NAME_OF[described.dtype]
        except KeyError:
            raise DTypeError(f"torch dtype {described.dtype} is not supported by jiter_magic") from None
        return ArrayDesc(name, tuple(described.array.shape), tuple(described.strides), described.pointer)

    def check_output(self, x: torch.Tensor) -> None:
        if x.is_conj() or x.is_neg():
            raise InvalidArgumentError("out= must not be a lazy conj/neg view; pass a plain tensor")
        self.check_writable((x,))

    def check_writable(self, outputs: tuple) -> None:
        """What the hot path's key cannot carry, checked before every `out=` launch: an inference
        tensor is written only inside `torch.inference_mode()`, as torch refuses an in-place
        update of one outside it (a plan made inside would otherwise serve a call outside)."""
        if not torch.is_inference_mode_enabled():
            for tensor in outputs:
                if tensor.is_inference():
                    raise GradientError("out= is an inference tensor outside inference mode, where torch "
                                        "refuses an in-place update of one; write into a clone, or call "
                                        "inside torch.inference_mode()")

    def written(self, outputs: list) -> None:
        """Bump the version counters of `out=` tensors, as an in-place op does, so that autograd
        refuses a backward through values that changed under it."""
        for tensor in outputs:
            _increment_version(tensor)

    def default_float(self) -> str:
        """What a Python float promotes to: torch's default dtype."""
        return NAME_OF.get(torch.get_default_dtype(), "float32")

    def gradient_inputs(self, items: list, outs: list | None) -> list:
        """The tensors that require grad while grad mode is on; with `out=` that is torch's error."""
        if not torch.is_grad_enabled():
            return []
        needing = [d.array for d in items if isinstance(d, Described) and d.array.requires_grad]
        if outs is not None and (needing or any(o.array.requires_grad for o in outs)):
            from jiter_magic.arrays.torch_autograd import out_with_grad

            raise out_with_grad()
        return needing

    def with_gradient(self, name: str, needing: list, results: list, backward: Any, args: tuple,
                      kwargs: dict) -> list:
        """Results tracked by autograd (torch_autograd.py): the jitted backward, or one that raises."""
        from jiter_magic.arrays.torch_autograd import with_gradient

        return with_gradient(name, needing, results, backward, args, kwargs)

    def allocator(self, shape: tuple[int, ...], strides: tuple[int, ...], dtype: str, like: Any) -> Callable[[], Any]:
        """Large CPU outputs are advised onto transparent huge pages, as NumPy does for its arrays:
        torch's allocator hands back fresh pages, and faulting 4 KiB pages in is otherwise slower
        than the kernel that fills them (17 ms against 5 ms for 64 MiB on the development machine)."""
        native = self.native
        nbytes = DTYPE_OF[dtype].itemsize
        for size in shape:
            nbytes *= size
        huge = like.device.type == "cpu" and nbytes >= HUGE_PAGE_THRESHOLD and _madvise is not None
        if native is not None and not huge:  # at::empty_strided from C++, no argument parsing
            return native.Allocator(tuple(shape), tuple(strides), DTYPE_OF[dtype], like.device)
        # A method of an empty tensor of the output's dtype and device (it holds no memory) takes no
        # keyword arguments to parse, unlike torch.empty_strided(..., dtype=, device=).
        template = torch.empty(0, dtype=DTYPE_OF[dtype], device=like.device)
        allocate = partial(template.new_empty_strided, shape, strides)
        if not huge:
            return allocate
        return _on_huge_pages(allocate, nbytes)

    def asarray(self, x: Any) -> torch.Tensor:
        return torch.as_tensor(x)


ADAPTER = TorchAdapter()
