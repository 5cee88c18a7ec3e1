"""NVRTC through CuPy's thin binding: CUDA source to a cubin for one architecture.

Works with no GPU (only the compiler library is needed), which is how CI proves that
every generated kernel compiles. CUDA headers are optional: the prelude needs none, and
when the pip headers wheel or a toolkit is found its include folder is added so that
user code may include <cuda_fp16.h> and friends.
"""
from __future__ import annotations

import ctypes
import functools
import os

from jiter_magic.compilers import toolchain_memo
from jiter_magic.compilers.base import CompileResult, map_log
from jiter_magic.errors import CompileError, ToolchainError


def _nvrtc():
    try:
        from cupy.cuda import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ToolchainError(
            "the CUDA backend needs CuPy and NVRTC: pip install 'jiter_magic[cuda13]' "
            "(or [cuda12] for a CUDA 12 driver)"
        ) from exc
    return nvrtc


@functools.lru_cache(maxsize=1)
def _toolchain() -> dict:
    """NVRTC's version and the CUDA include folder, remembered between processes (finding them
    imports cuda.pathfinder, about 50 ms: more than a disk hit's whole first call)."""
    context = [os.environ.get(name, "") for name in ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "PYTHONPATH")]
    return toolchain_memo.remembered("nvrtc", context, _find_toolchain)


def _find_toolchain() -> tuple[dict, list[str]]:
    include = _find_include_dir()
    library = _nvrtc_library()
    found = _version_of(library) if library else None
    witnesses: list[str] = []
    if library is None or found is None:  # CuPy finds its library its own way: asked, not remembered
        found = _nvrtc().getVersion()
    else:
        witnesses = [library, *toolchain_memo.site_folders()]
        if include:
            witnesses.append(os.path.join(include, "cuda_fp16.h"))
    major, minor = found
    return {"version": f"{major}.{minor}", "include": include}, witnesses


def cuda_include_dir() -> str | None:
    """Folder with cuda_fp16.h etc.: the pip headers wheel, then CUDA_PATH / CUDA_HOME, then /usr/local/cuda."""
    return _toolchain()["include"]


def nvrtc_version() -> str:
    """NVRTC's version, part of every CUDA cache key and so needed on every first call: from the
    library CuPy compiles with, found as CuPy 14 finds it (cuda.pathfinder) and asked through
    ctypes, because CuPy's own binding imports all of CuPy to load it (about 0.1 s); CuPy's answer
    where that does not work."""
    return _toolchain()["version"]


def _find_include_dir() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
        if found:
            return str(found)
    except Exception:  # noqa: BLE001 - pathfinder missing or failing: fall back to the usual places
        pass
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "include", "cuda_fp16.h")):
            return os.path.join(root, "include")
    return None


def _nvrtc_library() -> str | None:
    """The NVRTC library CuPy 14 would load, as cuda.pathfinder finds it."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return str(load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:  # noqa: BLE001 - no pathfinder or no library there: CuPy finds it its own way
        return None


def _version_of(library: str) -> tuple[int, int] | None:
    """NVRTC's (major, minor) as the library at `library` reports it; None when it cannot say."""
    try:
        handle = ctypes.CDLL(library)
        major, minor = ctypes.c_int(), ctypes.c_int()
        if handle.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
            return None
    except (OSError, AttributeError):  # not loadable, or no nvrtcVersion in it: CuPy is asked instead
        return None
    return major.value, minor.value


@functools.lru_cache(maxsize=1)
def supported_archs() -> tuple[int, ...] | None:
    """The architectures NVRTC compiles for, as it lists them (`nvrtcGetSupportedArchs`: 75, 80,
    ..., 120 for NVRTC 13), asked through ctypes like its version, else through CuPy's binding;
    None when neither can ask (no NVRTC here). Asked only to check a chosen architecture."""
    library = _nvrtc_library()
    if library is not None:
        try:
            handle = ctypes.CDLL(library)
            count = ctypes.c_int()
            if handle.nvrtcGetNumSupportedArchs(ctypes.byref(count)) == 0 and count.value > 0:
                archs = (ctypes.c_int * count.value)()
                if handle.nvrtcGetSupportedArchs(archs) == 0:
                    return tuple(sorted(archs))
        except (OSError, AttributeError):  # not loadable, or too old to list them: CuPy is asked
            pass
    try:
        return tuple(sorted(_nvrtc().getSupportedArchs()))
    except Exception:  # noqa: BLE001 - no CuPy, no NVRTC for it, or a CuPy without the call: nobody to ask
        return None


def complete_elf(binary: bytes) -> bytes:
    """The cubin with the byte CuPy's `getCUBIN` drops (it strips a 'trailing NUL' as for PTX text).

    The driver loads the short file, but nvdisasm and cuobjdump call it an invalid ELF file. The
    ELF header says where its tables end; the missing byte ends the program-header table (the top
    byte of the last header's alignment), so it is a zero, and only a file exactly one byte short
    is completed."""
    if len(binary) < 64 or binary[:5] != b"\x7fELF\x02":  # a 64-bit ELF header is 64 bytes
        return binary
    ph_offset, sh_offset = (int.from_bytes(binary[i:i + 8], "little") for i in (0x20, 0x28))
    ph_size, ph_count, sh_size, sh_count = (int.from_bytes(binary[i:i + 2], "little") for i in (0x36, 0x38, 0x3A, 0x3C))
    end = max(ph_offset + ph_size * ph_count, sh_offset + sh_size * sh_count)
    return binary + b"\x00" if end == len(binary) + 1 else binary


class NvrtcCompiler:
    """Compiles CUDA C++ to a cubin for `arch` (for example 'sm_90')."""

    def __init__(self, arch: str):
        self.arch = arch

    @property
    def target(self) -> str:
        return self.arch

    @property
    def identity(self) -> str:
        """What, beside the source and options, decides the binary: part of the cache key."""
        return f"nvrtc-{nvrtc_version()}-{self.arch}"

    def options(self) -> tuple[str, ...]:
        opts = [f"-arch={self.arch}", "-default-device", "--std=c++17", "-DJITER_MAGIC=1"]
        include = cuda_include_dir()
        if include:
            opts.append(f"-I{include}")
        return tuple(opts)

    def compile(self, source: str, name: str, options: tuple[str, ...] | None = None) -> CompileResult:
        binary, log = self._run(source, name, self.options() if options is None else options, "getCUBIN")
        return CompileResult(complete_elf(bytes(binary)), log)

    def ptx(self, source: str, name: str, options: tuple[str, ...]) -> str:
        """PTX for reading (fn.inspect): `options` name a virtual architecture (-arch=compute_XX)."""
        text, _log = self._run(source, name, options, "getPTX")
        return (text.decode(errors="replace") if isinstance(text, bytes) else str(text)).rstrip("\x00")

    def _run(self, source: str, name: str, options: tuple[str, ...], fetch: str) -> tuple:
        """Compile, then fetch the output (`getCUBIN` or `getPTX`) and the mapped log."""
        nvrtc = _nvrtc()
        program = nvrtc.createProgram(source, f"{name}.cu", (), ())
        try:
            try:
                nvrtc.compileProgram(program, options)
            except nvrtc.NVRTCError:
                log = map_log(nvrtc.getProgramLog(program))
                raise CompileError(f"NVRTC could not compile {name} for {self.arch}:\n{log}", log, source) from None
            output = getattr(nvrtc, fetch)(program)
            log = map_log(nvrtc.getProgramLog(program))
        finally:
            nvrtc.destroyProgram(program)
        return output, log
