"""One call of a scan: describe the arrays, plan (dtypes, the dim, layout, kernel shape), launch.

A scan rides a reduction's call (reduce_call.py's `call`): its inputs, extras and `out=` arrays are
described and checked as a reduction's, its plan a `FoldPlan` kept in the function's
`ReductionCalls` (built with the scan family of kernels), its results allocated, its kernel
launched and its C hot path kept alike. What is a scan's own is its `CallKind`: the options that
key a plan, and the plan itself, `planning/scan_plan.py`'s result, layout and spec and the kernel
shape chosen for them. Every check happens before anything is allocated.
"""
from __future__ import annotations

from typing import Any

from jiter_magic.frontend.scan import ScanBinding
from jiter_magic.kernels import scan_cuda, scan_host
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.reduce_layout import dense_strides, loop_values
from jiter_magic.planning.reduce_result import check_flag, checked_out
from jiter_magic.planning.scan_plan import ScanSpec, plan_scan_layout, scan_result
from jiter_magic.planning.values import scalar_kind
from jiter_magic.runtime import scan_hot
from jiter_magic.runtime.reduce_call import CallKind, FoldPlan, call
from jiter_magic.runtime.reduce_calls import ReductionCalls

OPTIONS = ("dim", "reverse", "exclusive", "dtype", "out")


def plan_call(binding: ScanBinding, descs: list[ArrayDesc], rules: str, device: int, identity: tuple[object, ...],
              extras: list, options: dict[str, Any], requested: str | None,
              out: tuple[ArrayDesc, ...] | None) -> FoldPlan:
    """Everything a call's launch needs, checked: dtypes, the dim, `out=`, the layout and the kernel."""
    reverse, exclusive = check_flag(options["reverse"], "reverse"), check_flag(options["exclusive"], "exclusive")
    planned = scan_result([d.dtype for d in descs], [d.shape for d in descs], rules, options["dim"], requested,
                          identity, binding.indexed)
    dtypes = (planned.dtype, "int64") if binding.indexed else (planned.dtype,) * binding.outputs
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
                    indexed=binding.indexed, exclusive=exclusive, vec=vec, staged=staged,
                    kept_values=binding.kept_values)
    launches = scan_cuda.launches(spec, layout, blocks) if device >= 0 else [((1, 1, 1), 0)]
    partials = scan_cuda.partials_size(spec, layout, blocks) if device >= 0 else 0
    # Each operand's kept strides, then its step along the scan and its start.
    geometry = loop_values(layout.kept_sizes, layout.kept_strides, spec.kept_ndim) + \
        list(layout.scan_strides) + list(layout.starts)
    return FoldPlan(spec, layout, blocks, planned.shape, dense_strides(planned.shape), dtypes,
                    (layout.rows, layout.count, blocks, int(reverse)),
                    tuple(launches) if layout.rows and layout.count else (), (partials, "int64") if partials else None,
                    tuple(geometry))


SCAN = CallKind(("dim", "reverse", "exclusive"), plan_call, scan_hot.options_key)


def run(calls: ReductionCalls, identity: tuple[object, ...], defaults: dict[str, object], args: tuple,
        options: dict[str, Any], given: dict[str, object]) -> Any:
    """A whole call: `options` holds dim, reverse, exclusive, dtype and out."""
    return call(SCAN, calls, identity, defaults, args, options, given)
