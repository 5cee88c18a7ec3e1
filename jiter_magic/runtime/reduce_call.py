"""One call of a reduction or a scan: describe the arrays, plan (dtypes, dims, layout, kernel shape), launch.

The arrays go through the same adapters as elementwise calls (arrays/); the plan is a frozen
`FoldPlan` of pure planning records; the kernel comes from the function's `ReductionCalls`.
Every stage here serves both kinds: a call's inputs, extras and `out=` arrays, its plan kept under
a key of everything that decides it, the results' allocation, the launches and the C hot path left
for calls keyed alike (reduce_hot.py). What is a kind's own is its `CallKind`: the options that
key a plan and how it is made; a scan's is in scan_call.py. Every check of an argument happens
before anything is allocated or launched.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from jiter_magic.arrays import BY_TYPE, adapter_for, coerce
from jiter_magic.arrays.base import ArrayAdapter, Delegated, DelegatingAdapter
from jiter_magic.errors import (
    ArgumentTypeError,
    BindError,
    DeviceError,
    GradientError,
    device_name,
    mixed_inputs,
)
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels import reduce_cuda, reduce_host
from jiter_magic.kernels.reduce_cuda_loads import narrow
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.reduce_layout import dense_strides, loop_values, plan_reduction_layout
from jiter_magic.planning.reduce_result import checked_out, reduction_result
from jiter_magic.planning.reduce_spec import ReductionSpec, identity_literal
from jiter_magic.planning.resolve import check_written
from jiter_magic.planning.values import scalar_kind, scalar_value
from jiter_magic.runtime import reduce_hot
from jiter_magic.runtime.keywords import check_kwarg_names
from jiter_magic.runtime.reduce_calls import ReductionCalls

Launches = tuple[tuple[tuple[int, int, int], int], ...]  # (grid, stage) of each launch


class ValuesIndices(NamedTuple):
    """The result of a reduction with indices, as torch.max(x, dim) returns it."""

    values: Any
    indices: Any


def _as_tuple(*outs: Any) -> tuple:
    """The results of a scan whose state holds several values: a tuple, one array a value."""
    return outs


@dataclass(frozen=True, slots=True)
class FoldPlan:
    """What one call of a reduction or a scan runs: the kernel's spec and layout, the results a call
    without `out=` allocates, and the launches with the `jm_Args` values the layout fixes (so packed
    once, not a call): `counts` go between the partials' pointer and the stage, `geometry` last."""

    spec: Any  # a ReductionSpec or a ScanSpec
    layout: Any  # a ReductionLayout or a ScanLayout
    blocks: int  # blocks a row of the first launch (the partials a row of a grid path)
    shape: tuple[int, ...]  # the results' shape, and their strides when a call allocates them: dense
    strides: tuple[int, ...]
    dtypes: tuple[str, ...]  # each result's
    counts: tuple[int, ...]  # rows, count and blocks (and a scan's reverse)
    launches: Launches  # none where there is nothing to compute
    partials: tuple[int, str] | None  # the size and dtype of what a launch leaves the next, on CUDA
    geometry: tuple[int, ...]

    @property
    def wrap(self) -> Callable[..., Any] | None:
        """What makes a call's result of its outputs (None: one output, as is)."""
        return ValuesIndices if self.spec.indexed else None if len(self.dtypes) == 1 and not self.spec.tupled \
            else _as_tuple


@dataclass(frozen=True, slots=True)
class CallKind:
    """What a reduction's call and a scan's do their own way: the options besides `dtype=` and
    `out=` that key a plan, how a plan is made, and the options as part of a hot key (reduce_hot.py)."""

    keyed: tuple[str, ...]
    plan: Callable[..., FoldPlan]  # (binding, descs, rules, device, identity, extras, options, requested, out)
    hot_options: Callable[[dict[str, Any]], tuple | None]


def no_backward(name: str, indexed: bool = False) -> GradientError:
    """What a call of a reduction without `def_backward` raises where autograd tracks an input."""
    takes = "a functor of the inputs at each result's index, the value and its gradient" if indexed else \
        "a functor of the inputs, the result and its gradient"
    return GradientError.no_backward(name, takes + ", writing one gradient an input", ", and an input requires grad")


def check_input_count(binding: ReductionBinding, args: tuple) -> None:
    if len(args) != binding.num_inputs:
        raise BindError(f"{binding.name} takes {binding.num_inputs} input array(s) {list(binding.input_names)}, "
                        f"got {len(args)}")


def number_input(name: str, value: object) -> ArgumentTypeError:
    """What a call raises for a number given as an input (the integrations raise it too)."""
    return ArgumentTypeError(f"{name}: the inputs of a reduction are arrays, got the number {value!r}; pass numbers "
                             "as keyword arguments of the map function")


def described_inputs(args: tuple, calls: ReductionCalls) -> tuple[list[Any], list[ArrayDesc], ArrayAdapter, int]:
    """Each input array, its description, and the one adapter and device they share (checked
    against the function's backend)."""
    binding = calls.binding
    check_input_count(binding, args)
    arrays, descs, adapter, device = [], [], None, -1
    raw = []  # the descriptions before normalizing, as gradient_inputs reads them
    for x in args:
        a = BY_TYPE.get(type(x)) or adapter_for(x)
        if a is None:
            if isinstance(x, (bool, int, float, complex)):
                raise number_input(binding.name, x)
            x, a = coerce(x)
        if a.delegates:  # Dask arrays, traced tensors: ReductionFunction hands the call to their integration
            raise Delegated(cast(DelegatingAdapter, a))
        x = a.materialize(x)
        described = a.describe(x)
        if adapter is None:
            adapter, device = a, described.device
            calls.check_backend(device)
        elif a is not adapter or described.device != device:
            raise mixed_inputs((adapter.library, a.library), (device, described.device))
        arrays.append(x)
        raw.append(described)
        descs.append(a.normalize(described))
    assert adapter is not None  # a binding has at least one input
    if adapter.gradient_inputs(raw, None):
        raise no_backward(binding.name, binding.indexed)
    return arrays, descs, adapter, device


def extra_values(binding: ReductionBinding, defaults: dict[str, object], given: dict[str, object]) -> list:
    """The map's extras, a call's keywords over the defaults, in the map's declared order."""
    check_kwarg_names(given, defaults, ("dim", "keepdim", "dtype", "out"))
    values = {**defaults, **{name: scalar_value(value, name) for name, value in given.items()}}
    return [values[name] for name in binding.extra_names]


def out_arrays(given: object, binding: ReductionBinding, adapter: ArrayAdapter, device: int,
               inputs: list[ArrayDesc]) -> tuple[list | None, tuple[ArrayDesc, ...] | None, tuple[tuple, tuple]]:
    """The `out=` arrays of a call and their descriptions, checked for their library, writability,
    device, gradient and memory (planning/resolve.py's `check_written`, against `inputs`): one array,
    with indices a (values, indices) pair as torch.max(x, dim, out=...) takes, or a tuple of as many
    arrays as `binding.outputs` says; then the overlap pairs `check_written` checked."""
    if given is None:
        return None, None, ((), ())
    if binding.indexed:
        if not isinstance(given, (tuple, list)) or len(given) != 2:
            raise ArgumentTypeError(f"{binding.name} gives values and their indices: out= takes a (values, indices) "
                                    f"pair of arrays, got {type(given).__name__}")
        outs = list(given)
    elif binding.tupled:  # a scan whose state holds several values gives each of them (or each kept one)
        if not isinstance(given, (tuple, list)) or len(given) != binding.outputs:
            arrays = f"{binding.outputs} array{'s' if binding.outputs > 1 else ''}"
            raise ArgumentTypeError(f"{binding.name} gives {arrays}, one a value of its state: out= takes a tuple "
                                    f"of {arrays}, got {type(given).__name__}")
        outs = list(given)
    else:
        outs = [given]
    described = []
    for out in outs:
        if adapter_for(out) is not adapter:
            raise ArgumentTypeError(f"out= must be a {adapter.library} array like the inputs, "
                                    f"got {type(out).__name__}")
        adapter.check_output(out)
        described.append(adapter.describe(out))
        if described[-1].device != device:
            raise DeviceError(f"out= lives on {device_name(described[-1].device)}, the inputs on {device_name(device)}")
    adapter.gradient_inputs([], described)  # an out= that requires grad: torch's own refusal
    descs = [adapter.normalize(d) for d in described]
    return outs, tuple(descs), check_written(descs, inputs)


def _typed(value: object) -> object:
    # Typed, so that dim=True (refused) never finds dim=1's plan, though True == 1 in a dict key.
    return tuple((type(v), v) for v in value) if isinstance(value, (list, tuple)) else (type(value), value)


def _memo_key(kind: CallKind, adapter: ArrayAdapter, descs: list[ArrayDesc], device: int, extras: list,
              options: dict[str, Any], requested: str | None, out: tuple[ArrayDesc, ...] | None) -> tuple | None:
    """What decides a call's plan, as a hashable tuple (None where an option cannot be hashed): the
    array library (its promotion rules and allocators), every field of the inputs' and `out=`'s
    descriptions but the pointers, whose alignment alone counts, and the kind's options, typed."""
    arrays = tuple((d.dtype, d.shape, d.strides, d.pointer % 16) for d in descs)
    written = None if out is None else tuple((d.dtype, d.shape, d.strides) for d in out)
    typed = tuple(_typed(options[name]) for name in kind.keyed)
    key = (adapter, arrays, device, tuple(scalar_kind(v) for v in extras), typed, requested, written)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def call(kind: CallKind, calls: ReductionCalls, identity: object, defaults: dict[str, object], args: tuple,
         options: dict[str, Any], given: dict[str, object]) -> Any:
    """A whole call of either kind: `options` holds the kind's options, `dtype` and `out`."""
    binding = calls.binding
    out = options["out"]
    if out is not None and not given and calls.hot:  # out= torch tensors keyed like a call before
        found = reduce_hot.hot_out_run(calls, args, out, kind.hot_options(options))
        if found is not None:
            return found
    calls.counts.general += 1
    arrays, descs, adapter, device = described_inputs(args, calls)
    extras = extra_values(binding, defaults, given)
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    outs, out_descs, pairs = out_arrays(out, binding, adapter, device, descs)
    key = _memo_key(kind, adapter, descs, device, extras, options, requested, out_descs)
    plan = calls.plans.get(key) if key is not None else None
    if plan is None:
        plan = kind.plan(binding, descs, adapter.rules, device, identity, extras, options, requested, out_descs)
        if key is not None:
            calls.plans.put(key, plan, plan.spec)
    if outs is None:
        outs = [adapter.allocator(plan.shape, plan.strides, d, arrays[0])() for d in plan.dtypes]
    wrap = plan.wrap
    result = outs[0] if wrap is None else wrap(*outs)
    if not plan.launches:
        return result
    launcher = calls.loader.launcher(plan.spec, device)
    stream = adapter.stream(device) if device >= 0 else 0
    partials, keep = 0, None
    if plan.partials is not None:
        keep = adapter.allocator((plan.partials[0],), (1,), plan.partials[1], arrays[0])()
        partials = adapter.pointer(keep)
    tail = [bool(v) if scalar == "bool" else float(v) if scalar == "float64" else int(v)  # as jm_Args takes them
            for v, scalar in zip(extras, plan.spec.extras)]
    if out is None and not given:  # leave a hot path for calls alike
        reduce_hot.keep_hot(calls, args, kind.hot_options(options), plan, tail, adapter, device)
    elif out_descs is not None and not given:
        reduce_hot.keep_hot_out(calls, args, outs, kind.hot_options(options), plan, tail, adapter, device, pairs)
    head = [*(adapter.pointer(o) for o in outs), *(d.pointer for d in descs), partials, *plan.counts]
    for grid, stage in plan.launches:
        launcher([*head, stage, *tail], plan.geometry, grid, stream)
    del keep  # the partials stay allocated until the launches are queued: the allocator orders reuse on the stream
    if out is not None:
        adapter.written(list(outs))
    return result


def plan_call(binding: ReductionBinding, descs: list[ArrayDesc], rules: str, device: int, identity: object,
              extras: list, options: dict[str, Any], requested: str | None,
              out: tuple[ArrayDesc, ...] | None) -> FoldPlan:
    """Everything a reduction's launch needs, checked: dtypes, dims, `out=`, the layout and the kernel."""
    indexed, dim, keepdim = binding.indexed, options["dim"], options["keepdim"]
    # Given indices are int64 positions, not values: the values' dtype alone decides the result's.
    valued = descs[:1] if binding.indices_given else descs
    planned = reduction_result([d.dtype for d in valued], [d.shape for d in descs], rules, dim, keepdim,
                               requested, identity, indexed)
    result, accumulate, shape, dims = planned.dtype, planned.accumulate, planned.shape, planned.dims
    if out is not None:
        checked_out(out, planned.out_shape, (result, "int64"), f"the result of reducing dims {list(dims)} of shape "
                    f"{shape} (keepdim={bool(keepdim)})")
    layout = plan_reduction_layout(shape, [(d.shape, d.strides) for d in descs], dims, bool(keepdim),
                                   None if out is None else out[0].strides, indexed=indexed,
                                   index_strides=None if out is None or not indexed else out[1].strides)
    inputs = tuple(d.dtype for d in descs)
    path, vec, blocks = reduce_host.choose_path(layout), 1, 1
    if device >= 0:
        path, vec = reduce_cuda.choose_path(layout, inputs, [d.pointer for d in descs])
        blocks = reduce_cuda.blocks_a_row(path, layout)
    spec = ReductionSpec(inputs, result, accumulate, tuple(scalar_kind(v) for v in extras),
                         identity_literal(identity, accumulate), path=path, kept_ndim=max(len(layout.kept_sizes), 1),
                         reduced_ndim=max(len(layout.reduced_sizes), 1), vec=vec, indexed=indexed,
                         indices_given=binding.indices_given,
                         index32=device >= 0 and indexed and not binding.indices_given
                         and narrow(layout.count, path, vec))
    launches = reduce_cuda.launches(spec, layout.rows, blocks) if device >= 0 else [((1, 1, 1), (1, 1, 1), 0)]
    geometry = loop_values(layout.kept_sizes, layout.kept_strides, spec.kept_ndim) + \
        loop_values(layout.reduced_sizes, layout.reduced_strides, spec.reduced_ndim)
    return FoldPlan(spec, layout, blocks, layout.out_shape, dense_strides(layout.out_shape),
                    (result, "int64") if indexed else (result,), (layout.rows, layout.count, blocks),
                    tuple((grid, stage) for grid, _block, stage in launches) if layout.rows else (),
                    reduce_cuda.partials_of(spec, layout.rows, blocks) if device >= 0 and blocks > 1 else None,
                    tuple(geometry))


REDUCE = CallKind(("dim", "keepdim"), plan_call, reduce_hot.call_options)


def run(calls: ReductionCalls, identity: object, defaults: dict[str, object], args: tuple,
        options: dict[str, Any], given: dict[str, object]) -> Any:
    """A whole call of a reduction: `options` holds dim, keepdim, dtype and out."""
    return call(REDUCE, calls, identity, defaults, args, options, given)
