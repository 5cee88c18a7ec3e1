"""The documentation site, built as tests/run.sh builds it (`mkdocs build --strict`), works offline.

No script or stylesheet comes from another host (the readthedocs theme's highlight.js came from a CDN:
offline, code was uncoloured and every page logged `hljs is not defined`); code is coloured by
Pygments as the site is built, `%%jiterator` cells of notebook pages as C++; no link is broken,
notebook pages included, and the notebooks' own links work where they live, in JupyterLab.
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocs_jupyter")

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//[^"'\s>]+""", re.I)
NOTEBOOK_LINK = re.compile(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"")


def _site_check():
    spec = importlib.util.spec_from_file_location("site_check", ROOT / "docs" / "hooks" / "site_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    return folder


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_no_page_fetches_a_script_or_stylesheet_from_another_host(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 15
    found = {path.relative_to(site).as_posix(): EXTERNAL.findall(path.read_text(encoding="utf-8")) for path in pages}
    assert {page: tags for page, tags in found.items() if tags} == {}
    assert not [path for path in pages if "hljs" in path.read_text(encoding="utf-8")]


def test_markdown_code_is_coloured_by_pygments_with_its_stylesheet(site):
    page = _page(site, "notebook")
    assert 'href="../css/pygments.css"' in page
    # the `%%jiterator` block, tagged c++: `template` and `typename` as C++ keywords
    block = re.search(r'<div class="language-c\+\+ highlight"><pre>.*?%%jiterator my_kernel.*?</pre>', page, re.S)
    assert block and '<span class="k">template</span>' in block[0]
    css = (site / "css" / "pygments.css").read_text(encoding="utf-8")
    assert re.search(r"^\.highlight \.k \{ color: #[0-9A-Fa-f]{6}", css, re.M)


def _cell_classes(page: str, opening: str) -> str:
    """The classes of the coloured code of the notebook cell whose source opens with `opening`."""
    cells = re.findall(r'<div class="(highlight-ipynb hl-[^"]*)"><pre>(.*?)</pre>', page, re.S)
    matching = [classes for classes, code in cells if re.sub(r"<[^>]+>", "", code).startswith(opening)]
    assert len(matching) == 1, (opening, len(matching))
    return matching[0]


def test_jiterator_cells_of_notebook_pages_are_coloured_as_cpp(site):
    page = _page(site, "notebooks/06_reductions")
    assert _cell_classes(page, "%%jiterator sum_sq --reduce").split() == ["highlight-ipynb", "hl-c++"]
    assert _cell_classes(page, "%load_ext jiter_magic").split()[1] == "hl-python"
    cell = re.search(r'<div class="highlight-ipynb hl-c\+\+"><pre>.*?</pre>', page, re.S)
    assert cell and '<span class="k">template</span>' in cell[0] and '<span class="k">typename</span>' in cell[0]


def test_notebook_pages_link_to_the_site_and_their_contents_to_their_headings(site):
    page = _page(site, "notebooks/06_reductions")
    assert 'href="../../reductions/#values-with-their-indices"' in page
    assert 'id="values-with-their-indices"' in _page(site, "reductions")
    # a heading with code in it: listed with its code, linked to the id nbconvert gave it
    beyond = _page(site, "notebooks/05_beyond")
    assert 'id="2-torchcompile"' in beyond
    assert re.search(r'<a class="reference internal" href="#2-torchcompile">2\. torch\.compile</a>', beyond)


def test_the_build_checks_every_link_and_source_of_the_site(site):
    assert _site_check().site_problems(site) == []


def test_the_site_check_reports_what_is_broken(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">Here</h2>', encoding="utf-8")
    (tmp_path / "index.html").write_text(
        '<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//cdn.example/x.css">'
        '<link rel="canonical" href="https://example.org/"><a href="https://example.org/">fine</a>'
        '<a href="a/">fine</a><a href="a/#here">fine</a><a href="#top" id="top">fine</a>'
        '<a href="b.md#x">dead</a><a href="a/#gone">dead anchor</a><img src="pic.png">', encoding="utf-8")
    assert _site_check().site_problems(tmp_path) == [
        "index.html: <script> fetched from another host: https://cdn.example/x.js",
        "index.html: <link> fetched from another host: //cdn.example/x.css",
        "index.html: <a> to a file the site does not have: b.md#x",
        "index.html: <a> to an anchor a/index.html does not have: a/#gone",
        "index.html: <img> to a file the site does not have: pic.png",
    ]


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_a_notebooks_relative_links_reach_files_where_it_lives(notebook: Path):
    """In JupyterLab a notebook's link is read from the notebook's folder: each must reach a file of the
    repository there (the site's build checks the anchors, on the pages those files become)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    links = [a or b for a, b in NOTEBOOK_LINK.findall(text)]
    relative = [link for link in links if not urlsplit(link).scheme and not link.startswith(("#", "/"))]
    dead = [link for link in relative if not (notebook.parent / urlsplit(link).path).exists()]
    assert dead == []
