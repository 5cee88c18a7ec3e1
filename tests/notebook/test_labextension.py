"""The prebuilt JupyterLab extension that highlights `%%jiterator` cells as C++.

Its bundle (jiter_magic/labextension/built) is committed, since installing jiter_magic must not
need Node; these checks keep it honest: built from the sources beside it, not bundling JupyterLab,
and installed where JupyterLab looks. The browser test sees it work.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "jiter_magic" / "labextension"
BUILT = SOURCE / "built"


def test_the_bundle_was_built_from_the_sources_beside_it():
    recorded = dict(reversed(line.split(maxsplit=1)) for line in (BUILT / "source.sha256").read_text().splitlines())
    assert sorted(recorded) == ["package-lock.json", "package.json", "src/cleanopen.ts", "src/index.ts", "tsconfig.json"]
    for name, digest in recorded.items():
        assert hashlib.sha256((SOURCE / name).read_bytes()).hexdigest() == digest, (
            f"{name} changed since the bundle was built: run bash jiter_magic/labextension/build.sh")


def test_the_bundle_is_a_small_federated_extension_sharing_jupyterlab():
    meta = json.loads((BUILT / "package.json").read_text())
    assert meta["name"] == "jiter-magic-highlight"
    entry = BUILT / meta["jupyterlab"]["_build"]["load"]
    assert entry.is_file() and entry.parent.name == "static"
    assert sum(f.stat().st_size for f in (BUILT / "static").iterdir()) < 64 * 1024  # JupyterLab is not inside
    for package in ("@jupyterlab/application", "@jupyterlab/notebook", "@jupyterlab/cells"):
        shared = meta["jupyterlab"]["sharedPackages"][package]
        assert shared == {"bundled": False, "singleton": True, "requiredVersion": "^4.0.0"}
    source = (SOURCE / "src" / "index.ts").read_text()
    assert "const MAGIC = '%%jiterator';" in source and "const CPP_MIME = 'text/x-c++src';" in source


@pytest.mark.slow
def test_jupyterlab_finds_it_installed():
    pytest.importorskip("jupyterlab")
    shared = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jiter-magic-highlight"
    if not shared.is_dir():
        pytest.skip(f"jiter_magic is not pip-installed in {sys.prefix} (the wheel's shared data puts it there)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, env=env, check=True)
    line = next(row for row in (listed.stdout + listed.stderr).splitlines() if "jiter-magic-highlight" in row)
    assert "enabled" in line and "OK" in line, line
