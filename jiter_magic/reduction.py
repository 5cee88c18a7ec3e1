"""`ReductionFunction`: the callable `create_reduction_fn` returns, a facade over the reduction call path.

Parsing and binding the named functions happen once, here; a call goes to runtime/reduce_call.py,
which plans it and launches the function's kernels (loaded as every function's are, through
runtime/reduce_calls.py's state). What every kind of function shares is `KernelFunction`'s.
"""
from __future__ import annotations

import pickle
from typing import Any

import jiter_magic.settings as settings
from jiter_magic.arrays import tracing
from jiter_magic.arrays.base import Delegated, run_delegated
from jiter_magic.displayed import PanelDisplay
from jiter_magic.errors import BindError, InvalidArgumentError, JiterError
from jiter_magic.frontend.reduction import bind_reduction
from jiter_magic.function import JitFunction
from jiter_magic.kernel_function import KernelFunction, autograd_tracks, checked_kwargs
from jiter_magic.kernels.reduce_family import REDUCTION
from jiter_magic.planning.reduce_spec import CUDA_PATHS, GRID, HOST, HOST_PATHS, ReductionSpec, check_identity
from jiter_magic.planning.values import scalar_value
from jiter_magic.runtime import reduce_call, reduce_hot
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.reduce_call import ValuesIndices
from jiter_magic.runtime.reduce_calls import ReductionCalls
from jiter_magic.runtime.unpickled import UnpickledFunctions
from jiter_magic.state import RUNTIME

__all__ = ["ReductionFunction", "ValuesIndices"]


class ReductionFunction(KernelFunction, PanelDisplay):
    """A jitted reduction; call it as torch.sum: `fn(*inputs, dim=None, keepdim=False, dtype=None, out=None)`.
    One with indices (`create_multi_output_reduction_fn`) returns `ValuesIndices(values, indices)`
    and takes `out=(values, indices)`, as torch.max(x, dim) does."""

    operation = "reduction"
    _calls: ReductionCalls

    def __init__(self, code_string: str, identity: object, map_name: str | None, combine: object,
                 finalize: object, kwargs: dict[str, object], indexed: bool = False) -> None:
        check_identity(identity)
        kwargs = checked_kwargs(kwargs, "a reduction")
        # What made it: pickling rebuilds it from this, torch.compile names its operator by it.
        self._made_from = (code_string, identity, map_name, combine, finalize, dict(kwargs), indexed)
        self.binding = bind_reduction(code_string, map_name, combine, finalize, list(kwargs), indexed)
        self.identity = identity
        self.code = code_string
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        self.name = self.__name__ = self.__qualname__ = self.binding.name
        self._calls = ReductionCalls(self.binding)
        self.recipe = pickle.dumps((rebuild, (*self._made_from[:5], self.kwargs, indexed)))  # as JitFunction.recipe

    def __call__(self, *inputs: object, dim: object = None, keepdim: bool = False, dtype: object = None,
                 out: object = None, **kwargs: object) -> Any:
        if tracing.compiling():  # torch.compile / torch.export: the call becomes one torch operator
            return tracing.traced_reduction(self, inputs, {"dim": dim, "keepdim": keepdim, "dtype": dtype, "out": out},
                                            kwargs)
        if out is None and not kwargs:  # a call keyed like one before runs in C (runtime/reduce_hot.py)
            found = reduce_hot.hot_call(self._calls, inputs, dim, keepdim, dtype)
            if found is not None:
                return found
        options = {"dim": dim, "keepdim": keepdim, "dtype": dtype, "out": out}
        try:
            return self.run(inputs, options, kwargs)
        except JiterError as error:
            # A mistake in the call's arguments: its message says all, so the traceback starts here,
            # under the caller's line, as JitFunction's does (JITER_MAGIC_DEBUG=1 shows every frame).
            if settings.DEBUG.get():
                raise
            raise error.with_traceback(None) from error.__cause__

    def eager(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call on real arrays, its C hot path first, without the facade's tracing check and
        traceback handling: what a torch operator's kernel runs (a call through the facade there
        would ask Dynamo's state eagerly, which a compiled frame may guard on)."""
        if options["out"] is None and not kwargs:
            found = reduce_hot.hot_call(self._calls, inputs, options["dim"], options["keepdim"], options["dtype"])
            if found is not None:
                return found
        return self.run(inputs, options, kwargs)

    def run(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call without the facade's tracing and traceback handling: `options` holds dim,
        keepdim, dtype and out."""
        try:
            if self.backward is not None and autograd_tracks(inputs):
                return self._tracked_call(inputs, options, kwargs)
            return reduce_call.run(self._calls, self.identity, self.kwargs, inputs, options, kwargs)
        except Delegated as delegated:  # Dask arrays, DTensors, traced tensors: their integration runs the call
            return run_delegated(delegated.adapter, self, inputs, options, kwargs)

    def _tracked_call(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call whose result autograd tracks through the backward (arrays/reduce_autograd.py)."""
        from jiter_magic.arrays.reduce_autograd import tracked_call

        def compute(detached: tuple) -> Any:
            return reduce_call.run(self._calls, self.identity, self.kwargs, detached, options, kwargs)

        return tracked_call(self.name, compute, inputs, options, {**self.kwargs, **kwargs}, self.backward)

    def def_backward(self, code_string: str | None) -> ReductionFunction:
        """Give the reduction its gradient as an elementwise functor, for torch autograd; returns `self`.

        The backward takes the forward's inputs, then the result and the incoming gradient (both
        with every reduced dim kept as size 1, so they broadcast against the inputs), with the
        map's extras bound by name (wherever they are declared), and writes one gradient an input
        through non-const references, e.g. for a sum of squares:
        `template <typename T> void sq_bwd(T x, T result, T g, T& gx) { gx = 2 * x * g; }`.
        Of a reduction with indices it runs on the element each result was taken from alone (its
        inputs, the value, the value's gradient), every other element's gradient being 0, as
        torch.max's: `template <typename T> void max_bwd(T x, T value, T g, T& gx) { gx = g; }`.
        Gradients are summed over the dims a call broadcast an input along and cast to its dtype;
        inputs that do not require grad get None. `None` removes the backward again."""
        self._set_backward(code_string)
        return self

    def _new_backward(self, code_string: str) -> JitFunction:
        return JitFunction(code_string, self.num_inputs, dict(self._made_from[5]))

    def _backward_takes(self) -> tuple[int, str]:
        return 2, "the result, then its gradient"

    def __reduce__(self) -> tuple:
        """Pickle by what made it (code string, identity, the named functions, kwargs, backward)
        and its backend, never by loaded kernels: another process rebuilds it and finds its
        kernels in the disk cache, as `JitFunction` does."""
        return _unpickle, self._pickled_state()

    def _pickled_state(self) -> tuple:
        return (*self._made_from, None if self.backward is None else self.backward._made_from[0], self.backend)

    @property
    def num_outputs(self) -> int:
        """1, or 2 for a reduction with indices (its values and their indices)."""
        return 2 if self.binding.indexed else 1

    def source(self, *dtypes: str, path: str = HOST, output: str | None = None, kept_ndim: int = 1,
               reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> str:
        """The generated source of one kernel (no GPU, no compiler needed): input dtype names (all
        float32 by default), the kernel shape (`path`: 'host', or a CUDA one of
        `jiter_magic.kernels.reduce_cuda`) and its loop dims; kwargs override the extras' defaults."""
        spec = self.spec(*dtypes, path=path, output=output, kept_ndim=kept_ndim, reduced_ndim=reduced_ndim, vec=vec,
                         **kwargs)
        return REDUCTION.render(self.binding, spec, _backend_of(spec.path))

    def spec(self, *dtypes: str, path: str = HOST, output: str | None = None, kept_ndim: int = 1,
             reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> ReductionSpec:
        """The spec of one kernel, as `source` takes it."""
        from jiter_magic.planning.reduce_spec import accumulate_dtype, identity_literal, result_dtype
        from jiter_magic.planning.values import scalar_kind

        inputs = tuple(dtypes) or ("float32",) * self.num_inputs
        if len(inputs) != self.num_inputs:
            raise BindError(f"{self.name} takes {self.num_inputs} input(s) {list(self.binding.input_names)}, "
                            f"got {len(inputs)} dtypes")
        result = result_dtype(inputs[0], output, self.binding.indexed)
        accumulate = accumulate_dtype(result)
        extras = reduce_call.extra_values(self.binding, self.kwargs, kwargs)
        if path not in HOST_PATHS + CUDA_PATHS:
            raise InvalidArgumentError(f"path must be one of {list(HOST_PATHS + CUDA_PATHS)}, got {path!r}")
        return ReductionSpec(inputs, result, accumulate, tuple(scalar_kind(v) for v in extras),
                             identity_literal(self.identity, accumulate), path=path, kept_ndim=kept_ndim,
                             reduced_ndim=reduced_ndim, vec=vec, indexed=self.binding.indexed)

    def compile(self, *dtypes: str, backend: str | None = None, path: str | None = None, output: str | None = None,
                kept_ndim: int = 1, reduced_ndim: int = 1, vec: int = 1) -> Specialization:
        """Build one kernel now (input dtype names, all float32 by default), so errors show early:
        on `backend` ('cpu' or 'cuda'; by default the function's, or where kernels run here) with its
        kernel shape `path` (by default 'host' on the CPU, 'grid' on CUDA) and loop dims."""
        if path is None:
            path = HOST if self._chosen_backend(backend) == "cpu" else GRID
        elif backend is not None and self._chosen_backend(backend) != _backend_of(path):
            raise InvalidArgumentError(f"path={path!r} is a {_backend_of(path)} kernel shape, not one of "
                                       f"backend={backend!r}")
        spec = self.spec(*dtypes, path=path, output=output, kept_ndim=kept_ndim, reduced_ndim=reduced_ndim, vec=vec)
        return self._compile_spec(spec, _backend_of(path))

    def __repr__(self) -> str:
        return f"<jiter_magic.ReductionFunction {self.name} combine={self.binding.combine.name}>"

    def inspect(self, *dtypes: str, kind: str = "ptx", path: str | None = None, output: str | None = None,
                kept_ndim: int = 1, reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> str:
        """The compiled code of one kernel as text (no GPU needed): kind='ptx' or 'sass' of a CUDA
        kernel shape (`path`, 'grid' by default), compiled by NVRTC, or kind='asm' of a host one
        ('host' by default); other arguments as `source` takes them. The code string's lines the
        compiler's line tables point at are shown as comments before their instructions."""
        path = path if path is not None else (HOST if kind == "asm" else GRID)
        backend = _backend_of(path)
        if kind in ("ptx", "sass") and backend == "cpu":
            raise InvalidArgumentError(f"kind={kind!r} is CUDA code: pass a CUDA path, one of {list(CUDA_PATHS)} "
                                       f"(for the host kernel path={path!r}, kind='asm')")
        if kind == "asm" and backend == "cuda":
            raise InvalidArgumentError(f"kind='asm' is a host kernel's assembly: pass path='host' or 'host_columns' "
                                       f"(for path={path!r}, kind='ptx' or kind='sass')")
        text = self.source(*dtypes, path=path, output=output, kept_ndim=kept_ndim, reduced_ndim=reduced_ndim,
                           vec=vec, **kwargs)
        return self._compiled_text(kind, text, backend)


def _backend_of(path: str) -> str:
    """The backend a reduction kernel shape runs on."""
    return "cpu" if path in HOST_PATHS else "cuda"


def rebuild(code_string: str, identity: object, map_name: str | None, combine: object, finalize: object,
             kwargs: dict[str, object], indexed: bool, backward: str | None = None, backend: str = "auto", *,
             kind: type[ReductionFunction] | None = None) -> ReductionFunction:
    """The same reduction, made again from its pickled state (pickles made before reductions had a
    backend end with the backward), or for torch.compile from its `recipe`; `kind`: a subclass to
    make (a notebook cell's reduction)."""
    fn = (kind or ReductionFunction)(code_string, identity, map_name, combine, finalize, kwargs, indexed)
    fn.backend = backend
    if backward is not None:
        fn.def_backward(backward)
    return fn


def _unpickle(*state: Any) -> ReductionFunction:
    """Unpickling (a Dask worker does it for every task): the reduction rebuilt before from an
    equal state, unless changed since, as `jiter_magic.function._unpickle` does."""
    return RUNTIME.part(UnpickledFunctions).reuse_or_make(
        pickle.dumps(state), lambda: rebuild(*state), ReductionFunction._now)
