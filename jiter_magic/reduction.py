"""`ReductionFunction`: the callable `create_reduction_fn` returns, a facade over the reduction call path.

Parsing and binding the named functions happen once, here; a call goes to runtime/reduce_call.py,
which plans it and launches the function's kernels (loaded as every function's are, through
runtime/reduce_calls.py's state). What it shares with a scan is `CombineFunction`'s, what every
kind of function shares `KernelFunction`'s.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jiter_magic.arrays import tracing
from jiter_magic.combine_function import CombineFunction
from jiter_magic.errors import InvalidArgumentError, JiterError
from jiter_magic.frontend.reduction import bind_reduction
from jiter_magic.function import JitFunction
from jiter_magic.kernel_function import for_caller, unpickled
from jiter_magic.kernels.reduce_family import REDUCTION
from jiter_magic.planning import reduce_spec
from jiter_magic.planning.reduce_spec import HOST, ReductionSpec, check_identity, identity_literal
from jiter_magic.runtime import reduce_call, reduce_hot
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.reduce_call import ValuesIndices
from jiter_magic.runtime.reduce_calls import ReductionCalls

__all__ = ["ReductionFunction", "ValuesIndices"]


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
    """Unpickling: the reduction rebuilt before from an equal state, unless changed since."""
    return unpickled(state, rebuild)


def _hot_call(calls: ReductionCalls, inputs: tuple, options: dict[str, Any]) -> Any:
    """The C hot path's result (runtime/reduce_hot.py), or None."""
    return reduce_hot.hot_call(calls, inputs, options["dim"], options["keepdim"], options["dtype"])


class ReductionFunction(CombineFunction):
    """A jitted reduction; call it as torch.sum: `fn(*inputs, dim=None, keepdim=False, dtype=None, out=None)`.
    One with indices (`create_multi_output_reduction_fn`) returns `ValuesIndices(values, indices)`
    and takes `out=(values, indices)`, as torch.max(x, dim) does."""

    operation = "reduction"
    _bind = staticmethod(bind_reduction)
    _family = REDUCTION
    _paths = (reduce_spec.HOST_PATHS, reduce_spec.CUDA_PATHS)
    _default_paths = {"cpu": HOST, "cuda": reduce_spec.GRID}
    _run = staticmethod(reduce_call.run)
    _hot = staticmethod(_hot_call)
    _rebuild = staticmethod(rebuild)
    _unpickle = staticmethod(_unpickle)

    def __init__(self, code_string: str, identity: object, map_name: str | None, combine: object,
                 finalize: object, kwargs: dict[str, object], indexed: bool = False) -> None:
        check_identity(identity)  # before anything else, as it always was: a reduction's identity is one number
        super().__init__(code_string, identity, map_name, combine, finalize, kwargs, indexed)

    def __call__(self, *inputs: object, dim: object = None, keepdim: bool = False, dtype: object = None,
                 out: object = None, **kwargs: object) -> Any:
        if tracing.compiling():  # torch.compile / torch.export: the call becomes one torch operator
            return tracing.traced_reduction(self, inputs, {"dim": dim, "keepdim": keepdim, "dtype": dtype, "out": out},
                                            kwargs)
        if out is None and not kwargs:  # as `eager`, inline: the hot path makes no frame or dict more than it must
            found = reduce_hot.hot_call(self._calls, inputs, dim, keepdim, dtype)
            if found is not None:
                return found
        options = {"dim": dim, "keepdim": keepdim, "dtype": dtype, "out": out}
        try:
            return self.run(inputs, options, kwargs)
        except JiterError as error:
            # A mistake in the call's arguments: its message says all, so the traceback starts here,
            # under the caller's line, as JitFunction's does (JITER_MAGIC_DEBUG=1 shows every frame).
            raise for_caller(error) from error.__cause__

    def _tracked_call(self, compute: Callable[[tuple], Any], inputs: tuple, options: dict[str, Any],
                      kwargs: dict[str, object]) -> Any:
        """Through the jitted backward (arrays/reduce_autograd.py)."""
        from jiter_magic.arrays.reduce_autograd import tracked_call

        return tracked_call(self.name, compute, inputs, options, kwargs, self.backward)

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

    def _pickled_state(self) -> tuple:
        return (*self._made_from, None if self.backward is None else self.backward._made_from[0], self.backend)

    def spec(self, *dtypes: str, path: str = HOST, output: str | None = None, kept_ndim: int = 1,
             reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> ReductionSpec:
        """The spec of one kernel, as `source` takes it: input dtype names, the kernel shape (`path`:
        'host', or a CUDA one of `jiter_magic.kernels.reduce_cuda`) and its loop dims."""
        inputs, result, accumulate, extras = self._spec_fields(dtypes, path, output, kwargs)
        return ReductionSpec(inputs, result, accumulate, extras, identity_literal(self.identity, accumulate),
                             path=path, kept_ndim=kept_ndim, reduced_ndim=reduced_ndim, vec=vec,
                             indexed=self.binding.indexed)

    def compile(self, *dtypes: str, backend: str | None = None, path: str | None = None,  # type: ignore[override]
                output: str | None = None, kept_ndim: int = 1, reduced_ndim: int = 1, vec: int = 1) -> Specialization:
        """As `CombineFunction.compile`, the spec's fields named: a reduction's build takes no extras
        (a misspelled keyword stays a TypeError)."""
        return super().compile(*dtypes, backend=backend, path=path, output=output, kept_ndim=kept_ndim,
                               reduced_ndim=reduced_ndim, vec=vec)

    def _check_inspected(self, kind: str, path: str, backend: str) -> None:
        if kind in ("ptx", "sass") and backend == "cpu":
            raise InvalidArgumentError(f"kind={kind!r} is CUDA code: pass a CUDA path, one of {list(self._paths[1])} "
                                       f"(for the host kernel path={path!r}, kind='asm')")
        if kind == "asm" and backend == "cuda":
            raise InvalidArgumentError(f"kind='asm' is a host kernel's assembly: pass path='host' or 'host_columns' "
                                       f"(for path={path!r}, kind='ptx' or kind='sass')")

    def __repr__(self) -> str:
        return f"<jiter_magic.ReductionFunction {self.name} combine={self.binding.combine.name}>"
