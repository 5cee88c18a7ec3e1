"""A real browser: JupyterLab on loopback, headless Debian Chromium, a `%%jiterator` cell, the panel.

It proves the part no kernel-side test can: that the widget bundle renders in JupyterLab
as four tabs, that the Kernel tab shows the generated source and the compiled code, that the
benchmark helper's sweep plot is drawn in the notebook, that jiter_magic's JupyterLab extension
edits the `%%jiterator` cell as C++ (keyword colours, not Python's), that the
panel follows a later cell's new specialization, that its code reads well in the light, dark and
high-contrast themes (measured contrast of every code token), and that a saved notebook reopened
with a fresh kernel shows the panels again, never "model not found", each with one "saved view"
line instead of a broken-link icon a view, and is not marked modified by opening it (the tree's
own extension bundle is served, ahead of any installed copy); that nbconvert's HTML of the saved
notebook, read with the network off, draws the panel and highlights the magic cell as C++; and
that at 700 px the Kernel tab's lists wrap, code scrolls sideways, and PTX of a CPU
specialization (NVRTC, no GPU) opens at the functor's marked instruction; with the file browser
open too, no tab label is clipped and each cache row takes one line; and that the saved notebook
stays under 200 KB. Skips with the reason
when Chromium, chromedriver, Selenium or JupyterLab is missing. Screenshots land in
test-artifacts/ (also when a test fails).
"""
from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jiter_magic.notebook.widgets import RECONNECT_LINE

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
LABEXTENSION = "jiter-magic-highlight"
SERVER_LIFETIME_S = 300  # hard bound on the JupyterLab process, whatever happens to this test

CELLS = [
    "%load_ext jiter_magic",
    "%%jiterator axpy alpha=2.0\ntemplate <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }",
    "import numpy as np\nprint(axpy(np.ones(3), np.arange(3.0)))",  # float64: a new specialization
    "%matplotlib inline\nimport jiter_magic\n"  # the benchmark helper's size sweep, drawn inline
    "swept = jiter_magic.sweep(axpy, lambda n: (np.ones(n), np.ones(n)), [2**10, 2**13, 2**16], repeat=3, warmup=1)\n"
    "swept.plot();",
]


def _missing() -> str | None:
    for path, what in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromedriver (Debian's chromium-driver)")):
        if not os.access(path, os.X_OK):
            return f"{what} is not installed (apt-get install chromium chromium-driver)"
    for module, package in (("selenium", "selenium"), ("jupyterlab", "jupyterlab"), ("ipykernel", "ipykernel")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (pip install {package})"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"cell{i}", "metadata": {}, "outputs": [],
              "source": source} for i, source in enumerate(CELLS)]
    kernelspec = {"display_name": "Python 3", "language": "python", "name": "python3"}
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": kernelspec},
                                "nbformat": 4, "nbformat_minor": 5}))


def _quiet_settings(settings: Path) -> None:
    """No news or update checks: the page stays offline and no toast covers the panel."""
    folder = settings / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True)
    (folder / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on 127.0.0.1 with isolated config, data, settings and cache folders; yields (url, token)."""
    home = tmp_path / "jupyter"
    for sub in ("config", "data", "runtime", "settings", "workspaces", "work"):
        (home / sub).mkdir(parents=True)
    _quiet_settings(home / "settings")
    # This tree's prebuilt JupyterLab extension, found before any installed copy (JUPYTER_PATH comes first)
    shutil.copytree(ROOT / "jiter_magic" / "labextension" / "built", home / "path" / "labextensions" / LABEXTENSION)
    _notebook(home / "work" / "panel.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_PATH": str(home / "path"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache"),
        "JITER_MAGIC_PANEL": "auto",
    }
    command = [
        "timeout", str(SERVER_LIFETIME_S), sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ip=127.0.0.1", f"--port={port}", "--port-retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={home / 'work'}", "--expose-app-in-browser",
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly", f"--ServerApp.shutdown_no_activity_timeout={SERVER_LIFETIME_S}",
    ] + (["--allow-root"] if os.geteuid() == 0 else [])
    log = open(tmp_path / "jupyterlab.log", "wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home / "work")
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(url, token, server, tmp_path / "jupyterlab.log")
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _wait_for_server(url: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within 90 s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors are asserted on
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_script_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


# The open notebook's panel, in JavaScript: the shell's current widget, or the main area's widget
# with a kernel session (JupyterLab 4.6 leaves the current widget unset in a window that never had
# the focus, as headless Chromium's).
NOTEBOOK_PANEL = ("(window.jupyterapp.shell.currentWidget || "
                  "Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.sessionContext))")

# The colour of the C++ keyword `template` and of the plain text around it in the magic cell's editor.
KEYWORD_COLOURS = """
const editor = NOTEBOOK_PANEL.content.widgets[1].node.querySelector('.cm-content');
const spans = [...editor.querySelectorAll('span')].filter(s => s.textContent.trim() === 'template');
if (!spans.length) return null;
return {template: getComputedStyle(spans[0]).color, plain: getComputedStyle(editor).color};
""".replace("NOTEBOOK_PANEL", NOTEBOOK_PANEL)

RUN_ALL = """
const done = arguments[arguments.length - 1];
(async () => {
  const app = window.jupyterapp;
  const panel = NOTEBOOK_PANEL;
  await panel.context.ready;
  await panel.sessionContext.ready;
  await app.commands.execute('notebook:run-all-cells');
  done('ok');
})().catch(error => done('error: ' + error));
""".replace("NOTEBOOK_PANEL", NOTEBOOK_PANEL)


def _run_all_cells(driver, url: str, token: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/lab/tree/panel.ipynb?reset&token={token}")
    WebDriverWait(driver, 120).until(ec.presence_of_element_located((By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")))
    WebDriverWait(driver, 60).until(lambda d: d.execute_script(
        f"const w = window.jupyterapp && {NOTEBOOK_PANEL};"
        "return !!(w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel);"))
    assert driver.execute_async_script(RUN_ALL) == "ok"


@pytest.mark.slow
def test_panel_renders_in_jupyterlab(lab, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        _run_all_cells(browser, url, token)
        # jiter_magic's JupyterLab extension: the %%jiterator cell is edited as C++, the others as Python
        mimes = browser.execute_script(
            f"return {NOTEBOOK_PANEL}.content.widgets.map(c => c.model.mimeType);")
        assert mimes[1] == "text/x-c++src" and mimes[2] == mimes[3] == "text/x-ipython", mimes
        keyword = WebDriverWait(browser, 30).until(lambda d: d.execute_script(KEYWORD_COLOURS))
        assert keyword["template"] != keyword["plain"], keyword  # `template` coloured as a C++ keyword
        tab_labels = WebDriverWait(browser, 120).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-OutputArea .widget-tab .lm-TabBar-tabLabel"))
        assert [label.text for label in tab_labels] == ["Functor", "Kernel", "Compile log", "Cache"]

        panel = browser.find_element(By.CSS_SELECTOR, ".jp-OutputArea .widget-tab")
        functor = panel.find_element(By.CSS_SELECTOR, ".widget-tab-contents .widget-html:not(.lm-mod-hidden)")
        assert "T axpy(T x, T y, T alpha)" in functor.get_attribute("textContent")

        tab_labels[1].click()  # the Kernel tab
        dropdown = WebDriverWait(browser, 30).until(
            lambda d: next((e for e in panel.find_elements(By.CSS_SELECTOR, "select") if e.is_displayed()), None))
        # the panel under cell 2 has followed the float64 call of cell 3, and shows its kernel
        WebDriverWait(browser, 30).until(lambda d: "#1 cpu: (float64, float64) -> (float64)" in dropdown.text)
        assert "#0 cpu: (float32, float32) -> (float32)" in dropdown.text
        source = WebDriverWait(browser, 30).until(lambda d: next(
            (e for e in panel.find_elements(By.CSS_SELECTOR, ".widget-html") if e.is_displayed()
             and "jm_kernel" in e.get_attribute("textContent")), None))
        text = source.get_attribute("textContent")
        assert 'extern "C" int jm_kernel' in text
        assert "return alpha * x + y;" in text and "double* jm_out0" in text

        plot = WebDriverWait(browser, 120).until(lambda d: next(
            (e for e in d.find_elements(By.CSS_SELECTOR, ".jp-OutputArea .jp-RenderedImage img")
             if d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", e)), None))
        assert browser.execute_script("return arguments[0].naturalWidth", plot) > 200  # the sweep's figure
        plot.screenshot(str(ARTIFACTS / "browser_benchmark_plot.png"))

        _choose(panel, "Show", "assembly (CPU)")  # the compiled-code view: g++ -S of the float64 kernel
        listing = WebDriverWait(browser, 60).until(lambda d: next(
            (e for e in panel.find_elements(By.CSS_SELECTOR, ".widget-html pre") if e.is_displayed()
             and "jm_kernel:" in e.get_attribute("textContent")), None))
        assert ".text" in listing.get_attribute("textContent")
        browser.save_screenshot(str(ARTIFACTS / "browser_panel_assembly.png"))
    finally:
        browser.save_screenshot(str(ARTIFACTS / "browser_panel.png"))


# The Kernel tab's toolbar and code box at a narrow width: every dropdown inside the panel, and the
# code box's lines unwrapped (wider than the box, which scrolls sideways).
NARROW_LAYOUT = """
const panel = arguments[0];
const right = panel.getBoundingClientRect().right;
const selects = [...panel.querySelectorAll('.widget-dropdown')].filter(d => d.offsetParent !== null);
const box = [...panel.querySelectorAll('.jiter-magic-code')].find(b => b.offsetParent !== null);
const pre = box.querySelector('pre');
return {selects: selects.map(d => [d.querySelector('label').textContent, d.getBoundingClientRect().right <= right + 1]),
        whiteSpace: getComputedStyle(pre).whiteSpace, scrollsSideways: box.scrollWidth > box.clientWidth,
        lineHeight: parseFloat(getComputedStyle(pre).lineHeight),
        longLine: [...pre.childNodes].length > 0};
"""

# The panel's tab labels cut short (an ellipsis), and the lines each of the Cache tab's rows takes.
TAB_LABELS_CLIPPED = """
return [...arguments[0].querySelectorAll('.widget-tab .lm-TabBar-tabLabel')]
  .filter(l => l.scrollWidth > l.clientWidth + 1).map(l => l.textContent);
"""
CACHE_ROW_LINES = """
const table = [...arguments[0].querySelectorAll('table.jiter-magic-cache')].find(t => t.offsetParent !== null);
if (!table) return null;
const lines = cell => {  // the text lines a cell's content takes: its boxes' distinct tops
  const range = document.createRange();
  range.selectNodeContents(cell);
  return new Set([...range.getClientRects()].map(box => Math.round(box.top))).size;
};
return [...table.rows].map(row => Math.max(...[...row.cells].map(lines)));
"""
OPEN_FILE_BROWSER = """
const done = arguments[arguments.length - 1];
window.jupyterapp.commands.execute('filebrowser:activate').then(() => done('ok'), error => done('error: ' + error));
"""
CLOSE_LEFT_AREA = """
const done = arguments[arguments.length - 1];
window.jupyterapp.shell.collapseLeft();
done('ok');
"""

# The listing box's scroll position and where its first marked line of the functor sits in it.
LISTING_SCROLL = """
const box = [...arguments[0].querySelectorAll('.jiter-magic-listing')].find(b => b.offsetParent !== null);
if (!box) return null;
const first = box.querySelector('.jiter-magic-user-line');
const top = first.getBoundingClientRect().top - box.getBoundingClientRect().top;
const before = box.textContent.split(first.textContent)[0].split('\\n').slice(-3).join('\\n');
return {scrollTop: box.scrollTop, firstLineInView: top >= 0 && top < box.clientHeight, text: first.textContent, before};
"""


@pytest.mark.slow
def test_the_kernel_tab_at_a_narrow_width(lab, browser):
    """700 px: the toolbar wraps, code scrolls sideways; PTX of a CPU specialization opens at the functor."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    browser.set_window_size(700, 1000)
    try:
        _run_all_cells(browser, url, token)
        tab_labels = WebDriverWait(browser, 120).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-OutputArea .widget-tab .lm-TabBar-tabLabel"))
        tab_labels[1].click()  # the Kernel tab
        panel = browser.find_element(By.CSS_SELECTOR, ".jp-OutputArea .jiter-magic-panel")
        WebDriverWait(browser, 30).until(lambda d: any(
            b.is_displayed() for b in panel.find_elements(By.CSS_SELECTOR, ".jiter-magic-code")))
        layout = browser.execute_script(NARROW_LAYOUT, panel)
        assert layout["selects"] == [["Specialization", True], ["Show", True], ["CUDA architecture", True]], layout
        assert layout["whiteSpace"] == "pre" and layout["scrollsSideways"], layout
        browser.execute_script("arguments[0].scrollIntoView()", panel)
        browser.save_screenshot(str(ARTIFACTS / "browser_narrow_kernel_tab.png"))

        # With the file browser open too (issue 45): every tab label whole, each cache row one line
        assert browser.execute_async_script(OPEN_FILE_BROWSER) == "ok"
        time.sleep(1.0)
        assert browser.execute_script(TAB_LABELS_CLIPPED, panel) == []
        tab_labels[3].click()  # the Cache tab
        rows = WebDriverWait(browser, 30).until(lambda d: d.execute_script(CACHE_ROW_LINES, panel))
        assert rows and max(rows) <= 1, rows
        browser.save_screenshot(str(ARTIFACTS / "browser_narrow_cache_tab.png"))
        assert browser.execute_async_script(CLOSE_LEFT_AREA) == "ok"  # the rest at 700 px, as before
        tab_labels[1].click()

        _choose(panel, "Show", "PTX (CUDA)")  # the CPU specialization's CUDA counterpart, through NVRTC
        scroll = WebDriverWait(browser, 120).until(lambda d: d.execute_script(LISTING_SCROLL, panel))
        assert scroll["scrollTop"] > 0 and scroll["firstLineInView"], scroll  # opened at the functor's line
        assert scroll["text"].startswith(">") and "fma.rn.f" in scroll["text"]  # the functor's multiply-add
        assert "// line 2: template <typename T> T axpy" in scroll["before"]  # after its line, as a comment
        listing = panel.find_element(By.CSS_SELECTOR, ".jiter-magic-listing")
        assert ".visible .entry jm_kernel" in listing.get_attribute("textContent")
        browser.execute_script("arguments[0].scrollIntoView()", panel)
        browser.save_screenshot(str(ARTIFACTS / "browser_narrow_ptx.png"))
        for short, theme in THEMES.items():  # the marked lines read well in every theme
            _theme(browser, theme)
            listing = panel.find_element(By.CSS_SELECTOR, ".jiter-magic-listing")
            worst = browser.execute_script(WORST_CONTRAST, listing)
            assert worst["ratio"] >= MIN_CONTRAST and ">" in worst["text"], f"{theme}: {worst}"
            browser.save_screenshot(str(ARTIFACTS / f"browser_narrow_ptx_{short}.png"))
    finally:
        browser.save_screenshot(str(ARTIFACTS / "browser_narrow_last.png"))


def _choose(panel, description: str, option: str) -> None:
    """Pick `option` in the panel's dropdown labelled `description` (ipywidgets renders a <select>)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for box in panel.find_elements(By.CSS_SELECTOR, ".widget-dropdown"):
        if box.is_displayed() and box.find_element(By.CSS_SELECTOR, "label").text == description:
            Select(box.find_element(By.CSS_SELECTOR, "select")).select_by_visible_text(option)
            return
    raise AssertionError(f"no visible dropdown labelled {description!r}")


THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark", "high-contrast": "JupyterLab Dark High Contrast"}
MIN_CONTRAST = 4.5  # WCAG AA for normal text, asked of every coloured token of the code

# The lowest WCAG contrast ratio between a code token's colour and the background it is painted on.
WORST_CONTRAST = """
const box = arguments[0];
// rgb(r, g, b) / rgba(r, g, b, a) in 0-255, or a mixed colour as Chromium computes it: color(srgb r g b / a) in 0-1
const rgba = text => {
  const v = text.match(/[\\d.]+/g).map(Number);
  const rgb = text.startsWith('color(') ? v.slice(0, 3).map(c => c * 255) : v.slice(0, 3);
  return [...rgb, v.length > 3 ? v[3] : 1];
};
const channel = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
const backdrop = el => {
  for (; el; el = el.parentElement) {
    const c = rgba(getComputedStyle(el).backgroundColor);
    if (c[3] > 0) return c;
  }
  return [255, 255, 255, 1];
};
let worst = {ratio: 1e9};
for (const el of [box, ...box.querySelectorAll('span')]) {
  const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
  if (!own) continue;
  const bg = backdrop(el), fg = rgba(getComputedStyle(el).color);
  const shown = [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3]));  // a translucent colour over its backdrop
  const [hi, lo] = [luminance(shown), luminance(bg)].sort((a, b) => b - a);
  const ratio = (hi + 0.05) / (lo + 0.05);
  if (ratio < worst.ratio) worst = {ratio, text: own, color: getComputedStyle(el).color, background: bg.join(',')};
}
return worst;
"""

CHANGE_THEME = """
const done = arguments[arguments.length - 1];
window.jupyterapp.commands.execute('apputils:change-theme', {theme: arguments[0]})
  .then(() => done('ok'), error => done('error: ' + error));
"""

SAVE_AND_SHUT_DOWN = """
const done = arguments[arguments.length - 1];
(async () => {
  const panel = NOTEBOOK_PANEL;
  await panel.context.save();  // what docmanager:save does, for a panel that need not have the focus
  await panel.sessionContext.shutdown();
  done('ok');
})().catch(error => done('error: ' + error));
""".replace("NOTEBOOK_PANEL", NOTEBOOK_PANEL)


def _theme(driver, name: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    assert driver.execute_async_script(CHANGE_THEME, name) == "ok"
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.jpThemeName") == name)
    time.sleep(1.0)  # the theme's stylesheet is swapped in after the attribute changes


def _functor_box(driver):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 120).until(lambda d: next(
        (e for e in d.find_elements(By.CSS_SELECTOR, ".jp-OutputArea .widget-tab .jiter-magic-code")
         if e.is_displayed() and "T axpy(T x, T y, T alpha)" in e.get_attribute("textContent")), None))


@pytest.mark.slow
def test_panel_reads_well_in_every_theme_and_survives_save_and_reopen(lab, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        _run_all_cells(browser, url, token)
        box = _functor_box(browser)
        for short, theme in THEMES.items():
            _theme(browser, theme)
            box = _functor_box(browser)
            browser.execute_script("arguments[0].scrollIntoView()", box)
            browser.save_screenshot(str(ARTIFACTS / f"browser_theme_{short}.png"))
            worst = browser.execute_script(WORST_CONTRAST, box)
            assert worst["ratio"] >= MIN_CONTRAST, f"{theme}: {worst}"
        _theme(browser, THEMES["light"])

        # Save (JupyterLab stores the widget state, as jiter_magic's settings default asks), end the kernel,
        # open the notebook again: a fresh kernel starts, and the panels come back from the saved state.
        assert browser.execute_async_script(SAVE_AND_SHUT_DOWN) == "ok"
        saved_file = Path(_lab_root(tmp_path)) / "panel.ipynb"
        # Issue 45: small enough for git and handing out (a panel's Kernel tab is built when it opens)
        assert saved_file.stat().st_size <= 200 * 1024, saved_file.stat().st_size
        saved = json.loads(saved_file.read_text())
        state = saved["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        assert any("T axpy(T x, T y, T alpha)" in json.dumps(model["state"]) for model in state.values())
        browser.get_log("browser")  # drop the first session's messages
        browser.get(f"{url}/lab/tree/panel.ipynb?token={token}")
        WebDriverWait(browser, 120).until(lambda d: d.execute_script(
            f"const w = window.jupyterapp && {NOTEBOOK_PANEL};"
            "return !!(w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel);"))
        tab_labels = WebDriverWait(browser, 120).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-OutputArea .widget-tab .lm-TabBar-tabLabel"))
        assert [label.text for label in tab_labels] == ["Functor", "Kernel", "Compile log", "Cache"]
        assert "T axpy(T x, T y, T alpha)" in _functor_box(browser).get_attribute("textContent")
        time.sleep(3.0)  # give a late "model not found" time to appear
        outputs = " ".join(e.get_attribute("textContent") for e in
                           browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"))
        assert "Error displaying widget" not in outputs and "model not found" not in outputs
        errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not [m for m in errors if "widget" in m.lower() or "model" in m.lower()], errors
        browser.save_screenshot(str(ARTIFACTS / "browser_reopened.png"))

        # One "saved view" line a panel instead of ipywidgets' broken-link icon on each of its views
        marks = browser.execute_script(DISCONNECTED_MARKS)
        assert marks == [{"panel": True, "content": f'"{RECONNECT_LINE}"'}], marks
        line = browser.find_element(By.CSS_SELECTOR, ".jp-OutputArea .jiter-magic-panel")
        line.screenshot(str(ARTIFACTS / "browser_reopened_panel.png"))
        # Opening it marked nothing modified (ipywidgets marks a notebook dirty as it restores saved models)
        assert browser.execute_script(f"return {NOTEBOOK_PANEL}.context.model.dirty") is False
        assert not browser.find_elements(By.CSS_SELECTOR, ".lm-TabBar-tab.jp-mod-dirty")

        # Running the cells reconnects: live panels carry no line, and a run marks the notebook modified
        assert browser.execute_async_script(RUN_CELLS_AGAIN) == "ok"
        WebDriverWait(browser, 120).until(lambda d: d.execute_script(DISCONNECTED_MARKS) == [])
        assert browser.execute_script(f"return {NOTEBOOK_PANEL}.context.model.dirty") is True

        # nbconvert's HTML of the notebook as saved, read offline: the panels drawn, the magic cell as C++
        _export_offline(browser, Path(_lab_root(tmp_path)) / "panel.ipynb", tmp_path / "exported")
    finally:
        browser.save_screenshot(str(ARTIFACTS / "browser_theme_last.png"))


# Each view of a jiter_magic panel marked disconnected whose ::before pseudo-element shows something.
DISCONNECTED_MARKS = """
const marks = [];
for (const panel of document.querySelectorAll('.jp-OutputArea .jiter-magic-panel')) {
  for (const el of [panel, ...panel.querySelectorAll('.jupyter-widgets-disconnected')]) {
    if (!el.classList.contains('jupyter-widgets-disconnected')) continue;
    const before = getComputedStyle(el, '::before');
    if (before.content !== 'none' && before.display !== 'none') marks.push({panel: el === panel, content: before.content});
  }
}
return marks;
"""

RUN_CELLS_AGAIN = """
const done = arguments[arguments.length - 1];
(async () => {
  const panel = NOTEBOOK_PANEL;
  await panel.sessionContext.ready;
  await window.jupyterapp.commands.execute('notebook:run-all-cells');
  done('ok');
})().catch(error => done('error: ' + error));
""".replace("NOTEBOOK_PANEL", NOTEBOOK_PANEL)


def _export_offline(driver, notebook: Path, folder: Path) -> None:
    from selenium.webdriver.common.by import By

    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "jiter_magic.notebook.export.PanelHTMLExporter",
                    str(notebook), "--output-dir", str(folder)], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                                    if p)})
    page = (folder / "panel.html").read_text()
    assert "unpkg.com" not in page and "@jupyter-widgets/html-manager" not in page  # no widget script from a CDN
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                                "uploadThroughput": -1})
    driver.get((folder / "panel.html").as_uri())
    panel = driver.find_element(By.CSS_SELECTOR, ".jp-OutputArea-output .jiter-magic")
    assert panel.is_displayed() and panel.size["height"] > 100
    text = panel.text
    assert "axpy template <typename T> T axpy(T x, T y, T alpha)" in text
    assert "#1 cpu (float64, float64) -> (float64) compute float64" in text  # the panel as saved: both calls
    summary = panel.find_element(By.CSS_SELECTOR, "details.jiter-magic-generated summary")
    summary.click()  # the folded generated kernel and logs open
    assert 'extern "C" int jm_kernel' in panel.text
    keywords = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".jp-Cell-inputArea .highlight .k")]
    assert "template" in keywords and "return" in keywords  # the %%jiterator cell, lexed as C++
    driver.execute_script("arguments[0].scrollIntoView()", panel)
    driver.save_screenshot(str(ARTIFACTS / "browser_exported_offline.png"))


def _lab_root(tmp_path: Path) -> Path:
    return tmp_path / "jupyter" / "work"
