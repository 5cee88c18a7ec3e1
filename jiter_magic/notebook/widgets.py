"""The inspection panel of a jitted function of any kind, and its static stand-in.

A live frontend (JupyterLab, Notebook 7, VS Code) gets an ipywidgets panel with four tabs:
the functor, the generated kernel of each specialization, the compile log and the cache; what
differs between elementwise functions, reductions and scans is their hook (panel_kinds.py).
It listens to the function, so it grows as later cells compile new specializations.
Beside the widget view, every bundle carries HTML and text built only from deterministic facts
(code, signature, specializations: no timings, paths or keys). Frontends without widgets
(nbconvert without widget state, GitHub) render those, nbval compares them (it skips widget
views), and terminal IPython gets only them; so stored notebook outputs compare equal from
run to run. A kernel cannot ask its frontend whether it renders widgets, hence both forms.
"""
from __future__ import annotations

import html
import importlib.util
import weakref
from collections.abc import Container
from typing import Any

import jiter_magic.settings as settings
from jiter_magic.cache.disk import stats as cache_stats
from jiter_magic.errors import JiterError
from jiter_magic.kernel_function import KernelFunction
from jiter_magic.notebook.listings import compiled_listing, cuda_archs, preferred_arch
from jiter_magic.notebook.names import bound_name
from jiter_magic.notebook.panel_html import (
    cache_html,
    highlight,
    kernel_html,
    label,
    log_html,
    static_html,
    static_text,
)
from jiter_magic.notebook.panel_kinds import kind_of
from jiter_magic.state import RUNTIME

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


# A panel reopened from a saved notebook is drawn from its saved state, without a kernel behind it:
# ipywidgets then marks every view `jupyter-widgets-disconnected`, and its stylesheet puts a
# broken-link icon before each (4-9 a panel, pushing the layout around). This stylesheet, carried
# in the panel's own HTML so that it is saved with it, hides those and gives the panel one line
# instead. A live panel is connected, so the line never shows there.
PANEL_CLASS = "jiter-magic-panel"
# The panel's last static HTML rides in the saved widget state as a hidden child of this class, so
# that nbconvert can show the panel as it was saved, not as it was first displayed (notebook/export.py).
STATIC_CLASS = "jiter-magic-static"
RECONNECT_LINE = "saved view, run the cell to reconnect"
PANEL_STYLE = (
    "<style>"
    f".{PANEL_CLASS} .jupyter-widgets-disconnected::before{{content:none;display:none}}"
    f".{PANEL_CLASS}.jupyter-widgets-disconnected::before{{content:'{RECONNECT_LINE}';display:block;"
    "font:italic var(--jp-ui-font-size1,13px) var(--jp-ui-font-family,sans-serif);"
    "color:var(--jp-ui-font-color1,#212121);padding:0 0 4px 0}"
    # ipywidgets' tabs shrink to share a fixed-width bar, clipping "Compile log" in a narrow
    # notebook (700 px with the file browser open): here each tab keeps its label's width and
    # the bar wraps onto a second row instead.
    f".{PANEL_CLASS} .widget-tab>.lm-TabBar{{flex:0 0 auto;min-height:var(--jp-widgets-horizontal-tab-height,24px)}}"
    f".{PANEL_CLASS} .widget-tab>.lm-TabBar .lm-TabBar-content{{flex-wrap:wrap}}"
    f".{PANEL_CLASS} .widget-tab>.lm-TabBar .lm-TabBar-tab{{flex:0 0 auto;min-width:max-content}}"
    "</style>"
)

# ----------------------------------------------------------------------------- the live panel
# What the Kernel tab can show of the chosen specialization: its source, or a compiled listing.
VIEWS = {"generated source": None, "PTX (CUDA)": "ptx", "SASS (CUDA)": "sass", "assembly (CPU)": "asm"}


KERNEL_TAB = 1  # the Kernel tab's index in Panel.TITLES


class Panel:
    """The ipywidgets tree for one function of any kind; it refreshes itself when the function compiles."""

    TITLES = ("Functor", "Kernel", "Compile log", "Cache")

    def __init__(self, fn: KernelFunction, name: str | None = None):
        import ipywidgets as w

        self._fn = weakref.ref(fn)  # the function owns the panel (through its listener), not the reverse
        self.name = name or fn.name  # the notebook name it was displayed by, else the C++ function's
        self.rebound_as: str | None = None  # set when the notebook name of fn now names another function
        self.header = w.HTML()
        self.functor = w.HTML(highlight(fn.code) + PANEL_STYLE)
        # The specialization takes a row; the view and the architecture share the next (any width)
        self.choice = w.Dropdown(description="Specialization", style={"description_width": "initial"},
                                 layout=w.Layout(width="auto", flex="1 1 100%", min_width="0"))
        self.view = w.Dropdown(description="Show", options=list(VIEWS), value="generated source",
                               layout=w.Layout(width="auto"), style={"description_width": "initial"})
        archs, preferred = cuda_archs(), preferred_arch()
        self.arch = w.Dropdown(description="CUDA architecture", options=archs,
                               value=preferred if preferred in archs else archs[-1], disabled=True,
                               layout=w.Layout(width="auto"), style={"description_width": "initial"})
        self.toolbar = w.HBox([self.choice, self.view, self.arch], layout=w.Layout(flex_flow="row wrap"))
        self.source = w.HTML("<p><i>The generated kernel shows when this tab is opened while the notebook's "
                             "kernel runs (run the cell).</i></p>")
        self.log = w.HTML()
        self.cache = w.HTML()
        self.tabs = w.Tab(children=[self.functor, w.VBox([self.toolbar, self.source]), self.log,
                                    self.cache], titles=self.TITLES)
        self.static = w.HTML(layout=w.Layout(display="none"))
        self.static.add_class(STATIC_CLASS)
        self.widget = w.VBox([self.header, self.tabs, self.static])
        self.widget.add_class(PANEL_CLASS)
        self._refreshing = False
        self.tabs.observe(self._show_source, names="selected_index")
        self.choice.observe(self._show_source, names="value")
        self.view.observe(self._show_source, names="value")
        self.arch.observe(self._show_source, names="value")
        fn.add_listener(self._on_specialization)
        fn.add_start_listener(self._on_build_start)
        weakref.finalize(fn, self._close_widgets)
        self.refresh()

    def _on_specialization(self, _specialization) -> None:
        self.refresh()

    def _on_build_start(self, spec, device: int) -> None:
        """Say in the header that a call waits for a build (replaced by the next refresh)."""
        fn = self._fn()
        if fn is not None:
            busy = html.escape(f"compiling {fn.describe_build(spec, device)}")
            self.header.value = f"{self._header(fn)}<div><i>{busy} &hellip;</i></div>"

    def _header(self, fn: Any) -> str:
        """The first line: the title and the kind's facts (panel_kinds.py), where calls run."""
        kind = kind_of(fn)
        notice = ("" if self.rebound_as is None else
                  f"<div><b>{html.escape(self.rebound_as)}</b> now names another function (its cell ran again); "
                  "this panel shows the earlier one.</div>")
        facts = " &middot; ".join([*kind.header_facts(fn), f"runs on {html.escape(kind.runs_on(fn))}"])
        return f"{notice}<b>{html.escape(self.name)}</b> {kind.summary_html(fn)} &middot; {facts}"

    def refresh(self) -> None:
        """Rebuild every tab from the function's specializations; select the newest one."""
        fn = self._fn()
        if fn is None:
            return
        specs = list(fn.specializations)
        self.header.value = self._header(fn)
        self._refreshing = True  # one highlight per refresh, not one per dropdown event
        try:
            self.choice.options = [(label(i, s), i) for i, s in enumerate(specs)]
            self.choice.value = len(specs) - 1 if specs else None
            self.choice.disabled = not specs
        finally:
            self._refreshing = False
        self._show_source()
        self.log.value = log_html(fn)
        self.cache.value = cache_html(fn, cache_stats())
        self.static.value = static_html(fn, self.name)

    def _show_source(self, _change: Any = None) -> None:
        if self._refreshing:
            return
        if self.tabs.selected_index != KERNEL_TAB:
            # Built when the tab is opened: a generated kernel's HTML is some 100 KB, which the
            # notebook would otherwise save with every panel, opened or not.
            return
        fn = self._fn()
        index = self.choice.value
        if fn is None or index is None:
            self.source.value = "<p><i>Not compiled yet: call the function, or fn.compile('float32', ...).</i></p>"
            return
        specialization = fn.specializations[index]
        kind = VIEWS[self.view.value]
        self.arch.disabled = kind not in ("ptx", "sass")
        if kind is None:
            self.source.value = kernel_html(specialization.source, specialization.backend)
            return
        try:  # compiled on demand, only when this view is chosen
            self.source.value = compiled_listing(fn, specialization, kind, self.arch.value)
        except (JiterError, OSError) as exc:
            self.source.value = f"<p><i>{html.escape(str(exc))}</i></p>"

    def rebound(self, name: str) -> None:
        """Say in the header that `name` now names another function."""
        self.rebound_as = name
        self.refresh()

    def close(self) -> None:
        """Stop listening and close the widget models (the frontend views go blank)."""
        fn = self._fn()
        if fn is not None:
            fn.remove_listener(self._on_specialization)
            fn.remove_start_listener(self._on_build_start)
            live = live_panels().get(fn, [])
            if self in live:
                live.remove(self)
        self._close_widgets()

    def _close_widgets(self) -> None:
        for widget in (self.widget, self.header, self.tabs, *self.tabs.children, self.toolbar, self.choice, self.view,
                       self.arch, self.source, self.static):
            widget.close()


class LivePanels:
    """Each function's live panels, held weakly by function: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.by_function: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def live_panels() -> weakref.WeakKeyDictionary:
    return RUNTIME.part(LivePanels).by_function


def panel(fn: KernelFunction, name: str | None = None) -> Panel:
    """A new live panel of `fn`, titled `name`: each display gets its own, so a tab chosen in one
    does not move another; all of them follow the function's new specializations."""
    made = Panel(fn, name)
    live_panels().setdefault(fn, []).append(made)
    return made


def panels(fn: KernelFunction) -> list[Panel]:
    """The live panels of `fn`."""
    return list(live_panels().get(fn, []))


def rebound(previous: KernelFunction, name: str) -> None:
    """`name` was bound to `previous` and now names another function: its panels say so."""
    for shown in panels(previous):
        shown.rebound(name)


def live_frontend() -> bool:
    """Whether to offer the widget: inside a Jupyter kernel, unless JITER_MAGIC_PANEL says otherwise."""
    mode = settings.PANEL.get()
    if mode in ("static", "widget"):
        return mode == "widget"
    if importlib.util.find_spec("ipywidgets") is None:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def mimebundle(fn: KernelFunction, include: Container[str] | None = None,
               exclude: Container[str] | None = None, name: str | None = None) -> dict[str, Any]:
    """`PanelDisplay._repr_mimebundle_` (displayed.py), for every kind: the live panel where a kernel can host
    it, static HTML and text always.

    A frontend that renders widgets picks the widget view; nbconvert (without widget state),
    nbval's comparison and plain frontends use the static forms, which stay byte-identical
    between runs. Every form is titled by `name`, by default the notebook name `fn` is bound to.
    """
    name = name or bound_name(fn)
    bundle: dict[str, Any] = {}
    if live_frontend():
        bundle.update(panel(fn, name).widget._repr_mimebundle_())
    bundle["text/plain"] = static_text(fn, name)
    bundle["text/html"] = static_html(fn, name)
    if include:  # the forms `_repr_mimebundle_`'s include and exclude ask for
        bundle = {k: v for k, v in bundle.items() if k in include}
    if exclude:
        bundle = {k: v for k, v in bundle.items() if k not in exclude}
    return bundle
