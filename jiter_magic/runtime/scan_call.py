"""One call of a scan: describe the arrays, plan (dtypes, the dim, layout, kernel shape), launch.

A scan rides a reduction's call stages: its inputs are described and checked as a reduction's
(reduce_call.described_inputs), its extras and `out=` arrays likewise, its plans kept in the
function's `ReductionCalls` (built with the scan family of kernels) under a key of everything
that decides them. What is a scan's own is its plan: `planning/scan_plan.py`'s result, layout and
spec, and the kernel shape chosen for them. Every check happens before anything is allocated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jiter_magic.arrays.base import ArrayAdapter
from jiter_magic.errors import ArgumentTypeError
from jiter_magic.frontend.scan import ScanBinding
from jiter_magic.kernels import scan_cuda, scan_host
from jiter_magic.kernels.scan_common import scan_args
from jiter_magic.planning.dtypes import dtype_name
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.reduce_layout import dense_strides
from jiter_magic.planning.scan_plan import ScanLayout, ScanSpec, plan_scan_layout, scan_result
from jiter_magic.planning.values import scalar_kind
from jiter_magic.runtime import scan_hot
from jiter_magic.runtime.reduce_call import ValuesIndices, checked_out, described_inputs, extra_values, out_arrays
from jiter_magic.runtime.reduce_calls import ReductionCalls

OPTIONS = ("dim", "reverse", "exclusive", "dtype", "out")


@dataclass(frozen=True, slots=True)
class ScanPlan:
    """What one call runs: the kernel's spec, its layout, its launches' blocks and the loop geometry
    its `jm_Args` end with (fixed by the layout, so packed once, not a call)."""

    spec: ScanSpec
    layout: ScanLayout
    blocks: int
    geometry: tuple[int, ...]


def _as_tuple(*outs: Any) -> tuple:
    """The results of a scan whose state holds several values: a tuple, one array a value."""
    return outs


def check_flag(value: object, name: str) -> bool:
    """`reverse=` and `exclusive=` are True or False (a NumPy bool too): a string such as "False"
    would otherwise count as true."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    if not isinstance(value, bool) and not numpy_bool:
        raise ArgumentTypeError(f"{name} must be True or False, got {type(value).__name__}: {value!r}")
    return bool(value)


def _padded(values: tuple[int, ...], length: int, fill: int) -> list[int]:
    return list(values) + [fill] * (length - len(values))


def loop_geometry(spec: ScanSpec, layout: ScanLayout) -> tuple[int, ...]:
    """The kept sizes, each operand's kept strides (padded to the spec's loop dims), then each
    operand's step along the scan and its start."""
    values = _padded(layout.kept_sizes, spec.kept_ndim, 1)
    for strides in layout.kept_strides:
        values += _padded(strides, spec.kept_ndim, 0)
    return tuple(values + list(layout.scan_strides) + list(layout.starts))


def plan_call(binding: ScanBinding, descs: list[ArrayDesc], rules: str, device: int, identity: tuple[object, ...],
              extras: list, options: dict[str, Any], requested: str | None,
              out: tuple[ArrayDesc, ...] | None) -> ScanPlan:
    """Everything a call's launch needs, checked: dtypes, the dim, `out=`, the layout and the kernel."""
    reverse, exclusive = check_flag(options["reverse"], "reverse"), check_flag(options["exclusive"], "exclusive")
    planned = scan_result([d.dtype for d in descs], [d.shape for d in descs], rules, options["dim"], requested,
                          identity, binding.indexed)
    dtypes = [planned.dtype, "int64"] if binding.indexed else [planned.dtype] * binding.outputs
    if out is not None:
        checked_out(out, planned.shape, dtypes, "a scan's result (its inputs' broadcast shape)", "scan")
    written: list[tuple[int, ...] | None] = [d.strides for d in out] if out is not None else [None] * len(dtypes)
    layout = plan_scan_layout(planned.shape, planned.dim, written, [(d.shape, d.strides) for d in descs], reverse)
    inputs = tuple(d.dtype for d in descs)
    path, vec, blocks = scan_host.choose_path(layout), 1, 1
    if device >= 0:
        path, vec, blocks = scan_cuda.choose_path(layout, inputs, [d.pointer for d in descs])
    staged = device >= 0 and scan_cuda.staged(path, planned.accumulate, binding.state, binding.indexed)
    spec = ScanSpec(inputs, planned.dtype, planned.accumulate, tuple(scalar_kind(v) for v in extras),
                    planned.identity, path=path, kept_ndim=max(len(layout.kept_sizes), 1), state=binding.state,
                    indexed=binding.indexed, exclusive=exclusive, vec=vec, staged=staged)
    return ScanPlan(spec, layout, blocks, loop_geometry(spec, layout))


def _memo_key(adapter: ArrayAdapter, descs: list[ArrayDesc], device: int, extras: list, options: dict[str, Any],
              requested: str | None, out: tuple[ArrayDesc, ...] | None) -> tuple | None:
    """What decides a call's plan, as a hashable tuple (None where an option cannot be hashed);
    options are typed, so that dim=True (refused) never finds dim=1's plan."""
    arrays = tuple((d.dtype, d.shape, d.strides, d.pointer % 16) for d in descs)
    written = None if out is None else tuple((d.dtype, d.shape, d.strides) for d in out)
    typed = tuple((type(options[name]), options[name]) for name in ("dim", "reverse", "exclusive"))
    key = (adapter, arrays, device, tuple(scalar_kind(v) for v in extras), typed, requested, written)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def run(calls: ReductionCalls, identity: tuple[object, ...], defaults: dict[str, object], args: tuple,
        options: dict[str, Any], given: dict[str, object]) -> Any:
    """A whole call: `options` holds dim, reverse, exclusive, dtype and out."""
    binding = calls.binding
    assert isinstance(binding, ScanBinding)
    calls.counts.general += 1
    arrays, descs, adapter, device = described_inputs(args, calls)
    extras = extra_values(binding, defaults, given)
    requested = None if options["dtype"] is None else dtype_name(options["dtype"])
    outs, out_descs = out_arrays(options["out"], binding, adapter, device, descs)
    key = _memo_key(adapter, descs, device, extras, options, requested, out_descs)
    plan = calls.plans.get(key) if key is not None else None
    if plan is None:
        plan = plan_call(binding, descs, adapter.rules, device, identity, extras, options, requested, out_descs)
        if key is not None:
            calls.plans.put(key, plan, plan.spec)
    spec, layout = plan.spec, plan.layout
    shape = layout.shape if any(d.shape for d in descs) else ()  # a 0-d result of 0-d inputs
    if outs is None:
        dtypes = [spec.output, "int64"] if spec.indexed else [spec.output] * spec.state
        outs = [adapter.allocator(shape, dense_strides(shape), d, arrays[0])() for d in dtypes]
    wrap = ValuesIndices if spec.indexed else None if spec.state == 1 else _as_tuple
    result = outs[0] if wrap is None else wrap(*outs)
    if layout.rows == 0 or layout.count == 0:
        return result
    launcher = calls.launcher(spec, device)
    stream = adapter.stream(device) if device >= 0 else 0
    keep, partials = None, 0
    if device >= 0:
        size = scan_cuda.partials_size(spec, layout, plan.blocks)
        if size:
            keep = adapter.allocator((size,), (1,), "int64", arrays[0])()
            partials = adapter.pointer(keep)
    tail = [bool(v) if kind == "bool" else float(v) if kind == "float64" else int(v)
            for v, kind in zip(extras, spec.extras)]
    if options["out"] is None and not given:  # leave a C hot path for the calls keyed like this one
        def packed(stage: int) -> bytes:  # a launch's jm_Args with every pointer 0
            zeros = [0] * (len(outs) + len(descs) + 1)
            values = [*zeros, layout.rows, layout.count, plan.blocks, int(options["reverse"]), stage, *tail]
            return scan_args(spec).packer.pack(*values, *plan.geometry)

        scan_hot.keep_hot(calls, args, options, plan, adapter, device, packed, shape, wrap)
    head = [*(adapter.pointer(o) for o in outs), *(d.pointer for d in descs), partials, layout.rows, layout.count,
            plan.blocks, int(options["reverse"])]
    launches = scan_cuda.launches(spec, layout, plan.blocks) if device >= 0 else [((1, 1, 1), 0)]
    for grid, stage in launches:
        launcher([*head, stage, *tail], plan.geometry, grid, stream)
    del keep  # the partials stay allocated until the launches are queued: the allocator orders reuse on the stream
    if options["out"] is not None:
        adapter.written(list(outs))
    return result
