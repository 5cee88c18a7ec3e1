"""The disk cache cannot be tricked: entries bound to their key, no-follow opens, private folders,
the library's own files only, a size bound with LRU eviction, the instruction-set features in the
host key, a discard for entries that fail to load, and per-key inter-process locks (one compile
among concurrent processes or threads, no stale lock after a kill, a timeout that compiles, lock
files private, never through a link, and removed by their holder).

Everything runs on real files and real processes; the build logic uses the counting fake compiler
of test_cache.py, and the end-to-end checks the real host compiler.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings

import numpy as np
import pytest

import jiter_magic
import jiter_magic.cache.disk as cache_module
import jiter_magic.compilers.cxx as cxx_module
from jiter_magic import CacheWarning, SettingWarning, create_jit_fn, settings
from jiter_magic.cache import entry as cache_entry
from jiter_magic.cache.entry import cache_key
from jiter_magic.cache.keylock import KeyLock
from jiter_magic.compilers.base import CompileResult
from jiter_magic.errors import LaunchError
from jiter_magic.kernels.families import ELEMENTWISE
from jiter_magic.runtime.build import build, discard, recipe

from helpers import (
    REPO,
    SPEC,
    SPEC64,
    FakeCompiler,
    all_files,
    binding,
    cache_warnings,
    counters,
    delta,
    forget_loaded_kernels,
    load_cpu_backend_once,
)

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OTHER_UID = 12345


def recorded(callable_, *args):
    """(result, list of CacheWarning and SettingWarning messages) of one call."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = callable_(*args)
    settings_said = [w for w in record if issubclass(w.category, SettingWarning)]
    return result, [str(w.message) for w in cache_warnings(record) + settings_said]


def discarded(path: str, why: str) -> str:
    return f"jiter_magic: cache entry {path} {why}; discarding it and recompiling"


def not_private(root, what: str, fix: str) -> str:
    return (f"jiter_magic: cache directory {root} is not private: {what}, so another user could plant code in it; "
            "caching compiled kernels in memory only for this process. "
            f"Fix: {fix}, or set JITER_MAGIC_CACHE_DIR to a private folder of yours.")


def assert_no_temporary_or_lock_files(root) -> None:
    names = [os.path.basename(f) for f in all_files(root)]
    assert names and all(n.endswith(".bin") and not n.startswith(".tmp-") for n in names), names


def use_root(monkeypatch, root) -> None:
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)


# ----------------------------------------------------------------------------- entries bound to their key
def test_entry_copied_from_another_key_is_a_miss_with_one_warning(fresh_cache):
    b = binding()
    s32 = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    s64 = build(b, ELEMENTWISE, SPEC64, "cpu", FakeCompiler())
    shutil.copyfile(s32.cache_file, s64.cache_file)  # a valid checksum, but the entry of another key
    compiler = FakeCompiler()
    before = counters()
    again, messages = recorded(build, b, ELEMENTWISE, SPEC64, "cpu", compiler)
    assert messages == [discarded(s64.cache_file, f"holds the kernel of another key (cpu/{s32.cache_key[:16]}...), "
                                                   "e.g. a copied file")]
    assert compiler.calls == 1 and again.cache_event == "compiled"
    assert again.binary == s64.binary != s32.binary
    assert delta(before, counters(), "corrupt_entries") == 1
    third, messages = recorded(build, b, ELEMENTWISE, SPEC64, "cpu", FakeCompiler())  # healed: a clean disk hit
    assert messages == [] and third.cache_event == "disk" and third.binary == s64.binary


def test_entry_of_another_namespace_is_a_miss(fresh_cache):
    disk = cache_module.disk_cache()
    key = "cd" + "1" * 62
    assert disk.put("cpu", key, b"host library bytes") == disk.path("cpu", key)
    os.makedirs(os.path.dirname(disk.path("cuda", key)), mode=0o700)
    shutil.copyfile(disk.path("cpu", key), disk.path("cuda", key))
    found, messages = recorded(disk.get, "cuda", key)
    assert found is None
    assert messages == [discarded(disk.path("cuda", key), f"holds the kernel of another key (cpu/{key[:16]}...), "
                                                          "e.g. a copied file")]
    assert not os.path.exists(disk.path("cuda", key))
    assert recorded(disk.get, "cpu", key) == (b"host library bytes", [])


# ----------------------------------------------------------------------------- no symbolic links, no special files
def test_symlinked_entry_is_not_followed(fresh_cache, tmp_path):
    good = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    outside = tmp_path / "planted.bin"
    shutil.move(good.cache_file, outside)  # a valid entry for this very key, behind a link
    os.symlink(outside, good.cache_file)
    compiler = FakeCompiler()
    again, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    assert messages == [discarded(good.cache_file, "is a symbolic link (not followed)")]
    assert compiler.calls == 1 and again.cache_event == "compiled"  # followed, it would have been a disk hit
    assert outside.is_file() and not os.path.islink(good.cache_file) and os.path.isfile(good.cache_file)


def test_fifo_entry_is_rejected_without_blocking(fresh_cache):
    good = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    os.remove(good.cache_file)
    os.mkfifo(good.cache_file)  # opening it for reading would block forever without O_NONBLOCK
    compiler = FakeCompiler()
    again, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    assert messages == [discarded(good.cache_file, "is not a regular file")]
    assert compiler.calls == 1 and again.binary == good.binary
    assert stat.S_ISREG(os.lstat(good.cache_file).st_mode)


# ----------------------------------------------------------------------------- private folders
def test_group_writable_root_warns_once_and_computes_in_memory(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o770)
    use_root(monkeypatch, root)
    fn = create_jit_fn("template <typename T> T group_root(T x, T y) { return x * y - T(1); }")
    x, y = np.arange(5, dtype=np.float32), np.full(5, 3, dtype=np.float32)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first, second = fn(x, y), fn(x.astype(np.float64), y.astype(np.float64))
        third = fn(x, y)
    assert [str(w.message) for w in cache_warnings(record)] == [
        not_private(root, f"{root} is writable by group or others (mode 0770)", f"run `chmod go-w {root}`")]
    np.testing.assert_array_equal(first, x * y - 1)
    np.testing.assert_array_equal(second, x.astype(np.float64) * 3 - 1)
    np.testing.assert_array_equal(third, first)
    assert [(s.cache_event, s.cache_file) for s in fn.specializations] == [("compiled", None), ("compiled", None)]
    stats = counters()
    assert stats["writable"] is False and stats["entries"] == 0 and os.listdir(root) == []


def test_world_writable_subfolder_is_refused(fresh_cache):
    (fresh_cache / "cpu").mkdir(parents=True, mode=0o700)
    os.chmod(fresh_cache, 0o700)
    os.chmod(fresh_cache / "cpu", 0o777)
    compiler = FakeCompiler()
    s32, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    s64, more = recorded(build, binding(), ELEMENTWISE, SPEC64, "cpu", compiler)
    folder = fresh_cache / "cpu"
    assert messages == [not_private(fresh_cache, f"{folder} is writable by group or others (mode 0777)",
                                    f"run `chmod go-w {folder}`")]
    assert more == [] and compiler.calls == 2 and s32.cache_file is None and s64.cache_file is None
    assert os.listdir(folder) == []


def test_symlinked_subfolder_is_refused(fresh_cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    fresh_cache.mkdir(mode=0o700)
    os.symlink(elsewhere, fresh_cache / "cpu")
    spec, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    link = fresh_cache / "cpu"
    assert messages == [not_private(fresh_cache, f"{link} is a symbolic link", f"remove the link {link}")]
    assert spec.cache_file is None and os.listdir(elsewhere) == []


@pytest.mark.skipif(not AS_ROOT, reason="simulating another user's folder needs chown (root)")
def test_root_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, OTHER_UID)
    use_root(monkeypatch, root)
    compiler = FakeCompiler()
    s32, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    s64, more = recorded(build, binding(), ELEMENTWISE, SPEC64, "cpu", compiler)
    assert messages == [not_private(root, f"{root} is owned by uid {OTHER_UID}, not by you (uid 0)",
                                    "use a folder of your own")]
    assert more == [] and compiler.calls == 2 and s32.cache_file is None and s64.cache_file is None
    assert os.listdir(root) == [] and counters()["writable"] is False


@pytest.mark.skipif(not AS_ROOT, reason="simulating another user's folder needs chown (root)")
def test_root_linked_to_another_users_folder_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    os.chown(target, OTHER_UID, OTHER_UID)
    root = tmp_path / "link"
    os.symlink(target, root)
    use_root(monkeypatch, root)
    spec, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert messages == [not_private(root, f"{root} is owned by uid {OTHER_UID}, not by you (uid 0)",
                                    "use a folder of your own")]
    assert spec.cache_file is None and os.listdir(target) == []


def test_root_linked_to_an_own_folder_is_used(tmp_path, monkeypatch):
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    root = tmp_path / "link"
    os.symlink(target, root)
    use_root(monkeypatch, root)
    first, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    second, more = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert messages == more == [] and (first.cache_event, second.cache_event) == ("compiled", "disk")
    assert os.path.isfile(target / "cpu" / first.cache_key[:2] / (first.cache_key + ".bin"))


# ----------------------------------------------------------------------------- only the library's own files
def test_foreign_files_are_not_counted_nor_cleared(fresh_cache):
    b = binding()
    s32 = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    s64 = build(b, ELEMENTWISE, SPEC64, "cpu", FakeCompiler())
    key = s32.cache_key
    other = ("ef" if key[:2] != "ef" else "fe") + key[2:]
    foreign = [
        "notes.bin", "foo/bar.bin", "cpu/notes.bin", f"cpu/{key[:2]}/short.bin", f"cpu/zz/{'a' * 64}.bin",
        f"cpu/{key[:2]}/{other}.bin",  # a key under the wrong folder
        f"cpu/{key[:2]}/{key.upper()}.bin", f"cpu/{key[:2]}/{key}.bin.bak", f"cpu/{key[:2]}/.tmp-{key}.bin",
        f"other/{key[:2]}/{key}.bin", f"{key[:2]}/{key}.bin",
    ]
    for index, name in enumerate(foreign):
        path = fresh_cache / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(b"user data %d" % index * 1000)
    own_temp = fresh_cache / "cpu" / key[:2] / f".tmp-{key}-{'0' * 16}.bin"
    own_lock = fresh_cache / "cpu" / key[:2] / f"{key}.lock"
    own_temp.write_bytes(b"half-written by a killed process")
    own_lock.write_bytes(b"")
    stats = counters()
    assert stats["entries"] == 2
    assert stats["bytes"] == os.path.getsize(s32.cache_file) + os.path.getsize(s64.cache_file)
    jiter_magic.clear_cache()
    for index, name in enumerate(foreign):
        assert (fresh_cache / name).read_bytes() == b"user data %d" % index * 1000, name
    assert not os.path.exists(s32.cache_file) and not os.path.exists(s64.cache_file)
    assert not own_temp.exists() and not own_lock.exists()
    assert counters()["entries"] == 0 and counters()["bytes"] == 0


def test_clear_keeps_a_lock_file_another_holder_holds(fresh_cache):
    disk = cache_module.disk_cache()
    key = "ab" + "2" * 62
    disk.put("cpu", key, b"payload")
    holder = KeyLock(disk.lock_path("cpu", key))
    assert holder.acquire(1.0) is True
    jiter_magic.clear_cache(memory=False)
    assert os.path.exists(disk.lock_path("cpu", key)) and not os.path.exists(disk.path("cpu", key))
    holder.release()
    assert not os.path.exists(disk.lock_path("cpu", key))  # the holder removes its own lock file


# ----------------------------------------------------------------------------- size bound, LRU eviction
class BigCompiler(FakeCompiler):
    """The fake compiler with binaries of about `size` bytes."""

    def __init__(self, identity: str, size: int = 50_000):
        super().__init__(identity=identity)
        self.size = size

    def compile(self, source: str, name: str, options: tuple[str, ...] | None = None) -> CompileResult:
        small = super().compile(source, name, options).binary
        return CompileResult(small * (self.size // len(small)), "")


def test_eviction_keeps_the_total_under_the_bound_least_recently_used_first(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", "200K")
    b = binding()

    def make(name):
        time.sleep(0.02)  # distinct mtimes even on a coarse clock
        compiler = BigCompiler(name)
        return build(b, ELEMENTWISE, SPEC, "cpu", compiler), compiler.calls

    built = {name: make(name)[0] for name in ("id-0", "id-1", "id-2", "id-3")}
    entry = os.path.getsize(built["id-0"].cache_file)
    assert entry == cache_entry.HEADER + 49_912
    before = counters()
    assert before["entries"] == 4 and before["bytes"] == 4 * entry <= 204_800 == before["max_bytes"]
    hit, calls = make("id-0")  # a disk hit refreshes id-0: id-1 is now the least recently used
    assert (hit.cache_event, calls) == ("disk", 0)
    built["id-4"] = make("id-4")[0]
    after = counters()
    assert delta(before, after, "evictions") == 1 and after["entries"] == 4 and after["bytes"] == 4 * entry
    assert {name for name, s in built.items() if os.path.exists(s.cache_file)} == {"id-0", "id-2", "id-3", "id-4"}
    built["id-5"] = make("id-5")[0]
    assert {name for name, s in built.items() if os.path.exists(s.cache_file)} == {"id-0", "id-3", "id-4", "id-5"}
    assert delta(before, counters(), "evictions") == 2 and counters()["bytes"] <= 204_800


def test_an_entry_larger_than_the_bound_is_kept_alone(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", "1K")
    before = counters()
    first = build(binding(), ELEMENTWISE, SPEC, "cpu", BigCompiler("a", 5_000))
    assert os.path.exists(first.cache_file) and counters()["entries"] == 1
    time.sleep(0.02)
    second = build(binding(), ELEMENTWISE, SPEC, "cpu", BigCompiler("b", 5_000))
    assert not os.path.exists(first.cache_file) and os.path.exists(second.cache_file)
    assert delta(before, counters(), "evictions") == 1
    assert counters()["entries"] == 1


@pytest.mark.slow
def test_eviction_end_to_end(fresh_cache, monkeypatch):
    load_cpu_backend_once()
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", "40K")  # two host kernels fit, not three
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    codes = [f"template <typename T> T evict_{i}(T x) {{ return x * T({i + 2}); }}" for i in range(3)]
    files, before = [], counters()
    for i, code in enumerate(codes):
        time.sleep(0.02)
        fn = create_jit_fn(code)
        np.testing.assert_array_equal(fn(x), x * np.float32(i + 2))
        files.append(fn.specializations[-1].cache_file)
        assert counters()["bytes"] <= 40 * 1024
    assert [os.path.exists(f) for f in files] == [False, True, True]
    stats = counters()
    assert stats["entries"] == 2 and delta(before, stats, "evictions") == 1 and stats["max_bytes"] == 40960
    del fn
    forget_loaded_kernels()
    again = create_jit_fn(codes[0])
    np.testing.assert_array_equal(again(x), x * 2)
    assert again.specializations[-1].cache_event == "compiled"


@pytest.mark.parametrize(("text", "expected"), [
    ("", 1 << 30), ("1073741824", 1 << 30), ("200K", 204_800), ("300kb", 307_200), ("64KiB", 65_536),
    ("500M", 500 << 20), ("2G", 2 << 30), ("1.5g", 3 << 29), (" 7 ", 7),
])
def test_max_bytes_setting(monkeypatch, text, expected):
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", text)
    value, messages = recorded(cache_module.max_bytes)
    assert (value, messages) == (expected, [])
    assert type(value) is int


@pytest.mark.parametrize("text", ["lots", "0", "-5", "12X"])
def test_bad_max_bytes_warns_once_and_uses_the_default(monkeypatch, text):
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", text)
    settings._parsed.cache_clear()
    first, messages = recorded(cache_module.max_bytes)
    second, more = recorded(cache_module.max_bytes)
    assert first == second == 1 << 30 and more == []
    assert messages == [f"jiter_magic: JITER_MAGIC_CACHE_MAX_BYTES={text!r} is not valid: expected a positive size in "
                        "bytes, such as 1073741824, 500M or 2G; using the default, 1073741824"]


def test_lock_timeout_setting(monkeypatch):
    settings._parsed.cache_clear()
    for text, expected in (("", 60.0), ("1.5", 1.5), ("0", 0.0), ("120", 120.0)):
        monkeypatch.setenv("JITER_MAGIC_CACHE_LOCK_TIMEOUT", text)
        assert recorded(cache_module.lock_timeout) == (expected, [])
    monkeypatch.setenv("JITER_MAGIC_CACHE_LOCK_TIMEOUT", "soon")
    value, messages = recorded(cache_module.lock_timeout)
    assert value == 60.0 and messages == [
        "jiter_magic: JITER_MAGIC_CACHE_LOCK_TIMEOUT='soon' is not valid: expected seconds, a number >= 0; "
        "using the default, 60.0"]


def test_cache_stats_keys(fresh_cache):
    stats = counters()
    assert set(stats) == {"root", "enabled", "writable", "memory_hits", "disk_hits", "compiles", "compile_seconds",
                          "corrupt_entries", "entries", "bytes", "max_bytes", "evictions", "lock_timeouts"}
    assert all(type(stats[k]) is int for k in ("max_bytes", "evictions", "lock_timeouts", "entries", "bytes"))


# ----------------------------------------------------------------------------- host key: instruction-set features
MACROS = "#define __SSE2__ 1\n#define __AVX__ 1\n#define __AVX2__ 1\n#define __x86_64__ 1\n#define __SIZEOF_INT__ 4\n"


def test_feature_identity_follows_the_feature_macros():
    names = "__AVX2__ __AVX__ __SSE2__ __x86_64__"
    assert cxx_module.feature_identity(MACROS) == f"isa:4:{hashlib.sha256(names.encode()).hexdigest()[:32]}"
    shuffled = "".join(reversed(MACROS.splitlines(keepends=True))) + '#define __VERSION__ "12.2.0"\n'
    assert cxx_module.feature_identity(shuffled) == cxx_module.feature_identity(MACROS)
    assert cxx_module.feature_identity("") == "isa:unknown"
    same_model = [cxx_module.host_identity("g++ 12", "x86_64", "AMD EPYC", macros)
                  for macros in (MACROS, MACROS + "#define __AVX512F__ 1\n")]
    assert same_model[0] != same_model[1]
    assert same_model[0] == "g++ 12|x86_64|AMD EPYC|" + cxx_module.feature_identity(MACROS)
    assert cache_key("s", ("-O3",), same_model[0]) != cache_key("s", ("-O3",), same_model[1])


def test_host_identity_holds_the_compilers_real_features(monkeypatch):
    from jiter_magic.runtime.backends import cpu

    compiler = cpu.compiler()
    native = ("-march=native",) if cxx_module._accepts(compiler.cxx, "-march=native") else ()
    macros = cxx_module._target_macros(compiler.cxx, native)
    if platform.machine() in ("x86_64", "AMD64"):
        assert "#define __SSE2__ 1" in macros
    identity = compiler.identity
    assert identity == cxx_module.host_identity(cxx_module._version(compiler.cxx), platform.machine(),
                                                cxx_module._cpu_model(), macros)
    assert identity.endswith(cxx_module.feature_identity(macros)) and "isa:unknown" not in identity
    facts = cxx_module.toolchain_facts(compiler.cxx)
    assert facts["macros"] == macros and facts["version"] == cxx_module._version(compiler.cxx)
    # A feature this host's compiler does not target (Sapphire Rapids hosts have AVX512FP16 already).
    added = next(name for name in ("__AVX512FP16__", "__AVX10_2__", "__APX_F__", "__JM_TEST_FEATURE__")
                 if f"#define {name} 1" not in macros)
    monkeypatch.setattr(cxx_module, "toolchain_facts",
                        lambda cxx: {**facts, "macros": macros + f"#define {added} 1\n"})
    assert compiler.identity != identity  # another feature set, another key


# ----------------------------------------------------------------------------- discard: an entry that fails to load
def test_discard_removes_the_entry_and_the_next_build_compiles(fresh_cache):
    b = binding()
    build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    from_disk = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert from_disk.cache_event == "disk"
    before = counters()
    removed, messages = recorded(discard, from_disk, "bad ELF header")
    assert removed is True and messages == [discarded(from_disk.cache_file, "could not be loaded (bad ELF header)")]
    assert not os.path.exists(from_disk.cache_file) and delta(before, counters(), "corrupt_entries") == 1
    compiler = FakeCompiler()
    rebuilt = build(b, ELEMENTWISE, SPEC, "cpu", compiler)
    assert compiler.calls == 1 and rebuilt.cache_event == "compiled"
    os.remove(rebuilt.cache_file)
    assert recorded(discard, rebuilt) == (False, [])  # nothing on disk: nothing to discard


def test_discard_with_the_disk_cache_off(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_DISK_CACHE", "0")
    spec = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert recorded(discard, spec, "whatever") == (False, [])


@pytest.mark.slow
def test_unloadable_entry_is_discarded_and_rebuilt_end_to_end(fresh_cache):
    """The loader's recovery: a 'disk' specialization whose binary does not load is discarded and
    built again, which compiles a loadable one."""
    from jiter_magic.runtime.backends import cpu

    load_cpu_backend_once()
    fn = create_jit_fn("template <typename T> T unloadable(T x) { return x - T(5); }")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(fn(x), x - 5)
    spec = fn.specializations[-1]
    cache_module.disk_cache().put("cpu", spec.cache_key, b"not a shared library, valid checksum")
    loaded = build(fn.binding, ELEMENTWISE, spec.spec, "cpu", cpu.compiler())
    assert loaded.cache_event == "disk"
    with pytest.raises(LaunchError) as info:
        cpu.CpuLauncher(loaded.binary, ELEMENTWISE.packer(loaded.spec, "cpu"), loaded.cache_key, "unloadable")
    removed, messages = recorded(discard, loaded, str(info.value))
    assert removed is True and messages == [discarded(loaded.cache_file, f"could not be loaded ({info.value})")]
    rebuilt = build(fn.binding, ELEMENTWISE, spec.spec, "cpu", cpu.compiler())
    assert rebuilt.cache_event == "compiled" and rebuilt.binary == spec.binary
    cpu.CpuLauncher(rebuilt.binary, ELEMENTWISE.packer(rebuilt.spec, "cpu"), rebuilt.cache_key, "unloadable")  # loads


# ----------------------------------------------------------------------------- per-key locks
def test_key_lock_excludes_and_removes_its_file(tmp_path):
    path = str(tmp_path / "k.lock")
    first = KeyLock(path)
    assert first.acquire(1.0) is True and os.path.exists(path)
    assert KeyLock(path).acquire(0.05) is False  # another open file, even in this process
    waiter = KeyLock(path)
    got = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(10.0)))
    thread.start()
    time.sleep(0.1)
    assert first.release() is True  # unlinks the file while it holds it: the waiter locks the new file at the path
    thread.join()
    assert got == [True] and os.path.exists(path)
    assert KeyLock(path).acquire(0.05) is False
    assert waiter.release() is True
    assert not os.path.exists(path)
    assert waiter.release() is False  # released once: nothing more is removed


def test_a_waiter_that_locks_a_removed_lock_file_does_not_hold_the_lock(tmp_path, monkeypatch):
    """The race that removing lock files opens: a waiter opened the file, the holder unlinked it and
    released it, and the waiter's flock then succeeds on the removed file while a third process
    could create and lock a new one. The waiter must not count that as holding the lock: it locks
    the file at the path, which a third locker then finds held."""
    import fcntl

    path = str(tmp_path / "k.lock")
    holder = KeyLock(path)
    assert holder.acquire(1.0) is True
    real_flock, raced = fcntl.flock, []

    def flock(fd, operation):
        if operation & fcntl.LOCK_EX and not raced:  # the waiter's first try, its file already open
            raced.append(os.fstat(fd).st_nlink)
            assert holder.release() is True  # between the waiter's open and its flock
            raced.append(os.fstat(fd).st_nlink)
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    waiter = KeyLock(path)
    assert waiter.acquire(5.0) is True
    monkeypatch.undo()
    assert raced == [1, 0]  # the waiter's first flock was on the file its holder had just removed
    assert os.path.exists(path) and KeyLock(path).acquire(0.05) is False  # the waiter holds the file at the path
    assert waiter.release() is True and not os.path.exists(path)


def test_lock_files_are_created_private_even_under_a_permissive_umask(tmp_path):
    path = str(tmp_path / "k.lock")
    old = os.umask(0)
    try:
        lock = KeyLock(path)
        assert lock.acquire(1.0) is True
        info = os.lstat(path)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
        assert lock.release() is True
    finally:
        os.umask(old)


def test_a_symlink_planted_at_the_lock_path_is_not_followed(fresh_cache, tmp_path):
    compiler = FakeCompiler()
    path = _lock_of(compiler)
    target = tmp_path / "victim.txt"
    target.write_bytes(b"the user's data")
    os.chmod(target, 0o644)
    os.symlink(target, path)
    with pytest.raises(OSError):
        KeyLock(path).acquire(1.0)
    before = counters()
    spec, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)  # compiles without the lock
    assert messages == [] and compiler.calls == 1 and spec.cache_event == "compiled"
    assert delta(before, counters(), "lock_timeouts") == 0
    jiter_magic.clear_cache(memory=False)  # not a lock file it can lock: left alone, and so is its target
    assert os.path.islink(path) and target.read_bytes() == b"the user's data"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644


def test_only_a_cache_miss_imports_filelock(tmp_path):
    """filelock costs tens of milliseconds to import: a process that only loads cached kernels never
    imports it; the first lock, before a compile, does."""
    code = f"template <typename T> T lazy_{uuid.uuid4().hex[:8]}(T x) {{ return x + T(2); }}"
    script = ("import sys, numpy as np, jiter_magic\n"
              "before = 'filelock' in sys.modules\n"
              f"fn = jiter_magic.create_jit_fn({code!r})\n"
              "assert (fn(np.arange(3.0)) == np.arange(3.0) + 2).all()\n"
              "print(before, fn.specializations[-1].cache_event, 'filelock' in sys.modules)")
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=REPO, JITER_MAGIC_FAST_CALL="0")
    env.pop("JITER_MAGIC_DISK_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    assert [(r.returncode, r.stdout.split()) for r in runs] == [
        (0, ["False", "compiled", "True"]), (0, ["False", "disk", "False"])], [r.stderr for r in runs]


HOLD_SCRIPT = textwrap.dedent("""
    import sys, time
    from jiter_magic.cache.keylock import KeyLock
    lock = KeyLock(sys.argv[1])  # kept: filelock releases a lock it drops
    assert lock.acquire(10.0)
    print("locked", flush=True)
    time.sleep(600)
""")


def _hold_lock(path: str) -> subprocess.Popen:
    """A process that holds the lock at `path` until killed."""
    child = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, path], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=REPO))
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    return child


def _lock_of(compiler: FakeCompiler, spec=SPEC) -> str:
    """The lock path of the fake build of `spec`, its folder created."""
    key = cache_key(recipe(binding(), ELEMENTWISE, spec, "cpu"), compiler.options(), compiler.identity)
    path = cache_module.disk_cache().lock_path("cpu", key)
    cache_module.fs.make_private_dirs(os.path.dirname(path))
    return path


def test_killed_lock_holder_does_not_block(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_CACHE_LOCK_TIMEOUT", "60")
    compiler = FakeCompiler()
    path = _lock_of(compiler)
    child = _hold_lock(path)
    assert KeyLock(path).acquire(0.2) is False  # really held
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    assert os.path.exists(path)  # the killed holder left its file, but no lock
    before = counters()
    started = time.monotonic()
    spec, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    assert time.monotonic() - started < 5
    assert messages == [] and compiler.calls == 1 and spec.cache_event == "compiled"
    assert delta(before, counters(), "lock_timeouts") == 0
    assert not os.path.exists(path) and os.path.isfile(spec.cache_file)


@pytest.mark.slow
def test_lock_timeout_falls_back_to_compiling(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_CACHE_LOCK_TIMEOUT", "1.5")
    compiler = FakeCompiler()
    path = _lock_of(compiler)
    child = _hold_lock(path)
    try:
        before = counters()
        started = time.monotonic()
        spec, messages = recorded(build, binding(), ELEMENTWISE, SPEC, "cpu", compiler)
        waited = time.monotonic() - started
        assert 1.5 <= waited < 30
        assert messages == [f"jiter_magic: waited 1.5 s for another process compiling the same kernel (lock {path}); "
                            "compiling it here too. JITER_MAGIC_CACHE_LOCK_TIMEOUT sets the wait."]
        assert compiler.calls == 1 and spec.cache_event == "compiled" and os.path.isfile(spec.cache_file)
        assert delta(before, counters(), "lock_timeouts") == 1 and delta(before, counters(), "compiles") == 1
        jiter_magic.clear_cache(memory=False)
        assert os.path.exists(path)  # a lock a live process holds is never removed
    finally:
        child.kill()
        child.wait(timeout=30)
    jiter_magic.clear_cache(memory=False)
    assert not os.path.exists(path)  # now nobody holds it


def test_disabled_disk_cache_does_not_lock(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_DISK_CACHE", "0")
    with cache_module.disk_cache().key_lock("cpu", "ab" + "3" * 62) as held:
        assert held is False
    build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert not fresh_cache.exists()


RACE_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import jiter_magic
    fn = jiter_magic.create_jit_fn(sys.argv[2])
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    y = np.arange(1001, dtype=np.float32)
    print("ready", flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.005)
    result = fn(x, y)
    s = jiter_magic.cache_stats()
    print(json.dumps({"ok": bool(np.array_equal(result, x * y - np.float32(7))), "compiles": s["compiles"],
                      "disk_hits": s["disk_hits"], "lock_timeouts": s["lock_timeouts"],
                      "file": fn.specializations[-1].cache_file}), flush=True)
""")


@pytest.mark.slow
def test_eight_processes_compile_once(tmp_path):
    root, go = tmp_path / "cold_cache", tmp_path / "go"
    code = f"template <typename T> T race_{uuid.uuid4().hex[:8]}(T x, T y) {{ return x * y - T(7); }}"
    # JITER_MAGIC_FAST_CALL=0: the race is the kernel's; the C call path's build (a process that
    # outlives these) would hold its own lock file under root/ext meanwhile.
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=str(root), PYTHONPATH=REPO, JITER_MAGIC_CACHE_LOCK_TIMEOUT="300",
               JITER_MAGIC_FAST_CALL="0")
    env.pop("JITER_MAGIC_DISK_CACHE", None)
    children = [subprocess.Popen([sys.executable, "-c", RACE_SCRIPT, str(go), code], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    go.touch()  # all at once
    reports = []
    for child in children:
        out, err = child.communicate(timeout=400)
        assert child.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] is True for r in reports)
    assert sum(r["compiles"] for r in reports) == 1
    assert sorted(r["disk_hits"] for r in reports) == [0] + [1] * 7
    assert sum(r["lock_timeouts"] for r in reports) == 0
    kernel = reports[0]["file"]
    assert {r["file"] for r in reports} == {kernel} and os.path.isfile(kernel)
    assert_no_temporary_or_lock_files(root)


def test_eight_threads_compile_once(fresh_cache):
    load_cpu_backend_once()
    code = f"template <typename T> T threads_{uuid.uuid4().hex[:8]}(T x, T y) {{ return x - y * T(3); }}"
    x, y = np.linspace(0, 1, 257, dtype=np.float32), np.full(257, 0.5, dtype=np.float32)
    functions = [create_jit_fn(code) for _ in range(8)]  # separate functions: no shared loader lock
    barrier, results = threading.Barrier(8), [None] * 8

    def run(index):
        barrier.wait()
        results[index] = functions[index](x, y)

    before = counters()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    after = counters()
    assert cache_warnings(record) == []
    for result in results:
        np.testing.assert_array_equal(result, x - y * np.float32(3))
    assert delta(before, after, "compiles") == 1 and delta(before, after, "disk_hits") == 7
    assert sorted(fn.specializations[-1].cache_event for fn in functions) == ["compiled"] + ["disk"] * 7
    assert {fn.specializations[-1].cache_file for fn in functions} == {functions[0].specializations[-1].cache_file}
    assert_no_temporary_or_lock_files(fresh_cache)


def test_a_call_recovers_from_an_unloadable_entry_through_the_loader(fresh_cache):
    """What a user sees: a call whose kernel entry passes its checks but does not load warns once,
    discards it, compiles a good one and returns the right values; the next process loads that."""
    load_cpu_backend_once()
    code = "template <typename T> T recovers(T x) { return x * T(7); }"
    fn = create_jit_fn(code)
    x = np.arange(5, dtype=np.float64)
    np.testing.assert_array_equal(fn(x), 7 * x)
    entry = fn.specializations[-1]
    cache_module.disk_cache().put("cpu", entry.cache_key, b"a valid frame around bytes that are no library")
    del fn
    gc.collect()
    jiter_magic.clear_cache(disk=False)  # memory caches and the pool of loaded kernels: the next call reads the disk
    again = create_jit_fn(code)
    before = counters()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(again(x), 7 * x)
    assert [w.category for w in caught] == [CacheWarning] and "could not be loaded" in str(caught[0].message)
    assert delta(before, counters(), "compiles") == 1 and delta(before, counters(), "corrupt_entries") == 1
    assert [s.cache_event for s in again.specializations] == ["compiled"]
