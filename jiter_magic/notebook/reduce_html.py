"""The panel's text for a reduction: its header facts, the static forms (HTML and text), the log and
cache tabs, and the Kernel tab's compiled listings.

Pure functions of a `ReductionFunction` and its built kernels, as panel_html.py is for elementwise
functions. The static forms hold only deterministic facts (code, the functions' roles, identity,
kernels built: no timings, paths or keys), so stored notebook outputs compare equal from run to run;
the kernel shape of a call differs between the CPU and a GPU, which notebooks/nbval_sanitize.cfg
hides.
"""
from __future__ import annotations

import html
from dataclasses import replace
from typing import Any

from jiter_magic.kernel_function import KernelFunction
from jiter_magic.kernels.reduce_family import REDUCTION
from jiter_magic.notebook.code_html import highlight
from jiter_magic.notebook.panel_html import cache_tab_html, counted, kernel_html, options_html
from jiter_magic.planning.reduce_spec import COLUMNS, GRID, HOST_COLUMNS
from jiter_magic.runtime.build import Specialization

# A ReductionFunction: reduction.py displays itself through this module, which therefore cannot
# import it; what is read beyond KernelFunction's face is its `identity`.
Reduction = Any


def label(index: int, built: Specialization) -> str:
    """'#0 cpu: reduce (float32) -> float32 accumulating float32, host 1-d kept x 1-d reduced'."""
    return f"#{index} {built.backend}: {built.describe()}"


def roles_text(fn: KernelFunction) -> str:
    """'combine add, map sq, finalize root': the cell's functions by what the reduction does with them."""
    binding = fn.binding
    indices = " (values with their indices)" if binding.indexed else ""
    parts = [f"combine {binding.combine.name}{indices}",
             f"map {binding.map.functor.name}" if binding.map is not None else "no map (the elements themselves)"]
    if binding.finalize is not None:
        parts.append(f"finalize {binding.finalize.name}")
    return ", ".join(parts)


def default_dim_text(fn: KernelFunction) -> str:
    """A `%%jiterator --reduce dim=...` cell's default dim; every dim (torch.sum's) otherwise."""
    dim = getattr(fn, "default_dim", None)
    return "every dim" if dim is None else repr(dim)


def identity_text(fn: Reduction) -> str | None:
    """The identity, as shown; None for values with their indices, where the identity is optional
    and unused (no element is compared with it), so a panel shows none rather than a default 0."""
    return None if fn.binding.indexed else repr(fn.identity)


def kwargs_text(fn: Reduction) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in fn.kwargs.items()) or "none"


def static_text(fn: Reduction, name: str | None = None) -> str:
    """Plain text of a reduction: stable across runs and machines of one kind (no timings or paths);
    titled by `name`, the notebook name it is bound to (by default the C++ combine's)."""
    identity = identity_text(fn)
    lines = [
        f"ReductionFunction {name or fn.name}: {roles_text(fn)}",
        f"  inputs: {', '.join(fn.binding.input_names)}; " + ("" if identity is None else f"identity: {identity}; ")
        + f"kwargs: {kwargs_text(fn)}; default dim: {default_dim_text(fn)}",
        f"  kernels: {len(fn.specializations)}",
    ]
    lines += [f"    {label(i, s)}" for i, s in enumerate(fn.specializations)]
    return "\n".join(lines)


def static_html(fn: Reduction, name: str | None = None) -> str:
    """HTML of a reduction without widgets: the facts of `static_text`, the code highlighted as C++,
    and the newest kernel's source with the compile logs, folded (`jiter-magic-generated`, which
    nbval_sanitize.cfg leaves out: it is CUDA's on a GPU machine)."""
    built = fn.specializations
    rows = "".join(f"<tr><td>#{i}</td><td>{s.backend}</td><td><code>{html.escape(s.describe())}</code></td></tr>"
                   for i, s in enumerate(built))
    table = (f"<table><tr><th></th><th>backend</th><th>kernel</th></tr>{rows}</table>"
             if rows else "<p><i>no kernel built yet</i></p>")
    identity = identity_text(fn)
    return (
        f'<div class="jiter-magic">'
        f"<p><b>{html.escape(name or fn.name)}</b> reduction: {html.escape(roles_text(fn))}<br>"
        f"inputs: <code>{html.escape(', '.join(fn.binding.input_names))}</code>; "
        + ("" if identity is None else f"identity: <code>{html.escape(identity)}</code>; ")
        + f"kwargs: <code>{html.escape(kwargs_text(fn))}</code>; "
        f"default dim: {html.escape(default_dim_text(fn))}</p>"
        f"{highlight(fn.code)}{table}{_generated_html(built)}</div>"
    )


def _generated_html(built: list[Specialization]) -> str:
    if not built:
        return ""
    newest = built[-1]
    logs = "".join(f"<p>{html.escape(label(i, s))}: " + (f"</p><pre>{html.escape(s.log.strip())}</pre>"
                                                         if s.log.strip() else "no warnings</p>")
                   for i, s in enumerate(built))
    return (f'<details class="jiter-magic-generated"><summary>generated kernel of '
            f"{html.escape(label(len(built) - 1, newest))}, and the compile logs</summary>"
            f"{kernel_html(newest.source, newest.backend, coloured=False)}{logs}</details>")


def log_html(built: list[Specialization]) -> str:
    """The Compile log tab: each kernel's target, how it was built, its options and its log."""
    if not built:
        return "<p><i>nothing compiled yet</i></p>"
    parts = []
    for i, s in enumerate(built):
        made = s
        how = (f"compiled in {made.compile_seconds:.3f} s" if made.cache_event == "compiled"
               else "loaded from the disk cache")
        log = html.escape(made.log.strip()) or "<i>(empty: no warnings)</i>"
        parts.append(f"<h4>{html.escape(label(i, s))}</h4><p>target <code>{html.escape(s.target)}</code>, {how}<br>"
                     f"options {options_html(made.options)}</p><pre>{log}</pre>")
    return "".join(parts)


def cache_html(built: list[Specialization], stats: dict) -> str:
    """The Cache tab: one short row a kernel (the long facts as tooltips), then the cache's totals."""
    rows = [(s.describe(), f"({', '.join(s.spec.inputs)}) → {s.spec.output}", f"{s.backend} {s.spec.path}",
             s.cache_event, s.cache_file, len(s.binary), s.compile_seconds) for s in built]
    return cache_tab_html("kernel", rows, stats)


def listing(fn: KernelFunction, built: Specialization, kind: str, arch: str) -> str:
    """The Kernel tab's compiled listing of a kernel. PTX and SASS of a host kernel are those of its
    CUDA counterpart (the columns kernel for the host's column walk, the grid kernel otherwise: it
    serves any layout), compiled by NVRTC for `arch` without a GPU."""
    from jiter_magic.notebook.listings import listing_html
    from jiter_magic.runtime.compiled_code import compiled_text

    if kind == "asm":
        text = compiled_text(kind, built.source, built.backend, built.target, fn.code)
        return listing_html(text, f"{built.backend} assembly")
    if built.backend == "cuda":
        source, what = built.source, f"{kind.upper()} for {arch}"
    else:
        spec = replace(built.spec, path=COLUMNS if built.spec.path == HOST_COLUMNS else GRID, vec=1)
        source = REDUCTION.render(fn.binding, spec, "cuda")
        what = (f"{kind.upper()} for {arch} of this CPU kernel's CUDA counterpart, the {spec.path} kernel "
                f"({spec.kept_ndim}-d kept x {spec.reduced_ndim}-d reduced), compiled by NVRTC (no GPU needed)")
    return listing_html(compiled_text(kind, source, "cuda", arch, fn.code), what)


def header(fn: Reduction, where: str, name: str | None = None) -> str:
    """The live panel's first line, titled by `name` (the notebook's, by default the C++ combine's):
    the roles, identity, extras and default dim, where calls run."""
    identity = identity_text(fn)
    shown = "" if identity is None else f" &middot; identity <code>{html.escape(identity)}</code>"
    return (f"<b>{html.escape(name or fn.name)}</b> reduction: {html.escape(roles_text(fn))}{shown}"
            f" &middot; kwargs <code>{html.escape(kwargs_text(fn))}"
            f"</code> &middot; default dim {html.escape(default_dim_text(fn))} &middot; "
            f"{counted(len(fn.specializations), 'kernel')} &middot; runs on {html.escape(where)}")
