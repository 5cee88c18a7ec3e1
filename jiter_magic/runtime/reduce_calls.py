"""`ReductionCalls`: one reduction function's call path state, as `Dispatcher` is an elementwise one's.

Its kernels load through the one `KernelLoader` (runtime/loader.py) with the reduction family of
kernels (kernels/families.py), so the pool, the disk entry's retry, the notices and the listeners
are those of every function; its plans and C hot paths are memory caches, which
`clear_cache(memory=True)` empties with everything else; its calls are counted alike.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jiter_magic.cache.memory import MemoryCache
from jiter_magic.frontend.reduction import ReductionBinding
from jiter_magic.kernels.families import KernelFamily
from jiter_magic.kernels.reduce_family import REDUCTION
from jiter_magic.runtime.calls import FunctionCalls
from jiter_magic.runtime.loader import KernelLoader

PLAN_LIMIT = 1024  # plans a function keeps (each a key of a call: dtypes, shapes, strides, dims)
HOT_LIMIT = 256  # C hot paths a function keeps


class ReductionCalls(FunctionCalls):
    """One reduction's kernels and plans, and its C hot paths by fast key (runtime/reduce_hot.py);
    a scan's too, with the scan family of kernels (a scan binds as a reduction does)."""

    def __init__(self, binding: ReductionBinding, family: KernelFamily = REDUCTION) -> None:
        super().__init__(binding.name, KernelLoader(binding, family), PLAN_LIMIT)
        self.binding = binding
        # Each takes the key's pointers; one into given out= arrays takes those arrays too.
        self.hot: MemoryCache[Callable[..., Any]] = MemoryCache(HOT_LIMIT, counted=False)

    def forget_plans(self) -> None:
        super().forget_plans()
        self.hot.clear()
