"""`ScanFunction`: the callable `create_scan_fn` returns, a facade over the scan call path.

A scan is the third kind of jitted function on the shared stages: its binding extends a
reduction's (frontend/scan.py), its call state is a `ReductionCalls` loading the scan family of
kernels, its call is runtime/scan_call.py; what every kind of function shares (specializations,
listeners, counts, backend, compiled code, benchmarking) is `KernelFunction`'s.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from jiter_magic.arrays import tracing
from jiter_magic.arrays.base import Delegated, run_delegated
from jiter_magic.displayed import PanelDisplay
from jiter_magic.errors import ArgumentTypeError, BindError, InvalidArgumentError, JiterError
from jiter_magic.frontend.scan import ScanBinding, bind_scan
from jiter_magic.kernel_function import KernelFunction, autograd_tracks, checked_kwargs, for_caller
from jiter_magic.kernels.scan_family import SCAN
from jiter_magic.planning.reduce_spec import accumulate_dtype, check_identity, result_dtype
from jiter_magic.planning.scan_plan import CUDA_SCAN_PATHS, HOST_SCAN_PATHS, SCAN_ROWS, WARP_SCAN, ScanSpec
from jiter_magic.planning.values import scalar_kind, scalar_value
from jiter_magic.runtime import scan_call, scan_hot
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.reduce_call import extra_values
from jiter_magic.runtime.reduce_calls import ReductionCalls
from jiter_magic.runtime.unpickled import UnpickledFunctions
from jiter_magic.state import RUNTIME

__all__ = ["ScanFunction"]


def _identities(identity: object, binding: ScanBinding) -> tuple[object, ...]:
    """The identity as one number a state value: a number, or for a state of several values a tuple."""
    if binding.state == 1:
        if identity is None and binding.indexed:  # no element is compared with it: the index -1 marks none
            identity = 0
        check_identity(identity)
        return (identity,)
    if not isinstance(identity, (tuple, list)) or len(identity) != binding.state:
        raise ArgumentTypeError(f"the state of {binding.name} holds {binding.state} values: identity must be a "
                                f"tuple of {binding.state} numbers (for a linear recurrence (1, 0)), got {identity!r}")
    for value in identity:
        check_identity(value)
    return tuple(identity)


class ScanFunction(KernelFunction, PanelDisplay):
    """A jitted scan; call it as torch.cumsum: `fn(*inputs, dim, reverse=False, exclusive=False,
    dtype=None, out=None, **extras)`. One with indices returns `ValuesIndices(values, indices)` as
    torch.cummax does; one whose state holds several values returns a tuple of them."""

    operation = "scan"
    _calls: ReductionCalls
    binding: ScanBinding

    def __init__(self, code_string: str, identity: object, map_name: str | None, combine: object,
                 finalize: object, kwargs: dict[str, object], multi: bool = False) -> None:
        kwargs = checked_kwargs(kwargs, "a scan")
        self._made_from = (code_string, identity, map_name, combine, finalize, dict(kwargs), multi)
        self.binding = bind_scan(code_string, map_name, combine, finalize, list(kwargs), multi)
        self.identity = _identities(identity, self.binding)
        self.code = code_string
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        self.name = self.__name__ = self.__qualname__ = self.binding.name
        self._calls = ReductionCalls(self.binding, SCAN)
        self.recipe = pickle.dumps((rebuild, (*self._made_from[:5], self.kwargs, multi)))  # as JitFunction.recipe
        self._backward: Callable[..., Any] | None = None
        # The backward as torch.compile names its operator by it: pickled by reference, so None
        # where it cannot be (a lambda, a nested function); see def_backward.
        self.backward_recipe: bytes | None = None

    def __call__(self, *inputs: object, dim: object = None, reverse: bool = False, exclusive: bool = False,
                 dtype: object = None, out: object = None, **kwargs: object) -> Any:
        options = {"dim": dim, "reverse": reverse, "exclusive": exclusive, "dtype": dtype, "out": out}
        if tracing.compiling():  # torch.compile / torch.export: the call becomes one torch operator
            return tracing.traced_scan(self, inputs, options, kwargs)
        if out is None and not kwargs:  # a call keyed like one before runs in C (runtime/scan_hot.py)
            found = scan_hot.hot_call(self._calls, inputs, options)
            if found is not None:
                return found
        try:
            return self.run(inputs, options, kwargs)
        except JiterError as error:
            raise for_caller(error) from error.__cause__

    def eager(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call on real arrays, its C hot path first, without the facade's tracing check and
        traceback handling: what a torch operator's kernel runs (as ReductionFunction.eager)."""
        if options["out"] is None and not kwargs:
            found = scan_hot.hot_call(self._calls, inputs, options)
            if found is not None:
                return found
        return self.run(inputs, options, kwargs)

    def run(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call without the facade's tracing and traceback handling: `options` holds dim, reverse,
        exclusive, dtype and out."""
        try:
            if autograd_tracks(inputs):
                return self._tracked_call(inputs, options, kwargs)
            return scan_call.run(self._calls, self.identity, self.kwargs, inputs, options, kwargs)
        except Delegated as delegated:  # Dask arrays, DTensors, traced tensors: their integration runs the call
            return run_delegated(delegated.adapter, self, inputs, options, kwargs)

    def _tracked_call(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call whose results autograd tracks through the backward (arrays/scan_autograd.py)."""
        from jiter_magic.arrays import scan_autograd

        if self._backward is None:
            raise scan_autograd.no_backward(self.name)

        def compute(detached: tuple) -> Any:
            return scan_call.run(self._calls, self.identity, self.kwargs, detached, options, kwargs)

        return scan_autograd.tracked_call(self, compute, inputs, options, {**self.kwargs, **kwargs})

    @property
    def backward(self) -> Callable[..., Any] | None:
        """The gradient given by `def_backward` (a Python callable), or None."""
        return self._backward

    def def_backward(self, backward: Callable[..., Any] | None) -> ScanFunction:
        """Give the scan its gradient for torch autograd; returns `self`.

        A scan's gradient is itself a scan, so `backward` is a Python callable (typically written
        with jitted scans and torch ops), called as
        `backward(*inputs, *results, *grads, dim=, reverse=, exclusive=, **extras)`: one result and
        one gradient an output of the scan (a gradient of an output that got none is zeros), `dim`
        normalized to the inputs' broadcast shape, the extras by name. It returns one gradient an
        input (a tensor or None; for one input, a single tensor), which is summed over the dims the
        call broadcast that input along and cast to its dtype. `None` removes the backward.
        Pickling the scan, or taking a gradient under torch.compile, stores the callable by
        reference: a function defined at a module's top level."""
        if backward is not None and not callable(backward):
            if isinstance(backward, str):
                raise BindError(f"the backward of {self.name} is a Python callable, not a code string: a scan's "
                                "gradient is itself a scan (a cumsum's is the reversed cumsum of the gradient), "
                                "so write it with jitted scans and torch ops, as docs/scans.md shows")
            raise ArgumentTypeError(f"{self.name}.def_backward takes a Python callable (or None to remove it), got "
                                    f"{type(backward).__name__}: {backward!r}")
        self._backward = backward
        self.backward_recipe = None
        if backward is not None:
            try:  # a recipe as torch_op_parts.made_of reads it: no maker, then what it is made of
                self.backward_recipe = pickle.dumps((None, (backward,)))
            except (pickle.PicklingError, AttributeError, TypeError):
                pass
        return self

    @property
    def num_outputs(self) -> int:
        """Arrays a call gives: 1, 2 for values with indices, or the state's size."""
        return self.binding.outputs

    def __reduce__(self) -> tuple:
        """Pickle by what made it, its backend and its backward, never by loaded kernels, as the
        other kinds do."""
        if self._backward is not None and self.backward_recipe is None:
            raise ArgumentTypeError(f"{self.name} cannot be pickled: its backward {self._backward!r} cannot be "
                                    "pickled by reference; define it with def at a module's top level, or remove it "
                                    f"with {self.name}.def_backward(None) before pickling")
        return _unpickle, self._pickled_state()

    def _pickled_state(self) -> tuple:
        return (*self._made_from, self.backend, self._backward)

    def spec(self, *dtypes: str, path: str = SCAN_ROWS, output: str | None = None, kept_ndim: int = 1,
             exclusive: bool = False, vec: int = 1, staged: bool = False, **kwargs: object) -> ScanSpec:
        """The spec of one kernel, as `source` takes it."""
        inputs = tuple(dtypes) or ("float32",) * self.num_inputs
        if len(inputs) != self.num_inputs:
            raise BindError(f"{self.name} takes {self.num_inputs} input(s) {list(self.binding.input_names)}, "
                            f"got {len(inputs)} dtypes")
        if path not in HOST_SCAN_PATHS + CUDA_SCAN_PATHS:
            raise InvalidArgumentError(f"path must be one of {list(HOST_SCAN_PATHS + CUDA_SCAN_PATHS)}, got {path!r}")
        from jiter_magic.planning.reduce_spec import identity_literal

        result = result_dtype(inputs[0], output, self.binding.indexed)
        accumulate = accumulate_dtype(result)
        extras = extra_values(self.binding, self.kwargs, kwargs)
        return ScanSpec(inputs, result, accumulate, tuple(scalar_kind(v) for v in extras),
                        tuple(identity_literal(v, accumulate) for v in self.identity), path=path, kept_ndim=kept_ndim,
                        state=self.binding.state, indexed=self.binding.indexed, exclusive=exclusive, vec=vec,
                        staged=staged)

    def source(self, *dtypes: str, path: str = SCAN_ROWS, **options: Any) -> str:
        """The generated source of one kernel (no GPU, no compiler needed): input dtype names (all
        float32 by default), the kernel shape (`path`) and the spec's other fields as `spec` takes them."""
        spec = self.spec(*dtypes, path=path, **options)
        return SCAN.render(self.binding, spec, _backend_of(spec.path))

    def compile(self, *dtypes: str, backend: str | None = None, path: str | None = None,
                **options: Any) -> Specialization:
        """Build one kernel now (input dtype names, all float32 by default), so errors show early:
        on `backend` ('cpu' or 'cuda'; by default the function's, or where kernels run here)."""
        if path is None:
            path = SCAN_ROWS if self._chosen_backend(backend) == "cpu" else WARP_SCAN
        spec = self.spec(*dtypes, path=path, **options)
        return self._compile_spec(spec, _backend_of(path))

    def inspect(self, *dtypes: str, kind: str = "ptx", path: str | None = None, **options: Any) -> str:
        """The compiled code of one kernel as text (no GPU needed): 'ptx' or 'sass' of a CUDA path,
        'asm' of a host one."""
        path = path if path is not None else (SCAN_ROWS if kind == "asm" else WARP_SCAN)
        backend = _backend_of(path)
        if (kind == "asm") != (backend == "cpu"):
            raise InvalidArgumentError(f"kind={kind!r} does not fit path={path!r} (a {backend} kernel shape)")
        return self._compiled_text(kind, self.source(*dtypes, path=path, **options), backend)

    def __repr__(self) -> str:
        return f"<jiter_magic.ScanFunction {self.name} combine={self.binding.combine.name}>"


def _backend_of(path: str) -> str:
    return "cpu" if path in HOST_SCAN_PATHS else "cuda"


def rebuild(code_string: str, identity: object, map_name: str | None, combine: object, finalize: object,
            kwargs: dict[str, object], multi: bool, backend: str = "auto",
            backward: Callable[..., Any] | None = None, *, kind: type[ScanFunction] | None = None) -> ScanFunction:
    """The same scan, made again from its pickled state, or for torch.compile from its `recipe`;
    `kind`: a subclass to make (a notebook cell's scan)."""
    fn = (kind or ScanFunction)(code_string, identity, map_name, combine, finalize, kwargs, multi)
    fn.backend = backend
    return fn.def_backward(backward)


def _unpickle(*state: Any) -> ScanFunction:
    """Unpickling: the scan rebuilt before from an equal state, unless changed since."""
    return RUNTIME.part(UnpickledFunctions).reuse_or_make(pickle.dumps(state), lambda: rebuild(*state),
                                                          ScanFunction._now)
