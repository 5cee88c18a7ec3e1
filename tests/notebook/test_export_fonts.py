"""`jupyter nbconvert --to jiter_html`: a panel's code is set in the cells' code font and size.

nbconvert's lab stylesheet gave the panel's functor and generated kernel the page's proportional
font, a size larger than the cells' code (issue 45, item 4). The page here is real nbconvert's HTML of
a notebook holding a real panel (a function compiled on the CPU, its static HTML as a display shows
it); the rules are read from the page and matched against its elements, and, where Chromium is
installed, a real browser's computed styles are compared.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")
bs4 = pytest.importorskip("bs4")

from jiter_magic import create_jit_fn  # noqa: E402
from jiter_magic.notebook.export import PANEL_CSS, PanelHTMLExporter  # noqa: E402
from jiter_magic.notebook.panel_html import static_html  # noqa: E402

FUNCTOR = "template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
PANEL_CODE = (".jiter-magic .jiter-magic-code pre", ".jiter-magic-generated .jiter-magic-code pre", ".jiter-magic p code")


def _notebook(with_panel: bool):
    """A `%%jiterator` cell whose output is the panel of the function it defines, compiled on the CPU."""
    cell = nbformat.v4.new_code_cell(f"%%jiterator axpy alpha=2.0\n{FUNCTOR}", execution_count=1)
    if with_panel:
        import numpy as np

        fn = create_jit_fn(FUNCTOR, alpha=2.0)
        fn(np.ones(3, dtype=np.float32), np.ones(3, dtype=np.float32))  # one specialization: a generated kernel
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": static_html(fn),
                                                                      "text/plain": "axpy"})]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    os.environ.setdefault("JITER_MAGIC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    body, _ = PanelHTMLExporter().from_notebook_node(_notebook(with_panel=True))
    path = tmp_path_factory.mktemp("fonts") / "panel.html"
    path.write_text(body, encoding="utf-8")
    return path


def _declarations(css: str) -> dict[str, dict[str, str]]:
    """selector -> {property: value} of a flat stylesheet (no @media), the way the page states them."""
    rules: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        values = dict((name.strip(), value.strip()) for name, value in
                      (item.split(":", 1) for item in body.split(";") if ":" in item))
        for selector in selectors.split(","):
            rules.setdefault(" ".join(selector.split()), {}).update(values)
    return rules


def test_the_page_gives_the_panels_code_the_cells_code_font_and_size(page):
    soup = bs4.BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    ours = [style.string for style in soup.find_all("style") if style.string and PANEL_CSS in style.string]
    assert len(ours) == 1
    rules = _declarations(PANEL_CSS)
    assert set(rules) == {"div.jiter-magic pre", "div.jiter-magic code"}
    for values in rules.values():
        assert values["font-family"] == "var(--jp-code-font-family, monospace)"
        assert values["font-size"] == "var(--jp-code-font-size, 13px)"
    # the rules reach the functor's box, the generated kernel's box and the code in the panel's text
    for selector in PANEL_CODE:
        elements = soup.select(selector)
        assert elements, selector
        assert all(any(element in soup.select(rule) for rule in rules) for element in elements), selector
    # and the page's own theme defines the two variables, as it does for the cells' code
    css = "".join(style.string or "" for style in soup.find_all("style"))
    assert re.search(r"--jp-code-font-family:\s*var\(--jp-code-font-family-default\)", css)
    assert re.search(r"--jp-code-font-family-default:[^;]*monospace;", css)
    assert re.search(r"--jp-code-font-size:\s*13px;", css)


def test_a_notebook_without_a_panel_gets_no_panel_stylesheet():
    body, _ = PanelHTMLExporter().from_notebook_node(_notebook(with_panel=False))
    assert PANEL_CSS not in body
    assert "hl-c" in body or 'class="highlight' in body  # the cell itself is still there


@pytest.mark.skipif(not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
                    reason="chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
def test_a_browser_sets_the_panels_code_as_the_cells_code(page):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.get(page.as_uri())
        styles = driver.execute_script(
            "return arguments[0].map(s => { const e = document.querySelector(s);"
            " if (!e) return null; const c = getComputedStyle(e); return [c.fontFamily, c.fontSize]; });",
            [".jp-InputArea-editor pre", *PANEL_CODE, ".jiter-magic p"])
    finally:
        driver.quit()
    cell, *code, text = styles
    assert cell is not None and cell[0].endswith("monospace")
    assert code == [cell] * len(PANEL_CODE)  # the same family and size as the cell's code
    assert text is not None and not text[0].endswith("monospace")  # the panel's prose stays the page's text
