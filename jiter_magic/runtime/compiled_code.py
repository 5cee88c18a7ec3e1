"""The compiled code of a specialization, as text: host assembly, PTX, or SASS.

`fn.inspect(..., kind=...)` renders the specialization as `fn.source` does, then compiles it
for reading, not loading: g++ `-S` with line tables (CPU), NVRTC to PTX with `-lineinfo`
(`-arch=compute_XX`), or NVRTC to a cubin disassembled by `nvdisasm --print-code
--print-line-info-inline` (SASS; NVIDIA's `nvdisasm`, from a CUDA toolkit or the pip wheel
`nvidia-cuda-nvdisasm`, part of the cuda13 extra). None of these needs a GPU. Where the compiler's
line tables point at the user's code, the user's line is shown as a comment before the instructions
compiled from it, at the line numbers of the code string (`// line N: ...`, `# line N: ...` in
assembly), and a `// generated code` comment where the instructions return to jiter_magic's kernel.
nvdisasm's own `//## File ".../jiterator", line N` comments, with paths it makes up under the working
folder, are rewritten so (the functor is inlined, hence `-gi`).
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


GENERATED = "generated code"  # the comment where instructions return from the user's lines to the kernel's
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\b")


def mark_user_lines(text: str, code: str, comment: str) -> str:
    """Before each run of instructions a `.loc` puts at a line of the user's file, that line as a
    comment; where a `.loc` of another file ends such a run, a `generated code` comment."""
    found = _FILE.search(text)
    if not found:
        return text
    user = found.group(1)
    lines = code.splitlines()
    out, last = [], None
    for row in text.splitlines():
        match = _LOC.match(row)
        if match and match.group(1) == user and match.group(2) != last:
            last = match.group(2)
            number = int(last)
            if 1 <= number <= len(lines):
                out.append(f"\t{comment} line {number}: {lines[number - 1].strip()}")
        elif match and match.group(1) != user and last is not None:
            last = None
            out.append(f"\t{comment} {GENERATED}")
        out.append(_FILE_PATH.sub(r'\1"\2"', row))
    return "\n".join(out)


# A `.file N "folder/name"` directive: the folder is where the compiler ran (made up for generated
# code), so only the name is kept.
_FILE_PATH = re.compile(r'^(\s*\.file\s+\d+\s+)"[^"]*/([^"/]*)"')


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


_SASS_LINE = re.compile(r'^(\s*)//## File "(?:[^"]*/)?([^"/]*)", line (\d+)')


def _mark_sass_lines(text: str, code: str) -> str:
    """nvdisasm's `//## File "...", line N [inlined at ...]` comments as PTX's: the user's line as
    `// line N: ...` where the innermost file is the user's, one `// generated code` where the
    instructions return to the kernel's own lines, none otherwise (their made-up paths say nothing).
    nvdisasm writes an inlined line's whole chain, innermost first, one comment a frame: the first of
    consecutive comments tells where the instructions after them come from."""
    lines = code.splitlines()
    out, last, chained = [], None, False
    for row in text.splitlines():
        match = _SASS_LINE.match(row)
        if match is None or chained:
            chained = match is not None
            if match is None:
                out.append(row)
            continue
        chained = True
        indent, name, number = match.group(1), match.group(2), int(match.group(3))
        if name == USER_FILE and 1 <= number <= len(lines):
            if number != last:
                out.append(f"{indent}// line {number}: {lines[number - 1].strip()}")
            last = number
        elif last is not None:
            out.append(f"{indent}// {GENERATED}")
            last = None
    return "\n".join(out)
