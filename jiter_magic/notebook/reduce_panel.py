"""The inspection panel of a reduction: the elementwise panel's tabs (the functions, the generated
kernel of each kernel built with its compiled listings, the compile log, the cache), filled from a
`ReductionFunction`'s kernels (reduce_html.py), and the same static stand-in beside the widget.
"""
from __future__ import annotations

import html
from collections.abc import Container
from typing import Any

from jiter_magic.kernel_function import KernelFunction
from jiter_magic.notebook import reduce_html
from jiter_magic.notebook.names import bound_name
from jiter_magic.notebook.widgets import Panel, live_frontend, live_panels, selected


class ReductionPanel(Panel):
    """The panel of one reduction; it refreshes itself when the reduction builds a kernel."""

    def _header(self, fn: Any) -> str:
        notice = ("" if self.rebound_as is None else
                  f"<div><b>{html.escape(self.rebound_as)}</b> now names another function (its cell ran again); "
                  "this panel shows the earlier one.</div>")
        return notice + reduce_html.header(fn, runs_where(), self.name)

    def label(self, index: int, specialization: Any) -> str:
        return reduce_html.label(index, specialization)

    def log_html(self, specializations: list) -> str:
        return reduce_html.log_html(specializations)

    def cache_html(self, specializations: list, stats: dict) -> str:
        return reduce_html.cache_html(specializations, stats)

    def static_html(self, fn: Any) -> str:
        return reduce_html.static_html(fn, self.name)

    def listing(self, fn: Any, specialization: Any, kind: str, arch: str) -> str:
        return reduce_html.listing(fn, specialization, kind, arch)


def runs_where() -> str:
    """Where a reduction's calls run: where their inputs live."""
    from jiter_magic.runtime.inspection import cuda_available, cuda_device_name

    if not cuda_available():
        return "the inputs' device (the CPU: no GPU found)"
    return f"the inputs' device ({cuda_device_name()}, or the CPU)"


def panel(fn: KernelFunction, name: str | None = None) -> ReductionPanel:
    """A new live panel of `fn` titled `name`, kept with the function's others (widgets.panels, rebound)."""
    made = ReductionPanel(fn, name)
    live_panels().setdefault(fn, []).append(made)
    return made


def mimebundle(fn: KernelFunction, include: Container[str] | None = None,
               exclude: Container[str] | None = None, name: str | None = None) -> dict[str, Any]:
    """`ReductionFunction._repr_mimebundle_`: the live panel where a kernel can host it, static HTML
    and text always (as widgets.mimebundle for elementwise functions), titled by `name`, by default
    the notebook name `fn` is bound to."""
    name = name or bound_name(fn)
    bundle: dict[str, Any] = {}
    if live_frontend():
        bundle.update(panel(fn, name).widget._repr_mimebundle_())
    bundle["text/plain"] = reduce_html.static_text(fn, name)
    bundle["text/html"] = reduce_html.static_html(fn, name)
    return selected(bundle, include, exclude)
