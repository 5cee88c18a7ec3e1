"""The Kernel tab's compiled listings: assembly, PTX and SASS of a specialization, as HTML.

PTX and SASS need no GPU: NVRTC compiles for any architecture it lists, so a CPU specialization
shows those of its CUDA counterpart (the same functions, dtypes and scalar kinds) for the chosen
architecture. A listing marks the instructions the compiler's line tables tie to the functor (those
after a `// line N: ...` comment, up to the next `// generated code`; never a comment or directive)
and opens scrolled to the first of them; its box scrolls sideways rather than wrapping lines.
"""
from __future__ import annotations

import functools
import html
import re

from jiter_magic.kernel_function import KernelFunction
from jiter_magic.notebook.code_html import BOX_STYLE, PRE_STYLE
from jiter_magic.notebook.panel_kinds import counted, kind_of
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.compiled_code import GENERATED

# The comments runtime/compiled_code.py puts before the instructions of a functor's line
# (`// line N: ...`, `# line N: ...` in assembly), and where instructions return to the kernel's.
_USER_LINE = re.compile(r"^\s*(?:#|//) line \d+: ")
_KERNEL_LINES = re.compile(rf"^\s*(?:#|//) {GENERATED}$")
USER_LINE_STYLE = "display:inline-block;min-width:100%;font-weight:bold;background:var(--jp-layout-color2,#eeeeee)"
# The listing opens scrolled to the functor's first line (CSS scroll-initial-target, on a box, so
# the marked lines are inline blocks; no script: widget HTML runs none); browsers without it open
# at the top, where the count says what to look for.
FIRST_USER_LINE_STYLE = "scroll-initial-target:nearest;scroll-margin-top:3em"


def is_instruction(line: str) -> bool:
    """An instruction of assembly, PTX or SASS (`vmulss ...`, `@%p1 bra ...`, `/*0890*/ FFMA ...`),
    not a comment, directive (`.loc`), label (`$L__BB0_2:`) or brace."""
    text = line.strip()
    return bool(text) and (text[0].isalpha() or text[0] == "@" or text.startswith("/*")) and not text.endswith(":")


def listing_html(text: str, what: str) -> str:
    """A compiled listing (`what`: 'PTX for sm_90', ...) with the instructions compiled from the
    functor's lines marked (`>`, bold), in a box that scrolls both ways and opens at the first of them."""
    rows, marked, in_functor = [], 0, False
    for line in text.splitlines():
        if _USER_LINE.match(line) or _KERNEL_LINES.match(line):
            in_functor = bool(_USER_LINE.match(line))
        if in_functor and is_instruction(line):
            style = USER_LINE_STYLE + (";" + FIRST_USER_LINE_STYLE if not marked else "")
            rows.append(f'<span class="jiter-magic-user-line" style="{style}">&gt;{html.escape(line)}</span>')
            marked += 1
        else:
            rows.append(" " + html.escape(line))
    note = (f"{counted(marked, 'instruction')} compiled from the functor's lines, marked &gt; (each line of "
            "the functor a comment before its instructions; one fused from two lines, such as x * x + a "
            "in one FMA, goes with one of them)"
            if marked else "no instruction is tied to the functor's lines (the compiler kept no line table for them)")
    return (f"<p>{html.escape(what)}: {counted(len(rows), 'line')}; {note}.</p>"
            f'<div class="jiter-magic-listing" style="{BOX_STYLE}"><pre style="{PRE_STYLE}">'
            + "\n".join(rows) + "</pre></div>")


@functools.cache  # NVRTC's list does not change within a process
def cuda_archs() -> tuple[str, ...]:
    """The architectures the Kernel tab offers for PTX and SASS: those this NVRTC compiles for
    (no GPU needed), or the default alone where NVRTC cannot be asked."""
    from jiter_magic.compilers.nvrtc import supported_archs
    from jiter_magic.compilers.nvrtc_archs import default_arch

    listed = [f"sm_{n}" for n in supported_archs() or ()]
    return tuple(listed if default_arch() in listed else sorted({*listed, default_arch()}))


def preferred_arch() -> str:
    """The GPU's own architecture where there is one, else the default (JITER_MAGIC_CUDA_ARCH, sm_90)."""
    from jiter_magic.compilers.nvrtc_archs import default_arch
    from jiter_magic.runtime.inspection import cuda_available

    if not cuda_available():
        return default_arch()
    from jiter_magic.runtime.backends.cuda import current_device, device_arch

    return device_arch(current_device())


def compiled_listing(fn: KernelFunction, specialization: Specialization, kind: str, arch: str) -> str:
    """The chosen listing of a specialization as HTML. PTX and SASS of a CPU kernel are its CUDA
    counterpart's (the same functions and dtypes, chosen by the function's kind: panel_kinds.py),
    compiled by NVRTC for `arch`."""
    from jiter_magic.runtime.compiled_code import compiled_text

    if kind == "asm":
        text = compiled_text(kind, specialization.source, specialization.backend, specialization.target, fn.code)
        return listing_html(text, f"{specialization.backend} assembly")
    if specialization.backend == "cuda":
        source, what = specialization.source, f"{kind.upper()} for {arch}"
    else:
        panel_kind = kind_of(fn)
        source, counterpart = panel_kind.counterpart(fn, specialization.spec)
        what = (f"{kind.upper()} for {arch} of this CPU {panel_kind.noun}'s CUDA counterpart, {counterpart}, "
                "compiled by NVRTC (no GPU needed)")
    return listing_html(compiled_text(kind, source, "cuda", arch, fn.code), what)
