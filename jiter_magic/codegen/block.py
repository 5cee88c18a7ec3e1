"""`CodeBlock`: lines of generated C++ with their indentation, so no generator counts spaces.

Generators append statements with `line`, open a braced scope with `with code.block(head):`,
and embed another block's lines at the current depth with `extend`.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

INDENT = "  "


class CodeBlock:
    """An indented list of lines; `text()` joins them."""

    def __init__(self, *lines: str) -> None:
        self.lines: list[str] = []
        self.depth = 0
        for text in lines:
            self.line(text)

    def line(self, text: str) -> None:
        """One statement (or several lines joined by newlines), at the current depth."""
        pad = INDENT * self.depth
        self.lines.extend(pad + row for row in text.split("\n"))

    def extend(self, other: CodeBlock) -> None:
        """Another block's lines, nested at the current depth."""
        pad = INDENT * self.depth
        self.lines.extend(pad + row for row in other.lines)

    @contextmanager
    def block(self, head: str | None, close: str = "}") -> Iterator[None]:
        """`head {`, the lines added inside one level deeper, then `close` (`} else {` chains
        a second block with `head=None`)."""
        if head is not None:
            self.line(f"{head} {{" if head else "{")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        self.line(close)

    def text(self) -> str:
        return "\n".join(self.lines)
