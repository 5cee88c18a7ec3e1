"""Helpers shared by the tests of several folders (tests/ is on sys.path: pyproject's pytest
`pythonpath`): the kernel cache's fake compiler, counters and specs (tests/cache/), and
`forget_loaded_kernels` (tests/cache/, tests/notebook/), `nvrtc_or_skip` (tests/notebook/)."""
from __future__ import annotations

import gc
import hashlib
import os

import numpy as np
import pytest

import jiter_magic
from jiter_magic import CacheWarning, create_jit_fn
from jiter_magic.compilers.base import CompileResult
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.planning.spec import CONTIGUOUS, KernelSpec

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE = "template <typename T> T cache_kernel(T x, T y) { return x * y + T(1); }"
SPEC = KernelSpec(("float32", "float32"), (False, False), ("float32",), "float32", (), path=CONTIGUOUS,
                  params=ContiguousParams())
SPEC64 = KernelSpec(("float64", "float64"), (False, False), ("float64",), "float64", (), path=CONTIGUOUS,
                    params=ContiguousParams())


class FakeCompiler:
    """Counts compiles; the 'binary' is a digest of the source, so a wrong binary is detectable."""

    target = "fake"

    def __init__(self, identity: str = "fake-compiler 1.0", options: tuple[str, ...] = ("-O3", "-fake")):
        self.identity = identity
        self._options = options
        self.calls = 0

    def options(self) -> tuple[str, ...]:
        return self._options

    @staticmethod
    def binary_for(source: str) -> bytes:
        return b"FAKEBIN\0" + hashlib.sha256(source.encode()).digest() * 4

    def compile(self, source: str, name: str, options: tuple[str, ...] | None = None) -> CompileResult:
        assert options == self._options, "build passes the options it keyed on"
        self.calls += 1
        return CompileResult(self.binary_for(source), "")


def forget_loaded_kernels() -> None:
    """Forget the kernels this process shares between functions (live functions keep theirs), so
    that the next new function reads the disk cache or compiles."""
    from jiter_magic.runtime.loader import KernelPool
    from jiter_magic.state import RUNTIME

    gc.collect()
    RUNTIME.part(KernelPool).forget()


def binding():
    return create_jit_fn(CODE).binding


def counters() -> dict:
    return jiter_magic.cache_stats()


def delta(before: dict, after: dict, key: str):
    return after[key] - before[key]


def all_files(root) -> list[str]:
    found = []
    for folder, _dirs, files in os.walk(root):
        found += [os.path.join(folder, f) for f in files]
    return found


def cache_warnings(record) -> list:
    return [w for w in record if issubclass(w.category, CacheWarning)]


_BACKEND_LOADED: list[bool] = []


def load_cpu_backend_once() -> None:
    """Run one host kernel with the disk cache off, so that whatever the CPU backend sets up once a
    process has happened and a cache under test holds only the kernels the test builds."""
    if _BACKEND_LOADED:
        return
    saved = os.environ.get("JITER_MAGIC_DISK_CACHE")
    os.environ["JITER_MAGIC_DISK_CACHE"] = "0"
    try:
        warm = create_jit_fn("template <typename T> T backend_warm_up(T x) { return x; }")
        np.testing.assert_array_equal(warm(np.ones(2, dtype=np.float32)), np.ones(2, dtype=np.float32))
    finally:
        if saved is None:
            del os.environ["JITER_MAGIC_DISK_CACHE"]
        else:
            os.environ["JITER_MAGIC_DISK_CACHE"] = saved
    _BACKEND_LOADED.append(True)


def nvrtc_or_skip() -> None:
    """Skip the calling test where no NVRTC can compile PTX here."""
    try:
        from jiter_magic.compilers.nvrtc import supported_archs

        if not supported_archs():
            pytest.skip("NVRTC is not installed")
    except jiter_magic.ToolchainError as exc:
        pytest.skip(f"no NVRTC: {exc}")
