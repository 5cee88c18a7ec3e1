"""Golden sources of reductions: the generated kernel of each reduction path, pinned in checked-in
files under `tests/golden/reduce/`.

Any change to a reduction's code generation shows here as a diff. After an intended change,
regenerate them with `JITER_MAGIC_REGEN_GOLDEN=1 pytest tests/kernels/test_reduce_golden.py` and
review the diff.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from jiter_magic import create_multi_output_reduction_fn, create_reduction_fn

GOLDEN = Path(__file__).parents[1] / "golden" / "reduce"
REGENERATE = os.environ.get("JITER_MAGIC_REGEN_GOLDEN") == "1"

SUMSQ = create_reduction_fn("template <typename T> T sq(T x) { return x * x; }\n"
                            "template <typename T> T add(T a, T b) { return a + b; }\n", 0, map="sq", combine="add")
DOT = create_reduction_fn("template <typename T> T scaled(T x, T y, T alpha) { return alpha * x * y; }\n"
                          "template <typename T> T add(T a, T b) { return a + b; }\n", 0, combine="add", alpha=1.0)
ARGMAX = create_multi_output_reduction_fn(
    "template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
    "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
    "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n", combine="keep_max")

# name: (function, dtypes, spec fields)
CASES = {
    "host_f32": (SUMSQ, ("float32",), {"path": "host"}),
    "host_columns_argmax": (ARGMAX, ("float16",), {"path": "host_columns", "kept_ndim": 2}),
    "warp_rows_f32_vec4": (SUMSQ, ("float32",), {"path": "warp_rows", "vec": 4}),
    "block_rows_bf16_vec8": (SUMSQ, ("bfloat16",), {"path": "block_rows", "vec": 8}),
    "block_rows_argmax": (ARGMAX, ("float32",), {"path": "block_rows", "vec": 4}),
    "columns_f32": (SUMSQ, ("float32",), {"path": "columns", "kept_ndim": 2, "reduced_ndim": 2}),
    "columns_bf16_width2": (SUMSQ, ("bfloat16",), {"path": "columns", "vec": 2}),
    "columns_argmax_bf16_width2": (ARGMAX, ("bfloat16",), {"path": "columns", "vec": 2}),
    "dense_runs_f32_vec4": (SUMSQ, ("float32",), {"path": "dense_runs", "vec": 4, "reduced_ndim": 2}),
    "dense_runs_argmax_bf16": (ARGMAX, ("bfloat16",), {"path": "dense_runs", "vec": 8, "reduced_ndim": 2}),
    "grid_f32_vec4": (SUMSQ, ("float32",), {"path": "grid", "vec": 4}),
    "grid_dot_strided": (DOT, ("float32", "float16"), {"path": "grid", "kept_ndim": 2, "reduced_ndim": 2}),
    "grid_argmax_f32_vec4": (ARGMAX, ("float32",), {"path": "grid", "vec": 4}),
    "grid_argmax_strided": (ARGMAX, ("int8",), {"path": "grid", "reduced_ndim": 2}),
    # As a call plans them where fewer than 2^31 elements are reduced: 32-bit indices in the loops.
    "columns_argmax_bf16_index32": (ARGMAX, ("bfloat16",), {"path": "columns", "vec": 2, "index32": True}),
    "grid_argmax_f32_index32": (ARGMAX, ("float32",), {"path": "grid", "vec": 4, "index32": True}),
}


def _source(fn, dtypes, fields):
    """fn.source's text, or where `fields` name `index32` (which `fn.spec` does not take) the
    render of its spec with it."""
    if "index32" not in fields:
        return fn.source(*dtypes, **fields)
    from dataclasses import replace

    from jiter_magic.kernels.reduce_family import REDUCTION

    plain = {k: v for k, v in fields.items() if k != "index32"}
    spec = replace(fn.spec(*dtypes, **plain), index32=fields["index32"])
    return REDUCTION.render(fn.binding, spec, "cuda")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reduction_source_matches_golden(name):
    fn, dtypes, fields = CASES[name]
    source = _source(fn, dtypes, fields)
    path = GOLDEN / f"{name}.{'cpp' if name.startswith('host') else 'cu'}"
    if REGENERATE:
        path.write_text(source)
    assert path.exists(), f"no golden {path.name}: run with JITER_MAGIC_REGEN_GOLDEN=1"
    assert source == path.read_text(), f"{name}'s source changed: regenerate and review the diff if intended"
