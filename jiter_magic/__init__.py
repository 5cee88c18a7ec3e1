"""jiter_magic: write an elementwise kernel as a C++ functor string, call it like a Python function.

A drop-in for `torch.cuda.jiterator._create_jit_fn` / `_create_multi_output_jit_fn` that
runs on CUDA (NVRTC through CuPy) and on the CPU (host C++), caches kernels in memory and
on disk, and comes with a `%%jiterator` notebook magic (`%load_ext jiter_magic`).
Importing this package imports neither torch, CuPy nor IPython.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jiter_magic._version import __version__
from jiter_magic.cache.entry import CacheWarning
from jiter_magic.errors import (
    ArgumentTypeError,
    BindError,
    CompileError,
    DeviceError,
    DimensionError,
    DTypeError,
    GradientError,
    IntegerDivisionError,
    InvalidArgumentError,
    JiterError,
    KernelFaultError,
    LaunchError,
    ParseError,
    ScalarOverflowError,
    SettingWarning,
    ShapeError,
    ToolchainError,
    UnknownKwargError,
    UnsupportedArrayError,
)
from jiter_magic.function import JitFunction
from jiter_magic.kernel_function import for_caller
from jiter_magic.runtime.build import Specialization

__all__ = [
    "create_jit_fn", "create_multi_output_jit_fn", "create_reduction_fn", "create_multi_output_reduction_fn",
    "create_scan_fn", "create_multi_output_scan_fn",
    "JitFunction", "ReductionFunction", "ScanFunction", "ValuesIndices", "Specialization",
    "cache_stats", "clear_cache", "cache_dir", "benchmark", "sweep", "BenchmarkResult", "SweepResult",
    "JiterError", "ParseError", "BindError", "DTypeError", "ShapeError", "DeviceError", "CompileError",
    "ToolchainError", "LaunchError", "ArgumentTypeError", "InvalidArgumentError", "UnknownKwargError",
    "ScalarOverflowError", "UnsupportedArrayError", "GradientError", "KernelFaultError",
    "IntegerDivisionError", "DimensionError", "CacheWarning", "SettingWarning", "__version__",
    "load_ipython_extension", "unload_ipython_extension", "register_torch_operators",
]


def create_jit_fn(code_string: str, **kwargs: object) -> JitFunction:
    """Jit an elementwise functor with one output (its return value).

    `code_string` holds C++ functions; the last one is the entry point. `kwargs` name entry
    parameters that are extra scalar arguments, with their defaults; every other value
    parameter is an array input, in declaration order.
    """
    try:
        return JitFunction(code_string, None, kwargs)
    except JiterError as error:  # a mistake in the code string or kwargs: the caller's line, no internals
        raise for_caller(error) from error.__cause__  # JITER_MAGIC_DEBUG=1 shows all frames


def create_multi_output_jit_fn(code_string: str, num_outputs: int, **kwargs: object) -> JitFunction:
    """Jit a functor that writes `num_outputs` outputs through non-const reference parameters."""
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs < 1:
        raise BindError(f"num_outputs must be a positive int, got {num_outputs!r}")
    try:
        return JitFunction(code_string, num_outputs, kwargs)
    except JiterError as error:  # as in create_jit_fn
        raise for_caller(error) from error.__cause__


def create_reduction_fn(code_string: str, identity: object, map: str | None = None, *,  # noqa: A002 - the API's name
                        combine: str, finalize: str | None = None, **kwargs: object) -> ReductionFunction:
    """Jit a reduction from C++ functors: `combine(a, b)` folds two accumulator values (it must be
    associative and commutative, which cannot be checked), `map(inputs..., extras...)` makes each
    element's value (by default the last function that is neither combine nor finalize; none: the
    element itself), `finalize(result, count)` optionally ends each result (a mean, a norm).
    `identity` is the value that combine leaves any value unchanged with (0 for a sum, float('-inf')
    for a max). `kwargs` name the map's extra scalar parameters, with their defaults.
    Calls take `dim=`, `keepdim=`, `dtype=` and `out=` as torch.sum does."""
    from jiter_magic.reduction import ReductionFunction

    try:
        return ReductionFunction(code_string, identity, map, combine, finalize, kwargs)
    except JiterError as error:  # as in create_jit_fn
        raise for_caller(error) from error.__cause__


def create_multi_output_reduction_fn(code_string: str, identity: object = None, map: str | None = None, *,  # noqa: A002
                                     combine: str, finalize: str | None = None, num_outputs: int = 2,
                                     **kwargs: object) -> ReductionFunction:
    """Jit a reduction that gives each result's value and the index of the element it came from
    (argmax, a max with its index), as a `ValuesIndices(values, indices)` pair like torch.max(x, dim).
    `combine` folds two (value, index) pairs and writes the one it keeps through two references:
    `template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index)`;
    it breaks ties by index to be deterministic. An index is the element's flat position over the
    reduced dims. `identity` is optional here: no element is compared with it. `num_outputs` is 2."""
    if num_outputs != 2 or isinstance(num_outputs, bool):
        raise BindError(f"a multi-output reduction gives 2 outputs, its values and their indices; "
                        f"got num_outputs={num_outputs!r}")
    from jiter_magic.reduction import ReductionFunction

    try:
        return ReductionFunction(code_string, 0 if identity is None else identity, map, combine, finalize, kwargs,
                                 indexed=True)
    except JiterError as error:  # as in create_jit_fn
        raise for_caller(error) from error.__cause__


def create_scan_fn(code_string: str, identity: object, map: str | None = None, *,  # noqa: A002 - the API's name
                   combine: str, finalize: str | None = None, **kwargs: object) -> ScanFunction:
    """Jit a scan (a cumulative sum, max, logcumsumexp) from C++ functors: `combine(a, b)` gives the
    state of a's elements followed by b's (it must be associative, which cannot be checked; it need
    not be commutative), `map(inputs..., extras...)` makes each element's value (by default the last
    function that is neither combine nor finalize; none: the element itself), `finalize(value,
    count)` optionally ends each result. `identity` is the value combine leaves any value unchanged
    with (0 for a sum, float('-inf') for a max); an exclusive scan's first result is it. `kwargs` name
    the map's extra scalar parameters, with their defaults. Calls take `dim=` (required),
    `reverse=`, `exclusive=`, `dtype=` and `out=`, with torch.cumsum's dtype rules."""
    from jiter_magic.scan import ScanFunction

    try:
        return ScanFunction(code_string, identity, map, combine, finalize, kwargs)
    except JiterError as error:  # as in create_jit_fn
        raise for_caller(error) from error.__cause__


def create_multi_output_scan_fn(code_string: str, identity: object = None, map: str | None = None, *,  # noqa: A002
                                combine: str, finalize: str | None = None, outputs: tuple[int, ...] | None = None,
                                **kwargs: object) -> ScanFunction:
    """Jit a scan whose state holds several values, or values with their indices.

    A state of 2 to 4 values: `combine` takes two states and writes the new one through references,
    as a linear recurrence `h[t] = a[t] * h[t-1] + b[t]` does with
    `template <typename T> void affine(T a1, T b1, T a2, T b2, T& a, T& b) { a = a1 * a2; b = a2 * b1 + b2; }`;
    `identity` is a tuple of the state's values ((1, 0) there), the map writes an element's state
    through references (none: the inputs are the state's values, one array each), and a call
    returns a tuple of one array a value (`h` is the second there). `outputs=` names the positions
    of the values a call returns, in order (by default all): `outputs=(1,)` returns `(h,)`, a tuple
    of one array, and writes nothing else (the kernels still carry the whole state); `out=` then
    takes as many arrays, and a backward gets those results and their gradients only. `outputs` is
    a keyword of this function, so no extra of the map may be named so.
    Values with indices (cummax): `combine` is a reduction with indices' (`void keep_max(T a,
    int64_t ia, T b, int64_t ib, T& value, int64_t& index)`, ties broken by index to be
    deterministic) and a call returns `ValuesIndices(values, indices)` as torch.cummax does."""
    from jiter_magic.frontend.scan import outputs_type_error
    from jiter_magic.scan import ScanFunction

    try:
        if isinstance(outputs, bool):  # not the multi-output flag it would pass for below
            raise outputs_type_error(outputs, combine)
        if isinstance(outputs, list):  # a copy: changing the list later changes neither the function nor its pickle
            outputs = tuple(outputs)
        return ScanFunction(code_string, identity, map, combine, finalize, kwargs,
                            multi=True if outputs is None else outputs)
    except JiterError as error:  # as in create_jit_fn
        raise for_caller(error) from error.__cause__


if TYPE_CHECKING:
    from jiter_magic.cache.disk import stats as cache_stats
    from jiter_magic.reduction import ReductionFunction, ValuesIndices
    from jiter_magic.scan import ScanFunction
    from jiter_magic.tools.benchmarking import benchmark, sweep
    from jiter_magic.tools.results import BenchmarkResult, SweepResult

# Names whose modules load when first asked for (PEP 562): a new process's first elementwise call
# needs none of them (the disk cache's module loads with its first build), and each module costs
# milliseconds of import.
_LAZY = ("ReductionFunction", "ValuesIndices", "ScanFunction", "benchmark", "sweep", "BenchmarkResult", "SweepResult",
         "cache_stats")


def __getattr__(name: str) -> Any:
    """A name of `_LAZY`, its module imported the first time it is asked for."""
    module: Any
    if name in ("ReductionFunction", "ValuesIndices"):
        from jiter_magic import reduction as module
    elif name == "ScanFunction":
        from jiter_magic import scan as module
    elif name in ("benchmark", "sweep"):
        from jiter_magic.tools import benchmarking as module
    elif name in ("BenchmarkResult", "SweepResult"):
        from jiter_magic.tools import results as module
    elif name == "cache_stats":
        from jiter_magic.cache import disk

        value = globals()[name] = disk.stats
        return value
    else:
        raise AttributeError(f"module 'jiter_magic' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def cache_dir() -> str | None:
    """The disk cache directory in use (None when JITER_MAGIC_DISK_CACHE=0)."""
    from jiter_magic.cache.disk import disk_cache

    return disk_cache().root


def clear_cache(memory: bool = True, disk: bool = True) -> None:
    """Empty the disk cache and/or the memory caches (every function's plans and loaded kernels,
    which later calls build again) and the counters."""
    from jiter_magic.cache.disk import clear_caches

    clear_caches(memory, disk)


def register_torch_operators(*functions: JitFunction | ReductionFunction) -> list[str]:
    """Register the torch operators of `functions` now, as torch.compile and torch.export do on
    their first traced call; returns their names. A process that loads a saved `torch.export`
    program calling jitted functions (or reductions) creates those functions again, with the same
    code, kwargs, backward and backend, and registers them with this before `torch.export.load`."""
    from jiter_magic.integrations.traced import register_operators

    return register_operators(*functions)


def load_ipython_extension(ipython) -> None:
    """`%load_ext jiter_magic`: registers the %%jiterator, %jiterator_cache and %jiterator_bench magics."""
    from jiter_magic.notebook.magic import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from jiter_magic.notebook.magic import unload_ipython_extension as unload

    unload(ipython)
