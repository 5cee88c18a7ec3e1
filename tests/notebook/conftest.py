"""Fixtures of the notebook tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def shell(fresh_cache, monkeypatch):
    """The process's IPython shell with the extension loaded, printing the static panel form."""
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    monkeypatch.setenv("JITER_MAGIC_PANEL", "static")
    ip = interactiveshell.InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jiter_magic")
    before = set(ip.user_ns)
    yield ip
    ip.run_line_magic("unload_ext", "jiter_magic")
    for name in set(ip.user_ns) - before:  # what the test bound: later tests see the shell as it was
        ip.user_ns.pop(name, None)
