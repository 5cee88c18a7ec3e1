"""C++ and CUDA source as HTML that follows the notebook's theme.

Pygments' own HTML carries fixed colors (a near-white background, dark grey names), which is
unreadable in JupyterLab's dark theme. Here every color is one of JupyterLab's theme variables
(the ones its own code editor uses), with a light-theme value as the fallback for frontends
that define none (nbconvert's classic template, a plain browser). Inline styles only: no
`<style>` element, which sanitizers drop from untrusted outputs.
"""
from __future__ import annotations

import html
from collections.abc import Container

from pygments.lexers import CppLexer, CudaLexer
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, Punctuation, String, _TokenType

# Token kind -> (JupyterLab variable, fallback, extra CSS); the first kind a token belongs to wins.
_STYLES: tuple[tuple[_TokenType, str, str, str], ...] = (
    (Comment.Preproc, "--jp-mirror-editor-meta-color", "#aa22ff", ""),
    (Comment.PreprocFile, "--jp-mirror-editor-string-color", "#ba2121", ""),
    (Comment, "--jp-mirror-editor-comment-color", "#408080", "font-style:italic"),
    (Keyword.Type, "--jp-mirror-editor-variable-3-color", "#0055aa", ""),
    (Keyword, "--jp-mirror-editor-keyword-color", "#008000", "font-weight:bold"),
    (Name.Function, "--jp-mirror-editor-def-color", "#0000ff", ""),
    (Name.Builtin, "--jp-mirror-editor-builtin-color", "#008000", ""),
    (Number, "--jp-mirror-editor-number-color", "#008800", ""),
    (String, "--jp-mirror-editor-string-color", "#ba2121", ""),
    (Operator, "--jp-mirror-editor-operator-color", "#aa22ff", "font-weight:bold"),
    (Punctuation, "--jp-mirror-editor-punctuation-color", "#0055aa", ""),
    (Error, "--jp-mirror-editor-error-color", "#ff0000", ""),
)
# width 0 with min-width 100%: the box takes its container's width without asking for its widest
# line's, so at a narrow width the box scrolls sideways (not the whole widget, or the page).
BOX_STYLE = ("max-height:32em;overflow:auto;width:0;min-width:100%;box-sizing:border-box;"
             "border:1px solid var(--jp-border-color2,#e0e0e0);"
             "background:var(--jp-cell-editor-background,#f7f7f7);color:var(--jp-content-font-color1,#212121)")
# Lines never wrap (a wrapped line breaks mid-word at a narrow width): the box scrolls sideways.
PRE_STYLE = ("margin:0;padding:4px 6px;background:transparent;color:inherit;line-height:1.3;"
             "white-space:pre;overflow-wrap:normal;word-break:normal;overflow:visible")  # the box scrolls
LINE_NUMBER_STYLE = "color:var(--jp-content-font-color1,#212121);user-select:none"  # color2 falls short of 4.5:1
# Three parts the theme's colour, one part its text colour: JupyterLab's own editor colours fall
# short of 4.5:1 for some tokens (comments 4.17:1 in its light theme, 3.54:1 in dark; `#include`
# 3.36:1 in dark; its error red 4.37:1 in dark), and the text colour, which contrasts with the
# background in every theme, lifts each above it while keeping its hue (tests/notebook/
# test_panel_contrast.py computes it). A browser without color-mix() (before 2023) shows tokens
# uncoloured, and the line-number marker in its plain colour (`colour` declares that first).
MIX_SHARE = 75


def mixed(variable: str, fallback: str) -> str:
    """A theme variable's colour mixed with the theme's text colour."""
    return f"color-mix(in srgb,var({variable},{fallback}) {MIX_SHARE}%,var(--jp-content-font-color1,#212121))"


def colour(variable: str, fallback: str) -> str:
    """`color:` declarations of `mixed`, the plain colour first for browsers without color-mix()."""
    return f"color:var({variable},{fallback});color:{mixed(variable, fallback)}"


# A token's span names its colour by a short custom property (`--jm3`) that the code's box defines
# once: the mixed colour spelled out on every token made a generated kernel's HTML 330 KB, saved
# in the notebook's widget state with each panel.
def _property(index: int) -> str:
    return f"--jm{index}"


# A line the compiler named
MARKED_STYLE = colour("--jp-error-color1", "#d32f2f") + ";font-weight:bold;user-select:none"


def _style_of(kind: _TokenType) -> str:
    for index, (family, _variable, _fallback, extra) in enumerate(_STYLES):
        if kind in family:
            return f"color:var({_property(index)})" + (f";{extra}" if extra else "")
    return ""


def _properties(body: str) -> str:
    """The custom properties of the token colours `body` uses, as the box's style declares them."""
    return "".join(f"{_property(i)}:{mixed(variable, fallback)};" for i, (_family, variable, fallback, _extra)
                   in enumerate(_STYLES) if f"var({_property(i)})" in body)


def _line_html(tokens: list[tuple[_TokenType, str]]) -> str:
    """One line's spans, neighbours of one style merged (`#` and `include` make one span)."""
    runs: list[list[str]] = []  # [style, text]
    for kind, text in tokens:
        style = _style_of(kind) if text.strip() else ""
        if runs and runs[-1][0] == style:
            runs[-1][1] += text
        else:
            runs.append([style, text])
    return "".join(f'<span style="{style}">{html.escape(text)}</span>' if style else html.escape(text)
                   for style, text in runs)


def _numbered(number: int, width: int, marked: bool) -> str:
    text = f">{number}" if marked else str(number)
    return f'<span style="{MARKED_STYLE if marked else LINE_NUMBER_STYLE}">{text:>{width}}</span> '


def plain(code: str) -> str:
    """Source in the same box as `highlight`, uncoloured and unnumbered: a fifth of its size, for a
    copy the notebook saves but seldom shows (the static form's folded generated kernel)."""
    return f'<div class="jiter-magic-code" style="{BOX_STYLE}"><pre style="{PRE_STYLE}">{html.escape(code)}</pre></div>'


def highlight(code: str, backend: str = "cpu", first_line: int = 1, marked: Container[int] = ()) -> str:
    """Source as self-contained HTML, its lines numbered from `first_line` as the compiler numbers them;
    the numbers in `marked` (say, the lines a compile error names) get a `>` and the error colour."""
    body_code = code.lstrip("\n")  # a magic's functor starts on the cell's line 2: number it so, show no blank
    first_line += len(code) - len(body_code)
    code = body_code
    lexer = CudaLexer(stripnl=False, ensurenl=False) if backend == "cuda" else CppLexer(stripnl=False, ensurenl=False)
    lines: list[list[tuple[_TokenType, str]]] = [[]]
    for kind, text in lexer.get_tokens(code):
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                lines.append([])
            if piece:
                lines[-1].append((kind, piece))
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the newline that ends the last line opens no new one
    width = len(str(first_line + len(lines) - 1)) + (1 if marked else 0)
    body = "\n".join(_numbered(first_line + i, width, first_line + i in marked) + _line_html(line)
                     for i, line in enumerate(lines))
    return (f'<div class="jiter-magic-code" style="{_properties(body)}{BOX_STYLE}"><pre style="{PRE_STYLE}">'
            f"{body}</pre></div>")
