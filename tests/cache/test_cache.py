"""The kernel cache: counters, disk entries, integrity, atomic writes, permissions, disabled, unwritable.

The build/cache logic is tested with a small counting fake compiler (`jiter_magic.runtime.build.build`
takes any object with `.options()`, `.identity` and `.compile(source, name)`); the same rules are
then checked end to end with the real host compiler (g++), including a fresh process that must
find its kernel on disk and compile nothing.
"""
from __future__ import annotations

import gc
import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import jiter_magic
import jiter_magic.cache.disk as cache_module
from jiter_magic import CacheWarning, create_jit_fn
from jiter_magic.cache import entry as cache_entry
from jiter_magic.cache.entry import cache_key
from jiter_magic.kernels.contiguous import ContiguousParams
from jiter_magic.kernels.families import ELEMENTWISE
from jiter_magic.kernels.render import render
from jiter_magic.kernels.rows import RowsParams
from jiter_magic.planning.spec import CONTIGUOUS, ROWS, KernelSpec
from jiter_magic.runtime.build import build, generator_fingerprint, recipe

from helpers import (  # tests/helpers.py
    CODE,
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


# ----------------------------------------------------------------------------- build + disk (fake compiler)
def test_first_build_compiles_and_writes_an_entry(fresh_cache):
    compiler = FakeCompiler()
    before = counters()
    spec = build(binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    after = counters()
    assert compiler.calls == 1
    assert delta(before, after, "compiles") == 1
    assert delta(before, after, "disk_hits") == 0
    assert spec.cache_event == "compiled"
    assert spec.binary == FakeCompiler.binary_for(spec.source)
    assert spec.cache_file is not None and os.path.isfile(spec.cache_file)
    assert os.path.commonpath([spec.cache_file, str(fresh_cache)]) == str(fresh_cache)
    # Keyed by what decides the source, not the source itself: a disk hit renders nothing.
    assert spec.cache_key == cache_key(recipe(binding(), ELEMENTWISE, SPEC, "cpu"), compiler.options(),
                                       compiler.identity)
    assert spec.source == render(binding(), SPEC, "cpu")
    assert after["entries"] == 1 and after["bytes"] >= len(spec.binary)
    assert after["root"] == str(fresh_cache) == jiter_magic.cache_dir()


def test_second_build_hits_the_disk(fresh_cache):
    b = binding()
    first = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    compiler = FakeCompiler()
    before = counters()
    second = build(b, ELEMENTWISE, SPEC, "cpu", compiler)
    after = counters()
    assert compiler.calls == 0
    assert delta(before, after, "compiles") == 0
    assert delta(before, after, "disk_hits") == 1
    assert second.cache_event == "disk" and second.compile_seconds == 0.0
    assert second.binary == first.binary
    assert second.cache_file == first.cache_file


def test_different_specs_are_different_entries(fresh_cache):
    b = binding()
    s32 = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    s64 = build(b, ELEMENTWISE, SPEC64, "cpu", FakeCompiler())
    assert s32.cache_key != s64.cache_key and s32.binary != s64.binary
    assert counters()["entries"] == 2


def test_entry_is_checksummed_and_bound_to_its_key(fresh_cache):
    spec = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    with open(spec.cache_file, "rb") as handle:
        blob = handle.read()
    magic = cache_entry.MAGIC
    assert magic == b"JITERMAGIC2\n" and cache_entry.HEADER == len(magic) + 32 + 8 + 64 + 8
    assert os.path.basename(spec.cache_file) == spec.cache_key + ".bin"
    body = blob[len(magic) + 32:]
    # The digest covers the namespace, the full key and the length as well as the payload.
    assert blob[len(magic):len(magic) + 32] == hashlib.sha256(body).digest()
    assert body[:8] == b"cpu\0\0\0\0\0" and body[8:72] == spec.cache_key.encode()
    assert int.from_bytes(body[72:80], "little") == len(spec.binary)
    assert body[80:] == spec.binary and len(blob) == cache_entry.HEADER + len(spec.binary)


def test_old_format_entry_is_a_miss_with_one_warning(fresh_cache):
    good = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    old = b"JITERMAGIC1\n" + hashlib.sha256(good.binary).digest() + len(good.binary).to_bytes(8, "little") + good.binary
    with open(good.cache_file, "wb") as handle:
        handle.write(old)
    compiler = FakeCompiler()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        again = build(binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    assert [str(w.message) for w in cache_warnings(record)] == [
        f"jiter_magic: cache entry {good.cache_file} is truncated, corrupt or not ours; discarding it and recompiling"]
    assert compiler.calls == 1 and again.cache_event == "compiled" and again.binary == good.binary


def _truncate(blob: bytes) -> bytes:
    return blob[: len(blob) // 2]


def _flip(blob: bytes) -> bytes:
    corrupt = bytearray(blob)
    corrupt[-5] ^= 0xFF
    return bytes(corrupt)


def _foreign(blob: bytes) -> bytes:
    return b"\x7fELF\x02\x01\x01" + b"\0" * 200


def _header_only(blob: bytes) -> bytes:
    return blob[: cache_entry.HEADER]


def _empty(blob: bytes) -> bytes:
    return b""


def _longer(blob: bytes) -> bytes:
    return blob + b"trailing garbage"


@pytest.mark.parametrize("damage", [_truncate, _flip, _foreign, _header_only, _empty, _longer],
                         ids=["truncated", "flipped-byte", "foreign", "header-only", "empty", "trailing-bytes"])
def test_damaged_entry_warns_recompiles_and_heals(fresh_cache, damage):
    b = binding()
    good = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    with open(good.cache_file, "rb") as handle:
        blob = handle.read()
    with open(good.cache_file, "wb") as handle:
        handle.write(damage(blob))
    compiler = FakeCompiler()
    before = counters()
    with pytest.warns(CacheWarning, match="corrupt|truncated|not ours"):
        again = build(b, ELEMENTWISE, SPEC, "cpu", compiler)
    after = counters()
    assert compiler.calls == 1
    assert delta(before, after, "compiles") == 1
    assert delta(before, after, "corrupt_entries") == 1
    assert again.cache_event == "compiled"
    assert again.binary == good.binary  # the right binary, never the damaged bytes
    # The entry was rewritten: the next build is a clean disk hit.
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        third = build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert third.cache_event == "disk" and third.binary == good.binary


# ----------------------------------------------------------------------------- atomic writes
def test_writes_are_atomic_via_os_replace(fresh_cache, monkeypatch):
    calls = []
    real_replace = os.replace

    def spy(src, dst, *args, **kwargs):
        calls.append((str(src), str(dst)))
        assert os.path.isfile(src)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(cache_module.os, "replace", spy)
    spec = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    monkeypatch.undo()
    entry_calls = [c for c in calls if c[1] == spec.cache_file]
    assert len(entry_calls) == 1
    src, dst = entry_calls[0]
    assert os.path.dirname(src) == os.path.dirname(dst)  # same folder: rename is atomic
    assert os.path.basename(src).startswith(".tmp-")
    assert not os.path.exists(src)
    leftovers = [f for f in all_files(fresh_cache) if os.path.basename(f).startswith(".tmp-")]
    assert leftovers == []


def test_failed_write_leaves_no_temp_file(fresh_cache, monkeypatch):
    def failing_replace(src, dst, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.os, "replace", failing_replace)
    compiler = FakeCompiler()
    with pytest.warns(CacheWarning):
        spec = build(binding(), ELEMENTWISE, SPEC, "cpu", compiler)
    monkeypatch.undo()
    assert spec.binary == FakeCompiler.binary_for(spec.source)
    assert compiler.calls == 1
    assert [f for f in all_files(fresh_cache) if ".tmp-" in os.path.basename(f)] == []
    assert not any(f.endswith(".bin") for f in all_files(fresh_cache))


def test_concurrent_writers_and_readers_never_see_a_partial_entry(fresh_cache):
    """Writers racing on one key rename complete files into place: a reader sees one payload or the
    other (or nothing yet), never a partial file that would count as corrupt."""
    import threading

    disk = cache_module.disk_cache()
    key = "ab" + "0" * 62
    payloads = [b"first payload " * 5000, b"second payload " * 5000]
    seen, stop = [], threading.Event()
    corrupt_before = counters()["corrupt_entries"]

    def writer(payload):
        for _ in range(30):
            disk.put("cpu", key, payload)

    def reader():
        while not stop.is_set():
            seen.append(disk.get("cpu", key))

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    watcher = threading.Thread(target=reader)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)  # counted below instead
        watcher.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        watcher.join()
    assert counters()["corrupt_entries"] == corrupt_before
    assert all(value is None or value in payloads for value in seen)
    assert disk.get("cpu", key) in payloads
    assert [f for f in all_files(fresh_cache) if ".tmp-" in f] == []


# ----------------------------------------------------------------------------- directories and modes
def test_directories_created_recursively_with_mode_0700(tmp_path, monkeypatch):
    root = tmp_path / "deep" / "er" / "jiter_cache"
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    assert not (tmp_path / "deep").exists()
    spec = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert os.path.isfile(spec.cache_file)
    folder = os.path.dirname(spec.cache_file)
    created = []
    while folder != str(tmp_path):
        created.append(folder)
        folder = os.path.dirname(folder)
    assert str(tmp_path / "deep") in created and str(root) in created
    for path in created:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path


def test_xdg_cache_home_default(tmp_path, monkeypatch):
    monkeypatch.delenv("JITER_MAGIC_CACHE_DIR", raising=False)
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jiter_magic.cache_dir() == str(tmp_path / "xdg" / "jiter_magic")
    spec = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    assert spec.cache_file.startswith(str(tmp_path / "xdg" / "jiter_magic") + os.sep)


# ----------------------------------------------------------------------------- disabled / unwritable
def test_disk_cache_disabled_writes_nothing(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_DISK_CACHE", "0")
    assert jiter_magic.cache_dir() is None
    b = binding()
    compiler = FakeCompiler()
    before = counters()
    first = build(b, ELEMENTWISE, SPEC, "cpu", compiler)
    second = build(b, ELEMENTWISE, SPEC, "cpu", compiler)
    after = counters()
    assert compiler.calls == 2  # no disk layer: the second build compiles again
    assert delta(before, after, "disk_hits") == 0
    assert first.cache_file is None and second.cache_file is None
    assert not fresh_cache.exists()
    assert after["enabled"] is False and after["entries"] == 0


def test_disk_cache_disabled_end_to_end(fresh_cache, monkeypatch):
    monkeypatch.setenv("JITER_MAGIC_DISK_CACHE", "0")
    fn = create_jit_fn("template <typename T> T disabled_e2e(T x, T y) { return x - y * T(2); }")
    x, y = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 1.0, -1.0])
    torch.testing.assert_close(fn(x, y), x - 2 * y)
    assert not fresh_cache.exists()


def _unwritable_root(tmp_path):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a regular file where a folder should be")
    return blocker / "cache"


def test_unwritable_directory_caches_in_memory(tmp_path, monkeypatch):
    root = _unwritable_root(tmp_path)
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    b = binding()
    compiler = FakeCompiler()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        s32 = build(b, ELEMENTWISE, SPEC, "cpu", compiler)
        s64 = build(b, ELEMENTWISE, SPEC64, "cpu", compiler)
    assert any("not writable" in str(w.message) for w in cache_warnings(record))
    assert compiler.calls == 2
    assert s32.binary == FakeCompiler.binary_for(s32.source)
    assert s64.binary == FakeCompiler.binary_for(s64.source)
    assert s32.cache_file is None and s64.cache_file is None
    assert counters()["writable"] is False


def test_unwritable_directory_warns_once(tmp_path, monkeypatch):
    root = _unwritable_root(tmp_path)
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    b = binding()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
        build(b, ELEMENTWISE, SPEC64, "cpu", FakeCompiler())
    assert len(cache_warnings(record)) == 1


def test_unwritable_directory_end_to_end(tmp_path, monkeypatch):
    root = _unwritable_root(tmp_path)
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    fn = create_jit_fn("template <typename T> T unwritable_e2e(T x, T y) { return x * x - y; }")
    x = torch.tensor([1.0, 2.0, 3.0])
    y = torch.tensor([[1.0], [2.0]])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = fn(x, y)
        second = fn(x.double(), y.double())  # a second specialization
        third = fn(x, y)  # memory hit
    assert any("not writable" in str(w.message) for w in cache_warnings(record))
    torch.testing.assert_close(first, x * x - y)
    torch.testing.assert_close(second, (x * x - y).double())
    torch.testing.assert_close(third, first)
    assert not root.exists()


def test_unwritable_directory_end_to_end_warns_once(tmp_path, monkeypatch):
    root = _unwritable_root(tmp_path)
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)
    fn = create_jit_fn("template <typename T> T unwritable_once(T x, T y) { return x * x + y; }")
    x = torch.tensor([1.0, 2.0, 3.0])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fn(x, x)
        fn(x.double(), x.double())
    assert len(cache_warnings(record)) == 1


# ----------------------------------------------------------------------------- clear_cache
def test_clear_cache(fresh_cache):
    b = binding()
    build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    build(b, ELEMENTWISE, SPEC64, "cpu", FakeCompiler())
    stats = counters()
    assert stats["entries"] == 2 and stats["compiles"] >= 2
    jiter_magic.clear_cache(memory=False)
    stats = counters()
    assert stats["entries"] == 0 and stats["bytes"] == 0
    assert stats["compiles"] >= 2  # counters kept
    assert not any(f.endswith(".bin") for f in all_files(fresh_cache))
    build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    jiter_magic.clear_cache()
    stats = counters()
    assert stats["entries"] == 0
    assert stats["compiles"] == stats["disk_hits"] == stats["memory_hits"] == stats["corrupt_entries"] == 0
    # After clearing, a build compiles again.
    compiler = FakeCompiler()
    build(b, ELEMENTWISE, SPEC, "cpu", compiler)
    assert compiler.calls == 1


def test_clear_cache_empties_memory_and_functions_rebuild(fresh_cache):
    fn = create_jit_fn("template <typename T> T clear_e2e(T x) { return x + T(3); }")
    x = torch.arange(4.0)
    torch.testing.assert_close(fn(x), x + 3)
    torch.testing.assert_close(fn(x), x + 3)
    assert counters()["memory_hits"] == 1
    jiter_magic.clear_cache(disk=False)  # memory only: the next call loads the kernel from disk
    torch.testing.assert_close(fn(x), x + 3)
    assert counters()["memory_hits"] == 0 and counters()["disk_hits"] == 1 and counters()["compiles"] == 0
    jiter_magic.clear_cache()  # memory and disk: the next call compiles again
    torch.testing.assert_close(fn(x + 1), x + 4)
    assert counters()["memory_hits"] == 0 and counters()["compiles"] == 1
    torch.testing.assert_close(fn(x), x + 3)
    assert counters()["memory_hits"] == 1 and counters()["compiles"] == 1
    assert len(fn.specializations) == 3  # one build a clear: compiled, from disk, compiled


def test_memory_cache_is_a_bounded_lru_with_counts_per_group():
    from jiter_magic.cache.memory import MemoryCache

    cache: MemoryCache[str] = MemoryCache(limit=2, counted=False)
    cache.put("a", "plan a", group="spec 1")
    cache.put("b", "plan b", group="spec 1")
    assert cache.get("a") == "plan a"  # a is now the most recently used
    cache.put("c", "plan c", group="spec 2")
    assert cache.get("b") is None and cache.get("a") == "plan a" and cache.get("c") == "plan c"
    assert len(cache) == 2
    cache.put("c2", "plan c", group="spec 2", miss=False)  # a second key for a plan already counted
    assert cache.counts("spec 1") == (2, 2) and cache.counts("spec 2") == (1, 1)
    cache.clear()
    assert len(cache) == 0 and cache.get("a") is None and cache.counts("spec 1") == (0, 0)


def test_memory_counts_per_specialization(fresh_cache):
    fn = create_jit_fn("template <typename T> T counted(T x) { return x * T(2); }")
    x = torch.arange(5.0)
    for _ in range(4):
        fn(x)
    fn(x.double())
    by_dtype = {s.spec.inputs: fn.memory_counts(s) for s in fn.specializations}
    assert by_dtype == {("float32",): (3, 1), ("float64",): (0, 1)}


# ----------------------------------------------------------------------------- the key
def test_cache_key_covers_source_options_identity_and_version(monkeypatch):
    base = cache_key("source", ("-O3",), "g++ 12")
    assert base == cache_key("source", ("-O3",), "g++ 12")
    assert len(base) == 64 and int(base, 16) >= 0
    assert cache_key("source ", ("-O3",), "g++ 12") != base
    assert cache_key("source", ("-O2",), "g++ 12") != base
    assert cache_key("source", ("-O3", "-fopenmp"), "g++ 12") != base
    assert cache_key("source", ("-O3",), "g++ 13") != base
    # Option boundaries matter: ("-a", "b") is not ("-ab",).
    assert cache_key("s", ("-a", "b"), "id") != cache_key("s", ("-ab",), "id")
    monkeypatch.setattr(cache_entry, "__version__", "999.0.0")
    assert cache_key("source", ("-O3",), "g++ 12") != base


def test_the_recipe_covers_binding_spec_backend_and_the_generators(monkeypatch):
    """The disk key names what decides the source instead of the source: the function's code, the
    spec, the backend, and the code of the generators (so an edited kernel path keys anew)."""
    base = recipe(binding(), ELEMENTWISE, SPEC, "cpu")
    assert base == recipe(binding(), ELEMENTWISE, SPEC, "cpu")
    assert recipe(binding(), ELEMENTWISE, SPEC64, "cpu") != base
    assert recipe(binding(), ELEMENTWISE, SPEC, "cuda") != base
    other = create_jit_fn(CODE.replace("T(1)", "T(2)")).binding
    assert recipe(other, ELEMENTWISE, SPEC, "cpu") != base
    fingerprint = generator_fingerprint()
    assert len(fingerprint) == 64 and fingerprint in base
    monkeypatch.setattr("jiter_magic.runtime.build.generator_fingerprint", lambda: "0" * 64)
    assert recipe(binding(), ELEMENTWISE, SPEC, "cpu") != base


def test_a_disk_hit_renders_the_source_only_when_it_is_read(fresh_cache, monkeypatch):
    first = build(binding(), ELEMENTWISE, SPEC, "cpu", FakeCompiler())
    renders = []
    family = type(ELEMENTWISE)()
    monkeypatch.setattr(family, "render", lambda *args: renders.append(args) or render(*args))
    again = build(binding(), family, SPEC, "cpu", FakeCompiler())
    assert again.cache_event == "disk" and again.binary == first.binary and renders == []
    assert again.source == first.source and again.source == first.source and len(renders) == 1


def test_build_key_changes_with_compiler_identity_and_options(fresh_cache):
    b = binding()
    keys = {
        build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler()).cache_key,
        build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler(identity="fake-compiler 2.0")).cache_key,
        build(b, ELEMENTWISE, SPEC, "cpu", FakeCompiler(options=("-O2",))).cache_key,
    }
    assert len(keys) == 3
    assert counters()["entries"] == 3


def test_a_spec_keys_by_value_and_is_frozen():
    """Specs key the loaded kernels and the memoized layouts: equal fields, equal hash."""
    same = KernelSpec(("float32", "float32"), (False, False), ("float32",), "float32", (), path=CONTIGUOUS,
                      params=ContiguousParams())
    assert same == SPEC and hash(same) == hash(SPEC) and {SPEC: 1}[same] == 1 and same != SPEC64
    # The path's parameters key it by value too, and a record of another path never equals one.
    vec4 = SPEC._replace(params=ContiguousParams(vec=4))
    assert vec4 != SPEC and vec4 == SPEC._replace(params=ContiguousParams(vec=4))
    assert hash(vec4) == hash(SPEC._replace(params=ContiguousParams(vec=4)))
    rows = SPEC._replace(path=ROWS)
    assert rows._replace(params=RowsParams(vec=1)) != rows  # same numbers, another record
    wider = SPEC._replace(ndim=2)
    assert wider is not SPEC and wider.ndim == 2 and SPEC.ndim == 1 and wider != SPEC
    with pytest.raises(AttributeError):
        SPEC.ndim = 2  # type: ignore[misc]


def test_render_is_deterministic():
    b = binding()
    assert render(b, SPEC, "cpu") == render(binding(), SPEC, "cpu")
    other = create_jit_fn(CODE.replace("T(1)", "T(2)")).binding
    assert render(other, SPEC, "cpu") != render(b, SPEC, "cpu")


# ----------------------------------------------------------------------------- end to end with g++
def test_counters_memory_disk_compile(fresh_cache):
    load_cpu_backend_once()
    code = "template <typename T> T counters_e2e(T x, T y) { return x * T(3) - y; }"
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([4.0, 8.0])
    fn = create_jit_fn(code)
    before = counters()
    torch.testing.assert_close(fn(x, y), 3 * x - y)
    mid = counters()
    assert delta(before, mid, "compiles") == 1 and delta(before, mid, "disk_hits") == 0
    assert mid["compile_seconds"] > before["compile_seconds"]
    assert mid["entries"] == 1
    torch.testing.assert_close(fn(x, y), 3 * x - y)
    after = counters()
    assert delta(mid, after, "memory_hits") == 1 and delta(mid, after, "compiles") == 0
    # A second function with the same code in this process shares the loaded kernel.
    fn2 = create_jit_fn(code)
    torch.testing.assert_close(fn2(x, y), 3 * x - y)
    last = counters()
    assert delta(after, last, "disk_hits") == 0 and delta(after, last, "compiles") == 0
    assert fn2.specializations[-1].cache_event == "memory"
    assert fn.specializations[-1].cache_event == "compiled"  # the memory hit's record is a new one
    # Once no function holds it and the memory caches are cleared, the disk serves it.
    del fn, fn2
    gc.collect()
    jiter_magic.clear_cache(disk=False)
    fn3 = create_jit_fn(code)
    torch.testing.assert_close(fn3(x, y), 3 * x - y)
    assert counters()["disk_hits"] == 1 and counters()["compiles"] == 0
    assert fn3.specializations[-1].cache_event == "disk"


def test_damaged_entry_end_to_end(fresh_cache):
    code = "template <typename T> T damaged_e2e(T x, T y) { return x / y + T(1); }"
    x, y = torch.tensor([1.0, 2.0, 9.0]), torch.tensor([4.0, 8.0, 3.0])
    fn = create_jit_fn(code)
    torch.testing.assert_close(fn(x, y), x / y + 1)
    path = fn.specializations[-1].cache_file
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(size // 3)
    del fn
    forget_loaded_kernels()
    fn2 = create_jit_fn(code)
    before = counters()
    with pytest.warns(CacheWarning):
        result = fn2(x, y)
    torch.testing.assert_close(result, x / y + 1)
    assert delta(before, counters(), "compiles") == 1
    assert os.path.getsize(path) == size  # healed


def test_foreign_entry_end_to_end(fresh_cache):
    code = "template <typename T> T foreign_e2e(T x) { return x * x; }"
    fn = create_jit_fn(code)
    x = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(fn(x), x * x)
    path = fn.specializations[-1].cache_file
    with open(path, "wb") as handle:  # e.g. another program's library under our name
        handle.write(b"\x7fELF" + os.urandom(4096))
    del fn
    forget_loaded_kernels()
    fn2 = create_jit_fn(code)
    with pytest.warns(CacheWarning):
        result = fn2(x)
    np.testing.assert_array_equal(result, x * x)


SCRIPT = textwrap.dedent("""
    import json, torch, jiter_magic
    fn = jiter_magic.create_jit_fn("template <typename T> T fresh_process(T x, T y) { return x * y + T(2); }")
    x = torch.arange(6.0).reshape(2, 3)
    y = torch.tensor([1.0, -1.0, 0.5])
    r = fn(x, y)
    ok = bool(torch.equal(r, x * y + 2))
    s = jiter_magic.cache_stats()
    print(json.dumps({"ok": ok, "compiles": s["compiles"], "disk_hits": s["disk_hits"], "entries": s["entries"],
                      "root": s["root"], "file": fn.specializations[-1].cache_file}))
""")


def _run_fresh_process(root) -> dict:
    import json

    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=str(root), PYTHONPATH=REPO)
    env.pop("JITER_MAGIC_DISK_CACHE", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_fresh_process_hits_the_disk_cache(tmp_path):
    root = tmp_path / "shared_cache"
    first = _run_fresh_process(root)
    kernel = first.pop("file")
    assert os.path.dirname(os.path.dirname(os.path.dirname(kernel))) == str(root) and os.path.isfile(kernel)
    # The kernel's entry, and whatever the backend stores once (such as a runtime library).
    entries = first.pop("entries")
    assert type(entries) is int and entries >= 1
    assert first == {"ok": True, "compiles": 1, "disk_hits": 0, "root": str(root)}
    second = _run_fresh_process(root)
    assert second == {"ok": True, "compiles": 0, "disk_hits": 1, "entries": entries, "root": str(root), "file": kernel}
