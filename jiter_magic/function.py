"""`JitFunction`: the callable returned by `create_jit_fn`, a facade over the call path.

Parsing and binding happen once, here; a call goes to the `Dispatcher` (runtime/dispatch.py),
kernels are built and loaded by the `KernelLoader` (runtime/loader.py), and inspection without a
call lives in runtime/inspection.py.
"""
from __future__ import annotations

import pickle
import weakref
from collections.abc import Callable, Container
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jiter_magic import settings
from jiter_magic.arrays import tracing
from jiter_magic.errors import BindError, InvalidArgumentError, JiterError
from jiter_magic.frontend.bind import bind
from jiter_magic.frontend.parse import parse_functor
from jiter_magic.frontend.signature import LazySignature, docstring_of
from jiter_magic.planning.spec import CONTIGUOUS, KernelSpec
from jiter_magic.planning.values import scalar_value
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.dispatch import CallCounts, Dispatcher
from jiter_magic.runtime.loader import KernelLoader
from jiter_magic.runtime.unpickled import UnpickledFunctions
from jiter_magic.state import RUNTIME

if TYPE_CHECKING:
    from jiter_magic.tools.results import BenchmarkResult


class JitFunction:
    """A jitted elementwise function; call it like a Python function on arrays."""

    __signature__ = LazySignature()

    def __init__(self, code_string: str, num_outputs: int | None, kwargs: dict[str, object]):
        self._made_from = (code_string, num_outputs, dict(kwargs))  # what pickling rebuilds it from
        self.functor = parse_functor(code_string)
        self.code = self.functor.code
        self.name = self.functor.name
        self.binding = bind(self.functor, list(kwargs), num_outputs)
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        # What makes it, as bytes: torch.compile names the function's operator by them (a constant
        # to Dynamo, where the kwargs' values may be symbolic floats).
        self._recipe = pickle.dumps((code_string, num_outputs, self.kwargs))
        self.num_outputs = self.binding.num_outputs
        self.multi_output = num_outputs is not None
        self.__name__ = self.__qualname__ = self.functor.name
        self.__doc__ = docstring_of(self.binding, self.kwargs)
        self._loader = KernelLoader(self.binding)
        # One output comes back as the array itself, from the multi-output form too (as torch's does).
        self._dispatch = Dispatcher(self.functor.name, self._loader, self.kwargs, self.num_outputs == 1)
        self._dispatch.owner = weakref.ref(self)
        self._call = self._dispatch.call

    def __call__(self, *args: object, out: object = None, **kwargs: object) -> Any:
        if tracing.compiling():  # torch.compile / torch.export: the call becomes one torch operator
            return tracing.traced_call(self, args, out, kwargs)  # (outside the try: Dynamo traces no handler)
        # A try costs nothing until something raises (Python 3.11+): the hot path stays as it was.
        try:
            return self._call(args, out, kwargs)
        except JiterError as error:
            # A mistake in the call's arguments: what was wrong is all in the message, so the
            # traceback drops the frames that found it and starts here, under the caller's lines.
            # `from` its own cause: a deliberate cause stays, an implicit context is not shown.
            # Other exceptions, a bug of jiter_magic's own among them, keep every frame.
            if settings.DEBUG.get():
                raise
            raise error.with_traceback(None) from error.__cause__  # JITER_MAGIC_DEBUG=1 shows all frames

    def __reduce__(self) -> tuple:
        """Pickle by what made it (code string, outputs, kwargs, backward) and its backend, never
        by loaded kernels: another process rebuilds it, and its first call finds the kernel in the
        disk cache (or compiles it). So jitted functions travel to worker processes."""
        return _unpickle, self._pickled_state()

    def _pickled_state(self) -> tuple[str, int | None, dict[str, object], str, str | None]:
        code_string, num_outputs, kwargs = self._made_from
        backward = None if self.backward is None else self.backward._made_from[0]
        return code_string, num_outputs, kwargs, self.backend, backward

    def _now(self) -> bytes:
        """What this function is now, as bytes: its pickled state, and what a change after it was
        made could alter beyond that state (the kwargs its calls use, its backward's own state)."""
        backward = None if self.backward is None else self.backward._now()
        return pickle.dumps((self._pickled_state(), self.kwargs, backward))

    @property
    def backward(self) -> JitFunction | None:
        """The jitted gradient given by `def_backward`, or None."""
        return self._dispatch.backward

    def def_backward(self, code_string: str | None) -> JitFunction:
        """Give the function its gradient as another functor, for torch autograd; returns `self`.

        The backward functor takes the forward's inputs, then its extras (bound by name, with the
        call's values), then one gradient a forward output, and writes one gradient an input
        through non-const references, e.g. for `a * x + y`:
        `template <typename T> void axpy_bwd(T x, T y, T a, T g, T& gx, T& gy) { gx = a * g; gy = g; }`.
        Gradients are summed over the dimensions a call broadcast an input along and cast to its
        dtype; inputs that do not require grad get None. `None` removes the backward again."""
        if code_string is None:
            self._dispatch.backward = None
            return self
        try:
            backward = JitFunction(code_string, self.num_inputs, dict(self._made_from[2]))
        except BindError as exc:
            raise BindError(f"the backward of {self.name}: {exc}") from None
        expected = self.num_inputs + self.num_outputs
        if backward.num_inputs != expected:
            raise BindError(
                f"the backward of {self.name} must take its {self.num_inputs} input(s) "
                f"{list(self.binding.input_names)}, then one gradient for each of its {self.num_outputs} "
                f"output(s): {expected} array parameters besides the extras {list(self.kwargs)}; "
                f"{backward.name} takes {backward.num_inputs} {list(backward.binding.input_names)}")
        backward.backend = self.backend
        self._dispatch.backward = backward
        return self

    @property
    def num_inputs(self) -> int:
        """How many arrays (or Python numbers) a call takes."""
        return self.binding.num_inputs

    @property
    def backend(self) -> str:
        """'auto' (by where the inputs live), 'cuda' or 'cpu' (refuse inputs living elsewhere)."""
        return self._dispatch.backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._dispatch.set_backend(value)
        if self.backward is not None:
            self.backward.backend = value

    @property
    def specializations(self) -> list[Specialization]:
        """Every specialization built for this function, in order."""
        return self._loader.specializations

    @property
    def warnings(self) -> list[str]:
        """Compiler warnings of the specializations built so far."""
        return self._loader.warnings

    @property
    def call_counts(self) -> CallCounts:
        """How many calls so far took the hot path (their plan found from the fast key, the C
        call path's or Python's) and how many the general path (described argument by argument,
        planned on a miss): a copy, taken now."""
        return replace(self._dispatch.counts)

    def memory_counts(self, specialization: Specialization) -> tuple[int, int]:
        """(calls served from memory, plans made) for one specialization, since the cache was cleared."""
        return self._dispatch.plans.counts(specialization.spec)

    def add_listener(self, callback: Callable[[Specialization], None]) -> None:
        """Call `callback(specialization)` whenever a new specialization is built."""
        self._loader.listeners.append(callback)

    def remove_listener(self, callback: Callable[[Specialization], None]) -> None:
        if callback in self._loader.listeners:
            self._loader.listeners.remove(callback)

    def add_start_listener(self, callback: Callable[[KernelSpec, int], None]) -> None:
        """Call `callback(spec, device)` when a call starts building a specialization (device -1: the
        host), before it compiles or reads the disk cache; the panel says "compiling" with it."""
        self._loader.start_listeners.append(callback)

    def remove_start_listener(self, callback: Callable[[KernelSpec, int], None]) -> None:
        if callback in self._loader.start_listeners:
            self._loader.start_listeners.remove(callback)

    def __repr__(self) -> str:
        return f"<jiter_magic.JitFunction {self.functor.signature}>"

    def _repr_mimebundle_(self, include: Container[str] | None = None,
                          exclude: Container[str] | None = None) -> dict[str, Any]:
        from jiter_magic.notebook.widgets import mimebundle

        return mimebundle(self, include, exclude)

    def source(self, *dtypes_or_arrays: object, backend: str = "cuda", path: str = CONTIGUOUS, ndim: int = 1,
               **kwargs: object) -> str:
        """The generated source of one specialization (no GPU, no compiler needed).

        Give dtype names (dense inputs; `path` and `ndim` pick the loop), or example inputs as
        for a call (arrays of any library, Python numbers, kwargs overrides): their dtypes and
        layout then decide, exactly as a call on them would.
        """
        from jiter_magic.runtime import inspection

        return inspection.source(self._dispatch, dtypes_or_arrays, backend, path, ndim, kwargs)

    def inspect(self, *dtypes_or_arrays: object, kind: str = "ptx", backend: str | None = None,
                path: str = CONTIGUOUS, ndim: int = 1, **kwargs: object) -> str:
        """The compiled code of one specialization as text (no GPU needed): kind='ptx' or 'sass'
        for CUDA, 'asm' for the CPU; arguments as `source` takes them. Lines of the code string
        the compiler's line tables point at are shown as comments before their instructions."""
        from jiter_magic.compilers.nvrtc_archs import default_arch
        from jiter_magic.runtime import inspection
        from jiter_magic.runtime.compiled_code import compiled_text

        if backend is None:
            backend = "cpu" if kind == "asm" else "cuda"
        text = self.source(*dtypes_or_arrays, backend=backend, path=path, ndim=ndim, **kwargs)
        arch = default_arch()
        if backend == "cuda" and inspection.cuda_available():
            from jiter_magic.runtime.backends.cuda import current_device, device_arch

            arch = device_arch(current_device())
        return compiled_text(kind, text, backend, arch, self.code)

    def benchmark(self, *inputs: object, reference: Callable[..., Any] | None = None, warmup: int = 3,
                  repeat: int = 25, **kwargs: Any) -> BenchmarkResult:
        """Time a call on these inputs (CUDA events on a GPU, perf_counter on the host; median of
        `repeat` after `warmup`): its time, GB/s and fraction of a same-sized device copy measured
        alongside, and with `reference` (a callable taking the same inputs) the speedup over it.
        `out=` and keyword extras go to the call. See `jiter_magic.benchmark`."""
        from jiter_magic.tools.benchmarking import benchmark

        return benchmark(self, *inputs, reference=reference, warmup=warmup, repeat=repeat, **kwargs)

    def compile(self, *dtypes: str, backend: str | None = None, path: str = CONTIGUOUS,
                ndim: int = 1) -> Specialization:
        """Build a specialization now (for the given input dtypes, default all float32), so errors show early."""
        from jiter_magic.runtime import inspection

        if backend is None:
            backend = self.backend if self.backend != "auto" else ("cuda" if inspection.cuda_available() else "cpu")
        if backend not in inspection.BACKEND_NAMES:
            raise InvalidArgumentError(f"backend must be 'cuda' or 'cpu', got {backend!r}")
        spec = inspection.named_spec(self._dispatch, dtypes, backend, path, ndim)
        for existing in self.specializations:
            if existing.spec == spec and existing.backend == backend:
                return existing
        if backend == "cpu":
            self._loader.launcher(spec, -1)
        elif inspection.cuda_available():
            from jiter_magic.runtime.backends.cuda import current_device

            self._loader.launcher(spec, current_device())
        else:
            return self._loader.build_without_device(spec)
        return self.specializations[-1]


def _rebuild(code_string: str, num_outputs: int | None, kwargs: dict[str, object], backend: str,
             backward: str | None = None) -> JitFunction:
    """The same function, created again from its pickled state. Pickles made before `_unpickle`
    name this function, with four arguments (before backwards were pickled) or five: the state has
    no version, so these names and their arguments stay as they are."""
    fn = JitFunction(code_string, num_outputs, kwargs)
    fn.backend = backend
    if backward is not None:
        fn.def_backward(backward)
    return fn


def _unpickle(code_string: str, num_outputs: int | None, kwargs: dict[str, object], backend: str,
              backward: str | None = None) -> JitFunction:
    """Unpickling, which a Dask worker does for every task: a function unpickled before from an
    equal state (code string, outputs, kwargs, backend and backward, compared as pickled bytes) is
    that one again, parsing, binding and planning once, not once a task; unless it was changed
    since (`def_backward`, its backend, its kwargs), when a new one is made from the state. So an
    unpickled function always is the pickled one."""
    state = pickle.dumps((code_string, num_outputs, kwargs, backend, backward))
    return RUNTIME.part(UnpickledFunctions).reuse_or_make(
        state, lambda: _rebuild(code_string, num_outputs, kwargs, backend, backward), JitFunction._now)
