"""The inspection panel on real ipywidgets models, and the static forms nbval compares."""
from __future__ import annotations

import re

import numpy as np
import pytest

widgets_lib = pytest.importorskip("ipywidgets")

import jiter_magic  # noqa: E402
from jiter_magic.kernels import describe  # noqa: E402
from jiter_magic.notebook import code_html, listings, panel_html, widgets  # noqa: E402
from jiter_magic.runtime.compiled_code import find_nvdisasm  # noqa: E402

from helpers import forget_loaded_kernels  # noqa: E402

AXPBY = "template <typename T> T axpby(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"
SINCOS = "template <typename T> void sincos2(T x, T& s, T& c) { s = ::sin(x); c = ::cos(x); }"


@pytest.fixture
def fn(fresh_cache):
    forget_loaded_kernels()  # each test's function compiles into its own fresh cache
    f = jiter_magic.create_jit_fn(AXPBY, alpha=2.0, beta=0.5)
    f.compile(backend="cpu")
    yield f
    for shown in widgets.panels(f):
        shown.close()


def test_panel_has_the_four_tabs(fn):
    p = widgets.panel(fn)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert isinstance(p.widget, widgets_lib.VBox) and isinstance(p.tabs, widgets_lib.Tab)
    assert p.tabs.titles == ("Functor", "Kernel", "Compile log", "Cache")
    assert len(p.tabs.children) == 4
    assert "axpby" in p.header.value and "alpha=2.0, beta=0.5" in p.header.value
    assert "1 output &middot; runs on " in p.header.value
    if not jiter_magic.runtime.inspection.cuda_available():
        assert p.header.value.endswith("runs on the CPU (no GPU found)")
    # Pygments colours the functor with inline styles and numbers its lines like the compiler does
    assert "<span" in p.functor.value and "style=" in p.functor.value
    assert "axpby" in p.functor.value and ">1</span>" in p.functor.value


def test_kernel_tab_shows_the_generated_source_of_the_chosen_specialization(fn):
    p = widgets.panel(fn)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert p.choice.options == (("#0 cpu: " + describe(fn.specializations[0].spec), 0),)
    assert p.choice.value == 0 and not p.choice.disabled
    assert p.source.value == widgets.kernel_html(fn.specializations[0].source, "cpu")
    assert "jm_kernel" in p.source.value
    # the user's code comes first, numbered as in the full source; the prelude is folded
    prelude, body = p.source.value.split("</details>")
    assert prelude.startswith("<details><summary>prelude: ") and "jm_kernel" in body
    start = fn.specializations[0].source.splitlines().index('#line 1 "jiterator"')
    assert re.search(rf">\s*{start + 1}</span>", body)  # numbers are padded to the widest one


@pytest.mark.slow
def test_panel_follows_new_specializations(fn):
    p = widgets.panel(fn)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    out = fn(np.arange(4.0), np.ones(4))  # float64: a second specialization, compiled now
    np.testing.assert_allclose(out, 2.0 * np.arange(4.0) + 0.5)
    assert out.dtype == np.float64
    assert [value for _, value in p.choice.options] == [0, 1]
    assert p.choice.value == 1
    assert "(float64, float64) -&gt; (float64)" in p.cache.value
    assert p.cache.value.count("<tr>") == 3  # header + two specializations
    assert p.cache.value.count("<td>compiled</td>") == 2
    assert fn.specializations[1].cache_key[:12] in p.cache.value
    assert fn.specializations[1].cache_file in p.cache.value
    assert p.log.value.count("<h4>") == 2 and "compiled in" in p.log.value
    # the second's heading says what makes it new; the first has nothing to be new beside
    assert p.log.value.count("<p><i>new ") == 1
    assert "</h4><p><i>new dtypes; #0 is (float32, float32) -&gt; (float32), contiguous vec1</i></p>" in p.log.value
    assert p.source.value == widgets.kernel_html(fn.specializations[1].source, "cpu")

    p.choice.value = 0
    assert p.source.value == widgets.kernel_html(fn.specializations[0].source, "cpu")


@pytest.mark.slow
def test_cache_tab_tells_a_disk_hit_from_a_compile(fn):
    forget_loaded_kernels()
    again = jiter_magic.create_jit_fn(AXPBY, alpha=2.0, beta=0.5)
    again.compile(backend="cpu")
    p = widgets.panel(again)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert again.specializations[0].cache_event == "disk"
    assert "<td>disk</td>" in p.cache.value
    assert "loaded from the disk cache" in p.log.value
    stats = jiter_magic.cache_stats()
    assert re.search(rf"\b{stats['disk_hits']} disk hits?\b", p.cache.value)
    assert re.search(r": 1 entry, \d+\.\d KiB; this process: ", p.cache.value)  # one entry, its size readable
    assert 'style="max-height:24em;overflow:auto"' in p.cache.value  # long lists scroll
    entry = again.specializations[0].cache_file
    short = re.search(r'<code title="([^"]+)">([^<]+)</code>', p.cache.value)
    assert short.group(1) == entry and len(short.group(2)) <= 24 and short.group(2).startswith("cpu/")
    p.close()


def test_cache_rows_name_scalar_kinds_and_never_wrap(fn):
    """Issue 45: `(float32, scalar float32)` and `(float32, float32)` are two rows that differ."""
    fn(np.ones(3, np.float32), np.float32(2.0))  # a NumPy scalar: an array input, the same row again
    fn(np.ones(3, np.float32), 2.0)  # a Python float: passed by value, a new specialization
    p = widgets.panel(fn)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    dtypes = re.findall(r"<td title='[^']*'>([^<]*)</td>", p.cache.value)
    assert "(float32, float32) → (float32)" in dtypes and "(float32, scalar float32) → (float32)" in dtypes
    assert 'class="jiter-magic-cache" style="white-space:nowrap"' in p.cache.value
    # the compile options break only between options: each is one unbreakable piece
    options = fn.specializations[-1].options
    assert all(f'<code style="white-space:nowrap">{o}</code>' in p.log.value for o in options if "<" not in o)
    p.close()


def test_a_panel_is_titled_by_its_notebook_name_and_keeps_its_tab_labels_whole(fn):
    p = widgets.panel(fn, "blend")
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert p.header.value.startswith("<b>blend</b> <code>template &lt;typename T&gt; T axpby(")
    assert "<b>blend</b>" in p.static.value
    assert widgets.mimebundle(fn, name="blend")["text/plain"].startswith("JitFunction blend: template")
    # ipywidgets' tabs shrink and clip their labels in a narrow notebook; the panel's style keeps them whole
    assert ".jiter-magic-panel .widget-tab>.lm-TabBar .lm-TabBar-tab{flex:0 0 auto;min-width:max-content}" \
        in p.functor.value
    p.close()


@pytest.mark.parametrize("n,text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 << 20, "5.0 MiB"),
                                    (3 << 30, "3.0 GiB"), (5 << 40, "5120.0 GiB")])
def test_human_sizes(n, text):
    assert panel_html.human_size(n) == text


def test_counted_nouns():
    assert [panel_html.counted(n, "entry", "entries") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
    assert panel_html.counted(1, "compile") == "1 compile"


@pytest.mark.slow
def test_each_display_gets_its_own_panel_and_all_follow_the_function(fn):
    first, second = widgets.panel(fn), widgets.panel(fn)
    assert first is not second and first.widget.model_id != second.widget.model_id
    assert widgets.panels(fn) == [first, second]
    first.tabs.selected_index = 2  # a tab chosen in one display ...
    assert second.tabs.selected_index == 0  # ... does not move the other
    fn(np.arange(3.0), np.ones(3))  # a new specialization: both panels show it
    assert [value for _, value in first.choice.options] == [0, 1] == [value for _, value in second.choice.options]
    first.close()
    assert first._on_specialization not in fn._calls.loader.listeners
    assert second._on_specialization in fn._calls.loader.listeners
    assert first.widget.comm is None and first.tabs.comm is None  # the models are closed
    assert widgets.panels(fn) == [second] and second.widget.comm is not None


def test_a_panel_says_when_its_name_was_rebound(fn):
    shown = widgets.panel(fn)
    shown.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    widgets.rebound(fn, "my_axpby")
    assert shown.header.value.startswith("<div><b>my_axpby</b> now names another function (its cell ran again); "
                                         "this panel shows the earlier one.</div>")
    assert "axpby" in shown.header.value.split("</div>", 1)[1]


def test_a_function_never_compiled_shows_an_empty_kernel_tab(fresh_cache):
    f = jiter_magic.create_multi_output_jit_fn(SINCOS, 2)
    p = widgets.panel(f)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert p.choice.options == () and p.choice.value is None and p.choice.disabled
    assert "Not compiled yet" in p.source.value
    assert "nothing compiled yet" in p.log.value
    s, c = f(np.linspace(0.0, 1.0, 5))
    np.testing.assert_allclose(s, np.sin(np.linspace(0.0, 1.0, 5)), rtol=1e-12)
    np.testing.assert_allclose(c, np.cos(np.linspace(0.0, 1.0, 5)), rtol=1e-12)
    assert p.choice.value == 0 and "jm_kernel" in p.source.value
    p.close()


@pytest.mark.slow
def test_static_forms_are_stable_between_a_compile_and_a_disk_hit(fn, fresh_cache):
    forget_loaded_kernels()
    again = jiter_magic.create_jit_fn(AXPBY, alpha=2.0, beta=0.5)
    again.compile(backend="cpu")
    assert fn.specializations[0].cache_event == "compiled"
    assert again.specializations[0].cache_event == "disk"
    assert widgets.static_text(fn) == widgets.static_text(again)
    assert widgets.static_html(fn) == widgets.static_html(again)
    text = widgets.static_text(fn)
    assert text == (
        "JitFunction axpby: template <typename T> T axpby(T x, T y, T alpha, T beta)\n"
        "  kwargs: alpha=2.0, beta=0.5\n"
        "  outputs: 1, backend: auto\n"
        "  specializations: 1\n"
        "    #0 cpu: (float32, float32) -> (float32) compute float32, contiguous vec1, int64 index"
    )
    for form in (text, widgets.static_html(fn)):
        assert str(fresh_cache) not in form and fn.specializations[0].cache_key[:12] not in form
        assert "compiled" not in form and " s)" not in form


def test_mimebundle_outside_a_kernel_is_static(fn, monkeypatch):
    monkeypatch.delenv("JITER_MAGIC_PANEL", raising=False)
    bundle = fn._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == widgets.static_text(fn)
    assert bundle["text/html"] == widgets.static_html(fn)
    assert "&lt;typename T&gt;" in bundle["text/html"]


def test_mimebundle_with_a_widget_frontend_carries_the_panel(fn, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_PANEL", "widget")
    bundle = fn._repr_mimebundle_()
    view = bundle[widgets.WIDGET_VIEW]
    assert view["model_id"] == widgets.panels(fn)[-1].widget.model_id
    assert bundle["text/plain"] == widgets.static_text(fn)  # the fallback stays stable too
    assert set(fn._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}
    assert widgets.WIDGET_VIEW not in fn._repr_mimebundle_(exclude={widgets.WIDGET_VIEW})
    monkeypatch.setenv("JITER_MAGIC_PANEL", "static")
    assert widgets.WIDGET_VIEW not in fn._repr_mimebundle_()


USER_LINE = re.compile(r'<span class="jiter-magic-user-line" style="([^"]*)">&gt;([^<]*)</span>')


@pytest.mark.slow
def test_the_kernel_tab_shows_compiled_code_on_demand(fn):
    p = widgets.panel(fn)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    assert p.view.options == ("generated source", "PTX (CUDA)", "SASS (CUDA)", "assembly (CPU)")
    assert p.arch.disabled and p.arch.value == "sm_90"  # no GPU here: JITER_MAGIC_CUDA_ARCH's default
    assert "sm_75" in p.arch.options and "sm_120" in p.arch.options  # what this NVRTC compiles for
    source = p.source.value
    p.view.value = "assembly (CPU)"  # the CPU specialization's assembly, compiled now
    assert p.source.value.startswith("<p>cpu assembly: ")
    assert "jm_kernel:" in p.source.value and "# line 1: template &lt;typename T&gt; T axpby" in p.source.value
    marked = USER_LINE.findall(p.source.value)  # the functor's instructions: marked, the first scrolled to
    assert marked and all(listings.is_instruction(line) for _, line in marked)
    assert "scroll-initial-target:nearest" in marked[0][0]
    assert not [style for style, _ in marked[1:] if "scroll-initial-target" in style]
    assert f"; {len(marked)} instruction{'s' if len(marked) > 1 else ''} compiled from the functor's lines, marked " \
        "&gt;" in p.source.value.split("</p>")[0]

    p.view.value = "PTX (CUDA)"  # a CPU specialization: its CUDA counterpart, compiled by NVRTC without a GPU
    assert not p.arch.disabled
    ptx = p.source.value
    assert ptx.startswith("<p>PTX for sm_90 of this CPU specialization&#x27;s CUDA counterpart, (float32, float32) "
                          "-&gt; (float32), contiguous vec4, compiled by NVRTC (no GPU needed): ")
    assert ".visible .entry jm_kernel" in ptx and ".target sm_90" in ptx
    assert "// line 1: template" in ptx and ".f32" in USER_LINE.findall(ptx)[0][1]  # mul.f32 or fma.rn.f32
    p.arch.value = "sm_80"  # another architecture: compiled again for it
    assert ".target sm_80" in p.source.value and ".target sm_90" not in p.source.value
    p.view.value = "SASS (CUDA)"
    if find_nvdisasm() is not None:  # the cubin through nvdisasm, the functor's line named where it was inlined
        assert "jm_kernel:" in p.source.value and "// line 1: template" in p.source.value
        assert "//##" not in p.source.value and "File &quot;" not in p.source.value  # no made-up paths
        sass = [line for _, line in USER_LINE.findall(p.source.value)]
        assert sass and all(re.match(r"\s*/\*[0-9a-f]{4}\*/\s+[A-Z]", line) for line in sass), sass
        assert any("FFMA" in line for line in sass)
    else:
        assert "needs NVIDIA&#x27;s nvdisasm" in p.source.value
    p.view.value = "generated source"
    assert p.source.value == source and p.arch.disabled

    fn.compile(backend="cuda")  # NVRTC, no GPU needed: the newest specialization is CUDA's
    p.view.value = "PTX (CUDA)"
    assert p.source.value.startswith("<p>PTX for sm_80: ")  # its own source, for the chosen architecture
    assert ".visible .entry jm_kernel" in p.source.value and "// line 1: template" in p.source.value


def test_listings_never_wrap_and_mark_each_functor_line():
    text = ("jm_kernel:\n\tmovl c, d\n\t# line 2: return x;\n\t.loc 2 2 1\n\tmovl a, b\n.L3:\n\t# line 3: }\n"
            "\tret\n\t# generated code\n\t.loc 1 9 1\n\taddq $8, %rax\n")
    markup = listings.listing_html(text, "cpu assembly")
    assert markup.startswith("<p>cpu assembly: 11 lines; 2 instructions compiled from the functor's lines, marked &gt;")
    assert "white-space:pre;" in markup and "overflow:auto" in markup  # scrolls sideways, not wrapped mid-word
    # the instructions after a functor's line, up to the kernel's code again: never a comment, label or directive
    assert [line for _, line in USER_LINE.findall(markup)] == ["\tmovl a, b", "\tret"]
    assert listings.listing_html("jm_kernel:\n", "PTX for sm_90").startswith(
        "<p>PTX for sm_90: 1 line; no instruction is tied to the functor's lines")


@pytest.mark.slow
def test_header_says_compiling_while_a_call_builds(fn):
    p = widgets.panel(fn)
    p.tabs.selected_index = widgets.KERNEL_TAB  # its source is built on opening
    seen: list[str] = []
    listener = lambda spec, device: seen.append(p.header.value)  # noqa: E731 - runs after the panel's own
    fn.add_start_listener(listener)
    try:
        fn(np.arange(3.0), np.ones(3))  # float64: a new specialization
    finally:
        fn.remove_start_listener(listener)
    assert len(seen) == 1
    assert seen[0].endswith("<div><i>compiling axpby #1 for (float64, float64) -&gt; (float64), contiguous vec1 on the "
                            "CPU (new dtypes; #0 is (float32, float32) -&gt; (float32), contiguous vec1) &hellip;</i></div>")
    assert "compiling" not in p.header.value  # the refresh after the build replaced it
    fn(np.arange(3.0), np.ones(3))  # loaded: nothing built, nothing said
    assert len(seen) == 1


def test_static_html_carries_the_generated_kernel_and_logs_which_nbval_leaves_out(fn):
    import configparser
    from pathlib import Path

    markup = widgets.static_html(fn)
    block = markup[markup.index('<details class="jiter-magic-generated">'):]
    assert "generated kernel of #0 cpu: (float32, float32) -&gt; (float32)" in block
    assert 'extern "C" int jm_kernel' in re.sub(r"<[^>]+>", "", block).replace("&quot;", '"')
    assert "#0 cpu: (float32, float32) -&gt; (float32) compute float32, contiguous vec1, int64 index: no warnings" \
        in block
    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[2] / "notebooks" / "nbval_sanitize.cfg")
    section = next(s for s in config.sections() if s.startswith("the static panel's generated kernel"))
    sanitized = re.sub(config[section]["regex"], config[section]["replace"], markup)
    assert sanitized == markup[:markup.index('<details class="jiter-magic-generated">')] + "GENERATED</div>"


def test_the_static_html_highlights_the_functor_as_cpp(fn):
    """Issue 31: nbconvert and GitHub show the static form; its functor is coloured as in the live panel."""
    markup = panel_html.static_html(fn)
    assert "<pre>template" not in markup  # no longer plain text
    box = panel_html.highlight(fn.code)
    assert box in markup and box.startswith('<div class="jiter-magic-code"')
    keyword = code_html.mixed("--jp-mirror-editor-keyword-color", "#008000")
    assert f"--jm4:{keyword};" in box and 'style="color:var(--jm4);font-weight:bold">template</span>' in box


def _saved_bytes(widget) -> int:
    """What a notebook saves of a widget tree: each model's state as JSON (its layout and style too)."""
    import json

    seen: dict[str, int] = {}

    def walk(w) -> None:
        if w is None or w.model_id in seen:
            return
        seen[w.model_id] = len(json.dumps(w.get_state(drop_defaults=True), default=str))
        for part in (getattr(w, "layout", None), getattr(w, "style", None), *getattr(w, "children", ())):
            if isinstance(part, widgets_lib.Widget):
                walk(part)

    walk(widget)
    return sum(seen.values())


def test_three_panels_save_in_at_most_200_kb(fn):
    """Issue 45: a notebook with three panels saved 1.5 MB; the Kernel tab's kernel is built when the
    tab opens, and the static copy's generated kernel is uncoloured."""
    fn.compile("float64", "float64", backend="cpu")
    code = ("template <typename T> T sq(T x) { return x * x; }\n"
            "template <typename T> T add(T a, T b) { return a + b; }\n")
    sum_sq = jiter_magic.create_reduction_fn(code, 0, "sq", combine="add")
    sum_sq(np.ones((2, 3), np.float32), dim=1)
    shown = [widgets.panel(fn, "blend"), widgets.panel(fn, "blend"), widgets.panel(sum_sq, "sum_sq")]
    try:
        assert "jm_Args" not in shown[0].source.value  # not built before the tab opens
        total = sum(_saved_bytes(p.widget) for p in shown)
        assert total <= 200 * 1024, total
        assert "extern &quot;C&quot; int jm_kernel" in shown[0].static.value  # the export's copy keeps the kernel
        shown[0].tabs.selected_index = widgets.KERNEL_TAB
        assert "jm_Args" in shown[0].source.value  # built when the tab opens
    finally:
        for p in shown:
            p.close()
