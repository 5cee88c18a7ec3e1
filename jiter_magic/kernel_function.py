"""`KernelFunction`: what every jitted function is, whatever its kind of operation.

An elementwise function (function.py) and a reduction (reduction.py) differ in how a call is
bound, planned and launched, and in the form their gradient takes; their call paths keep one
state (runtime/calls.py) and load kernels through one loader. Everything a user reads off a
function or asks of it beyond a call is written here, once: its specializations and warnings,
listeners, counts, backend, gradient, compiling ahead of a call, compiled code, benchmarking and
the pickled state's identity.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from jiter_magic import settings
from jiter_magic.errors import ArgumentTypeError, BindError, InvalidArgumentError, JiterError
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.calls import CallCounts, FunctionCalls
from jiter_magic.runtime.unpickled import UnpickledFunctions
from jiter_magic.state import RUNTIME

if TYPE_CHECKING:
    from jiter_magic.tools.results import BenchmarkResult


def for_caller(error: JiterError) -> JiterError:
    """A mistake in a user's call or code string, to raise again where the user's line called:
    its message says all, so its traceback starts there. JITER_MAGIC_DEBUG=1 keeps every frame, each
    once: the traceback loses its first entry, the frame that caught the error, which raising it again
    puts back."""
    tb = error.__traceback__
    return error.with_traceback(tb.tb_next if settings.DEBUG.get() and tb is not None else None)


def checked_kwargs(kwargs: object, what: str) -> dict[str, object]:
    """The extras' defaults of a function being made (`what` names the maker): a dict by name, as
    keyword arguments give them; a pickle made by hand or damaged may hold anything."""
    if not isinstance(kwargs, dict) or not all(isinstance(name, str) for name in kwargs):
        raise ArgumentTypeError(f"{what}: the extras' defaults must be a dict of names to numbers, got "
                                f"{type(kwargs).__name__}: {kwargs!r} (a pickle not made by jiter_magic, or damaged?)")
    return dict(kwargs)


def autograd_tracks(inputs: tuple) -> bool:
    """Whether autograd tracks an input (only torch tensors have the flag; torch is then imported)."""
    if not any(getattr(x, "requires_grad", False) for x in inputs):
        return False
    from jiter_magic.arrays.reduce_autograd import requires_grad

    return requires_grad(inputs)


def unpickled(state: tuple, rebuild: Callable[..., Any]) -> Any:
    """Unpickling, which a Dask worker does for every task: a function unpickled before from an
    equal state (compared as pickled bytes) is that one again, parsing, binding and planning once,
    not once a task; unless it was changed since (`def_backward`, its backend, its kwargs), when
    `rebuild(*state)` makes a new one. So an unpickled function always is the pickled one."""
    return RUNTIME.part(UnpickledFunctions).reuse_or_make(pickle.dumps(state), lambda: rebuild(*state),
                                                          KernelFunction._now)


class KernelFunction:
    """The common face of jitted functions; subclasses set `name`, `code`, `kwargs`, `binding`
    and `_calls`, and say what their backward takes (`_backward_takes`)."""

    # The kind of operation ('elementwise', 'reduction'): what the integrations choose a kind's
    # torch operator, Dask and DTensor strategies by, without importing the kinds' modules.
    operation: ClassVar[str]
    name: str
    code: str  # the user's code string
    kwargs: dict[str, object]  # the extras' default values
    binding: Any
    _calls: FunctionCalls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @property
    def num_inputs(self) -> int:
        """How many arrays a call takes."""
        return int(self.binding.num_inputs)

    # The gradient: always an elementwise functor, whatever the forward's kind.

    @property
    def backward(self) -> Any:
        """The jitted gradient given by `def_backward` (a `JitFunction`), or None."""
        return self._calls.backward

    def _backward_takes(self) -> tuple[int, str]:
        """How many array parameters the backward takes after the forward's inputs, and what they are."""
        raise NotImplementedError

    def _new_backward(self, code_string: str) -> KernelFunction:
        """The elementwise function of a backward's code string, with this function's extras."""
        raise NotImplementedError

    def _set_backward(self, code_string: str | None) -> None:
        """`def_backward`'s work: the backward checked against what the forward's kind passes it."""
        if code_string is None:
            self._calls.backward = None
            return
        try:
            backward = self._new_backward(code_string)
        except BindError as exc:
            raise BindError(f"the backward of {self.name}: {exc}") from None
        more, what = self._backward_takes()
        expected = self.num_inputs + more
        if backward.num_inputs != expected:
            raise BindError(
                f"the backward of {self.name} must take its {self.num_inputs} input(s) "
                f"{list(self.binding.input_names)}, then {what}: {expected} array parameters besides the extras "
                f"{list(self.kwargs)}; {backward.name} takes {backward.num_inputs} "
                f"{list(backward.binding.input_names)}")
        backward.backend = self.backend
        self._calls.backward = backward

    # Pickled by what made it and its backend and backward, never by loaded kernels: another
    # process rebuilds it, and its first call finds its kernels in the disk cache (or compiles
    # them). So jitted functions travel to worker processes. `_unpickle` is the kind's module's
    # function of that name (pickles name it), `_pickled_state` its arguments.
    _unpickle: ClassVar[Callable[..., Any]]

    def __reduce__(self) -> tuple:
        return self._unpickle, self._pickled_state()

    def _pickled_state(self) -> tuple:
        raise NotImplementedError

    def _now(self) -> bytes:
        """What this function is now, as bytes: its pickled state, and what a change after it was
        made could alter beyond that state (the kwargs its calls use, its backward's own state)."""
        backward = None if self._calls.backward is None else self._calls.backward._now()
        return pickle.dumps((self._pickled_state(), self.kwargs, backward))

    # Where it runs, what it built, how its calls went.

    @property
    def backend(self) -> str:
        """'auto' (by where the inputs live), 'cuda' or 'cpu' (refuse inputs living elsewhere)."""
        return self._calls.backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._calls.set_backend(value)
        if self._calls.backward is not None:  # a jitted backward (a scan's is a Python callable)
            self._calls.backward.backend = value

    @property
    def specializations(self) -> list[Specialization]:
        """Every specialization (a kernel for some dtypes, layout and device) built for this
        function, in order."""
        return self._calls.loader.specializations

    @property
    def warnings(self) -> list[str]:
        """Compiler warnings of the specializations built so far."""
        return self._calls.loader.warnings

    @property
    def call_counts(self) -> CallCounts:
        """How many calls so far took the hot path (their plan found from the fast key, the C
        call path's or Python's) and how many the general path (described argument by argument,
        planned on a miss): a copy, taken now."""
        counts = self._calls.counts
        return CallCounts(counts.hot, counts.general)

    def memory_counts(self, specialization: Specialization) -> tuple[int, int]:
        """(calls served from memory, plans made) for one specialization, since the cache was cleared."""
        return self._calls.plans.counts(specialization.spec)

    def add_listener(self, callback: Callable[[Specialization], None]) -> None:
        """Call `callback(specialization)` whenever a new specialization is built."""
        self._calls.loader.listeners.append(callback)

    def remove_listener(self, callback: Callable[[Specialization], None]) -> None:
        if callback in self._calls.loader.listeners:
            self._calls.loader.listeners.remove(callback)

    def add_start_listener(self, callback: Callable[[Any, int], None]) -> None:
        """Call `callback(spec, device)` when a call starts building a specialization (device -1: the
        host), before it compiles or reads the disk cache; the panel says "compiling" with it."""
        self._calls.loader.start_listeners.append(callback)

    def remove_start_listener(self, callback: Callable[[Any, int], None]) -> None:
        if callback in self._calls.loader.start_listeners:
            self._calls.loader.start_listeners.remove(callback)

    def describe_build(self, spec: Any, device: int) -> str:
        """'name #2 for (dtypes), path on the CPU (new ...; #0 is ...)': a build about to start,
        as the notebook tells of it."""
        from jiter_magic.runtime.notice import what_is_built, why_new

        family, earlier = self._calls.loader.family, [s.spec for s in self.specializations]
        return what_is_built(self.name, family, spec, device, len(earlier)) + why_new(family, spec, earlier)

    # Ahead of a call: compiling, the compiled code, timing.

    def _chosen_backend(self, backend: str | None) -> str:
        """`backend` checked, or by default the function's, or where kernels can run here."""
        from jiter_magic.runtime import inspection

        if backend is None:
            backend = self.backend if self.backend != "auto" else ("cuda" if inspection.cuda_available() else "cpu")
        if backend not in inspection.BACKEND_NAMES:
            raise InvalidArgumentError(f"backend must be 'cuda' or 'cpu', got {backend!r}")
        return backend

    def _compile_spec(self, spec: Any, backend: str) -> Specialization:
        """Build `spec` now on `backend` (or find it built): loaded where it can run, compiled for
        the default architecture where no GPU is present."""
        from jiter_magic.runtime import inspection

        for existing in self.specializations:
            if existing.spec == spec and existing.backend == backend:
                return existing
        loader = self._calls.loader
        if backend == "cpu":
            loader.launcher(spec, -1)
        elif inspection.cuda_available():
            from jiter_magic.runtime.backends.cuda import current_device

            loader.launcher(spec, current_device())
        else:
            return loader.build_without_device(spec)
        return self.specializations[-1]

    def _compiled_text(self, kind: str, source: str, backend: str) -> str:
        """The compiled code of a generated `source`: PTX or SASS for this machine's GPU (or the
        default architecture), or the host's assembly."""
        from jiter_magic.compilers.nvrtc_archs import default_arch
        from jiter_magic.runtime import inspection
        from jiter_magic.runtime.compiled_code import compiled_text

        arch = default_arch()
        if backend == "cuda" and inspection.cuda_available():
            from jiter_magic.runtime.backends.cuda import current_device, device_arch

            arch = device_arch(current_device())
        return compiled_text(kind, source, backend, arch, self.code)

    def benchmark(self, *inputs: object, reference: Callable[..., Any] | None = None, warmup: int = 3,
                  repeat: int = 25, **kwargs: Any) -> BenchmarkResult:
        """Time a call on these inputs (CUDA events on a GPU, perf_counter on the host; median of
        `repeat` after `warmup`): its time, GB/s and fraction of a same-sized device copy measured
        alongside, and with `reference` (a callable taking the same inputs) the speedup over it.
        Keywords go to the call. See `jiter_magic.benchmark`."""
        from jiter_magic.tools.benchmarking import benchmark

        return benchmark(self, *inputs, reference=reference, warmup=warmup, repeat=repeat, **kwargs)
