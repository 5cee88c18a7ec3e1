"""CI's smoke test of an installed jiter_magic (a wheel in a fresh venv, no source tree on the path).

Usage: python smoke.py TORCH_MODULE, where TORCH_MODULE is `loaded` (the wheel was built where torch
was installed) or `unavailable` (a wheel built for distribution, without torch: the reason shown).
Checks: a CPU call of a jitted function, the C call path loaded at once (the line `python -m
jiter_magic` prints), the magic in a real IPython shell, the lab extension and settings installed as
shared data, the nbconvert exporter's entry point, py.typed. Exits non-zero on the first failure.
"""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"smoke test failed: {what}")
    print(f"ok: {what}")


def main(torch_module: str) -> None:
    import torch

    import jiter_magic

    package = Path(jiter_magic.__file__).parent
    check("site-packages" in package.parts, f"jiter_magic is imported from the installed wheel ({package})")
    f = jiter_magic.create_jit_fn("template <typename T> T smoke(T x, T y, T a) { return a * x + y; }", a=1.0)
    x = torch.arange(4.0)
    check(f(x, x, a=2.0).tolist() == [0.0, 3.0, 6.0, 9.0], "a CPU call of a jitted function")

    report = subprocess.run([sys.executable, "-m", "jiter_magic"], capture_output=True, text=True, check=True).stdout
    line = next((row for row in report.splitlines() if row.startswith("C call path: ")), "")
    if torch_module == "loaded":
        check(line == "C call path: loaded; its torch module: loaded", f"the C call path loaded ({line!r})")
    else:
        expected = ("C call path: loaded; its torch module: unavailable: "
                    "torch was not installed when jiter_magic was built")
        check(line.startswith(expected), f"the C call path loaded, and why not its torch module ({line!r})")

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jiter_magic")
    shell.run_cell_magic("jiterator", "smoke_cell --no-panel --quiet",
                         "template <typename T> T smoke_cell(T x) { return x + 1; }")
    shell.run_cell("smoke_out = smoke_cell(__import__('torch').arange(3.0)).tolist()")
    check(shell.user_ns.get("smoke_out") == [1.0, 2.0, 3.0], "%load_ext jiter_magic and a %%jiterator cell in IPython")

    share = Path(sys.prefix) / "share" / "jupyter"
    check((share / "labextensions" / "jiter-magic-highlight" / "package.json").is_file(),
          "the lab extension is installed (share/jupyter/labextensions/jiter-magic-highlight)")
    check((share / "lab" / "settings" / "overrides.d" / "jiter_magic.json").is_file(), "the lab settings are installed")
    exporters = {e.name: e.value for e in entry_points(group="nbconvert.exporters")}
    check(exporters.get("jiter_html") == "jiter_magic.notebook.export:PanelHTMLExporter",
          "the nbconvert exporter jiter_html is registered")
    check((package / "py.typed").is_file(), "py.typed is installed")
    check(not any((package / "native" / name).exists() for name in ("fast_call.cpp", "vectorcall_type.h")),
          "the wheel carries modules, not their sources")


if __name__ == "__main__":
    main(sys.argv[1])
