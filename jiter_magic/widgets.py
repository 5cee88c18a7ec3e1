"""The inspection panel of a jitted function, and its static stand-in.

A live frontend (JupyterLab, Notebook 7, VS Code) gets an ipywidgets panel with four tabs:
the functor, the generated kernel of each specialization, the compile log and the cache.
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
import os
import weakref
from collections.abc import Container
from typing import Any

from pygments import highlight as _pygmentize
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, CudaLexer

import jiter_magic
from jiter_magic import JitFunction

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# JITER_MAGIC_PANEL=static forces the static form (e.g. when storing notebook outputs), =widget the panel.
PANEL_ENV = "JITER_MAGIC_PANEL"


# ----------------------------------------------------------------------------- text pieces
def highlight(code: str, backend: str = "cpu", first_line: int = 1) -> str:
    """C++ (or CUDA) source as self-contained HTML, its lines numbered as the compiler numbers them."""
    lexer = CudaLexer() if backend == "cuda" else CppLexer()
    formatter = HtmlFormatter(noclasses=True, linenos="inline", linenostart=first_line, style="default")
    return f'<div style="max-height:32em;overflow:auto">{_pygmentize(code, lexer, formatter)}</div>'


def kernel_html(source: str, backend: str) -> str:
    """Generated source with its prelude (everything before the user's `#line 1`) folded away."""
    lines = source.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("#line 1 ")), 0)
    body = highlight("".join(lines[start:]), backend, first_line=start + 1)
    if not start:
        return body
    prelude = highlight("".join(lines[:start]), backend)
    return (f"<details><summary>prelude: {start} lines of definitions the functor may use</summary>"
            f"{prelude}</details>{body}")


def _kwargs_text(fn: JitFunction) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in fn.kwargs.items()) or "none"


def _label(index: int, specialization) -> str:
    return f"#{index} {specialization.backend}: {specialization.spec.describe()}"


def static_text(fn: JitFunction) -> str:
    """Plain text of a function: stable across runs and machines of one kind (no timings or paths)."""
    lines = [
        f"JitFunction {fn.name}: {fn.functor.signature}",
        f"  kwargs: {_kwargs_text(fn)}",
        f"  outputs: {fn.num_outputs}, backend: {fn.backend}",
        f"  specializations: {len(fn.specializations)}",
    ]
    lines += [f"    {_label(i, s)}" for i, s in enumerate(fn.specializations)]
    return "\n".join(lines)


def static_html(fn: JitFunction) -> str:
    """HTML of a function without widgets: the same facts as `static_text`, plus the code."""
    rows = "".join(
        f"<tr><td>#{i}</td><td>{s.backend}</td><td><code>{html.escape(s.spec.describe())}</code></td></tr>"
        for i, s in enumerate(fn.specializations)
    )
    table = (f"<table><tr><th></th><th>backend</th><th>specialization</th></tr>{rows}</table>"
             if rows else "<p><i>no specialization compiled yet</i></p>")
    return (
        f'<div class="jiter-magic">'
        f"<p><b>{html.escape(fn.name)}</b> <code>{html.escape(fn.functor.signature)}</code><br>"
        f"kwargs: <code>{html.escape(_kwargs_text(fn))}</code>; outputs: {fn.num_outputs}; "
        f"backend: {fn.backend}</p>"
        f"<pre>{html.escape(fn.code)}</pre>{table}</div>"
    )


def _log_html(specializations: list) -> str:
    if not specializations:
        return "<p><i>nothing compiled yet</i></p>"
    parts = []
    for i, s in enumerate(specializations):
        how = (f"compiled in {s.compile_seconds:.3f} s" if s.cache_event == "compiled"
               else "loaded from the disk cache")
        log = html.escape(s.log.strip()) or "<i>(empty: no warnings)</i>"
        parts.append(
            f"<h4>{html.escape(_label(i, s))}</h4>"
            f"<p>target <code>{html.escape(s.target)}</code>, {how}<br>"
            f"options <code>{html.escape(' '.join(s.options))}</code></p><pre>{log}</pre>"
        )
    return "".join(parts)


def _cache_html(specializations: list, stats: dict) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("", "backend", "specialization", "event", "key", "file", "size",
                                              "compile s"))
    rows = "".join(
        f"<tr><td>#{i}</td><td>{s.backend}</td><td><code>{html.escape(s.spec.describe())}</code></td>"
        f"<td>{s.cache_event}</td><td><code title='{s.cache_key}'>{s.cache_key[:12]}</code></td>"
        f"<td><code>{html.escape(s.cache_file or '(not stored)')}</code></td><td>{s.binary_size}</td>"
        f"<td>{s.compile_seconds:.3f}</td></tr>"
        for i, s in enumerate(specializations)
    )
    totals = (f"<p>cache root <code>{html.escape(str(stats['root']))}</code>: {stats['entries']} entries, "
              f"{stats['bytes']} bytes; this process: {stats['memory_hits']} memory hits, "
              f"{stats['disk_hits']} disk hits, {stats['compiles']} compiles "
              f"({stats['compile_seconds']:.2f} s)</p>")
    table = f'<table class="jiter-magic-cache"><tr>{head}</tr>{rows}</table>'
    return f'<div style="overflow-x:auto">{table}</div>{totals}'


# ----------------------------------------------------------------------------- the live panel
class Panel:
    """The ipywidgets tree for one function; it refreshes itself when the function compiles."""

    TITLES = ("Functor", "Kernel", "Compile log", "Cache")

    def __init__(self, fn: JitFunction):
        import ipywidgets as w

        self._fn = weakref.ref(fn)  # the function owns the panel (through its listener), not the reverse
        self.header = w.HTML()
        self.functor = w.HTML(highlight(fn.code))
        self.choice = w.Dropdown(description="Specialization", layout=w.Layout(width="95%"),
                                 style={"description_width": "initial"})
        self.source = w.HTML()
        self.log = w.HTML()
        self.cache = w.HTML()
        self.tabs = w.Tab(children=[self.functor, w.VBox([self.choice, self.source]), self.log, self.cache],
                          titles=self.TITLES)
        self.widget = w.VBox([self.header, self.tabs])
        self._refreshing = False
        self.choice.observe(self._show_source, names="value")
        fn.add_listener(self._on_specialization)
        weakref.finalize(fn, self._close_widgets)
        self.refresh()

    def _on_specialization(self, _specialization) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Rebuild every tab from the function's specializations; select the newest one."""
        fn = self._fn()
        if fn is None:
            return
        specs = list(fn.specializations)
        self.header.value = (f"<b>{html.escape(fn.name)}</b> <code>{html.escape(fn.functor.signature)}</code> "
                             f"&middot; kwargs <code>{html.escape(_kwargs_text(fn))}</code> &middot; "
                             f"{fn.num_outputs} output(s) &middot; backend {fn.backend}")
        self._refreshing = True  # one highlight per refresh, not one per dropdown event
        try:
            self.choice.options = [(_label(i, s), i) for i, s in enumerate(specs)]
            self.choice.value = len(specs) - 1 if specs else None
            self.choice.disabled = not specs
        finally:
            self._refreshing = False
        self._show_source()
        self.log.value = _log_html(specs)
        self.cache.value = _cache_html(specs, jiter_magic.cache_stats())

    def _show_source(self, _change: Any = None) -> None:
        if self._refreshing:
            return
        fn = self._fn()
        index = self.choice.value
        if fn is None or index is None:
            self.source.value = "<p><i>Not compiled yet: call the function, or fn.compile('float32', ...).</i></p>"
            return
        specialization = fn.specializations[index]
        self.source.value = kernel_html(specialization.source, specialization.backend)

    def close(self) -> None:
        """Stop listening and close the widget models (the frontend views go blank)."""
        fn = self._fn()
        if fn is not None:
            fn.remove_listener(self._on_specialization)
            _PANELS.pop(fn, None)
        self._close_widgets()

    def _close_widgets(self) -> None:
        for widget in (self.widget, self.header, self.tabs, *self.tabs.children, self.choice, self.source):
            widget.close()


_PANELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def panel(fn: JitFunction) -> Panel:
    """The one panel of `fn` (created on first use; displaying it again shows the same live model)."""
    existing = _PANELS.get(fn)
    if existing is None:
        existing = _PANELS[fn] = Panel(fn)
    return existing


def _live_frontend() -> bool:
    """Whether to offer the widget: inside a Jupyter kernel, unless JITER_MAGIC_PANEL says otherwise."""
    mode = os.environ.get(PANEL_ENV, "auto").lower()
    if mode in ("static", "widget"):
        return mode == "widget"
    if importlib.util.find_spec("ipywidgets") is None:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def mimebundle(fn: JitFunction, include: Container[str] | None = None,
               exclude: Container[str] | None = None) -> dict[str, Any]:
    """`JitFunction._repr_mimebundle_`: the live panel where a kernel can host it, static HTML and text always.

    A frontend that renders widgets picks the widget view; nbconvert (without widget state),
    nbval's comparison and plain frontends use the static forms, which stay byte-identical
    between runs.
    """
    bundle: dict[str, Any] = {}
    if _live_frontend():
        bundle.update(panel(fn).widget._repr_mimebundle_())
    bundle["text/plain"] = static_text(fn)
    bundle["text/html"] = static_html(fn)
    if include:
        bundle = {k: v for k, v in bundle.items() if k in include}
    if exclude:
        bundle = {k: v for k, v in bundle.items() if k not in exclude}
    return bundle
