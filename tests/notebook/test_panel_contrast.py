"""Every colour the panel paints text with, resolved as a browser resolves it in JupyterLab's light,
dark and high-contrast themes (and with no theme, nbconvert's page), has at least 4.5:1 contrast
(WCAG AA) against the background it is painted on.

The themes' variables are copied here (JupyterLab 4's own values, checked against the installed
theme stylesheets where JupyterLab is installed), so the test needs no browser: it reads the
panel's CSS (`var()` with fallbacks, `color-mix()`) and computes the ratio as the browser test
measures it on screen.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from jiter_magic.notebook import code_html, listings, panel_html

MIN_CONTRAST = 4.5

# The variables the panel's colours read, per theme (JupyterLab 4.x; `--md-*` are its Material palette).
_MATERIAL = {"md-grey-100": "#f5f5f5", "md-grey-200": "#eee", "md-grey-800": "#424242", "md-grey-900": "#212121",
             "md-red-500": "#f44336", "md-red-700": "#d32f2f", "md-green-400": "#66bb6a", "md-green-500": "#4caf50",
             "md-green-600": "#43a047", "md-blue-400": "#42a5f5", "md-blue-600": "#1e88e5"}
_EDITOR = "jp-mirror-editor-{}-color"
THEMES: dict[str, dict[str, str]] = {
    "light": {
        **{_EDITOR.format(k): v for k, v in {
            "meta": "#a2f", "string": "#ba2121", "comment": "#408080", "variable-3": "#085", "keyword": "green",
            "def": "#00f", "builtin": "green", "number": "#080", "operator": "#7800c2", "punctuation": "#05a",
            "error": "red"}.items()},
        "jp-cell-editor-background": "var(--md-grey-100,#f5f5f5)", "jp-layout-color1": "white",
        "jp-layout-color2": "var(--md-grey-200,#eee)", "jp-content-font-color1": "rgba(0,0,0,.87)",
        "jp-error-color1": "var(--md-red-700,#d32f2f)",
    },
    "dark": {
        **{_EDITOR.format(k): v for k, v in {
            "meta": "#a2f", "string": "#ff7070", "comment": "#408080", "variable-3": "var(--md-green-600,#43a047)",
            "keyword": "var(--md-green-500,#4caf50)", "def": "var(--md-blue-600,#1e88e5)",
            "builtin": "var(--md-green-600,#43a047)", "number": "var(--md-green-400,#66bb6a)",
            "operator": "#d48fff", "punctuation": "var(--md-blue-400,#42a5f5)", "error": "red"}.items()},
        "jp-cell-editor-background": "var(--jp-layout-color1)", "jp-layout-color1": "var(--md-grey-900,#212121)",
        "jp-layout-color2": "var(--md-grey-800,#424242)", "jp-content-font-color1": "#fff",
        "jp-error-color1": "var(--md-red-500,#f44336)",
    },
    "dark-high-contrast": {
        **{_EDITOR.format(k): v for k, v in {
            "meta": "#a2f", "string": "#ff7070", "comment": "#56acac", "variable-3": "var(--md-green-600)",
            "keyword": "#4eb352", "def": "var(--md-blue-600)", "builtin": "var(--md-green-600)",
            "number": "var(--md-green-400)", "operator": "#cc7cff", "punctuation": "var(--md-blue-400)",
            "error": "red"}.items()},
        "jp-cell-editor-background": "var(--jp-layout-color1)", "jp-layout-color1": "#111",
        "jp-layout-color2": "#424242", "jp-content-font-color1": "#fff", "jp-error-color1": "var(--md-red-500)",
    },
    "no theme (nbconvert)": {},  # every var() takes its fallback
}
_NAMED = {"white": "#ffffff", "black": "#000000", "green": "#008000", "red": "#ff0000", "blue": "#0000ff"}


def _split_arguments(text: str, separator: str = ",") -> list[str]:
    """`a, var(--b, c), d` -> ['a', 'var(--b, c)', 'd']: split at separators outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if char == separator and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _inside(text: str, function: str) -> str | None:
    if text.startswith(function + "(") and text.endswith(")"):
        return text[len(function) + 1:-1]
    return None


def resolve(value: str, variables: dict[str, str], background: tuple[float, ...] | None = None) -> tuple[float, ...]:
    """A CSS colour as opaque (r, g, b) 0-255, a translucent one composited over `background`."""
    value = value.strip()
    if (args := _inside(value, "var")) is not None:
        name, *fallback = _split_arguments(args)
        found = {**_MATERIAL, **variables}.get(name.removeprefix("--"))
        if found is None:
            assert fallback, f"{name} is undefined and has no fallback"
            found = fallback[0]
        return resolve(found, variables, background)
    if (args := _inside(value, "color-mix")) is not None:
        space, first, second = _split_arguments(args)
        assert space == "in srgb", value
        a_text, a_share = first.rsplit(" ", 1)
        share = float(a_share.rstrip("%")) / 100
        a, b = resolve(a_text, variables, background), resolve(second, variables, background)
        return tuple(share * x + (1 - share) * y for x, y in zip(a, b))
    value = _NAMED.get(value, value)
    if value.startswith("#"):
        digits = value[1:]
        if len(digits) == 3:
            digits = "".join(d * 2 for d in digits)
        rgb, alpha = tuple(int(digits[i:i + 2], 16) for i in (0, 2, 4)), 1.0
    else:
        args = _inside(value, "rgba") or _inside(value, "rgb")
        assert args is not None, f"unknown colour {value!r}"
        numbers = [float(n) for n in _split_arguments(args)]
        rgb, alpha = tuple(numbers[:3]), numbers[3] if len(numbers) == 4 else 1.0
    if alpha < 1:
        assert background is not None, f"{value} is translucent over nothing"
        rgb = tuple(alpha * c + (1 - alpha) * b for c, b in zip(rgb, background))
    return rgb


def contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    def luminance(rgb: tuple[float, ...]) -> float:
        linear = [(c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4) for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def declared(style: str, prop: str) -> str | None:
    """The last `prop:` declaration of an inline style (a later one overrides an earlier)."""
    declarations = [_split_declaration(d) for d in _split_arguments(style, ";") if d]
    values = [v for k, v in declarations if k == prop]
    return values[-1] if values else None


def _split_declaration(text: str) -> tuple[str, str]:
    key, _sep, value = text.partition(":")
    return key.strip(), value.strip()


# Every coloured piece of text the panel draws: (what, its style, the background style it sits on).
SAMPLE = ('#include <cmath>\n#define TWO 2\n// a comment\nfloat helper(float v) { return v + threadIdx.x; }\n'
          'template <typename T> T f(T x, int n) {\n  const char* s = "text"; return sqrt(x) * 2.5f + n; } @\n')


def _painted() -> list[tuple[str, str, str, dict[str, str]]]:
    """(text, its style, the background it sits on, the custom properties of its box)."""
    box = declared(code_html.BOX_STYLE, "background")
    assert box is not None
    found = []
    for page in (code_html.highlight(SAMPLE, "cpu", marked={3}), code_html.highlight(SAMPLE, "cuda")):
        box_style = re.match(r'<div class="jiter-magic-code" style="([^"]*)"', page).group(1)
        properties = {k.removeprefix("--"): v for k, v in (_split_declaration(d) for d in _split_arguments(box_style, ";"))
                      if k.startswith("--")}
        for style, text in re.findall(r'<span style="([^"]*)">([^<]*)</span>', page):
            found.append((text, style, box, properties))
    found.append(("plain code", code_html.BOX_STYLE, box, {}))
    listing = listings.listing_html("  mov r1, r2\n// line 2: return x;\n", "PTX")
    for style, text in re.findall(r'<span class="jiter-magic-user-line" style="([^"]*)">([^<]*)</span>', listing):
        background = declared(style, "background")
        assert background is not None
        found.append((text, code_html.BOX_STYLE, background, {}))  # a marked line: the box's text on its own colour
    return found


def test_the_sample_paints_every_token_kind_the_panel_styles():
    painted = _painted()
    styles = {style for _text, style, _background, _properties in painted}
    properties = {k: v for *_rest, found in painted for k, v in found.items()}
    for family, variable, _fallback, _extra in code_html._STYLES:
        used = [name for name, value in properties.items() if variable in value]
        assert used and any(f"var(--{used[0]})" in style for style in styles), f"{family} ({variable}) not in the sample"
    assert all(value.startswith("color-mix(in srgb,") for value in properties.values())
    assert any(code_html.MARKED_STYLE == style for style in styles)


@pytest.mark.parametrize("theme", list(THEMES))
def test_every_colour_of_the_panel_reaches_4_5_to_1(theme):
    variables = THEMES[theme]
    worst = []
    for text, style, background_css, properties in _painted():
        background = resolve(background_css, variables)
        colour = declared(style, "color")
        assert colour is not None, style
        ratio = contrast(resolve(colour, {**variables, **properties}, background), background)
        if ratio < MIN_CONTRAST:
            worst.append((round(ratio, 2), text.strip(), colour))
    assert not worst, f"{theme}: {sorted(set(worst))}"


def test_the_options_line_breaks_only_between_options():
    html_text = panel_html.options_html(("-O3", "-fopenmp", "-march=native"))
    assert html_text.count('style="white-space:nowrap"') == 3
    assert ">-march=native</code>" in html_text


def _installed_theme(name: str) -> str | None:
    import sys

    for root in (Path(sys.prefix), Path(sys.base_prefix)):
        css = root / "share/jupyter/lab/themes/@jupyterlab" / f"theme-{name}-extension" / "index.css"
        if css.is_file():
            return css.read_text()
    return None


@pytest.mark.parametrize("theme", [t for t in THEMES if t != "no theme (nbconvert)"])
def test_the_copied_variables_are_the_installed_jupyterlabs(theme):
    css = _installed_theme(theme)
    if css is None:
        pytest.skip("JupyterLab's theme stylesheets are not installed")
    declared_there = dict(re.findall(r"--([a-z0-9-]+)\s*:\s*([^;}]*)[;}]", css))
    for name, value in THEMES[theme].items():
        assert declared_there.get(name, "").replace(" ", "") == value.replace(" ", ""), name
