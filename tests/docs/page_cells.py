"""The fenced code blocks of a Markdown page, each sorted into what a reader does with it.

A page's blocks are read top to bottom. Each is one of:

- a notebook cell: a ```python block, or any block whose first line is an IPython magic
  (`%load_ext jiter_magic`, a `%%jiterator` cell, tagged ```c++ or not);
- a shell command: a ```bash block;
- an example session checked elsewhere: a ```pycon block (tests/test_docs.py runs them as doctests);
- a block marked by an HTML comment on the line just above its fence (invisible on GitHub and on the
  site): `<!-- notebook: gpu -->`, a notebook cell that needs a CUDA GPU, or
  `<!-- notebook: not a cell (WHY) -->`, a ```python block that is not typed into a notebook (a
  line of a config file, say).

Any other block is an error that names its line: nothing is left out without a word in the page.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})(?P<lang>[^`\s]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*notebook:\s*(?P<what>gpu|not a cell\b.*?)\s*-->\s*$")
NOT_RUN = {"bash": "a shell command", "pycon": "a doctest (tests/test_docs.py)"}


class UnsortedBlock(ValueError):
    """A block the rules above do not place: its page must say what it is."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, counted from 1
    lang: str
    code: str
    kind: str  # "cell", "gpu cell", or why it is not run


def _kind(page: str, line: int, lang: str, code: str, marker: str | None) -> str:
    is_magic = code.lstrip().startswith("%")
    if marker == "gpu":
        if lang != "python" and not is_magic:
            raise UnsortedBlock(f"{page}:{line}: a block marked 'gpu' must be a notebook cell, not ```{lang}")
        return "gpu cell"
    if marker is not None:
        return marker  # "not a cell (why)"
    if lang == "python" or is_magic:
        return "cell"
    if lang in NOT_RUN:
        return NOT_RUN[lang]
    raise UnsortedBlock(
        f"{page}:{line}: a ```{lang} block that is neither a notebook cell (```python, or a first line "
        "starting with an IPython magic) nor a ```bash or ```pycon block: tag its language, or mark it "
        "with <!-- notebook: not a cell (why) --> on the line above")


def blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a page, in order."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        ticks, indent = opening["ticks"], len(opening["indent"])
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(ticks) and not lines[j].strip().strip("`")), None)
        if end is None:
            raise UnsortedBlock(f"{page}:{i + 1}: a fence that is never closed")
        code = "\n".join(line[indent:] for line in lines[i + 1:end])
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marked = MARKER.match(above)
        found.append(Block(page, i + 1, opening["lang"], code,
                           _kind(page, i + 1, opening["lang"], code, marked["what"] if marked else None)))
        i = end + 1
    return found


def page_blocks(path: Path) -> list[Block]:
    return blocks(path.read_text(encoding="utf-8"), path.name)
