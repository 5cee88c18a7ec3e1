"""The code view's HTML: every colour a JupyterLab theme variable, text and numbering exact."""
from __future__ import annotations

import html
import re

import pytest

pytest.importorskip("pygments")

from jiter_magic.notebook.code_html import highlight  # noqa: E402

CODE = ('#include <cmath>\n'
        'template <typename T> T f(T x) {  // x < 1 & "quoted"\n'
        '  return x * 2.5f + ::sin(x);\n'
        '}\n')


def _text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_every_colour_is_a_theme_variable_with_a_fallback():
    markup = highlight(CODE)
    colours = re.findall(r"(?<![-\w])(?:color|background|--jm\d+):([^;\"]+)", markup)
    theme = r"var\(--jp-[\w-]+,#[0-9a-f]{6}\)"
    mixed = rf"color-mix\(in srgb,{theme} \d+%,var\(--jp-content-font-color1,#212121\)\)"
    short = r"var\(--jm\d+\)"  # a token's colour, one of those its box declares once
    assert colours and all(re.fullmatch(rf"{theme}|{mixed}|{short}|transparent|inherit", c) for c in colours), colours
    assert "<style" not in markup  # inline only: sanitizers drop <style> from untrusted outputs
    box = re.match(r'<div class="jiter-magic-code" style="([^"]*)"', markup).group(1)
    declared = dict(re.findall(r"(--jm\d+):(color-mix\([^;]*\)\));", box))

    def token(variable: str, fallback: str) -> str:
        found = [name for name, value in declared.items() if f"var({variable},{fallback})" in value]
        assert len(found) == 1, (variable, declared)
        return f'style="color:var({found[0]})'

    assert token("--jp-mirror-editor-keyword-color", "#008000") + ';font-weight:bold">template</span>' in markup
    assert token("--jp-mirror-editor-comment-color", "#408080") + \
        ';font-style:italic">// x &lt; 1 &amp; &quot;quoted&quot;' in markup
    assert token("--jp-mirror-editor-number-color", "#008800") + '">2.5f</span>' in markup
    assert token("--jp-mirror-editor-meta-color", "#aa22ff") + '">#include</span>' in markup  # one span


def test_text_is_the_code_with_line_numbers():
    lines = _text_of(highlight(CODE, "cuda", first_line=9)).splitlines()
    assert lines == [f"{9 + i:>2} {line}" for i, line in enumerate(CODE.splitlines())]


def test_a_functor_from_a_magic_cell_is_numbered_from_the_cells_line_2():
    # the magic hands "\n" + cell so that the compiler's line numbers are the editor's
    assert _text_of(highlight("\ntemplate <typename T> T g(T x) { return x; }")).splitlines() == [
        "2 template <typename T> T g(T x) { return x; }"]


def test_empty_and_unterminated_code():
    assert _text_of(highlight("")).splitlines() == ["1 "]
    assert _text_of(highlight("int a;")).splitlines() == ["1 int a;"]
