"""The compiled code of a specialization, as text: host assembly, PTX, or SASS.

`fn.inspect(..., kind=...)` renders the specialization as `fn.source` does, then compiles it
for reading, not loading: g++ `-S` with line tables (CPU), NVRTC to PTX with `-lineinfo`
(`-arch=compute_XX`), or NVRTC to a cubin disassembled by `nvdisasm --print-code
--print-line-info-inline` (SASS; NVIDIA's `nvdisasm`, from a CUDA toolkit or the pip wheel
`nvidia-cuda-nvdisasm`, part of the cuda13 extra). None of these needs a GPU. Where the compiler's
line tables point at the user's code, the user's line is shown with it, at the line numbers of the
code string (a `// line N: ...` comment before PTX and assembly, appended to nvdisasm's own
`//## File "jiterator", line N` comments in SASS; the functor is inlined, hence `-gi`).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

from jiter_magic.codegen.names import USER_FILE
from jiter_magic.errors import InvalidArgumentError, ToolchainError

KINDS = ("asm", "ptx", "sass")
_FILE = re.compile(rf'^\s*\.file\s+(\d+)\s+"(?:[^"]*/)?{USER_FILE}"', re.MULTILINE)


def compiled_text(kind: str, source: str, backend: str, arch: str, code: str) -> str:
    """The `kind` listing of `source` (a rendered kernel), its user lines marked from `code`."""
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    if kind == "asm":
        if backend != "cpu":
            raise InvalidArgumentError("kind='asm' is the CPU backend's assembly: pass backend='cpu' "
                                       "(for CUDA, kind='ptx' or kind='sass')")
        return mark_user_lines(_host_assembly(source), code, comment="#")
    if backend != "cuda":
        raise InvalidArgumentError(f"kind={kind!r} is CUDA code: pass backend='cuda' (for the CPU, kind='asm')")
    if kind == "ptx":
        return mark_user_lines(_ptx(source, arch), code, comment="//")
    return _sass(source, arch, code)


def mark_user_lines(text: str, code: str, comment: str) -> str:
    """Before each run of instructions a `.loc` puts at a line of the user's file, that line as a comment."""
    found = _FILE.search(text)
    if not found:
        return text
    user = found.group(1)
    lines = code.splitlines()
    loc = re.compile(rf"^\s*\.loc\s+{user}\s+(\d+)\b")
    out, last = [], None
    for row in text.splitlines():
        match = loc.match(row)
        if match and match.group(1) != last:
            last = match.group(1)
            number = int(last)
            if 1 <= number <= len(lines):
                out.append(f"\t{comment} line {number}: {lines[number - 1].strip()}")
        out.append(row)
    return "\n".join(out)


def _host_assembly(source: str) -> str:
    """The host compiler's own compile, with -S (and line tables) instead of -shared."""
    from jiter_magic.runtime.backends.cpu import compiler

    cxx = compiler()
    options = (*(o for o in cxx.options() if o != "-shared" and not o.startswith("-l")), "-S", "-g1",
               "-fno-asynchronous-unwind-tables")
    return cxx.compile(source, "kernel_asm", options).binary.decode(errors="replace")


def _nvrtc_options(compiler, arch_option: str) -> tuple[str, ...]:
    """The compiler's own options with another -arch, and line tables."""
    return (*(o for o in compiler.options() if not o.startswith("-arch=")), arch_option, "-lineinfo")


def _ptx(source: str, arch: str) -> str:
    from jiter_magic.compilers.nvrtc import NvrtcCompiler

    compiler = NvrtcCompiler(arch)
    return compiler.ptx(source, "jm_kernel", _nvrtc_options(compiler, f"-arch={arch.replace('sm_', 'compute_')}"))


def find_nvdisasm() -> str | None:
    """NVIDIA's disassembler: on the PATH, in a CUDA toolkit, or in the pip wheel's bin folder."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    roots += [os.path.join(p, "nvidia", folder) for p in sys.path if p
              for folder in ("cuda_nvdisasm", "cu13", "cu12")]
    for root in roots:
        if root and os.path.isfile(os.path.join(root, "bin", "nvdisasm")):
            return os.path.join(root, "bin", "nvdisasm")
    return None


def _sass(source: str, arch: str, code: str) -> str:
    tool = find_nvdisasm()
    if tool is None:
        raise ToolchainError("kind='sass' needs NVIDIA's nvdisasm: pip install nvidia-cuda-nvdisasm, or put a CUDA "
                             "toolkit's bin folder on the PATH (kind='ptx' needs only NVRTC)")
    from jiter_magic.compilers.nvrtc import NvrtcCompiler

    compiler = NvrtcCompiler(arch)
    cubin = compiler.compile(source, "jm_kernel", _nvrtc_options(compiler, f"-arch={arch}")).binary
    with tempfile.TemporaryDirectory(prefix="jiter_magic-sass-") as folder:
        path = os.path.join(folder, "jm_kernel.cubin")
        with open(path, "wb") as handle:
            handle.write(cubin)
        done = subprocess.run([tool, "--print-code", "--print-line-info-inline", path], capture_output=True,
                              text=True, check=False)
    if done.returncode != 0:
        raise ToolchainError(f"nvdisasm failed on the kernel: {done.stderr.strip()}")
    return _mark_sass_lines(done.stdout, code)


_SASS_LINE = re.compile(rf'//## File "(?:[^"]*/)?{USER_FILE}", line (\d+)')


def _mark_sass_lines(text: str, code: str) -> str:
    """nvdisasm's `//## File "jiterator", line N` comments, with the user's line appended."""
    lines = code.splitlines()

    def shown(match: re.Match) -> str:
        number = int(match.group(1))
        return match.group(0) + (f": {lines[number - 1].strip()}" if 1 <= number <= len(lines) else "")

    return _SASS_LINE.sub(shown, text)
