"""The documentation's `>>>` examples (docs/*.md) run as doctests, on NumPy and the CPU backend."""
from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
FENCE = re.compile(r"^\s*```.*$", re.MULTILINE)


def _doctest(path: Path) -> doctest.DocTest:
    # A fence line closing a ```pycon block would read as expected output: blanked, so each example
    # ends there (the line numbers stay those of the file).
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return doctest.DocTestParser().get_doctest(text, {"__name__": path.stem}, path.name, str(path), 0)


PAGES = [page for page in sorted(DOCS.glob("*.md")) if _doctest(page).examples]


def test_docs_hold_examples():
    """A page whose examples stopped parsing (a lost `>>>`) would otherwise pass unnoticed."""
    assert "api.md" in [page.name for page in PAGES]
    assert sum(len(_doctest(page).examples) for page in PAGES) >= 15


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_doctests(page: Path):
    test = _doctest(page)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    messages: list[str] = []
    result = runner.run(test, out=messages.append)
    assert result.failed == 0, "".join(messages)
