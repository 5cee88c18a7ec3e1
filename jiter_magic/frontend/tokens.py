"""Tokens of a C++ code string, and bracket matching over them.

Shared by the top-level scan (parse.py) and the declarator reader (parse_decl.py); kept apart
so that neither imports the other.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from jiter_magic.errors import ParseError

# Identifiers start with a Unicode letter or '_' (never a digit) and go on with word characters or
# any other non-ASCII, non-space character: GCC >= 10 and NVRTC take UTF-8 identifiers, and
# combining marks (a decomposed 'ö', Devanagari vowel signs) are not `\w` in Python. A line comment
# or a preprocessor line ending in a backslash goes on over the next line, as the compiler splices it.
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//(?:\\[ \t]*\r?\n|[^\n])*|/\*.*?\*/)
  | (?P<pp>\#(?:\\[ \t]*\r?\n|[^\n])*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>[^\W\d](?:\w|[^\x00-\x7f\s])*)
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<punct>::|->|&&|\|\||<<=|>>=|[-+*/%&|^!=<>]=|\+\+|--|.)
    """,
    re.VERBOSE | re.DOTALL,
)
_DEFINE = r"\#\s*define\s+([^\W\d]\w*)\b"  # compiled (and kept by `re`) at its first use
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}


class Token(NamedTuple):
    kind: str
    text: str
    line: int  # 1-based line in the code string


def tokenize(code: str) -> list[Token]:
    """Split C++ source into tokens, dropping white space, comments and preprocessor lines."""
    tokens: list[Token] = []
    line = 1
    for match in _TOKEN.finditer(code):
        kind = match.lastgroup or "punct"
        text = match.group()
        if kind not in ("ws", "comment", "pp"):
            tokens.append(Token(kind, text, line))
        line += text.count("\n")
    return tokens


def defined_macros(code: str) -> frozenset[str]:
    """Names the code string `#define`s: a return type spelled with one of them cannot be checked
    before the preprocessor runs, so the declarator check leaves it to the compiler."""
    found = (re.match(_DEFINE, m.group()) for m in _TOKEN.finditer(code) if m.lastgroup == "pp")
    return frozenset(m.group(1) for m in found if m)


def macros_with_braces(code: str) -> frozenset[str]:
    """Names the code string `#define`s with a `{` in their replacement: such a macro can write a
    function definition (or its body), which the scan, reading the code before the preprocessor
    runs, cannot see."""
    found = set()
    for match in _TOKEN.finditer(code):
        if match.lastgroup != "pp":
            continue
        line = re.sub(r"\\[ \t]*\r?\n", " ", match.group())  # the continued lines, spliced
        define = re.match(_DEFINE + r"(\([^)]*\))?(.*)", line, re.DOTALL)
        if define and any(t.text == "{" for t in tokenize(define.group(3))):
            found.add(define.group(1))
    return frozenset(found)


def match_bracket(tokens: list[Token], start: int) -> int:
    """Index of the bracket closing the one at `start` (round, square or curly)."""
    stack = []
    for index in range(start, len(tokens)):
        text = tokens[index].text
        if text in _OPEN:
            stack.append(_OPEN[text])
        elif text in _CLOSE:
            if not stack or stack.pop() != text:
                raise ParseError(f"unbalanced '{text}' on line {tokens[index].line} of the code string")
            if not stack:
                return index
    raise ParseError(f"'{tokens[start].text}' on line {tokens[start].line} of the code string is never closed")


def match_angle(tokens: list[Token], start: int, what: str = "template <") -> int:
    """Index of the '>' closing the template parameter or argument list that opens at `start`."""
    depth = 0
    index = start
    while index < len(tokens):
        text = tokens[index].text
        if text in ("(", "[", "{"):
            index = match_bracket(tokens, index)
        elif text == "<":
            depth += 1
        elif text in (">", ">>"):
            depth -= len(text)
            if depth <= 0:
                return index
        index += 1
    raise ParseError(f"'{what}' on line {tokens[start].line} of the code string is never closed")


def split_commas(tokens: list[Token]) -> list[list[Token]]:
    """Split a token list on commas not nested in brackets; angle brackets count only before a
    default value's '=', where '<' and '>' are comparisons."""
    parts: list[list[Token]] = [[]]
    depth = angles = 0
    in_default = False
    for token in tokens:
        text = token.text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        elif not in_default and text == "<":
            angles += 1
        elif not in_default and text in (">", ">>"):
            angles = max(0, angles - len(text))
        elif text == "=" and depth == 0 and angles == 0:
            in_default = True
        if text == "," and depth == 0 and angles == 0:
            parts.append([])
            in_default = False
        else:
            parts[-1].append(token)
    return [part for part in parts if part]


def join(tokens: list[Token]) -> str:
    """Tokens back to text, with a space only where two words would otherwise run together."""
    out = ""
    for token in tokens:
        glue = out and (out[-1].isalnum() or out[-1] == "_") and (token.text[0].isalnum() or token.text[0] == "_")
        out += (" " if glue else "") + token.text
    return out
