"""`PanelDisplay`: a jitted function's rich display in a notebook is its panel, for every kind.

The panels (notebook/) read a function through `KernelFunction`, so the display that calls them
lives here, above `kernel_function` and below the kinds' facades that mix it in: an import of the
panel from `KernelFunction` itself would close a circle.
"""
from __future__ import annotations

from collections.abc import Container
from typing import Any


class PanelDisplay:
    """Mixed into each kind's facade (JitFunction, ReductionFunction, ScanFunction)."""

    def _repr_mimebundle_(self, include: Container[str] | None = None,
                          exclude: Container[str] | None = None) -> dict[str, Any]:
        """A display in a notebook is the function's panel, the same for every kind (notebook/widgets.py)."""
        from jiter_magic.notebook.widgets import mimebundle

        return mimebundle(self, include, exclude)  # type: ignore[arg-type]  # mixed into KernelFunctions only
