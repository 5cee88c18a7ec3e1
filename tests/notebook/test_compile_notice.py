"""The notice a notebook cell shows while a call waits for a compile, in a real Jupyter kernel."""
from __future__ import annotations

import os
import queue
import warnings
from pathlib import Path

import pytest

import jiter_magic
from jiter_magic.runtime import notice as compile_notice

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]
AXPY = "template <typename T> T axpy(T x, T y, T a) { return a * x + y; }"


@pytest.mark.parametrize(("value", "expected"), [
    ("", compile_notice.DEFAULT_AFTER_S), ("0", 0.0), ("1.5", 1.5), ("off", None), ("OFF", None), ("none", None),
])
def test_threshold_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv(compile_notice.NOTICE_ENV, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid value warns of nothing
        assert compile_notice.threshold() == expected


@pytest.mark.parametrize("value", ["soon", "-3", "nan", "inf"])
def test_a_threshold_that_is_not_valid_warns_once_and_keeps_the_default(monkeypatch, value):
    monkeypatch.setenv(compile_notice.NOTICE_ENV, value)
    with pytest.warns(jiter_magic.SettingWarning, match=f"JITER_MAGIC_NOTICE_AFTER={value!r} is not valid: "
                      "expected seconds"):
        assert compile_notice.threshold() == compile_notice.DEFAULT_AFTER_S
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: the same value again warns of nothing
        assert compile_notice.threshold() == compile_notice.DEFAULT_AFTER_S


def test_no_notice_outside_a_kernel(monkeypatch):
    monkeypatch.setenv(compile_notice.NOTICE_ENV, "0")
    from jiter_magic.planning.spec import KernelSpec  # noqa: F401 - the notice needs no spec outside a kernel

    assert compile_notice.start("axpy", None, None, -1) is None  # type: ignore[arg-type]


def _run(client, code: str) -> list[dict]:
    """Execute `code`; the iopub messages of that execution, up to idle."""
    msg_id = client.execute(code)
    messages = []
    while True:
        try:
            message = client.get_iopub_msg(timeout=120)
        except queue.Empty:
            pytest.fail(f"no reply from the kernel for {code!r}: {messages}")
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return messages


def _texts(messages: list[dict], kind: str) -> list[str]:
    return [m["content"]["data"]["text/plain"] for m in messages if m["msg_type"] == kind]


@pytest.fixture
def kernel(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           "JITER_MAGIC_CACHE_DIR": str(tmp_path / "cache"), compile_notice.NOTICE_ENV: "0"}
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_compiling_call_says_so_in_the_cell_and_then_how_it_ended(kernel):
    setup = _run(kernel, f"import numpy as np, jiter_magic\naxpy = jiter_magic.create_jit_fn({AXPY!r}, a=2.0)")
    assert not [m for m in setup if m["msg_type"] == "error"], setup
    first = _run(kernel, "print(axpy(np.ones(3), np.arange(3.0)))")
    shown, updated = _texts(first, "display_data"), _texts(first, "update_display_data")
    assert shown == ["jiter_magic: compiling axpy #0 for (float64, float64) -> (float64), contiguous vec1 on the CPU ..."]
    assert len(updated) == 1 and updated[0].startswith(
        "jiter_magic: compiled axpy #0 for (float64, float64) -> (float64), contiguous vec1 on the CPU in ")
    ids = {m["content"]["transient"]["display_id"] for m in first if m["msg_type"].endswith("display_data")}
    assert len(ids) == 1  # the update rewrote the same line
    assert [m["content"]["text"] for m in first if m["msg_type"] == "stream"] == ["[2. 3. 4.]\n"]

    again = _run(kernel, "print(axpy(np.ones(3), np.arange(3.0)))")  # loaded: no build, no notice
    assert not [m for m in again if "display_data" in m["msg_type"]]

    failed = _run(kernel, "bad = jiter_magic.create_jit_fn('template <typename T> T bad(T x) { return x + ; }')\n"
                          "bad(np.ones(2))")
    assert _texts(failed, "display_data") == [
        "jiter_magic: compiling bad #0 for (float64) -> (float64), contiguous vec1 on the CPU ..."]
    assert _texts(failed, "update_display_data")[0].startswith(
        "jiter_magic: compiling bad #0 for (float64) -> (float64), contiguous vec1 on the CPU failed after ")
    assert [m["content"]["ename"] for m in failed if m["msg_type"] == "error"] == ["CompileError"]

    # a %%jiterator cell prints its own summary line after the build: no notice there
    magic = _run(kernel, "%load_ext jiter_magic\n")
    magic = _run(kernel, "%%jiterator twice --no-panel\ntemplate <typename T> T twice(T x) { return 2 * x; }")
    assert not [m for m in magic if "display_data" in m["msg_type"]], magic
    assert [m["content"]["text"].split(":")[0] for m in magic if m["msg_type"] == "stream"] == ["twice"]


def test_a_call_with_known_dtypes_says_what_makes_its_kernel_new(kernel):
    """A Python scalar and a broadcast row need kernels of their own for dtypes already compiled:
    the line names the facet and the earlier specialization, so it never reads as a repeat."""
    _run(kernel, f"import numpy as np, jiter_magic\naxpy = jiter_magic.create_jit_fn({AXPY!r}, a=2.0)\n"
                 "x = np.ones((3, 4))\naxpy(x, x)")
    scalar = _texts(_run(kernel, "axpy(x, 10.0)"), "update_display_data")
    assert len(scalar) == 1 and scalar[0].startswith(
        "jiter_magic: compiled axpy #1 for (float64, scalar float64) -> (float64), contiguous vec1 on the CPU in ")
    assert scalar[0].endswith(" s (new scalar kinds; #0 is (float64, float64) -> (float64), contiguous vec1)")
    row = _texts(_run(kernel, "axpy(x, np.ones(4))"), "update_display_data")
    assert len(row) == 1 and row[0].startswith("jiter_magic: compiled axpy #2 for (float64, float64) -> (float64), rows ")
    assert row[0].endswith(" s (new kernel path; #0 is (float64, float64) -> (float64), contiguous vec1)")


def test_a_reduction_says_so_in_the_cell_as_an_elementwise_call_does(kernel):
    """A reduction's kernels build through the same loader: the same notice, its kernel named by
    its spec, and what makes a later kernel new beside the earlier one."""
    code = ("template <typename T> T sq(T x) { return x * x; }\\n"
            "template <typename T> T add(T a, T b) { return a + b; }\\n")
    setup = _run(kernel, f"import numpy as np, jiter_magic\nsum_sq = jiter_magic.create_reduction_fn('{code}', 0, "
                         "'sq', combine='add')")
    assert not [m for m in setup if m["msg_type"] == "error"], setup
    first = _run(kernel, "print(sum_sq(np.ones((2, 3)), dim=1))")
    what = "sq #0 for (float64) -> float64 accumulating float64, host 1-d kept x 1-d reduced on the CPU"
    assert _texts(first, "display_data") == [f"jiter_magic: compiling {what} ..."]
    updated = _texts(first, "update_display_data")
    assert len(updated) == 1 and updated[0].startswith(f"jiter_magic: compiled {what} in ")
    assert [m["content"]["text"] for m in first if m["msg_type"] == "stream"] == ["[3. 3.]\n"]
    assert not [m for m in _run(kernel, "sum_sq(np.ones((2, 3)), dim=1)") if "display_data" in m["msg_type"]]
    columns = _texts(_run(kernel, "sum_sq(np.ones((64, 64)), dim=0)"), "update_display_data")
    assert len(columns) == 1 and columns[0].startswith("jiter_magic: compiled sq #1 for (float64) -> float64 "
                                                       "accumulating float64, host_columns 1-d kept x 1-d reduced")
    assert columns[0].endswith(" s (new path; #0 is (float64) -> float64 accumulating float64, host 1-d kept x "
                               "1-d reduced)")
