"""The C call path's build at install (hatch_build.py) where it cannot build everything, by the real
conditions: a wheel built by an interpreter with no torch, and one built with no C++ compiler. Each
wheel then runs in a process that has torch: the modules it lacks say why, in the one line that
`python -m jiter_magic` prints, and the calls take the Python path with the same results.

The build environment is a real virtual environment without torch: hatchling and setuptools (the
build requirements) linked in from this one, nothing else.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_REQUIREMENTS = ("hatchling", "packaging", "pathspec", "pluggy", "trove_classifiers", "setuptools",
                      "_distutils_hack", "tomli")
HAS_HEADERS = os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h"))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("hatchling") is None,
                                 reason="hatchling (the test extra) is not installed")]


@pytest.fixture(scope="module")
def torchless_python(tmp_path_factory) -> str:
    """An interpreter whose environment has the build requirements and no torch."""
    home = tmp_path_factory.mktemp("torchless")
    venv.EnvBuilder(with_pip=False).create(home / "venv")
    python = str(home / "venv" / "bin" / "python")
    linked = home / "linked"
    linked.mkdir()
    for name in BUILD_REQUIREMENTS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue  # tomli: only Python < 3.11 needs it
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (linked / source.name).symlink_to(source)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "build_requirements.pth").write_text(f"{linked}\n")
    probe = subprocess.run([python, "-I", "-c", "import torch"], capture_output=True, text=True)
    assert "No module named 'torch'" in probe.stderr  # the real condition: no torch to build against
    return python


def build_wheel(python: str, out: Path, **env: str) -> Path:
    """A real PEP 517 wheel build of this source tree by `python`; the wheel unpacked beside it."""
    code = f"from hatchling.build import build_wheel; print(build_wheel({str(out)!r}))"
    done = subprocess.run([python, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = out / done.stdout.strip().splitlines()[-1]
    unpacked = out / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    return unpacked


CALLS = """
import json, numpy as np, torch, jiter_magic
from jiter_magic.native import call_path
f = jiter_magic.create_jit_fn("template <typename T> T nb_axpy(T x, T y) { return 2 * x + y; }")
a = torch.arange(5.0)
for _ in range(3):
    out = f(a, a)
plan = next(p for p in f._calls.plans.values())
g = jiter_magic.create_jit_fn("template <typename T> T nb_twice(T x) { return 2 * x; }")
n = np.arange(4, dtype=np.int32)
for _ in range(3):
    doubled = g(n)
numpy_plan = next(p for p in g._calls.plans.values())
print(json.dumps({"from": jiter_magic.__file__, "status": call_path.status(), "torch_status": call_path.torch_status(),
                  "hot": type(getattr(plan.native_calls, "default", None)).__name__,
                  "launch": type(plan.launcher.native).__name__, "allocator": type(plan.allocators[0]).__name__,
                  "values": out.tolist(), "dtype": str(out.dtype), "numpy_values": doubled.tolist(),
                  "numpy_hot": type(getattr(numpy_plan.native_calls, "default", None)).__name__}))
"""


def run_from(unpacked: Path, tmp_path: Path) -> dict:
    """The calls above in a process with torch, importing jiter_magic from the unpacked wheel."""
    env = {**os.environ, "PYTHONPATH": str(unpacked), "JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", CALLS], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["from"].startswith(str(unpacked))  # the wheel's package, not this source tree
    return found


@pytest.mark.skipif(not HAS_HEADERS, reason="Python.h is not installed: no module can be built here")
def test_a_wheel_built_without_torch_has_the_core_module_and_says_why_it_lacks_the_torch_one(
        torchless_python, tmp_path):
    unpacked = build_wheel(torchless_python, tmp_path / "wheel")
    native = unpacked / "jiter_magic" / "native"
    modules = sorted(p.name.split(".")[0] for p in native.glob("*.so"))
    assert modules == ["_fast_call"]
    report = json.loads((native / "_built.json").read_text())
    why = "torch was not installed when jiter_magic was built"
    native_sources = ROOT / "jiter_magic" / "native"
    digest = hashlib.sha256((native_sources / "fast_call.cpp").read_bytes()
                            + (native_sources / "vectorcall_type.h").read_bytes()).hexdigest()
    assert report == {"_fast_call": {"built": True, "source": "fast_call.cpp", "sha256": digest},
                      "_torch_call": {"built": False, "reason": why}}
    assert not list(native.glob("*.cpp")) and not list(native.glob("*.h"))  # the sources stay in the sdist
    found = run_from(unpacked, tmp_path)
    assert found["status"] == "loaded" and found["torch_status"].startswith(f"unavailable: {why} (docs/install.md")
    # NumPy's calls run whole in C; torch's keep the Python hot path (only the torch module checks a
    # view against its storage from C), and launch their kernels from C.
    assert found["numpy_hot"] == "HotPlan" and found["numpy_values"] == [0, 2, 4, 6]
    assert found["hot"] == "NoneType" and found["launch"] == "Kernel" and found["allocator"] != "Allocator"
    assert found["values"] == [3.0 * v for v in range(5)] and found["dtype"] == "torch.float32"


def test_a_wheel_built_without_a_compiler_runs_the_python_path_and_says_why(torchless_python, tmp_path):
    unpacked = build_wheel(torchless_python, tmp_path / "wheel", CXX=str(tmp_path / "no-such-c++"))
    native = unpacked / "jiter_magic" / "native"
    assert not list(native.glob("*.so"))
    report = json.loads((native / "_built.json").read_text())
    if HAS_HEADERS:
        why = f"no C++ compiler at install: {str(tmp_path / 'no-such-c++')!r} was not found (set CXX, or install g++)"
    else:
        why = report["_fast_call"]["reason"]
        assert why.startswith("Python's headers are not installed")
    assert report == {"_fast_call": {"built": False, "reason": why}, "_torch_call": {"built": False, "reason": why}}
    found = run_from(unpacked, tmp_path)
    assert found["status"] == f"unavailable: {why} (docs/install.md says how to install jiter_magic with it)"
    assert found["torch_status"] == "not loaded yet"  # it needs the core module: never asked for
    assert found["hot"] == found["numpy_hot"] == "NoneType" and found["launch"] == "NoneType"
    assert found["allocator"] != "Allocator" and found["numpy_values"] == [0, 2, 4, 6]
    assert found["values"] == [3.0 * v for v in range(5)] and found["dtype"] == "torch.float32"
