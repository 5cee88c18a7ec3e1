"""Specialize a call: from its inputs' dtypes and layouts to a `KernelSpec` and a `Layout`.

Pure (no arrays, no devices): the result dtype and the `out=` rules from planning/, the layout
from planning/layout.py, and the first kernel path that fits the call.
"""
from __future__ import annotations

from jiter_magic.errors import DTypeError
from jiter_magic.kernels import CallShape, choose_path
from jiter_magic.planning import dtypes as dt
from jiter_magic.planning.layout import ArrayDesc, Layout, plan_layout
from jiter_magic.planning.resolve import Argument, check_expanded_outputs, result_dtype
from jiter_magic.planning.spec import KernelSpec


def resolve_call(arrays: list[Argument], rules: str, backend: str, outs: list[ArrayDesc] | None,
                 extras: tuple[str, ...], num_outputs: int,
                 default_float: str = "float32") -> tuple[KernelSpec, Layout]:
    """dtypes, layout and kernel path of a call on `backend` ('cuda' or 'cpu').

    `arrays` holds, per input, an `ArrayDesc` or a Python scalar; `outs` the `out=` arrays.
    `rules` is 'torch' or 'numpy'.
    """
    items = [a for a in arrays if isinstance(a, ArrayDesc)]
    common = result_dtype(arrays, rules, default_float)
    dt.dtype(common)
    compute = dt.compute_dtype(common)
    if outs is None:
        output_dtypes = (common,) * num_outputs
    else:
        output_dtypes = tuple(o.dtype for o in outs)
        for target in output_dtypes:
            if not dt.can_cast(common, target, rules):
                raise DTypeError(f"result type {common} can't be cast to the desired output type {target} (out=)")
    layout = plan_layout(
        [a.shape for a in items], [a.strides for a in items],
        None if outs is None else [o.shape for o in outs],
        None if outs is None else [o.strides for o in outs],
        num_outputs,
    )
    if outs is not None:
        check_expanded_outputs(outs)
    choice = choose_path(CallShape(layout, arrays, outs, output_dtypes), backend)
    spec = KernelSpec(
        tuple(a.dtype if isinstance(a, ArrayDesc) else compute for a in arrays),
        tuple(not isinstance(a, ArrayDesc) for a in arrays),
        output_dtypes, compute, extras, path=choice.path, ndim=choice.ndim,
        index64=backend != "cuda" or layout.needs_int64, params=choice.params,
    )
    return spec, layout
