"""A reduction's panel (every kind's: widgets.py) on real ipywidgets models, its static forms, and `ReductionFunction.inspect`
(host assembly with g++, PTX and SASS through NVRTC: no GPU needed)."""
from __future__ import annotations

import html
import re

import numpy as np
import pytest

widgets_lib = pytest.importorskip("ipywidgets")

import jiter_magic  # noqa: E402
from jiter_magic.notebook import panel_html, widgets  # noqa: E402
from jiter_magic.notebook.listings import is_instruction, listing_html  # noqa: E402
from jiter_magic.runtime.compiled_code import find_nvdisasm  # noqa: E402

from helpers import forget_loaded_kernels, nvrtc_or_skip  # noqa: E402

CODE = ("template <typename T> T sq(T x) { return x * x; }\n"
        "template <typename T> T add(T a, T b) { return a + b; }\n"
        "template <typename T> T root(T total, int64_t n) { return sqrt(total); }\n")


@pytest.fixture
def norm(fresh_cache):
    forget_loaded_kernels()
    fn = jiter_magic.create_reduction_fn(CODE, 0, "sq", combine="add", finalize="root")
    fn(np.ones((2, 3), dtype=np.float32), dim=1)
    yield fn
    for shown in widgets.panels(fn):
        shown.close()


def test_the_panel_has_the_four_tabs_filled_from_the_reductions_kernels(norm):
    p = widgets.panel(norm)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert p.tabs.titles == ("Functor", "Kernel", "Compile log", "Cache")
    assert p in widgets.panels(norm)
    assert p.header.value.startswith("<b>sq</b> reduction: combine add, map sq, finalize root &middot; identity "
                                     "<code>0</code> &middot; kwargs <code>none</code> &middot; default dim every dim "
                                     "&middot; 1 kernel &middot; runs on the inputs&#x27; device")
    assert 'class="jiter-magic-code"' in p.functor.value and "<span" in p.functor.value  # highlighted as C++
    (built,) = norm.specializations
    label = "#0 cpu: reduce (float32) -> float32 accumulating float32, host 1-d kept x 1-d reduced"
    assert p.choice.options == ((label, 0),) and p.choice.value == 0
    assert p.source.value == widgets.kernel_html(built.source, "cpu") and "jm_Args" in p.source.value
    assert f"<h4>{html.escape(label)}</h4><p>target <code>host</code>, compiled in " in p.log.value
    assert "-fopenmp" in p.log.value
    assert "<td>cpu host</td><td>compiled</td>" in p.cache.value and "cache root <code>" in p.cache.value
    assert p.static.value == panel_html.static_html(norm)


def test_the_panel_follows_new_kernels(norm):
    p = widgets.panel(norm)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    norm(np.ones((4, 1024)), dim=0)  # float64, the leading dim: a second kernel, the host's column walk
    assert len(norm.specializations) == 2 and norm.specializations[1].spec.path == "host_columns"
    assert [value for _label, value in p.choice.options] == [0, 1] and p.choice.value == 1
    assert "host_columns" in p.choice.label and "(float64) -> float64" in p.choice.label
    assert "1 kernel" not in p.header.value and "2 kernels" in p.header.value
    p.close()
    norm(np.ones(3, dtype=np.int32))
    assert len(p.choice.options) == 2  # a closed panel listens no more


def test_the_kernel_tab_shows_assembly_and_the_ptx_of_a_host_kernels_cuda_counterpart(norm):
    p = widgets.panel(norm)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    p.view.value = "assembly (CPU)"
    assert p.source.value.startswith("<p>cpu assembly: ") and "jiter-magic-listing" in p.source.value
    nvrtc_or_skip()
    p.view.value = "PTX (CUDA)"
    assert not p.arch.disabled
    assert p.source.value.startswith(f"<p>PTX for {p.arch.value} of this CPU kernel&#x27;s CUDA counterpart, the grid "
                                     "kernel (1-d kept x 1-d reduced), compiled by NVRTC (no GPU needed): ")
    assert ".entry" in p.source.value and "compiled from the functor's lines, marked &gt;" in p.source.value


def test_the_static_forms_are_deterministic_facts(norm):
    text = panel_html.static_text(norm)
    assert text.splitlines() == [
        "ReductionFunction sq: combine add, map sq, finalize root",
        "  inputs: x; identity: 0; kwargs: none; default dim: every dim",
        "  kernels: 1",
        "    #0 cpu: reduce (float32) -> float32 accumulating float32, host 1-d kept x 1-d reduced",
    ]
    markup = panel_html.static_html(norm)
    assert markup.startswith('<div class="jiter-magic"><p><b>sq</b> reduction: combine add, map sq, finalize root<br>')
    assert '<div class="jiter-magic-code"' in markup  # the code highlighted as C++, as in the live panel
    assert re.search(r'<details class="jiter-magic-generated"><summary>generated kernel of #0 cpu: ', markup)
    assert "compiled in" not in markup and str(jiter_magic.cache_stats()["root"]) not in markup  # no timings, paths
    bundle = norm._repr_mimebundle_()
    assert bundle["text/plain"] == text and bundle["text/html"] == markup


def test_inspect_gives_host_assembly_ptx_and_sass_without_a_gpu(norm):
    asm = norm.inspect(kind="asm")
    assert re.search(r"^\s*# line 1: template <typename T> T sq", asm, re.M)  # the map's line, marked
    with pytest.raises(jiter_magic.InvalidArgumentError, match=r"^kind='ptx' is CUDA code: pass a CUDA path, one of "
                                                              r"\['warp_rows', 'block_rows', 'columns', 'dense_runs', 'grid'\]"):
        norm.inspect(kind="ptx", path="host")
    with pytest.raises(jiter_magic.InvalidArgumentError, match=r"^kind='asm' is a host kernel's assembly"):
        norm.inspect(kind="asm", path="grid")
    with pytest.raises(jiter_magic.InvalidArgumentError, match=r"^kind must be one of 'asm', 'ptx', 'sass'"):
        norm.inspect(kind="cubin")
    nvrtc_or_skip()
    ptx = norm.inspect("float16", kind="ptx", path="block_rows", vec=8)
    assert ".visible .entry" in ptx and re.search(r"^\s*// line \d+: template <typename T>", ptx, re.M)
    assert norm.inspect(kind="ptx") == norm.inspect(kind="ptx", path="grid")  # the grid kernel by default
    if find_nvdisasm() is None:
        pytest.skip("no nvdisasm for SASS")
    sass = norm.inspect(kind="sass", path="warp_rows")
    assert re.search(r"^\s*// line \d+: template <typename T>", sass, re.M) and "//## File" not in sass


def test_a_reduction_with_indices_says_so():
    keep = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) "
            "{ const bool t = b > a || (b == a && ib < ia); value = t ? b : a; index = t ? ib : ia; }")
    argmax = jiter_magic.create_multi_output_reduction_fn(keep, combine="keep_max")
    argmax(np.arange(10.0).reshape(2, 5), dim=1)
    # no identity shown: none was given, and values with their indices compare no element with one
    assert panel_html.static_text(argmax).splitlines() == [
        "ReductionFunction keep_max: combine keep_max (values with their indices), no map (the elements themselves)",
        "  inputs: x; kwargs: none; default dim: every dim",
        "  kernels: 1",
        "    #0 cpu: reduce (float64) -> (float64, int64 index) accumulating float64, host 1-d kept x 1-d reduced",
    ]
    assert "identity" not in panel_html.static_html(argmax) and "identity" not in widgets.panel(argmax).header.value
    assert panel_html.static_text(argmax, "argmax").startswith("ReductionFunction argmax: combine keep_max")


def test_a_panel_is_titled_by_the_name_the_notebook_bound(norm):
    """Issue 45: `sum_sq = create_reduction_fn(...)` shows a panel titled sum_sq, not sq (its C++ map)."""
    namespace = {"_": norm, "sum_sq": norm, "other": 1}
    from jiter_magic.notebook.names import bound_name

    assert bound_name(norm, namespace) == "sum_sq" and bound_name(norm, {"_": norm}) is None
    p = widgets.panel(norm, "sum_sq")
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert p.header.value.startswith("<b>sum_sq</b> reduction: combine add, map sq, finalize root &middot; identity ")
    assert "<b>sum_sq</b> reduction" in p.static.value
    bundle = widgets.mimebundle(norm, name="sum_sq")
    assert bundle["text/plain"].startswith("ReductionFunction sum_sq: combine add")
    assert widgets.mimebundle(norm)["text/plain"].startswith("ReductionFunction sq: ")  # no notebook name


def test_a_reductions_listings_mark_the_instructions_of_every_function():
    """Issue 45: PTX and SASS of a reduction mark the instructions compiled from the map, the combine and
    the finalize (the map's sine is no multiply the combine's add could fuse), never a comment or path."""
    nvrtc_or_skip()
    code = ("template <typename T> T sine(T x) { return sin(x); }\n"
            "template <typename T> T add(T a, T b) { return a + b; }\n"
            "template <typename T> T halve(T total, int64_t n) { return total / 2; }\n")
    fn = jiter_magic.create_reduction_fn(code, 0, "sine", combine="add", finalize="halve")
    kinds = ["ptx"] + (["sass"] if find_nvdisasm() is not None else [])
    for kind in kinds:
        text = fn.inspect(kind=kind, path="grid")
        markup = listing_html(text, kind)
        marked = [html.unescape(m) for m in
                  re.findall(r'<span class="jiter-magic-user-line"[^>]*>&gt;([^<]*)</span>', markup)]
        assert marked and all(is_instruction(line) for line in marked), kind
        for number in (1, 2, 3):  # each function's line is named before instructions of its own
            assert re.search(rf"// line {number}: template", text), (kind, number)
        assert "//## File" not in text and "/work" not in text and "/tmp" not in text
