"""What the magics print: the line after a `%%jiterator` cell, and the `%jiterator_cache` report."""
from __future__ import annotations

from jiter_magic.function import JitFunction
from jiter_magic.kernel_function import KernelFunction
from jiter_magic.notebook.panel_html import human_size
from jiter_magic.runtime.inspection import cuda_available, cuda_device_name

_HOW = {"disk": "loaded from the disk cache", "memory": "reused from memory (an equal function had it)"}


def summary(fn: KernelFunction, bound_to: str) -> str:
    """The line after a `%%jiterator` cell: what was built, for which device, how and how fast;
    `bound_to` is the notebook name, followed by the C++ function's where the two differ. A
    reduction's or scan's names its dtypes as '(float32) -> float32, accumulating float32' (the
    kernel's shape is the panel's)."""
    built = fn.specializations[-1]
    spec, elementwise = built.spec, isinstance(fn, JitFunction)
    if built.backend == "cpu":
        where = "the CPU"
    elif cuda_available():
        where = f"CUDA {built.target} ({cuda_device_name()})"
    else:
        where = f"CUDA {built.target} (no GPU found: compiled only, to check it)"
    how = f"compiled in {built.compile_seconds:.2f} s" if built.cache_event == "compiled" else _HOW[built.cache_event]
    words = f"; {len(fn.warnings)} compiler warning(s): see {bound_to}.warnings" if fn.warnings else ""
    name = bound_to if bound_to == fn.name else f"{bound_to} ({fn.name})"
    if elementwise:
        return f"{name}: {how} for {where}, {spec.dtypes_text()}{words}"
    state = getattr(spec, "state", 1)  # a scan's state of several values, a result each
    output = f"({spec.output}, int64 index)" if spec.indexed else spec.output if state == 1 else \
        f"{state} x {spec.output}"
    verb = "scan" if fn.operation == "scan" else "reduce"
    return (f"{name}: {how} for {where}, {verb} ({', '.join(spec.inputs)}) -> {output}, "
            f"accumulating {spec.accumulate}{words}")


def format_cache_stats(stats: dict) -> str:
    """The `%jiterator_cache` report: one fact a line."""
    root = stats["root"] if stats.get("enabled", True) else "(disk cache disabled)"
    return "\n".join([
        "jiter_magic kernel cache",
        f"  root:         {root}",
        f"  entries:      {stats['entries']} ({human_size(stats['bytes'])})",
        f"  memory hits:  {stats['memory_hits']}",
        f"  disk hits:    {stats['disk_hits']}",
        f"  compiles:     {stats['compiles']} ({stats['compile_seconds']:.2f} s)",
    ])
