"""`python -m jiter_magic`, the README's main job: the seed examples, the C call path, the cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_main_job_runs_the_seed_examples_and_reports_the_cache(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT, "JITER_MAGIC_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "jiter_magic"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("jiter_magic ") and "running the seed examples on" in lines[0]
    ours, torch_says = lines[1].removeprefix("my_kernel(a, b, alpha=3.14) = ").split(" | torch: ")
    assert json.loads(ours) == json.loads(torch_says) and len(json.loads(ours)) == 3
    assert lines[2].startswith("min(val, sin(a) + cos(b)) = ")
    assert all(v <= 0.0 for v in json.loads(lines[2].split(" = ")[1]))  # min(0, ...)
    assert "gelu overridden by a jitted relu: True" in lines
    status = next(line for line in lines if line.startswith("C call path: "))
    if os.path.exists(os.path.join(sysconfig.get_paths().get("include") or "", "Python.h")):
        assert status == "C call path: loaded; its torch module: loaded"
    else:  # no headers to build it against: the Python path, and the reason
        assert status.startswith("C call path: unavailable: Python's headers are not installed")
    stats = json.loads(done.stdout[done.stdout.index("cache: ") + len("cache: "):])
    assert stats["root"] == str(tmp_path) and stats["compiles"] >= 3 and stats["entries"] >= 3
