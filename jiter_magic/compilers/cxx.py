"""The host C++ compiler: source to a shared library for the CPU backend.

`$CXX`, else the first of c++, g++, clang++ on the PATH. OpenMP is used when the
compiler accepts `-fopenmp` (honouring OMP_NUM_THREADS at run time); `-march=native`
lets the contiguous loop vectorize for this CPU, so the key holds the CPU model and the
instruction-set features `-march=native` enables, as the compiler itself reports them (its
predefined feature macros: __AVX2__, __AVX512F__, __ARM_FEATURE_SVE, ...): two hosts with one
model name but different features (a VM that masks AVX-512) never share a binary.
Finding these starts the compiler several times (about 0.1 s), so they are remembered between
processes (`toolchain_facts`), per compiler and CPU, while the compiler's file is unchanged.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile

from jiter_magic.compilers import toolchain_memo
from jiter_magic.compilers.base import CompileResult, map_log
from jiter_magic.errors import CompileError, ToolchainError

_FEATURE_MACRO = re.compile(r"^#define (__[A-Za-z0-9_]+) 1$", re.MULTILINE)
# -Wall: the user's code gets the usual warnings (fn.warnings, the panel's log); the generated
# code is kept free of them (pragmas of a compiler without OpenMP are not worth a word).
# -fwrapv: signed overflow wraps, as torch's integer arithmetic does, instead of being undefined
# behaviour that -O3 folds away (`(x + 1) > x` true even at INT_MAX). The options are part of every
# cache key, so binaries built without it are never reused.
BASE_OPTIONS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-Wall",
                "-Wno-unknown-pragmas")


@functools.cache
def find_cxx(explicit: str | None = None) -> str:
    """Path of the host compiler, or a ToolchainError saying how to get one."""
    candidates = [explicit] if explicit else ["c++", "g++", "clang++"]
    for name in candidates:
        path = shutil.which(name) if name else None
        if path:
            return path
    wanted = f"$CXX={explicit!r}" if explicit else "c++, g++ or clang++"
    raise ToolchainError(
        f"the CPU backend needs a C++ compiler and found no {wanted} on the PATH; install one "
        "(Debian/Ubuntu: apt-get install g++; macOS: xcode-select --install; conda: conda install gxx) "
        "or point $CXX at it"
    )


@functools.cache
def _version(cxx: str) -> str:
    result = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return (result.stdout.splitlines() or ["unknown"])[0]


def _builds(cxx: str, code: str, options: tuple[str, ...], libraries: tuple[str, ...] = (),
            warnings_fail: bool = False) -> bool:
    """Whether `code` compiles and links into an executable with `options` (and, with `warnings_fail`,
    without a warning): linked, so that a missing library or symbol fails here, not at a kernel's load."""
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "probe.cpp")
        with open(source, "w") as handle:
            handle.write(code)
        try:
            result = subprocess.run([cxx, *options, source, "-o", os.path.join(folder, "probe"), *libraries],
                                    capture_output=True, text=True, check=False, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
    return result.returncode == 0 and not (warnings_fail and "warning" in result.stderr)


@functools.cache
def _accepts(cxx: str, flag: str) -> bool:
    return _builds(cxx, "int main() { return 0; }\n", (flag,))


def _cpuinfo(*names: str) -> str | None:
    """The value of the first /proc/cpuinfo line starting with one of `names` (None: no such line)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(names):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    found = _cpuinfo("model name", "flags")
    return found[:200] if found is not None else platform.processor() or platform.machine()


@functools.lru_cache(maxsize=8)
def _target_macros(cxx: str, flags: tuple[str, ...]) -> str:
    """The compiler's predefined macros for `flags` (`-E -dM`); '' when it cannot say."""
    try:
        result = subprocess.run([cxx, *flags, "-x", "c++", "-E", "-dM", "-"], input="", capture_output=True,
                                text=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout if result.returncode == 0 else ""


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> str:
    """The first CPU's feature flags as the kernel lists them ('' where there is no /proc/cpuinfo)."""
    return _cpuinfo("flags", "Features") or ""


PROBED_FLAGS = ("-fopenmp", "-march=native")
# The options that use glibc's vector math library (codegen/prelude.py declares its functions
# `simd` under JM_VECTOR_MATH), where a probe found that this compiler builds and links against it.
VECTOR_MATH_OPTIONS = ("-DJM_VECTOR_MATH", "-lmvec")
_VECTOR_MATH_PROBE = """#include <math.h>
extern "C" __attribute__((simd("notinbranch"))) float sinf(float) noexcept;
float jm_in[64], jm_out[64];
int main() { for (int i = 0; i < 64; ++i) jm_out[i] = sinf(jm_in[i]); return (int)jm_out[3]; }
"""


@functools.lru_cache(maxsize=8)
def toolchain_facts(cxx: str) -> dict:
    """The compiler's version, which of PROBED_FLAGS it accepts, and its predefined macros for
    -march=native: remembered between processes for this compiler on this CPU."""
    context = [cxx, platform.node(), platform.machine(), _cpu_model(), _cpu_flags()]
    return toolchain_memo.remembered("cxx", context, lambda: _find_facts(cxx))


def _find_facts(cxx: str) -> tuple[dict, list[str]]:
    accepts = {flag: _accepts(cxx, flag) for flag in PROBED_FLAGS}
    native = ("-march=native",) if accepts["-march=native"] else ()
    facts = {"version": _version(cxx), "accepts": accepts, "macros": _target_macros(cxx, native),
             "vector_math": _links_vector_math(cxx, native)}
    return facts, [os.path.realpath(cxx)]


def _links_vector_math(cxx: str, native: tuple[str, ...]) -> bool:
    """Whether a loop over a `simd`-declared sinf compiles to libmvec's vector sinf and links against it."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    # A compiler that ignores the `simd` attribute only warns: it would call the scalar functions.
    return _builds(cxx, _VECTOR_MATH_PROBE, ("-O3", "-fno-math-errno", *native), ("-lmvec",), warnings_fail=True)


def feature_identity(macros: str) -> str:
    """A digest of the sorted `#define __NAME 1` macros of `-E -dM` output: the instruction-set
    features (and the -march CPU macro) a build targets, whatever order the compiler lists them in."""
    names = sorted(set(_FEATURE_MACRO.findall(macros)))
    if not names:
        return "isa:unknown"
    return f"isa:{len(names)}:{hashlib.sha256(' '.join(names).encode()).hexdigest()[:32]}"


def host_identity(version: str, machine: str, model: str, macros: str) -> str:
    """The host part of the cache key: compiler version, machine, CPU model and target features."""
    return f"{version}|{machine}|{model}|{feature_identity(macros)}"


class CxxCompiler:
    """Compiles host C++ into a shared library; `compile` returns the library's bytes."""

    target = "host"

    def __init__(self, cxx: str | None = None):
        self.cxx = find_cxx(cxx or os.environ.get("CXX") or None)

    @property
    def identity(self) -> str:
        facts = toolchain_facts(self.cxx)
        return host_identity(facts["version"], platform.machine(), _cpu_model(), facts["macros"])

    def options(self) -> tuple[str, ...]:
        facts = toolchain_facts(self.cxx)
        vector_math = VECTOR_MATH_OPTIONS if facts["vector_math"] else ()
        return BASE_OPTIONS + tuple(flag for flag in PROBED_FLAGS if facts["accepts"][flag]) + vector_math

    def command(self, source: str, output: str, options: tuple[str, ...]) -> list[str]:
        """The compiler's command line: libraries (`-l...`) after the source, where a linker that
        drops libraries no earlier input needs (`--as-needed`) still links them."""
        libraries = [o for o in options if o.startswith("-l")]
        return [self.cxx, *(o for o in options if not o.startswith("-l")), source, "-o", output, *libraries]

    def compile(self, source: str, name: str, options: tuple[str, ...] | None = None) -> CompileResult:
        """The library's bytes, and the compiler's messages."""
        options = self.options() if options is None else options
        with tempfile.TemporaryDirectory(prefix="jiter_magic-") as folder:
            src = os.path.join(folder, f"jm_{name}.cpp")
            lib = os.path.join(folder, f"jm_{name}.so")
            with open(src, "w") as handle:
                handle.write(source)
            process = subprocess.run(self.command(src, lib, options), capture_output=True, text=True, check=False)
            log = map_log((process.stdout + process.stderr).replace(folder + os.sep, ""))
            if process.returncode != 0:
                raise CompileError(f"the C++ compiler could not compile {name} for the CPU:\n{log}", log, source)
            with open(lib, "rb") as handle:
                binary = handle.read()
        return CompileResult(binary, log)
