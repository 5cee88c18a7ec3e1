"""Specs without a call: the generated source of a specialization, and eager compiles.

`fn.source(...)` and `fn.compile(...)` need no GPU and no arrays: a spec comes from dtype
names (dense inputs, a chosen path) or from example inputs planned as a call would be.
"""
from __future__ import annotations

from jiter_magic.arrays.base import Delegated
from jiter_magic.errors import BindError, InvalidArgumentError
from jiter_magic.kernels.base import widest_vector
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.kernels.render import render
from jiter_magic.kernels.specialize import resolve_call
from jiter_magic.planning import dtypes as dt
from jiter_magic.planning.spec import CONTIGUOUS, ROWS, STRIDED, KernelSpec, PathParams
from jiter_magic.runtime.dispatch import Dispatcher
from jiter_magic.runtime.planner import normalized

BACKEND_NAMES = ("cuda", "cpu")


def cuda_available() -> bool:
    """Whether a CUDA device can run kernels here (CuPy installed and a device visible)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no device all mean "no"
        return False


def cuda_device_name(device: int | None = None) -> str:
    """'cuda:0, NVIDIA H200' for the current (or given) device."""
    import cupy

    index = cupy.cuda.runtime.getDevice() if device is None else device
    name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
    return f"cuda:{index}, {name.decode() if isinstance(name, bytes) else name}"


def spec_for_dtypes(names: list[str], extras: tuple[str, ...], num_outputs: int, backend: str, path: str,
                    ndim: int) -> KernelSpec:
    """The spec of a call on dense arrays of the given dtypes."""
    for name in names:
        dt.dtype(name)
    if path not in (CONTIGUOUS, STRIDED):
        raise InvalidArgumentError(f"path must be {CONTIGUOUS!r} or {STRIDED!r}, got {path!r}")
    common = dt.torch_result_type(tuple((n, dt.DIMENSIONED) for n in names))
    cuda = backend == "cuda"
    vec = widest_vector([common, *names]) if cuda and path == CONTIGUOUS else 1
    params = ContiguousParams(vec) if path == CONTIGUOUS else PathParams()
    return KernelSpec(tuple(names), (False,) * len(names), (common,) * num_outputs, dt.compute_dtype(common),
                      extras, path=path, ndim=ndim if path == STRIDED else 1, index64=not cuda, params=params)


def named_spec(dispatcher: Dispatcher, dtypes: tuple, backend: str, path: str, ndim: int) -> KernelSpec:
    """The spec for dtype names (all float32 when none are given)."""
    count = len(dispatcher.input_names)
    names = list(dtypes) or ["float32"] * count
    if len(names) != count:
        raise BindError(f"{dispatcher.name} takes {count} input(s), got {len(names)} dtypes")
    return spec_for_dtypes(names, dispatcher.keywords.default_kinds, dispatcher.num_outputs, backend, path, ndim)


def example_spec(dispatcher: Dispatcher, args: tuple, backend: str, kwargs: dict) -> KernelSpec:
    """The spec a call on these example inputs would run on `backend`."""
    if len(args) != len(dispatcher.input_names):
        raise BindError(f"{dispatcher.name} takes {len(dispatcher.input_names)} input(s), got {len(args)}")
    kinds = dispatcher.keywords.of_call(kwargs)[1] if kwargs else dispatcher.keywords.default_kinds
    try:
        items, _parts, adapter, _device = dispatcher.describe(args, check_backend=False)
    except Delegated as delegated:
        raise InvalidArgumentError(
            f"example inputs must be arrays a kernel reads (torch tensors, NumPy or CuPy arrays) or numbers, not "
            f"{delegated.adapter.library} arrays that run calls their own way (DTensor, Dask, traced tensors): pass "
            "a local shard (x.to_local()), a block, or dtype names") from None
    spec, _layout = resolve_call(normalized(items, adapter), adapter.rules, backend, None, kinds,
                                 dispatcher.num_outputs, adapter.default_float())
    return spec


def source(dispatcher: Dispatcher, args: tuple, backend: str, path: str, ndim: int, kwargs: dict) -> str:
    """Dtype names or example inputs to the generated source of their specialization."""
    if backend not in BACKEND_NAMES:
        raise InvalidArgumentError(f"backend must be 'cuda' or 'cpu', got {backend!r}")
    if all(isinstance(d, str) for d in args):
        spec = named_spec(dispatcher, args, backend, path, ndim)
    else:
        spec = example_spec(dispatcher, args, backend, kwargs)
    return render(dispatcher.loader.binding, spec, backend)


def cuda_counterpart(spec: KernelSpec) -> KernelSpec:
    """The CUDA spec of the call a host `spec` was made for, to read its PTX or SASS without a GPU:
    the same dtypes, scalar kinds, outputs and extras; the contiguous path with CUDA's vector width,
    the rows path as it is, and the host's blocked or strided loops as CUDA's strided path (the
    tiled path's tiles depend on the call's shape, which a spec does not keep)."""
    if spec.path == CONTIGUOUS:
        vec = widest_vector([spec.compute, *spec.inputs, *spec.outputs])
        return spec._replace(index64=False, params=ContiguousParams(vec))
    if spec.path == ROWS:
        return spec._replace(index64=False)
    return spec._replace(path=STRIDED, index64=False, params=PathParams())
