"""Compiler facts remembered between processes (jiter_magic/toolchain_memo.py).

The facts (NVRTC's version and include folder; the host compiler's version, accepted flags and
target macros) key every kernel, and finding them costs a new process more than its whole disk
hit. These tests check that they are stored and reused, found afresh when a witness file
changes or vanishes, never stored without a witness, robust to a bad entry; and, in real new
processes, that a disk hit then starts no compiler (CPU) and imports no cuda.pathfinder (CUDA).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jiter_magic.cache.disk import disk_cache
from jiter_magic.compilers import cxx as cxx_module
from jiter_magic.compilers import nvrtc as nvrtc_module
from jiter_magic.compilers import toolchain_memo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Finder:
    """Counts its calls; returns the facts given, witnessed by `witnesses`."""

    def __init__(self, facts, witnesses):
        self.facts, self.witnesses, self.calls = facts, witnesses, 0

    def __call__(self):
        self.calls += 1
        return self.facts, self.witnesses


def test_facts_are_stored_once_and_reused_while_the_witness_is_unchanged(fresh_cache, tmp_path):
    witness = tmp_path / "compiler"
    witness.write_bytes(b"version 1")
    find = Finder({"version": "1.0", "flags": [True, False]}, [str(witness)])
    assert toolchain_memo.remembered("test", ["a"], find) == {"version": "1.0", "flags": [True, False]}
    assert toolchain_memo.remembered("test", ["a"], find) == {"version": "1.0", "flags": [True, False]}
    assert find.calls == 1
    find.facts = {"version": "2.0", "flags": []}
    witness.write_bytes(b"version 2, a longer file")  # a new compiler in place of the old one
    assert toolchain_memo.remembered("test", ["a"], find) == {"version": "2.0", "flags": []}
    assert find.calls == 2
    assert toolchain_memo.remembered("test", ["a"], find) == {"version": "2.0", "flags": []}
    assert find.calls == 2


def test_another_context_or_kind_has_facts_of_its_own(fresh_cache, tmp_path):
    witness = tmp_path / "w"
    witness.write_text("x")
    first, second = Finder("one", [str(witness)]), Finder("two", [str(witness)])
    assert toolchain_memo.remembered("test", ["cpu A"], first) == "one"
    assert toolchain_memo.remembered("test", ["cpu B"], second) == "two"
    assert toolchain_memo.remembered("other", ["cpu A"], second) == "two"
    assert toolchain_memo.remembered("test", ["cpu A"], first) == "one"
    assert (first.calls, second.calls) == (1, 2)


def test_a_vanished_witness_or_none_at_all_means_finding_again(fresh_cache, tmp_path):
    witness = tmp_path / "w"
    witness.write_text("x")
    find = Finder({"v": 1}, [str(witness)])
    toolchain_memo.remembered("test", [], find)
    witness.unlink()
    find.witnesses = [str(witness)]  # still names the missing file: not stored either
    assert toolchain_memo.remembered("test", [], find) == {"v": 1}
    assert toolchain_memo.remembered("test", [], find) == {"v": 1}
    assert find.calls == 3
    unwitnessed = Finder({"v": 2}, [])
    toolchain_memo.remembered("bare", [], unwitnessed)
    toolchain_memo.remembered("bare", [], unwitnessed)
    assert unwitnessed.calls == 2


@pytest.mark.parametrize("payload", [b"not json", b"[]", b'{"facts": 1}', b'{"facts": 1, "witnesses": [[]]}',
                                     b'{"facts": 1, "witnesses": 7}'])
def test_a_stored_entry_that_is_not_ours_is_replaced(fresh_cache, tmp_path, payload):
    witness = tmp_path / "w"
    witness.write_text("x")
    disk_cache().put(toolchain_memo.NAMESPACE, toolchain_memo._key("test", []), payload)
    find = Finder({"v": 3}, [str(witness)])
    assert toolchain_memo.remembered("test", [], find) == {"v": 3}
    assert toolchain_memo.remembered("test", [], find) == {"v": 3}
    assert find.calls == 1
    stored = json.loads(disk_cache().get(toolchain_memo.NAMESPACE, toolchain_memo._key("test", [])))
    assert stored["facts"] == {"v": 3} and stored["witnesses"][0][0] == str(witness)


def test_the_host_compilers_facts_match_what_probing_finds(fresh_cache):
    compiler = cxx_module.find_cxx(os.environ.get("CXX") or None)
    facts, witnesses = cxx_module._find_facts(compiler)
    assert witnesses == [os.path.realpath(compiler)]
    assert facts["version"] == cxx_module._version(compiler)
    assert facts["accepts"] == {flag: cxx_module._accepts(compiler, flag) for flag in cxx_module.PROBED_FLAGS}
    assert "#define __cplusplus" in facts["macros"]


def _child(script: str, cache: str, env_extra: dict | None = None) -> str:
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=cache, JITER_MAGIC_FAST_CALL="0", PYTHONPATH=ROOT,
               **(env_extra or {}))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


CPU_CALL = """
    import subprocess, sys
    import numpy as np
    import jiter_magic
    if sys.argv[-1] == "no-processes":
        def refuse(*args, **kwargs):
            raise AssertionError(f"started a process: {args[:1]}")
        subprocess.Popen.__init__ = refuse
    fn = jiter_magic.create_jit_fn("template <typename T> T memo_axpy(T x, T y, T a) { return a * x + y; }", a=2.0)
    x = np.arange(10, dtype=np.float32)
    out = fn(x, np.ones(10, dtype=np.float32))
    assert out.dtype == np.float32 and out.tolist() == [2 * i + 1.0 for i in range(10)], out
    print(jiter_magic.cache_stats()["disk_hits"], jiter_magic.cache_stats()["compiles"])
"""


@pytest.mark.slow
def test_a_new_processs_cpu_disk_hit_starts_no_compiler(tmp_path):
    cache = str(tmp_path / "cache")
    assert _child(CPU_CALL, cache) == "0 1"  # compiled, and the compiler's facts stored
    assert _child(CPU_CALL.replace('sys.argv[-1] == "no-processes"', "True"), cache) == "1 0"


@pytest.mark.skipif(nvrtc_module._nvrtc_library() is None, reason="cuda.pathfinder finds no NVRTC library here")
def test_a_new_process_knows_nvrtc_without_importing_cuda_pathfinder(tmp_path):
    cache = str(tmp_path / "cache")
    script = """
        import sys
        from jiter_magic.compilers import nvrtc
        print(nvrtc.nvrtc_version(), nvrtc.cuda_include_dir(), "cuda.pathfinder" in sys.modules)
    """
    version, include, imported = _child(script, cache).split()
    assert imported == "True" and version.count(".") == 1 and version.replace(".", "").isdigit()
    assert _child(script, cache).split() == [version, include, "False"]
    assert _child(script, cache, {"CUDA_HOME": "/elsewhere"}).split() == [version, include, "True"]


def test_a_namespace_longer_than_an_entry_holds_is_refused():
    from jiter_magic.cache.entry import _pack

    with pytest.raises(ValueError, match="longer than an entry holds"):
        _pack("toolchain", "0" * 64, b"facts")  # 9 bytes: the entry's namespace field holds 8
    assert _pack(toolchain_memo.NAMESPACE, "0" * 64, b"facts").endswith(b"facts")


def test_a_library_that_is_no_nvrtc_gives_no_version(tmp_path):
    """What cuda.pathfinder names might not load or might lack nvrtcVersion: then CuPy is asked."""
    not_a_library = tmp_path / "libnvrtc.so"
    not_a_library.write_bytes(b"not an ELF file")
    assert nvrtc_module._version_of(str(not_a_library)) is None
    import ctypes.util

    libc = ctypes.util.find_library("c")
    if libc:  # loads, but has no nvrtcVersion
        assert nvrtc_module._version_of(libc) is None
