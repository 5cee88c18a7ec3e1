"""Notebook pages of the site: `%%jiterator` cells coloured as C++, links written for JupyterLab made
to work on the site too.

mkdocs-jupyter renders a notebook's HTML with nbconvert and colours each code cell with the kernel's
language, Python, so the C++ of a `%%jiterator` cell came out as mis-coloured Python. It writes each
cell's source, escaped, beside its coloured copy (for the copy button): this hook reads the source
there and colours the cells that open with a jiterator magic with Pygments' C++ lexer, the lexer
`jupyter nbconvert --to jiter_html` uses for them (jiter_magic/notebook/export.py).

A notebook's Markdown links are written for where the notebook lives in the repository, so that they
work in JupyterLab: `../docs/reductions.md#values-with-their-indices` from notebooks/. On the site the
notebook is the page notebooks/06_reductions/, where that path leads nowhere: this hook points each
link that reaches a file of the site (a page, another notebook) at that file's page. A link that
reaches nothing is left as it is, for site_check.py to report.

mkdocs-jupyter makes a notebook page's table of contents (the sidebar) from its headings with their
inline code dropped, so a heading such as "2. `torch.compile`" was listed as "2." and linked to an
anchor `#2` that nbconvert, which keeps the code in the heading's id, never wrote. This hook gives each
entry the id and the text of the heading it stands for, taken from the page as rendered.

A page that shows a jiter_magic panel gets the stylesheet `jupyter nbconvert --to jiter_html` gives
one (export.PANEL_CSS): the panel's code in the cells' code font and size.
"""
from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.structure.toc import AnchorLink
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer

from jiter_magic.notebook.export import CELL_MAGICS, PANEL_CSS, PANEL_MARK

# The coloured cell (mkdocs-jupyter's `highlight-ipynb hl-LANGUAGE` div) and the escaped source after it.
CELL = re.compile(r'<div class="highlight-ipynb hl-[\w+]+ ?"><pre>.*?</pre></div>(?P<between>\s*)'
                  r'(?P<copy><div [^>]*class="clipboard-copy-txt"[^>]*>(?P<source>.*?)</div>)', re.S)
LINK = re.compile(r'(?P<open><a\s[^>]*?href=")(?P<href>[^"]*)(?P<close>")')
CPP = HtmlFormatter(cssclass="highlight-ipynb hl-c++")
HEADING = re.compile(r'<h(?P<level>[1-6])\s[^>]*?id="(?P<id>[^"]+)"[^>]*>(?P<inner>.*?)</h(?P=level)>', re.S)
TAG = re.compile(r"<[^>]+>")


def _cpp_cell(match: re.Match[str]) -> str:
    source = html.unescape(match["source"])
    if not source.lstrip().startswith(CELL_MAGICS):
        return match[0]
    return highlight(source, CppLexer(), CPP) + match["between"] + match["copy"]


def _site_link(match: re.Match[str], page: Page, by_path: dict[str, File]) -> str:
    href = match["href"]
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path or href.startswith("/"):
        return match[0]  # another site, an anchor of this page, or a path from the site's root
    source = Path(os.path.realpath(page.file.abs_src_path or "")).parent
    target = by_path.get(os.path.realpath(source / parts.path))
    if target is None:
        return match[0]
    url = target.url_relative_to(page.file) + (f"#{parts.fragment}" if parts.fragment else "")
    return match["open"] + html.escape(url) + match["close"]


def _entries(toc: Iterable[AnchorLink]) -> Iterator[AnchorLink]:
    for entry in toc:
        yield entry
        yield from _entries(entry.children)


def _mend_toc(content: str, page: Page) -> None:
    """Each table-of-contents entry gets its heading's id and text: the entries follow the headings in
    order, one for one (mkdocs-jupyter makes both from the same Markdown cells)."""
    headings = [(int(h["level"]), h["id"], html.unescape(TAG.sub("", h["inner"])).rstrip("¶").strip())
                for h in HEADING.finditer(content)]
    entries = list(_entries(page.toc))
    if [level for level, _, _ in headings] != [entry.level for entry in entries]:
        return  # not one for one: left as made, for site_check.py to report any broken anchor
    for entry, (_, anchor, title) in zip(entries, headings):
        entry.id, entry.title = anchor, title


def on_page_content(content: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if not page.file.src_uri.endswith(".ipynb"):
        return content
    content = CELL.sub(_cpp_cell, content)
    _mend_toc(content, page)
    if PANEL_MARK in content:
        content += f"<style>{PANEL_CSS}</style>"
    # Each site file by the real path of its source: docs/notebooks is a link to ../notebooks, so a
    # notebook's own folder is the repository's notebooks/ here, as it is in JupyterLab.
    by_path = {os.path.realpath(f.abs_src_path): f for f in files if f.abs_src_path}
    return LINK.sub(lambda match: _site_link(match, page, by_path), content)
