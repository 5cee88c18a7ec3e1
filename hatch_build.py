"""hatchling's build hook: the C call path's two optional extension modules, compiled at install.

- `jiter_magic.native._fast_call` (native/fast_call.cpp) needs only Python's headers: built into
  every platform wheel and every editable install.
- `jiter_magic.native._torch_call` (native/torch_fast_call.cpp) reads tensors through ATen, so it is
  compiled against the torch of the environment being installed into, and only where one is there.

Why at install: a module compiled at run time made the first process on every fresh machine wait
or run the slow Python path for its whole life; the packaging toolchain builds them once instead
(docs/install.md says how each way of installing fares). setuptools' `build_ext` compiles them
(compiler, CXX/CFLAGS, Python's flags and the extension suffix, all its business); hatchling
stays the backend for the rest (it installs the lab extension's shared data in editable installs
too, which setuptools does not).

pip builds in an isolated environment that hides the installed packages, torch included (and
adding torch to the build requirements would download a multi-GB CUDA build), but it runs the
build with the very interpreter it installs for. So the build asks that interpreter where torch
is, first as it is, then in isolated mode (`-I`: the environment's own packages, without pip's
overlay). No torch there (a wheel built for distribution, `pip install torch jiter_magic` in one
command, uv's or `python -m build`'s separate build environment): no torch module, and the
Python path reads tensors.

Neither module is required: where one cannot be built (no compiler, no Python.h, no torch), the
build goes on without it and records why in `jiter_magic/native/_built.json`, which the loader
reads (`python -m jiter_magic` shows the line).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # `python hatch_build.py` on a machine without hatchling (see the end of this file)
    BuildHookInterface = object  # type: ignore[assignment,misc]

NATIVE = "jiter_magic/native"
REPORT = "_built.json"  # what was built and why not: read by jiter_magic/native/loader.py
# The header both sources include: part of each module's digest (`source_digest`, as native/loader.py reads it).
SHARED_HEADER = "vectorcall_type.h"
NO_DEBUG = ["-g0", "-O2"]  # Python's own CFLAGS carry -g: tens of MB of debug info for torch's headers

# Run by the interpreter being installed for: the facts the torch module is compiled against.
TORCH_PROBE = """
import json, os, torch
print(json.dumps({"version": torch.__version__, "git": torch.version.git_version,
                  "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
                  "root": os.path.dirname(os.path.abspath(torch.__file__))}))
"""


def find_torch() -> tuple[dict | None, str]:
    """The installed torch's facts, or None and why there are none."""
    why = "torch was not installed when jiter_magic was built"
    for flags in ([], ["-I"]):
        try:
            done = subprocess.run([sys.executable, *flags, "-c", TORCH_PROBE], capture_output=True, text=True,
                                  timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"asking for torch failed at install: {exc}"
        if done.returncode == 0:
            return json.loads(done.stdout.strip().splitlines()[-1]), ""
        if "No module named 'torch'" not in done.stderr:
            why = "importing torch failed at install: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    return None, why


def missing_python_headers() -> str:
    include = sysconfig.get_paths().get("include") or ""
    if os.path.exists(os.path.join(include, "Python.h")):
        return ""
    return (f"Python's headers are not installed (no Python.h in {include!r}; "
            "Debian/Ubuntu: apt-get install python3-dev)")


def extensions(root: str) -> list[Any]:
    from setuptools import Extension

    source = os.path.join(root, NATIVE)
    header = [os.path.join(source, SHARED_HEADER)]  # rebuilt where it changed
    return [Extension("jiter_magic.native._fast_call", [os.path.join(source, "fast_call.cpp")], language="c++",
                      extra_compile_args=["-std=c++17", "-Wall", *NO_DEBUG], depends=header),
            Extension("jiter_magic.native._torch_call", [os.path.join(source, "torch_fast_call.cpp")], language="c++",
                      depends=header)]


def source_digest(source: str) -> str:
    """sha256 of a module's source followed by the header beside it that both sources include: an
    editable install's loader refuses a module older than either (native/loader.py)."""
    digest = hashlib.sha256()
    for path in (source, os.path.join(os.path.dirname(source), SHARED_HEADER)):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def configure_torch(ext: Any, torch: dict) -> None:
    headers, library = os.path.join(torch["root"], "include"), os.path.join(torch["root"], "lib")
    ext.include_dirs = [headers, os.path.join(headers, "torch", "csrc", "api", "include")]
    ext.library_dirs = ext.runtime_library_dirs = [library]
    ext.libraries = ["c10", "torch_cpu", "torch_python"]
    # torch's own extensions build as C++20; -w: torch's headers warn by the hundred.
    ext.extra_compile_args = ["-std=c++20", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={torch['abi']}", *NO_DEBUG]


def compile_modules(root: str, build_lib: str, build_temp: str) -> tuple[dict[str, dict], list[str]]:
    """Both modules compiled into `build_lib` where they can be: the report and the files made."""
    try:
        from setuptools import Distribution
        from setuptools.command.build_ext import build_ext
        from setuptools.errors import CCompilerError, ExecError, PlatformError
    except ImportError as exc:
        why = f"setuptools, which compiles them, is not installed in the build environment ({exc})"
        return {"_fast_call": {"built": False, "reason": why}, "_torch_call": {"built": False, "reason": why}}, []
    report: dict[str, dict] = {}

    class BuildNative(build_ext):
        """build_ext that skips a module it cannot build, saying why in the report, instead of failing."""

        def build_extension(self, ext: Any) -> None:
            name = ext.name.rsplit(".", 1)[-1]
            # The C++ command of this setuptools' compiler (CXX where set).
            compiler = getattr(self.compiler, "compiler_so_cxx", None) or self.compiler.compiler_cxx or ["c++"]
            why = missing_python_headers()
            if not why and shutil.which(compiler[0]) is None:
                why = f"no C++ compiler at install: {compiler[0]!r} was not found (set CXX, or install g++)"
            torch = None
            if not why and name == "_torch_call":
                torch, why = find_torch()
            if torch is not None:
                configure_torch(ext, torch)
            try:
                if why:
                    raise PlatformError(why)
                super().build_extension(ext)
            except (CCompilerError, ExecError, PlatformError, OSError) as exc:
                why = why or f"compiling {os.path.basename(ext.sources[0])} failed at install ({exc}; its log says why)"
                print(f"jiter_magic: not building {name}: {why}", file=sys.stderr)
                report[name] = {"built": False, "reason": why}
                return
            made_for = {"torch": {k: torch[k] for k in ("version", "git", "abi")}} if torch is not None else {}
            report[name] = {"built": True, "source": os.path.basename(ext.sources[0]),
                            "sha256": source_digest(ext.sources[0]), **made_for}

    command = BuildNative(Distribution({"name": "jiter_magic", "ext_modules": extensions(root)}))
    command.build_lib, command.build_temp = build_lib, build_temp
    command.ensure_finalized()
    command.run()
    made = [path for path in command.get_outputs() if os.path.exists(path)]
    return report, made


def build(root: str, scratch: str) -> list[tuple[str, str]]:
    """Both modules and the report made under `scratch`: (file, its path in the package tree) pairs."""
    build_lib = os.path.join(scratch, "lib")
    report, made = compile_modules(root, build_lib, os.path.join(scratch, "temp"))
    os.makedirs(os.path.join(build_lib, NATIVE), exist_ok=True)
    with open(os.path.join(build_lib, NATIVE, REPORT), "w") as handle:
        json.dump(report, handle, indent=1, sort_keys=True)
    return [(path, os.path.relpath(path, build_lib)) for path in [*made, os.path.join(build_lib, NATIVE, REPORT)]]


def build_in_place(root: str) -> None:
    """The modules in the source tree, where an editable install (or a run from the tree) imports them."""
    with tempfile.TemporaryDirectory(prefix="jiter_magic-build-") as scratch:
        for path, relative in build(root, scratch):
            shutil.copy2(path, os.path.join(root, relative))


class CustomBuildHook(BuildHookInterface):
    """Compiles the modules into a wheel, or into the source tree for an editable install."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if version == "editable":
            build_in_place(self.root)
        else:
            self.scratch = tempfile.mkdtemp(prefix="jiter_magic-build-")  # hatchling reads the files until finalize
            for path, relative in build(self.root, self.scratch):
                build_data["force_include"][path] = relative
        # A wheel with compiled modules is a platform wheel (cp311-cp311-linux_x86_64, say).
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self.target_name == "wheel" and version != "editable":
            shutil.rmtree(self.scratch, ignore_errors=True)


if __name__ == "__main__":
    # `python hatch_build.py`: what an editable install builds, without pip or hatchling, for a
    # machine that has torch and setuptools but neither hatchling nor a network (docs/install.md).
    here = os.path.dirname(os.path.abspath(__file__))
    build_in_place(here)
    with open(os.path.join(here, NATIVE, REPORT)) as handle:
        print(handle.read())
