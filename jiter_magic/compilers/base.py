"""What every compiler provides and returns, and how compiler logs are mapped back to the user's code."""
from __future__ import annotations

import re
from typing import NamedTuple, Protocol

from jiter_magic.codegen.names import KERNEL_FILE, USER_FILE

# Patterns as text, compiled (and kept) by `re` the first time a log is mapped, not at import.
_USER_LOCATION = rf"^{USER_FILE}(?:\((\d+)\)|:(\d+)(?::(\d+))?):\s*"
_USER_CONTEXT = rf"^{USER_FILE}: "  # g++: "jiterator: In instantiation of ...":
_KERNEL_LOCATION = rf"^(?:{KERNEL_FILE}|\S*jm_\w+\.(?:cu|cpp))(?:\((\d+)\)|:(\d+)(?::\d+)?):\s*"


class CompileResult(NamedTuple):
    binary: bytes
    log: str  # the compiler's own output (warnings on success), already mapped to user lines


class Compiler(Protocol):
    """Source to a loadable binary for one target; `build.py` owns keys, caching and timing."""

    @property
    def target(self) -> str:
        """What the binary runs on: 'sm_90', or 'host'."""

    @property
    def identity(self) -> str:
        """What, beside the source and options, decides the binary: part of the cache key."""

    def options(self) -> tuple[str, ...]: ...

    def compile(self, source: str, name: str, options: tuple[str, ...] | None = None) -> CompileResult:
        """The binary, or a CompileError carrying the mapped log."""


def map_log(log: str) -> str:
    """Rewrite compiler locations: the user's lines as 'line N', generated code as 'generated kernel'."""
    out = []
    for line in log.splitlines():
        match = re.match(_USER_LOCATION, line)
        if match:
            number = match.group(1) or match.group(2)
            column = f", column {match.group(3)}" if match.group(3) else ""
            line = f"line {number}{column}: " + line[match.end():]
        elif re.match(_USER_CONTEXT, line):
            line = line[len(USER_FILE) + 2:]
        else:
            match = re.match(_KERNEL_LOCATION, line)
            if match:
                line = "in the generated kernel: " + line[match.end():]
        out.append(line)
    return "\n".join(out).strip()


_MAPPED = r"^line (\d+)(?:, column (\d+))?: .*\b(?:error|warning)\b"


def with_source_lines(log: str, code: str) -> str:
    """After each 'line N: error' (or warning) of a mapped log, show line N of the user's code
    and, when the column is known, a `^` under it, as g++ does for files it can read (it cannot
    read the #line file); NVRTC prints both itself, and they are not repeated."""
    source = code.splitlines()
    rows = log.splitlines()
    out = []
    for index, row in enumerate(rows):
        out.append(row)
        match = re.match(_MAPPED, row)
        if not match:
            continue
        number = int(match.group(1))
        if 1 <= number <= len(source):
            text = source[number - 1].rstrip().expandtabs(8)  # g++ counts display columns, tabs to 8
            following = rows[index + 1].strip() if index + 1 < len(rows) else ""
            if text.strip() and following != text.strip():
                gutter = f"    {number} | "
                out.append(gutter + text)
                if match.group(2):
                    out.append(" " * (len(gutter) - 2) + "| " + " " * (int(match.group(2)) - 1) + "^")
    return "\n".join(out)
