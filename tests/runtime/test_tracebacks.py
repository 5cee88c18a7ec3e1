"""A caller's mistake shows the caller's own line and the message, not jiter_magic's frames.

The public entry points (a call, `create_jit_fn`, `create_multi_output_jit_fn`) re-raise a
JiterError with the frames that checked it dropped; JITER_MAGIC_DEBUG=1 keeps them, and an
exception of any other type (a bug, or an error of the caller's own object) keeps every frame.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import jiter_magic
from jiter_magic import create_jit_fn, create_multi_output_jit_fn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AXPY = "template <typename T> T axpy(T x, T y, T a) { return a * x + y; }"
INTERNAL = ("jiter_magic/runtime", "jiter_magic/frontend", "jiter_magic/planning", "jiter_magic/arrays")

# Two mistakes, each on a line of its own, caught and printed so that one run shows both.
SCRIPT = textwrap.dedent("""\
    import traceback
    import numpy as np
    import jiter_magic
    fn = jiter_magic.create_jit_fn({code!r}, a=1.0)
    x = np.ones(4, np.float32)
    try:
        fn(x)
    except jiter_magic.BindError:
        traceback.print_exc()
    try:
        fn(x, x, beta=1.0)
    except KeyError:
        traceback.print_exc()
""").format(code=AXPY)
MISSING_LINE, KEYWORD_LINE = 7, 11


def run_script(tmp_path, debug: str) -> str:
    script = tmp_path / "mistakes.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=REPO, JITER_MAGIC_CACHE_DIR=str(tmp_path / "cache"), JITER_MAGIC_DEBUG=debug)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def frames_of(error: BaseException) -> list[str]:
    return [frame.filename.replace(os.sep, "/") for frame in traceback.extract_tb(error.__traceback__)]


def test_a_script_shows_its_own_lines_and_the_messages(tmp_path):
    stderr = run_script(tmp_path, "0")
    script = str(tmp_path / "mistakes.py")
    assert f'File "{script}", line {MISSING_LINE}, in <module>' in stderr
    assert f'File "{script}", line {KEYWORD_LINE}, in <module>' in stderr
    assert "jiter_magic.errors.BindError: axpy takes 2 input(s) ['x', 'y'], got 1" in stderr
    assert "jiter_magic.errors.UnknownKwargError: beta is not declared in function definition" in stderr
    assert not [part for part in INTERNAL if part in stderr], stderr
    assert "During handling" not in stderr
    # Each traceback: the script's line, then the one entry point that re-raised.
    assert stderr.count("jiter_magic/function.py") == 2
    assert stderr.count("Traceback (most recent call last)") == 2


def test_jiter_magic_debug_keeps_the_internal_frames(tmp_path):
    stderr = run_script(tmp_path, "1")
    assert "jiter_magic/runtime/dispatch.py" in stderr
    assert "jiter_magic/runtime/keywords.py" in stderr  # where the keyword was refused
    assert "jiter_magic.errors.BindError: axpy takes 2 input(s) ['x', 'y'], got 1" in stderr


@pytest.mark.parametrize("call, kind, message", [
    (lambda fn, x: fn(x), jiter_magic.BindError, "takes 2 input(s)"),
    (lambda fn, x: fn(x, x, beta=1.0), jiter_magic.UnknownKwargError, "beta is not declared"),
    (lambda fn, x: fn(x, np.ones(3, np.float32)), jiter_magic.ShapeError, "cannot be broadcast"),
    (lambda fn, x: fn(x, x, a=1 << 80), jiter_magic.ScalarOverflowError, None),
    (lambda fn, x: fn(x, object()), jiter_magic.DTypeError, "got object"),
    (lambda fn, x: fn(x, x, out=np.ones(3, np.float32)), jiter_magic.ShapeError, None),
], ids=["missing-input", "undeclared-keyword", "shapes", "overflow", "not-an-array", "out-shape"])
def test_a_call_mistake_keeps_its_type_and_message_with_no_internal_frame(call, kind, message, fresh_cache):
    fn = create_jit_fn(AXPY, a=1.0)
    x = np.ones(4, np.float32)
    with pytest.raises(kind) as info:
        call(fn, x)
    assert type(info.value) is kind
    assert message is None or message in str(info.value)
    frames = frames_of(info.value)
    assert frames[-1].endswith("jiter_magic/function.py")  # the entry point is where it starts
    assert frames[0] == __file__.replace(os.sep, "/")
    assert [f for f in frames if "/jiter_magic/" in f] == [frames[-1]]
    assert info.value.__cause__ is not None or info.value.__suppress_context__


@pytest.mark.parametrize("make, kind", [
    (lambda: create_jit_fn("int x = 3;"), jiter_magic.ParseError),
    (lambda: create_jit_fn(AXPY, beta=1.0), jiter_magic.BindError),
    (lambda: create_multi_output_jit_fn(AXPY, 2), jiter_magic.BindError),
], ids=["parse", "undeclared-kwarg", "outputs"])
def test_a_creation_mistake_starts_at_create_jit_fn(make, kind):
    with pytest.raises(kind) as info:
        make()
    frames = frames_of(info.value)
    assert frames[-1].endswith("jiter_magic/__init__.py")
    assert [f for f in frames if "/jiter_magic/" in f] == [frames[-1]]


def test_debug_keeps_every_frame_in_process(monkeypatch, fresh_cache):
    monkeypatch.setenv("JITER_MAGIC_DEBUG", "1")
    fn = create_jit_fn(AXPY, a=1.0)
    with pytest.raises(jiter_magic.UnknownKwargError) as info:
        fn(np.ones(4, np.float32), np.ones(4, np.float32), beta=1.0)
    frames = frames_of(info.value)
    assert frames[-1].endswith("jiter_magic/runtime/keywords.py")
    assert sum(f.endswith("jiter_magic/function.py") for f in frames) == 1  # re-raised once, not twice


SUM = "template <typename T> T add(T a, T b) { return a + b; }"


@pytest.mark.parametrize("make, where", [
    (lambda: jiter_magic.create_jit_fn("int x = 3;"), "jiter_magic/__init__.py"),
    (lambda: jiter_magic.create_reduction_fn("int x = 3;", 0, combine="add"), "jiter_magic/__init__.py"),
    (lambda: jiter_magic.create_scan_fn("int x = 3;", 0, combine="add"), "jiter_magic/__init__.py"),
    (lambda: jiter_magic.create_reduction_fn(SUM, 0, combine="add")(np.ones(3), dim=5), "jiter_magic/reduction.py"),
], ids=["create_jit_fn", "create_reduction_fn", "create_scan_fn", "reduction-call"])
def test_debug_shows_each_re_raising_frame_once(monkeypatch, fresh_cache, make, where):
    monkeypatch.setenv("JITER_MAGIC_DEBUG", "1")
    with pytest.raises(jiter_magic.JiterError) as info:
        make()
    frames = frames_of(info.value)
    assert sum(f.endswith(where) for f in frames) == 1, frames
    assert any("jiter_magic/frontend" in f or "jiter_magic/planning" in f for f in frames), frames


class BrokenDLPack:
    """An array-like object whose own `__dlpack_device__` fails: an error jiter_magic did not raise."""

    def __dlpack_device__(self):
        raise RuntimeError("the array's own method failed")


def test_an_exception_of_another_type_keeps_every_frame(fresh_cache):
    fn = create_jit_fn(AXPY, a=1.0)
    with pytest.raises(RuntimeError, match="the array's own method failed") as info:
        fn(np.ones(4, np.float32), BrokenDLPack())
    assert not isinstance(info.value, jiter_magic.JiterError)
    frames = frames_of(info.value)
    assert frames[-1] == __file__.replace(os.sep, "/")  # the object's own method, at the bottom
    assert any(f.endswith("jiter_magic/runtime/dispatch.py") for f in frames)
    assert any(f.endswith("jiter_magic/arrays/__init__.py") for f in frames)


SUM = "template <typename T> T add(T a, T b) { return a + b; }"


@pytest.mark.parametrize("call, kind, message", [
    (lambda fn, x: fn(x, dim=3), jiter_magic.DimensionError, "dim 3 is out of range"),
    (lambda fn, x: fn(x, x), jiter_magic.BindError, "takes 1 input array(s)"),
    (lambda fn, x: fn(x, axis=0), jiter_magic.UnknownKwargError, "axis is not declared"),
    (lambda fn, x: fn(x, dim=0, out=np.ones(3, np.float32)), jiter_magic.ShapeError, "out= has shape (3,)"),
], ids=["dim", "inputs", "keyword", "out-shape"])
def test_a_reduction_call_mistake_starts_at_the_call(call, kind, message, fresh_cache):
    total = jiter_magic.create_reduction_fn(SUM, 0, combine="add")
    with pytest.raises(kind) as info:
        call(total, np.ones((4, 2), np.float32))
    assert message in str(info.value)
    frames = frames_of(info.value)
    assert frames[-1].endswith("jiter_magic/reduction.py") and frames[0] == __file__.replace(os.sep, "/")
    assert [f for f in frames if "/jiter_magic/" in f] == [frames[-1]]
