"""The panel's text: highlighted code, the static forms (HTML and text), the log and cache tabs.

Pure functions of a jitted function of any kind and its specializations (what differs between
kinds comes from its hook, panel_kinds.py), shared by the live panel (widgets.py) and the static
stand-in every display carries. The static forms hold only deterministic facts (code, signature
or roles, specializations: no timings, paths or keys), so stored notebook outputs compare equal
from run to run.
"""
from __future__ import annotations

import html
import os
import re

from jiter_magic.kernel_function import KernelFunction
from jiter_magic.notebook.code_html import highlight, plain
from jiter_magic.notebook.panel_kinds import counted, kind_of
from jiter_magic.runtime.build import Specialization


def kernel_html(source: str, backend: str, coloured: bool = True) -> str:
    """Generated source with its prelude (everything before the user's `#line 1`) folded away;
    uncoloured and unnumbered unless `coloured` (the static form's copy, saved with the notebook)."""
    lines = source.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("#line 1 ")), 0)
    body = highlight("".join(lines[start:]), backend, first_line=start + 1) if coloured else plain(
        "".join(lines[start:]))
    if not start:
        return body
    prelude = highlight("".join(lines[:start]), backend) if coloured else plain("".join(lines[:start]))
    return (f"<details><summary>prelude: {start} lines of definitions the functor may use</summary>"
            f"{prelude}</details>{body}")


def label(index: int, specialization: Specialization) -> str:
    """'#0 cpu: (float32) -> (float32) compute float32, ...': a built kernel as every tab names it."""
    return f"#{index} {specialization.backend}: {specialization.describe()}"


def static_text(fn: KernelFunction, name: str | None = None) -> str:
    """Plain text of a function: stable across runs and machines of one kind (no timings or paths);
    titled by `name`, the notebook name it is bound to (by default the C++ function's)."""
    kind = kind_of(fn)
    lines = [f"{kind.title} {name or fn.name}: {kind.summary(fn)}", *(f"  {line}" for line in kind.text_lines(fn)),
             f"  {kind.noun}s: {len(fn.specializations)}"]
    lines += [f"    {label(i, s)}" for i, s in enumerate(fn.specializations)]
    return "\n".join(lines)


def static_html(fn: KernelFunction, name: str | None = None) -> str:
    """HTML of a function without widgets: the same facts as `static_text`, plus the code."""
    kind = kind_of(fn)
    rows = "".join(
        f"<tr><td>#{i}</td><td>{s.backend}</td><td><code>{html.escape(s.describe())}</code></td></tr>"
        for i, s in enumerate(fn.specializations)
    )
    table = (f"<table><tr><th></th><th>backend</th><th>{kind.noun}</th></tr>{rows}</table>"
             if rows else f"<p><i>no {kind.noun} {kind.built} yet</i></p>")
    return (
        f'<div class="jiter-magic"><p><b>{html.escape(name or fn.name)}</b> {kind.summary_html(fn)}<br>'
        f"{'; '.join(f'{fact.name}: {fact.html}' for fact in kind.facts(fn))}</p>"
        f"{highlight(fn.code)}{table}{_generated_html(fn.specializations)}</div>"  # C++, as the live panel shows it
    )


def _generated_html(specializations: list) -> str:
    """The newest specialization's generated kernel and every compiler log, folded, for frontends
    without widgets. One `<details class="jiter-magic-generated">` block: the kernel differs between
    a CPU and a GPU machine, so notebooks/nbval_sanitize.cfg compares notebooks without it."""
    if not specializations:
        return ""
    newest = specializations[-1]
    logs = "".join(f"<p>{html.escape(label(i, s))}: "
                   + (f"</p><pre>{html.escape(s.log.strip())}</pre>" if s.log.strip() else "no warnings</p>")
                   for i, s in enumerate(specializations))
    return (f'<details class="jiter-magic-generated"><summary>generated kernel of '
            f"{html.escape(label(len(specializations) - 1, newest))}, and the compile logs</summary>"
            f"{kernel_html(newest.source, newest.backend, coloured=False)}{logs}</details>")


_LOG_LINE = re.compile(r"^line (\d+)(?:, column \d+)?:", re.MULTILINE)


def failed_html(name: str, code: str, log: str, backend: str = "cpu") -> str:
    """What a `%%jiterator` cell shows of a compile that failed: the functor with the lines the
    compiler named marked. The compiler's log is the error's message below it, shown once there."""
    marked = {int(n) for n in _LOG_LINE.findall(log)}
    return (f'<div class="jiter-magic"><p><b>{html.escape(name)}</b> did not compile '
            f"({counted(len(marked), 'line')} named by the compiler, marked <b>&gt;</b>; "
            "the compiler's log is in the error below):</p>"
            f"{highlight(code, backend, marked=marked)}</div>")


def log_html(fn: KernelFunction) -> str:
    """The Compile log tab: each kernel's target, how it was built, its options and its log."""
    specializations, note = fn.specializations, kind_of(fn).log_note
    if not specializations:
        return "<p><i>nothing compiled yet</i></p>"
    parts = []
    for i, s in enumerate(specializations):
        how = (f"compiled in {s.compile_seconds:.3f} s" if s.cache_event == "compiled"
               else "loaded from the disk cache")
        log = html.escape(s.log.strip()) or "<i>(empty: no warnings)</i>"
        new = note(s.spec, [earlier.spec for earlier in specializations[:i]])
        parts.append(
            f"<h4>{html.escape(label(i, s))}</h4>" + (f"<p><i>{html.escape(new)}</i></p>" if new else "") +
            f"<p>target <code>{html.escape(s.target)}</code>, {how}<br>"
            f"options {options_html(s.options)}</p><pre>{log}</pre>"
        )
    return "".join(parts)


def options_html(options: tuple[str, ...] | list[str]) -> str:
    """A compile's options, each one unbreakable (`-march=native` never splits at its dash), so that
    a narrow panel breaks the line only between options."""
    return " ".join(f'<code style="white-space:nowrap">{html.escape(option)}</code>' for option in options)


def human_size(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _short_path(path: str | None, root: str) -> str:
    """An entry's path below the cache root ('cpu/ab/abcdef….bin'), the full path as its tooltip."""
    if not path:
        return "(not stored)"
    shown = os.path.relpath(path, root) if root and path.startswith(root) else os.path.basename(path)
    folder, name = os.path.split(shown)
    if len(name) > 20:
        name = name[:12] + "…" + name[-4:]
    return f'<code title="{html.escape(path)}">{html.escape(os.path.join(folder, name))}</code>'


def cache_html(fn: KernelFunction, stats: dict) -> str:
    """The Cache tab of a panel: one short row a kernel (its description as a tooltip, dtypes,
    backend and kernel shape, cache event, file, size, compile seconds), at most ~16 rows tall,
    then the cache's totals."""
    kind = kind_of(fn)
    head = "".join(f"<th>{h}</th>" for h in ("", "dtypes", kind.column, "event", "file", "size", "compile"))
    root = str(stats["root"])
    cells = "".join(
        f"<tr><td>#{i}</td><td title='{html.escape(s.describe())}'>{html.escape(kind.dtypes(s.spec))}</td>"
        f"<td>{s.backend} {s.spec.path}</td><td>{s.cache_event}</td><td>{_short_path(s.cache_file, root)}</td>"
        f"<td>{human_size(s.binary_size)}</td>"
        f"<td>{f'{s.compile_seconds:.2f} s' if s.cache_event == 'compiled' else ''}</td></tr>"
        for i, s in enumerate(fn.specializations)
    )
    totals = (f"<p>cache root <code>{html.escape(root)}</code>: {counted(stats['entries'], 'entry', 'entries')}, "
              f"{human_size(stats['bytes'])}; this process: {counted(stats['memory_hits'], 'memory hit')}, "
              f"{counted(stats['disk_hits'], 'disk hit')}, {counted(stats['compiles'], 'compile')} "
              f"({stats['compile_seconds']:.2f} s)</p>")
    # Rows never wrap (at 700 px a row took five lines): the box scrolls sideways instead.
    table = f'<table class="jiter-magic-cache" style="white-space:nowrap"><tr>{head}</tr>{cells}</table>'
    return f'<div style="max-height:24em;overflow:auto">{table}</div>{totals}'

