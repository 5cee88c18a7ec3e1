"""`JitFunction`: the callable returned by `create_jit_fn`, a facade over the elementwise call path.

Parsing and binding happen once, here; a call goes to the `Dispatcher` (runtime/dispatch.py),
kernels are built and loaded by the `KernelLoader` (runtime/loader.py), and inspection without a
call lives in runtime/inspection.py. What every kind of function shares is `KernelFunction`'s.
"""
from __future__ import annotations

import pickle
import weakref
from typing import Any

from jiter_magic.arrays import tracing
from jiter_magic.displayed import PanelDisplay
from jiter_magic.errors import JiterError
from jiter_magic.frontend.bind import bind
from jiter_magic.frontend.parse import parse_functor
from jiter_magic.frontend.signature import LazySignature, docstring_of
from jiter_magic.kernel_function import KernelFunction, checked_kwargs, for_caller, unpickled
from jiter_magic.kernels.families import ELEMENTWISE
from jiter_magic.planning.spec import CONTIGUOUS
from jiter_magic.planning.values import scalar_value
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.dispatch import Dispatcher
from jiter_magic.runtime.loader import KernelLoader


def rebuild(code_string: str, num_outputs: int | None, kwargs: dict[str, object], backend: str = "auto",
            backward: str | None = None) -> JitFunction:
    """The same function, created again from its pickled state (and, for torch.compile, from its
    `recipe`). Pickles made before `_unpickle` name this function `_rebuild`, with four arguments
    (before backwards were pickled) or five: the state has no version, so that name and these
    arguments stay as they are."""
    fn = JitFunction(code_string, num_outputs, kwargs)
    fn.backend = backend
    if backward is not None:
        fn.def_backward(backward)
    return fn


def _unpickle(code_string: str, num_outputs: int | None, kwargs: dict[str, object], backend: str,
              backward: str | None = None) -> JitFunction:
    """Unpickling (`kernel_function.unpickled`) of the state `_pickled_state` gives."""
    return unpickled((code_string, num_outputs, kwargs, backend, backward), rebuild)


class JitFunction(KernelFunction, PanelDisplay):
    """A jitted elementwise function; call it like a Python function on arrays."""

    __signature__ = LazySignature()
    operation = "elementwise"
    _calls: Dispatcher
    _unpickle = staticmethod(_unpickle)

    def __init__(self, code_string: str, num_outputs: int | None, kwargs: dict[str, object]):
        kwargs = checked_kwargs(kwargs, "a jitted function")
        self._made_from = (code_string, num_outputs, kwargs)  # what pickling rebuilds it from
        self.functor = parse_functor(code_string)
        self.code = self.functor.code
        self.name = self.functor.name
        self.binding = bind(self.functor, list(kwargs), num_outputs)
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        # What makes it, as bytes: torch.compile names the function's operator by them (a constant
        # to Dynamo, where the kwargs' values may be symbolic floats), and the operator's module
        # makes it again by unpickling them (its maker and what it is made of), so no integration
        # imports a kind's module.
        self.recipe = pickle.dumps((rebuild, (code_string, num_outputs, self.kwargs)))
        self.num_outputs = self.binding.num_outputs
        self.multi_output = num_outputs is not None
        self.__name__ = self.__qualname__ = self.functor.name
        self.__doc__ = docstring_of(self.binding, self.kwargs)
        # One output comes back as the array itself, from the multi-output form too (as torch's does).
        self._calls = Dispatcher(self.functor.name, KernelLoader(self.binding, ELEMENTWISE), self.kwargs,
                                 self.num_outputs == 1)
        self._calls.owner = weakref.ref(self)
        self.run = self._calls.call  # a call without the facade's tracing and traceback handling

    def __call__(self, *args: object, out: object = None, **kwargs: object) -> Any:
        if tracing.compiling():  # torch.compile / torch.export: the call becomes one torch operator
            return tracing.traced_call(self, args, out, kwargs)  # (outside the try: Dynamo traces no handler)
        # A try costs nothing until something raises (Python 3.11+): the hot path stays as it was.
        try:
            return self.run(args, out, kwargs)
        except JiterError as error:
            # A mistake in the call's arguments: what was wrong is all in the message, so the
            # traceback drops the frames that found it and starts here, under the caller's lines.
            # `from` its own cause: a deliberate cause stays, an implicit context is not shown.
            # Other exceptions, a bug of jiter_magic's own among them, keep every frame.
            raise for_caller(error) from error.__cause__  # JITER_MAGIC_DEBUG=1 shows all frames

    def _pickled_state(self) -> tuple[str, int | None, dict[str, object], str, str | None]:
        code_string, num_outputs, kwargs = self._made_from
        backward = None if self.backward is None else self.backward._made_from[0]
        return code_string, num_outputs, kwargs, self.backend, backward

    def def_backward(self, code_string: str | None) -> JitFunction:
        """Give the function its gradient as another functor, for torch autograd; returns `self`.

        The backward functor takes the forward's inputs, then its extras (bound by name, with the
        call's values), then one gradient a forward output, and writes one gradient an input
        through non-const references, e.g. for `a * x + y`:
        `template <typename T> void axpy_bwd(T x, T y, T a, T g, T& gx, T& gy) { gx = a * g; gy = g; }`.
        Gradients are summed over the dimensions a call broadcast an input along and cast to its
        dtype; inputs that do not require grad get None. `None` removes the backward again."""
        self._set_backward(code_string)
        return self

    def _new_backward(self, code_string: str) -> JitFunction:
        return JitFunction(code_string, self.num_inputs, dict(self._made_from[2]))

    def _backward_takes(self) -> tuple[int, str]:
        return self.num_outputs, f"one gradient for each of its {self.num_outputs} output(s)"

    def __repr__(self) -> str:
        return f"<jiter_magic.JitFunction {self.functor.signature}>"

    def source(self, *dtypes_or_arrays: object, backend: str = "cuda", path: str = CONTIGUOUS, ndim: int = 1,
               **kwargs: object) -> str:
        """The generated source of one specialization (no GPU, no compiler needed).

        Give dtype names (dense inputs; `path` and `ndim` pick the loop), or example inputs as
        for a call (arrays of any library, Python numbers, kwargs overrides): their dtypes and
        layout then decide, exactly as a call on them would.
        """
        from jiter_magic.runtime import inspection

        return inspection.source(self._calls, dtypes_or_arrays, backend, path, ndim, kwargs)

    def inspect(self, *dtypes_or_arrays: object, kind: str = "ptx", backend: str | None = None,
                path: str = CONTIGUOUS, ndim: int = 1, **kwargs: object) -> str:
        """The compiled code of one specialization as text (no GPU needed): kind='ptx' or 'sass'
        for CUDA, 'asm' for the CPU; arguments as `source` takes them. Lines of the code string
        the compiler's line tables point at are shown as comments before their instructions."""
        if backend is None:
            backend = "cpu" if kind == "asm" else "cuda"
        text = self.source(*dtypes_or_arrays, backend=backend, path=path, ndim=ndim, **kwargs)
        return self._compiled_text(kind, text, backend)

    def compile(self, *dtypes: str, backend: str | None = None, path: str = CONTIGUOUS,
                ndim: int = 1) -> Specialization:
        """Build a specialization now (for the given input dtypes, default all float32), so errors show early."""
        from jiter_magic.runtime import inspection

        backend = self._chosen_backend(backend)
        return self._compile_spec(inspection.named_spec(self._calls, dtypes, backend, path, ndim), backend)


_rebuild = rebuild  # the name older pickles call (see `rebuild`)
