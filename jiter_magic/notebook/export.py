"""nbconvert's HTML of a notebook with jiter_magic panels: the panels drawn offline, the cells as C++.

A saved notebook keeps each panel twice: as a widget view (with the widget state JupyterLab
saves in the notebook's metadata) and as the static HTML every display also carries. nbconvert
prefers the widget view wherever the state was saved, and draws it with the widgets' script
from a CDN: offline the panel is not drawn at all. `StaticPanels` drops the widget view of each
output that carries a jiter_magic panel's static HTML beside it, so nbconvert renders static
HTML instead (the functor, the specializations, the newest generated kernel and the compile logs,
folded): the one the saved widget state holds, which the live panel kept up to date until the
notebook was saved, or else the one stored when the panel was displayed. It drops the saved widget
state once no widget view is left, so the page loads no widget script. It also marks `%%jiterator`
and `%%jiterator_backward` cells as C++ (`magics_language`, which nbconvert's highlighter reads),
as IPython's lexer would show their body as plain text. Where a panel is shown, it adds PANEL_CSS to
the page's stylesheets, so that the panel's code is set as the cells' code is.

Enabled by `jupyter nbconvert --to jiter_html notebook.ipynb` (the `PanelHTMLExporter`, an
`nbconvert.exporters` entry point), or for `--to html` itself by a line in
`jupyter_nbconvert_config.py`: `c.HTMLExporter.preprocessors = ["jiter_magic.notebook.export.StaticPanels"]`.
"""
from __future__ import annotations

from typing import Any

from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor

from jiter_magic.notebook.widgets import STATIC_CLASS, WIDGET_VIEW

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PANEL_MARK = '<div class="jiter-magic">'  # how static_html (panel_html.py) opens
CELL_MAGICS = ("%%jiterator ", "%%jiterator\n", "%%jiterator_backward")
CPP_LEXER = "c++"  # Pygments' name of its C++ lexer
# nbconvert's lab stylesheet gives HTML outputs' `pre` the page's proportional font
# (`.jp-OutputArea-output pre { font-family: inherit }`) and both `pre` and `code` the size of the text
# around them, so a panel's functor and generated kernel came out in a proportional font, larger than
# the cells' code. These rules give them the font and size of the cells' code (the variables of
# JupyterLab's theme, which the page defines); a class and two element names outrank lab's rules, a
# class and one element. Only exported pages get them: the panel's HTML itself (code_html.py) is the
# live panel's too, and inline styles only.
PANEL_CSS = ("div.jiter-magic pre, div.jiter-magic code { font-family: var(--jp-code-font-family, monospace); "
             "font-size: var(--jp-code-font-size, 13px); }")


def is_jiterator_cell(cell: Any) -> bool:
    """A code cell whose first line is a `%%jiterator` or `%%jiterator_backward` magic."""
    return cell.get("cell_type") == "code" and cell.get("source", "").lstrip().startswith(CELL_MAGICS)


def _is_panel(output: Any) -> bool:
    data = output.get("data", {})
    return WIDGET_VIEW in data and str(data.get("text/html", "")).startswith(PANEL_MARK)


def _shows_panel(output: Any) -> bool:
    """An output the page draws as a panel's static HTML (its widget view, if any, already dropped)."""
    data = output.get("data", {})
    return WIDGET_VIEW not in data and str(data.get("text/html", "")).startswith(PANEL_MARK)


def saved_static_html(view: dict, state: dict) -> str | None:
    """The static HTML a panel's saved widget state holds (its hidden child of class STATIC_CLASS):
    the panel as it was when the notebook was saved. None where the state has no such child."""
    panel = state.get(view.get("model_id"), {}).get("state", {})
    for reference in panel.get("children", []):
        child = state.get(str(reference).removeprefix("IPY_MODEL_"), {}).get("state", {})
        if STATIC_CLASS in child.get("_dom_classes", []):
            return child.get("value")
    return None


class StaticPanels(Preprocessor):
    """jiter_magic panels as their static HTML, and `%%jiterator` cells highlighted as C++."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._state: dict[str, Any] = {}  # the notebook's saved widget models by id, while one is processed

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        self._state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        nb, resources = super().preprocess(nb, resources)
        if any(_shows_panel(output) for cell in nb.cells for output in cell.get("outputs", [])):
            # nbconvert's templates write each of resources["inlining"]["css"] into a <style> of the page
            resources.setdefault("inlining", {}).setdefault("css", []).append(PANEL_CSS)
        views_left = any(WIDGET_VIEW in output.get("data", {})
                         for cell in nb.cells for output in cell.get("outputs", []))
        widgets = nb.metadata.get("widgets", {})
        if not views_left and WIDGET_STATE in widgets:
            del widgets[WIDGET_STATE]  # nothing left to draw with it: the page loads no widget script
            if not widgets:
                del nb.metadata["widgets"]
        return nb, resources

    def preprocess_cell(self, cell: Any, resources: dict, index: int) -> tuple[Any, dict]:
        if is_jiterator_cell(cell):
            cell.metadata["magics_language"] = CPP_LEXER
        for output in cell.get("outputs", []):
            if _is_panel(output):
                data = output["data"]
                saved = saved_static_html(data.pop(WIDGET_VIEW), self._state)
                if saved:  # the panel as saved; the display-time HTML otherwise
                    data["text/html"] = saved
        return cell, resources


class PanelHTMLExporter(HTMLExporter):
    """nbconvert's HTML exporter with `StaticPanels` first: `jupyter nbconvert --to jiter_html`."""

    export_from_notebook = "HTML, jiter_magic panels drawn offline"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register_preprocessor(StaticPanels, enabled=True)
