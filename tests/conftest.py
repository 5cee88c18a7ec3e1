"""Shared fixtures: an isolated cache directory for every test session, GPU detection, references."""
from __future__ import annotations

import os
import tempfile

import pytest

# Every test session gets its own disk cache unless the caller chose one (the GPU run does,
# to test a fresh process hitting the disk cache).
if "JITER_MAGIC_CACHE_DIR" not in os.environ:
    os.environ["JITER_MAGIC_CACHE_DIR"] = tempfile.mkdtemp(prefix="jiter_magic-test-cache-")


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


HAS_GPU = _has_gpu()


def pytest_sessionstart(session):
    """Every test runs on the C call path where the install built it (JITER_MAGIC_FAST_CALL=0 runs
    them on the Python path): loaded once here, before any test."""
    from jiter_magic.native import call_path

    call_path.load()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A new, empty cache directory for one test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    return root
