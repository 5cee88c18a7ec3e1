"""A new process loads only what it uses: `import jiter_magic` none of the modules that only a
compile, a reduction, the notebook, the tools or the integrations need, and a first call whose
kernel is on disk none of the code generators (nor the CUDA kernel paths, for a CPU call). Each
module costs milliseconds of a notebook restart; these keep an eager import from creeping back."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

# Modules that only compiling, a reduction, the notebook, the tools or the integrations use.
COMPILE_ONLY = ("jiter_magic.codegen", "jiter_magic.compilers", "jiter_magic.kernels.base",
                "jiter_magic.kernels.render", "jiter_magic.kernels.specialize", "jiter_magic.kernels.host",
                "jiter_magic.kernels.contiguous", "jiter_magic.kernels.rows", "jiter_magic.kernels.strided",
                "jiter_magic.kernels.tiled", "jiter_magic.kernels.packed_tiles", "jiter_magic.kernels.vector_tiles",
                "jiter_magic.kernels.tile_code", "jiter_magic.kernels.host_guard", "jiter_magic.kernels.reduce_",
                "jiter_magic.cache.disk", "jiter_magic.runtime.backends.", "jiter_magic.reduction",
                "jiter_magic.notebook", "jiter_magic.integrations", "jiter_magic.tools", "jiter_magic.runtime.reduce_",
                "dask", "torch", "numpy", "cupy", "IPython",
                # ... and what only a call needs: the C call path's loader (ctypes, json), the key's hashlib
                "jiter_magic.native", "ctypes", "json", "hashlib", "tempfile")
# What renders a kernel, and the CUDA paths: a CPU call whose kernel is on disk needs none of them.
RENDERING = ("jiter_magic.codegen.prelude", "jiter_magic.kernels.render", "jiter_magic.kernels.tiled",
             "jiter_magic.kernels.packed_tiles", "jiter_magic.kernels.vector_tiles", "jiter_magic.kernels.tile_code",
             "jiter_magic.kernels.strided", "jiter_magic.compilers.nvrtc", "jiter_magic.runtime.backends.cuda")
CODE = "template <typename T> T light_axpy(T x, T y, T alpha) { return alpha * x + y; }"
FIRST_CALL = f"""
import json, sys, torch
before = set(sys.modules)
import jiter_magic
fn = jiter_magic.create_jit_fn({CODE!r}, alpha=2.0)
out = fn(torch.ones(3), torch.arange(3.0))
print(json.dumps({{"values": out.tolist(), "dtype": str(out.dtype), "event": fn.specializations[0].cache_event,
                  "loaded": sorted(set(sys.modules) - before)}}))
"""


def _run(code: str, cache: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "JITER_MAGIC_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _matching(loaded: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """The modules of `loaded` that are, or lie under, one of `prefixes` (one ending in '.' or '_'
    names every module whose name starts so)."""
    return sorted(m for m in loaded if any(m.startswith(p) if p[-1] in "._" else m == p or m.startswith(p + ".")
                                             for p in prefixes))


def test_importing_the_package_loads_nothing_only_a_compile_needs(tmp_path):
    code = "import sys, jiter_magic; print(repr(sorted(sys.modules)))"  # no json: it is on the list
    loaded = ast.literal_eval(_run(code, str(tmp_path)))
    assert "jiter_magic.function" in loaded  # the check sees what the import loaded
    assert _matching(loaded, COMPILE_ONLY) == []


def test_the_lazy_names_still_resolve(tmp_path):
    code = ("import jiter_magic, jiter_magic.kernels as k\n"
            "print(sorted(jiter_magic.cache_stats()) == sorted(jiter_magic.cache.disk.stats()),"
            " [p.name for p in k.CUDA_PATHS], k.HOST_PATH.name, k.CallShape.__name__)")
    assert _run(code, str(tmp_path)) == "True ['contiguous', 'tiled', 'rows', 'strided'] host CallShape"


def test_a_first_call_from_the_disk_cache_renders_nothing(tmp_path):
    compiled = json.loads(_run(FIRST_CALL, str(tmp_path)))
    assert compiled["event"] == "compiled" and "jiter_magic.kernels.render" in compiled["loaded"]
    again = json.loads(_run(FIRST_CALL, str(tmp_path)))
    assert again["values"] == [2.0, 3.0, 4.0] and again["dtype"] == "torch.float32"
    assert again["event"] == "disk"
    assert _matching(again["loaded"], RENDERING) == []
    assert "jiter_magic.kernels.host" in again["loaded"]  # the CPU path itself: matching, geometry


def test_a_disk_hit_shows_the_source_a_compile_gave(tmp_path):
    code = FIRST_CALL + "print(json.dumps(fn.specializations[0].source))\n"
    first = json.loads(_run(code, str(tmp_path)))
    again = json.loads(_run(code, str(tmp_path)))
    assert "light_axpy" in again and again == first


CHOOSE_CUDA_PATH = """
import sys
from jiter_magic.kernels.specialize import resolve_call
from jiter_magic.planning.layout import ArrayDesc
spec, _ = resolve_call([ArrayDesc("float32", {shape!r}, {strides!r}, 1 << 20)] * 2, "torch", "cuda", None, (), 1)
print(repr((spec.path, sorted(m for m in sys.modules if m.startswith("jiter_magic.kernels.")))))
"""
OTHER_CUDA_PATHS = ("jiter_magic.kernels.tiled", "jiter_magic.kernels.tile_code", "jiter_magic.kernels.rows",
                    "jiter_magic.kernels.strided")


def test_a_contiguous_cuda_call_imports_no_other_cuda_path(tmp_path):
    # A GPU process's first call: the CUDA paths are tried in order, each module imported when reached.
    path, loaded = ast.literal_eval(_run(CHOOSE_CUDA_PATH.format(shape=(1024,), strides=(1,)), str(tmp_path)))
    assert path == "contiguous" and "jiter_magic.kernels.contiguous" in loaded
    assert _matching(loaded, OTHER_CUDA_PATHS) == []
    path, loaded = ast.literal_eval(_run(CHOOSE_CUDA_PATH.format(shape=(64, 64), strides=(1, 128)), str(tmp_path)))
    assert path == "strided" and _matching(loaded, OTHER_CUDA_PATHS) == sorted(OTHER_CUDA_PATHS)  # each was tried
