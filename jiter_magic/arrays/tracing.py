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
    compiling = torch.compiler.is_dynamo_compiling
    return compiling()


compiling = _until_torch_is_imported


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
