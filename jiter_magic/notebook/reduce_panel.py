"""A reduction's panel is every function's (widgets.py); magic.py still imports it from here.

Kept only until magic.py's `_panel_bundle` calls `widgets.mimebundle` for every kind.
"""
from jiter_magic.notebook.widgets import mimebundle, panel

__all__ = ["mimebundle", "panel"]
