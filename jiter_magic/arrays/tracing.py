"""Whether Dynamo is tracing the caller (torch.compile, torch.export), checked on every call at the
least cost.

Under Dynamo a call must become the function's torch operator (arrays/torch_ops.py) before it
reaches the call path, which reads data pointers that a traced tensor does not have. `compiling`
is torch's own `torch.compiler.is_dynamo_compiling` once torch is imported: a function that
returns False, which Dynamo folds to True while it traces (a third of the cost of
`torch.compiler.is_compiling`, which also calls `torch.jit.is_scripting`); until torch is
imported it cannot be tracing. Tracing without Dynamo (AOTAutograd, make_fx, non-strict export)
hands the call FakeTensors or FunctionalTensors, which reach the operator through their adapter.
"""
from __future__ import annotations

import sys
from typing import Any


def _until_torch_is_imported() -> bool:
    global compiling
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "compiler"):
        return False
    if torch.compiler.is_dynamo_compiling():
        # Being traced: replacing this function now would be a side effect that Dynamo guards on,
        # so the next call of the compiled frame would compile a second graph. An eager call
        # replaces it.
        return True
    compiling = torch.compiler.is_dynamo_compiling
    return False


# torch's own check from the start where torch came first (the usual order), so that Dynamo never
# traces the stand-in: its first eager call after a trace would replace it, and a compiled frame
# that guards on it would compile again.
_torch: Any = sys.modules.get("torch")
compiling = _torch.compiler.is_dynamo_compiling if hasattr(_torch, "compiler") else _until_torch_is_imported


def traced_call(function: Any, args: tuple, out: Any, kwargs: dict) -> Any:
    """The call as the function's torch operator (integrations/torch_ops.py), which the tracer
    records. Dynamo traces this function, and it can trace an import statement but not
    `importlib.import_module`, so the operator's module is imported here by name."""
    from jiter_magic.integrations.torch_ops import operator_call

    return operator_call(function, args, out, kwargs)


def traced_reduction(function: Any, inputs: tuple, options: dict, kwargs: dict) -> Any:
    """A reduction's call as its torch operator (integrations/reduce_ops.py), imported by name for
    the same reason."""
    from jiter_magic.integrations.reduce_ops import reduction_call

    return reduction_call(function, inputs, options, kwargs)


def traced_scan(function: Any, inputs: tuple, options: dict, kwargs: dict) -> Any:
    """A scan's call as its torch operator (integrations/scan_ops.py), imported by name for the
    same reason."""
    from jiter_magic.integrations.scan_ops import scan_call

    return scan_call(function, inputs, options, kwargs)
