"""One call of a reduction: describe the arrays, plan (dtypes, dims, layout, kernel shape), launch.

The arrays go through the same adapters as elementwise calls (arrays/); the plan is a frozen
`ReductionPlan` of pure planning records; the kernel comes from the function's `ReductionCalls`.
Every check of an argument happens before anything is allocated or launched.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from jiter_magic.arrays import BY_TYPE, adapter_for, coerce
from jiter_magic.arrays.base import ArrayAdapter, Delegated, DelegatingAdapter
from jiter_magic.errors import (
    ArgumentTypeError,
    BindError,
    DeviceError,
    DTypeError,
    GradientError,
    ShapeError,
    UnknownKwargError,
    device_name,
)
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels import reduce_cuda, reduce_host
from jiter_magic.kernels.reduce_common import reduce_args
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.reduce_layout import (
    ReductionLayout,
    dense_strides,
    plan_reduction_layout,
)
from jiter_magic.planning.reduce_result import reduction_result
from jiter_magic.planning.reduce_spec import (
    ReductionSpec,
    identity_literal,
)
from jiter_magic.planning.resolve import check_written
from jiter_magic.planning.values import scalar_kind, scalar_value
from jiter_magic.runtime import reduce_hot
from jiter_magic.runtime.reduce_calls import ReductionCalls


@dataclass(frozen=True, slots=True)
class ReductionPlan:
    """What one call runs: the kernel's spec, its layout, the grid reduction's blocks a row, and
    the loop geometry its `jm_Args` end with (fixed by the layout, so packed once, not a call)."""

    spec: ReductionSpec
    layout: ReductionLayout
    blocks: int
    geometry: tuple[int, ...]
    out_strides: tuple[int, ...]  # of a result allocated for the call: dense


def no_backward(name: str, indexed: bool = False) -> GradientError:
    """What a call of a reduction without `def_backward` raises where autograd tracks an input."""
    takes = "a functor of the inputs at each result's index, the value and its gradient" if indexed else \
        "a functor of the inputs, the result and its gradient"
    return GradientError.no_backward(name, takes + ", writing one gradient an input", ", and an input requires grad")


def check_input_count(binding: ReductionBinding, args: tuple) -> None:
    if len(args) != binding.num_inputs:
        raise BindError(f"{binding.name} takes {binding.num_inputs} input array(s) {list(binding.input_names)}, "
                        f"got {len(args)}")


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
                raise ArgumentTypeError(f"{binding.name}: the inputs of a reduction are arrays, got the number "
                                        f"{x!r}; pass numbers as keyword arguments of the map function")
            x, a = coerce(x)
        if a.delegates:  # Dask arrays, traced tensors: ReductionFunction hands the call to their integration
            raise Delegated(cast(DelegatingAdapter, a))
        x = a.materialize(x)
        described = a.describe(x)
        if adapter is None:
            adapter, device = a, described.device
            calls.check_backend(device)
        elif a is not adapter:
            raise DeviceError(f"inputs mix {adapter.library} and {a.library} arrays; convert them to one library")
        elif described.device != device:
            raise DeviceError(f"inputs live on different devices ({device_name(device)} and "
                              f"{device_name(described.device)}); move them to one device")
        arrays.append(x)
        raw.append(described)
        descs.append(a.normalize(described))
    assert adapter is not None  # a binding has at least one input
    if adapter.gradient_inputs(raw, None):
        raise no_backward(binding.name, binding.indexed)
    return arrays, descs, adapter, device


def extra_values(binding: ReductionBinding, defaults: dict[str, object], given: dict[str, object]) -> list:
    """The map's extras, a call's keywords over the defaults, in the map's declared order."""
    for name in given:
        if name not in defaults:
            raise UnknownKwargError.naming(name, list(defaults) + ["dim", "keepdim", "dtype", "out"])
    values = {**defaults, **{name: scalar_value(value, name) for name, value in given.items()}}
    return [values[name] for name in binding.extra_names]


def checked_out(out: tuple[ArrayDesc, ...], expected: tuple[int, ...], dtypes: Sequence[str], result: str,
                verb: str = "reduce") -> None:
    """`out=` arrays of the result's shape and dtypes (the values', then the indices' int64, or each
    value of a scan's state); `result` names the result in a message, `verb` what a call does."""
    for position, (desc, wanted) in enumerate(zip(out, dtypes)):
        which = "out=" if len(out) == 1 else f"out[{position}]"
        if desc.shape != expected:
            raise ShapeError(f"{which} has shape {desc.shape}, but {result} has shape {expected}")
        if desc.dtype != wanted:
            hint = f"pass dtype={desc.dtype} to {verb} into it, or " if position == 0 or wanted != "int64" else ""
            raise DTypeError(f"{which} has dtype {desc.dtype}, but the result is {wanted}; {hint}an {which} of "
                             f"dtype {wanted}")


def plan_call(binding: ReductionBinding, descs: list[ArrayDesc], rules: str, device: int, identity: object,
              extras: list, dim: object, keepdim: bool, requested: str | None,
              out: tuple[ArrayDesc, ...] | None) -> ReductionPlan:
    """Everything a call's launch needs, checked: dtypes, dims, `out=`, the layout and the kernel."""
    indexed = binding.indexed
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
                         indices_given=binding.indices_given)
    return ReductionPlan(spec, layout, blocks, loop_geometry(spec, layout), dense_strides(layout.out_shape))


def _padded(values: tuple[int, ...], length: int, fill: int) -> list[int]:
    return list(values) + [fill] * (length - len(values))


def loop_geometry(spec: ReductionSpec, layout: ReductionLayout) -> tuple[int, ...]:
    """The kept sizes and strides, then the reduced ones, padded to the spec's loop dims."""
    values = _padded(layout.kept_sizes, spec.kept_ndim, 1)
    for strides in layout.kept_strides:
        values += _padded(strides, spec.kept_ndim, 0)
    values += _padded(layout.reduced_sizes, spec.reduced_ndim, 1)
    for strides in layout.reduced_strides:
        values += _padded(strides, spec.reduced_ndim, 0)
    return tuple(values)


def packed_values(plan: ReductionPlan, out_pointers: list[int], pointers: list[int], partials: int, stage: int,
                  extras: list) -> list:
    """The `jm_Args` values of a launch before its loop geometry (`plan.geometry`), in `reduce_args`
    order (`out_pointers`: the result's, then the indices' output's with indices)."""
    spec, layout = plan.spec, plan.layout
    values: list = [*out_pointers, *pointers, partials, layout.rows, layout.count, plan.blocks, stage]
    values += [bool(v) if kind == "bool" else float(v) if kind == "float64" else int(v)
               for v, kind in zip(extras, spec.extras)]
    return values


def _memo_key(adapter: ArrayAdapter, descs: list[ArrayDesc], device: int, extras: list, options: dict[str, Any],
              requested: str | None, out: tuple[ArrayDesc, ...] | None) -> tuple | None:
    """What decides a call's plan, as a hashable tuple (None where a `dim=` cannot be hashed): the
    array library (its promotion rules and allocators), every field of the inputs' and `out=`'s
    descriptions but the pointers, whose alignment alone counts."""
    dim = options["dim"]
    # Typed, so that dim=True (refused) never finds dim=1's plan, though True == 1 in a dict key.
    dim = tuple((type(d), d) for d in dim) if isinstance(dim, (list, tuple)) else (type(dim), dim)
    arrays = tuple((d.dtype, d.shape, d.strides, d.pointer % 16) for d in descs)
    written = None if out is None else tuple((d.dtype, d.shape, d.strides) for d in out)
    keepdim = options["keepdim"]
    key = (adapter, arrays, device, tuple(scalar_kind(v) for v in extras), dim, (type(keepdim), keepdim), requested,
           written)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _planned(calls: ReductionCalls, descs: list[ArrayDesc], adapter: ArrayAdapter, device: int, identity: object,
             extras: list, options: dict[str, Any], requested: str | None,
             out: tuple[ArrayDesc, ...] | None) -> ReductionPlan:
    """The call's plan: from the function's memo of plans, or planned (and checked) now and kept."""
    rules = adapter.rules
    key = _memo_key(adapter, descs, device, extras, options, requested, out)
    plan = calls.plans.get(key) if key is not None else None
    if plan is None:
        plan = plan_call(calls.binding, descs, rules, device, identity, extras, options["dim"], options["keepdim"],
                         requested, out)
        if key is not None:
            calls.plans.put(key, plan, plan.spec)
    return plan


def run(calls: ReductionCalls, identity: object, defaults: dict[str, object], args: tuple,
        options: dict[str, Any], given: dict[str, object]) -> Any:
    """A whole call: `options` holds dim, keepdim, dtype and out."""
    binding = calls.binding
    calls.counts.general += 1
    arrays, descs, adapter, device = described_inputs(args, calls)
    extras = extra_values(binding, defaults, given)
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    out = options["out"]
    outs, out_descs = out_arrays(out, binding, adapter, device, descs)
    plan = _planned(calls, descs, adapter, device, identity, extras, options, requested, out_descs)
    layout, spec = plan.layout, plan.spec
    if outs is None:
        dtypes = [spec.output, "int64"] if spec.indexed else [spec.output]
        outs = [adapter.allocator(layout.out_shape, plan.out_strides, d, arrays[0])() for d in dtypes]
    result = ValuesIndices(*outs) if spec.indexed else outs[0]
    if layout.rows == 0:
        return result
    launcher = calls.launcher(spec, device)
    stream = adapter.stream(device) if device >= 0 else 0
    partials, keep = 0, None
    if device >= 0 and plan.blocks > 1:
        size, kind = reduce_cuda.partials_of(spec, layout.rows, plan.blocks)
        keep = adapter.allocator((size,), (1,), kind, arrays[0])()
        partials = adapter.pointer(keep)
    if out is None and not given:  # leave a C hot path for the calls keyed like this one
        def packed(stage: int) -> bytes:  # a launch's jm_Args with every pointer 0
            values = packed_values(plan, [0] * len(outs), [0] * len(descs), 0, stage, extras)
            return reduce_args(spec).packer.pack(*values, *plan.geometry)

        reduce_hot.keep_hot(calls, args, options, plan, adapter, device, packed,
                            ValuesIndices if spec.indexed else None)
    pointers = [d.pointer for d in descs]
    out_pointers = [adapter.pointer(o) for o in outs]
    launches = reduce_cuda.launches(spec, layout.rows, plan.blocks) if device >= 0 else [((1, 1, 1), (1, 1, 1), 0)]
    for grid, _block, stage in launches:
        launcher(packed_values(plan, out_pointers, pointers, partials, stage, extras), plan.geometry, grid, stream)
    del keep  # the partials stay allocated until the launches are queued: the allocator orders reuse on the stream
    if out is not None:
        adapter.written(list(outs))
    return result


def out_arrays(given: object, binding: ReductionBinding, adapter: ArrayAdapter, device: int,
               inputs: list[ArrayDesc]) -> tuple[list | None, tuple[ArrayDesc, ...] | None]:
    """The `out=` arrays of a call and their descriptions, checked for their library, writability,
    device, gradient and memory (planning/resolve.py's `check_written`, against `inputs`): one array,
    with indices a (values, indices) pair as torch.max(x, dim, out=...) takes, or a tuple of as many
    arrays as `binding.outputs` says."""
    if given is None:
        return None, None
    if binding.indexed:
        if not isinstance(given, (tuple, list)) or len(given) != 2:
            raise ArgumentTypeError(f"{binding.name} gives values and their indices: out= takes a (values, indices) "
                                    f"pair of arrays, got {type(given).__name__}")
        outs = list(given)
    elif binding.outputs > 1:  # a scan whose state holds several values gives each of them
        if not isinstance(given, (tuple, list)) or len(given) != binding.outputs:
            raise ArgumentTypeError(f"{binding.name} gives {binding.outputs} arrays, one a value of its state: out= "
                                    f"takes a tuple of {binding.outputs} arrays, got {type(given).__name__}")
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
    check_written(descs, inputs)
    return outs, tuple(descs)


class ValuesIndices(NamedTuple):
    """The result of a reduction with indices, as torch.max(x, dim) returns it."""

    values: Any
    indices: Any
