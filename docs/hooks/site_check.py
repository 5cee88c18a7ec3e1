"""Checks of the built site, after every build: nothing fetched from another host, no broken link.

`mkdocs build --strict` already fails on a broken link or anchor of a Markdown page, but not on one
inside a notebook page (mkdocs-jupyter's HTML is not read for links), and nothing checks where a
page's scripts and stylesheets come from. So this hook reads every built HTML file and warns
(an error under --strict, as tests/run.sh builds) for:

- a script or stylesheet from another host (`<script src="https://...">`, `<link rel="stylesheet"
  href="//...">`): the site must work offline;
- a relative link, image, script or stylesheet whose file is not in the site, or whose `#anchor`
  is no id of that page.

`site_problems(site_dir)` is the check itself, for tests to run on a site of their own.
"""
from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import get_plugin_logger

log = get_plugin_logger(__name__)
# (tag, attribute) pairs that name another resource; a <link> only counts for these `rel`s.
REFERENCES = {("a", "href"), ("img", "src"), ("script", "src"), ("link", "href")}
FETCHED_LINKS = {"stylesheet", "icon", "preload", "modulepreload"}


class _Page(HTMLParser):
    """One page's references (tag, url) and the ids it defines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.references: list[tuple[str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.ids.update(values[key] for key in ("id", "name") if values.get(key))
        for kind, attribute in REFERENCES:
            if tag != kind or attribute not in values:
                continue
            if tag == "link" and not FETCHED_LINKS & set(values.get("rel", "").split()):
                continue  # rel="canonical" and the like name a page, they fetch nothing
            self.references.append((tag, values[attribute]))


def _read(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def _target(site: Path, page: Path, path: str) -> Path:
    target = (site / path.lstrip("/")) if path.startswith("/") else (page.parent / path)
    return target / "index.html" if path.endswith("/") or target.is_dir() else target


def site_problems(site_dir: str | os.PathLike[str]) -> list[str]:
    """Every external script or stylesheet and every broken relative reference of the site's pages,
    as 'page: what'."""
    site = Path(site_dir)
    pages = {path: _read(path) for path in sorted(site.rglob("*.html"))}
    problems = []
    for path, page in pages.items():
        name = path.relative_to(site).as_posix()
        for tag, url in page.references:
            parts = urlsplit(url)
            if parts.scheme in ("http", "https") or url.startswith("//"):
                if tag != "a":
                    problems.append(f"{name}: <{tag}> fetched from another host: {url}")
                continue
            if parts.scheme or not (parts.path or parts.fragment):
                continue  # mailto:, data:, javascript:, an empty src
            target = _target(site, path, unquote(parts.path)) if parts.path else path
            if not target.is_file():
                problems.append(f"{name}: <{tag}> to a file the site does not have: {url}")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _read(target).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{name}: <{tag}> to an anchor {target.relative_to(site).as_posix()} "
                                    f"does not have: {url}")
    return problems


def on_post_build(config: MkDocsConfig) -> None:
    for problem in site_problems(config.site_dir):
        log.warning(problem)
