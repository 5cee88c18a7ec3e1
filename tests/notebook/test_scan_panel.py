"""A scan's panel: the one panel of every kind (widgets.py) with a scan's facts (panel_kinds.py), on
real ipywidgets models, and its static forms."""
from __future__ import annotations

import html

import numpy as np
import pytest

widgets_lib = pytest.importorskip("ipywidgets")

import jiter_magic  # noqa: E402
from jiter_magic.notebook import panel_html, widgets  # noqa: E402

from helpers import forget_loaded_kernels, nvrtc_or_skip  # noqa: E402

AFFINE = ("template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b) {\n"
          "  a = a1 * a2; b = a2 * b1 + b2;\n}\n")
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) "
            "{ const bool t = b > a || (b == a && ib > ia); value = t ? b : a; index = t ? ib : ia; }\n")
SQ_ADD_HALF = ("template <typename T> T sq(T x, T scale) { return scale * x * x; }\n"
               "template <typename T> T add(T a, T b) { return a + b; }\n"
               "template <typename T> T half(T total, int64_t n) { return total / 2; }\n")
LABEL = "#0 cpu: scan (float32, float32) -> 2 x float32 accumulating float32, scan_rows 1-d kept"


@pytest.fixture
def linear(fresh_cache):
    """h = a * h + b: a scan whose state holds two values, run once on the host."""
    forget_loaded_kernels()
    fn = jiter_magic.create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine")
    fn(np.full((2, 5), 0.5, np.float32), np.ones((2, 5), np.float32), dim=1)
    yield fn
    for shown in widgets.panels(fn):
        shown.close()


def test_the_header_shows_the_roles_identity_tuple_and_state(linear):
    p = widgets.panel(linear, "ema")
    assert p.tabs.titles == ("Functor", "Kernel", "Compile log", "Cache") and p in widgets.panels(linear)
    assert p.header.value.startswith(
        "<b>ema</b> scan: combine affine, no map (the elements themselves) &middot; identity <code>(1, 0)</code> "
        "&middot; state 2 values &middot; kwargs <code>none</code> &middot; default dim none (each call names its "
        "dim) &middot; 1 kernel &middot; runs on the inputs&#x27; device")
    assert 'class="jiter-magic-code"' in p.functor.value and "<span" in p.functor.value  # highlighted as C++


def test_the_kernel_log_and_cache_tabs_list_the_built_kernel(linear):
    p = widgets.panel(linear)
    assert "jm_Args" not in p.source.value  # built when the tab opens
    p.tabs.selected_index = widgets.KERNEL_TAB
    (built,) = linear.specializations
    assert p.choice.options == ((LABEL, 0),) and p.choice.value == 0
    assert p.source.value == panel_html.kernel_html(built.source, "cpu") and "jm_Args" in p.source.value
    assert f"<h4>{html.escape(LABEL)}</h4><p>target <code>host</code>, compiled in " in p.log.value
    assert "<th>kernel</th>" in p.cache.value
    assert "'>(float32, float32) → 2 x float32</td><td>cpu scan_rows</td><td>compiled</td>" in p.cache.value
    p.view.value = "assembly (CPU)"
    assert p.source.value.startswith("<p>cpu assembly: ") and "jiter-magic-listing" in p.source.value


def test_the_panel_follows_new_kernels(linear):
    p = widgets.panel(linear)
    linear(np.ones((6, 16)), np.ones((6, 16)), dim=0)  # float64 along the leading dim: the host's column walk
    assert [value for _label, value in p.choice.options] == [0, 1] and p.choice.value == 1
    assert "scan_columns" in p.choice.label and "(float64, float64) -> 2 x float64" in p.choice.label
    assert "2 kernels" in p.header.value
    assert p.static.value == panel_html.static_html(linear)


def test_the_ptx_of_a_host_scan_is_its_cuda_counterparts(linear):
    nvrtc_or_skip()
    p = widgets.panel(linear)
    p.tabs.selected_index = widgets.KERNEL_TAB
    p.view.value = "PTX (CUDA)"
    assert p.source.value.startswith(f"<p>PTX for {p.arch.value} of this CPU kernel&#x27;s CUDA counterpart, the "
                                     "warp_scan kernel (1-d kept), compiled by NVRTC (no GPU needed): ")
    assert ".entry" in p.source.value and "compiled from the functor's lines, marked &gt;" in p.source.value


def test_the_static_forms_are_deterministic_facts(linear):
    text = panel_html.static_text(linear)
    assert text.splitlines() == [
        "ScanFunction affine: combine affine, no map (the elements themselves)",
        "  inputs: a1, b1; identity: (1, 0); state: 2 values; kwargs: none; default dim: none (each call names its dim)",
        "  kernels: 1",
        f"    {LABEL}",
    ]
    markup = panel_html.static_html(linear)
    assert markup.startswith('<div class="jiter-magic"><p><b>affine</b> scan: combine affine, no map (the elements '
                             "themselves)<br>inputs: <code>a1, b1</code>; identity: <code>(1, 0)</code>; state: 2 "
                             "values; kwargs: <code>none</code>; default dim: none (each call names its dim)</p>")
    assert "<th>kernel</th>" in markup and f"<code>{html.escape(LABEL[8:])}</code>" in markup
    assert f'<details class="jiter-magic-generated"><summary>generated kernel of {html.escape(LABEL)}' in markup
    assert "compiled in" not in markup and str(jiter_magic.cache_stats()["root"]) not in markup  # no timings, paths
    bundle = linear._repr_mimebundle_()  # a display in a notebook: the function's panel, as every kind's
    assert bundle["text/plain"] == text and bundle["text/html"] == markup
    assert widgets.mimebundle(linear, name="ema")["text/plain"].startswith("ScanFunction ema: combine affine")


def test_a_scan_with_indices_a_map_and_a_finalize_says_so(fresh_cache):
    cummax = jiter_magic.create_multi_output_scan_fn(KEEP_MAX, float("-inf"), combine="keep_max")
    assert panel_html.static_text(cummax).splitlines() == [
        "ScanFunction keep_max: combine keep_max (values with their indices), no map (the elements themselves)",
        "  inputs: x; identity: (-inf,); kwargs: none; default dim: none (each call names its dim)",
        "  kernels: 0",
    ]
    assert "<p><i>no kernel built yet</i></p>" in panel_html.static_html(cummax)
    halved = jiter_magic.create_scan_fn(SQ_ADD_HALF, 0, "sq", combine="add", finalize="half", scale=2.0)
    assert panel_html.static_text(halved).splitlines()[:2] == [
        "ScanFunction sq: combine add, map sq, finalize half",
        "  inputs: x; identity: (0,); kwargs: scale=2.0; default dim: none (each call names its dim)",
    ]
