"""nbconvert's HTML of a notebook saved with widget state: jiter_magic's panels drawn offline, cells as C++.

The notebook is executed by nbclient in a real kernel with the live panel, and nbclient stores
the widget state in its metadata as JupyterLab does on save; the HTML is real nbconvert's.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")
pytest.importorskip("ipywidgets")

from jiter_magic.notebook.export import PanelHTMLExporter, StaticPanels  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CELLS = [
    "%load_ext jiter_magic",
    "%%jiterator axpy alpha=2.0\ntemplate <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }",
    "import numpy as np\nprint(axpy(np.ones(3), np.arange(3.0)))",
    "import ipywidgets\nipywidgets.IntSlider(3)",  # a widget of another library keeps its view
]
WIDGET_SCRIPT = "@jupyter-widgets/html-manager"  # what nbconvert's template loads from the CDN


def _kernel_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
            "JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache"), "JITER_MAGIC_PANEL": "widget",
            "JITER_MAGIC_NOTICE_AFTER": "off"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A notebook run in a real kernel and saved with its widget state, as JupyterLab saves it."""
    tmp_path = tmp_path_factory.mktemp("export")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    env = _kernel_env(tmp_path)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel nbclient starts inherits this process's environment
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    return path


def _panel_output(nb) -> dict:
    return next(o for o in nb.cells[1].outputs if "text/html" in o.get("data", {}))


def test_the_saved_notebook_holds_each_panel_as_a_widget_view_and_its_state(saved):
    nb = nbformat.read(saved, as_version=4)
    data = _panel_output(nb)["data"]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] in state
    assert data["text/html"].startswith('<div class="jiter-magic">')


def test_plain_nbconvert_draws_the_panel_only_through_the_cdn_script(saved):
    body, _ = nbconvert.HTMLExporter().from_filename(str(saved))
    assert WIDGET_SCRIPT in body and "unpkg.com" in body
    assert '<div class="jiter-magic">' not in body  # the static form is not shown: offline, nothing is


def _exported(saved: Path) -> str:
    body, _ = PanelHTMLExporter().from_filename(str(saved))
    return body


def test_the_panel_html_exporter_shows_the_static_panel(saved):
    body = _exported(saved)
    panel = body[body.index('<div class="jiter-magic">'):]
    text = re.sub(r"<[^>]+>", "", panel)
    assert "axpy template &lt;typename T&gt; T axpy(T x, T y, T alpha)" in text  # the functor's header
    assert "#1cpu(float64, float64) -&gt; (float64) compute float64, contiguous vec1, int64 index" in text
    assert "generated kernel of #1 cpu: (float64, float64)" in text and "jm_kernel" in text  # folded kernel
    assert "no warnings" in text  # the compile logs


def test_a_widget_of_another_library_keeps_its_view_and_the_script_that_draws_it(saved):
    body = _exported(saved)
    assert body.count('<script type="application/vnd.jupyter.widget-view+json">') == 1  # the slider's, not the panel's
    assert WIDGET_SCRIPT in body


def test_without_other_widgets_the_page_loads_no_widget_script(saved, tmp_path):
    nb = nbformat.read(saved, as_version=4)
    nb.cells = nb.cells[:3]
    only_panels = tmp_path / "panels.ipynb"
    nbformat.write(nb, only_panels)
    body = _exported(only_panels)
    assert WIDGET_SCRIPT not in body and "unpkg.com" not in body and "widget-state+json" not in body
    assert '<div class="jiter-magic">' in body


def _cell_input(body: str, index: int) -> str:
    inputs = re.findall(r'<div class="jp-InputArea jp-Cell-inputArea">(.*?)</div>\s*</div>\s*</div>', body, re.S)
    return inputs[index]


def test_jiterator_cells_are_highlighted_as_cpp(saved):
    plain, _ = nbconvert.HTMLExporter().from_filename(str(saved))
    assert '<span class="k">template</span>' not in _cell_input(plain, 1)  # IPython's lexer: plain text
    body = _exported(saved)
    cell = _cell_input(body, 1)
    assert '<span class="k">template</span>' in cell and '<span class="k">return</span>' in cell
    assert '<span class="k">import</span>' not in cell
    assert '<span class="kn">import</span>' in _cell_input(body, 2)  # a Python cell stays Python


def test_the_preprocessor_marks_backward_cells_too():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%%jiterator_backward sq\ntemplate <typename T> "
                                                                   "void sq_bwd(T x, T g, T& gx) { gx = 2 * x * g; }"),
                                         nbformat.v4.new_code_cell("%%jiterator\n"),
                                         nbformat.v4.new_code_cell("print(1)  # %%jiterator")])
    StaticPanels().preprocess(nb, {})
    assert [c.metadata.get("magics_language") for c in nb.cells] == ["c++", "c++", None]


def _convert(saved: Path, tmp_path: Path, *args: str, config: str | None = None) -> str:
    home = tmp_path / "config"
    home.mkdir(exist_ok=True)
    if config is not None:
        (home / "jupyter_nbconvert_config.py").write_text(config)
    env = {**_kernel_env(tmp_path), "JUPYTER_CONFIG_DIR": str(home)}
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", *args, str(saved), "--output-dir", str(tmp_path)],
                   check=True, capture_output=True, env=env)
    return (tmp_path / "saved.html").read_text()


def test_the_command_line_as_documented(saved, tmp_path):
    """`--to` the exporter (what the jiter_html entry point names), and `--to html` with the config line."""
    body = _convert(saved, tmp_path, "--to", "jiter_magic.notebook.export.PanelHTMLExporter")
    assert '<div class="jiter-magic">' in body
    configured = _convert(saved, tmp_path, "--to", "html",
                          config='c.HTMLExporter.preprocessors = ["jiter_magic.notebook.export.StaticPanels"]\n')
    assert '<div class="jiter-magic">' in configured and '<span class="k">template</span>' in configured
    project = (ROOT / "pyproject.toml").read_text()  # the entry point names this very class
    section = project[project.index('[project.entry-points."nbconvert.exporters"]'):].split("\n\n")[0]
    assert section.splitlines()[1:] == ['jiter_html = "jiter_magic.notebook.export:PanelHTMLExporter"']
