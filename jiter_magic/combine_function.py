"""`CombineFunction`: what the kinds built on a combine, reductions and scans, share.

Both bind a combine, map and finalize, keep their calls in one state (runtime/reduce_calls.py) and
take a call's options as keywords beside the extras; so how they are made, called, pickled and
inspected is written here once, and each kind (reduction.py, scan.py) names its parts and the
form of its gradient. What every kind of function shares is `KernelFunction`'s.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, ClassVar

from jiter_magic.arrays.base import Delegated, run_delegated
from jiter_magic.displayed import PanelDisplay
from jiter_magic.errors import BindError, InvalidArgumentError
from jiter_magic.kernel_function import KernelFunction, autograd_tracks, checked_kwargs
from jiter_magic.kernels.families import KernelFamily
from jiter_magic.planning.reduce_spec import accumulate_dtype, result_dtype
from jiter_magic.planning.values import scalar_kind, scalar_value
from jiter_magic.runtime.build import Specialization
from jiter_magic.runtime.reduce_call import extra_values
from jiter_magic.runtime.reduce_calls import ReductionCalls


class CombineFunction(KernelFunction, PanelDisplay):
    """A reduction or a scan: made from a code string, an identity, the names of its map, combine
    and finalize, the extras' defaults and whether it is the kind's multi-output form (values with
    indices, or a scan's state of several values; for that one, the positions of the values a call
    returns where not all: `outputs=`)."""

    _calls: ReductionCalls
    # What each kind names: its binder, kernels and their shapes (host ones, CUDA ones, each
    # backend's default), its call path (a runtime module's `run`), C hot path (`hot_call`), its
    # module's `rebuild` (which `recipe` names), and whether a call that autograd tracks needs the
    # backward (a scan refuses one without) or runs untracked without it (a reduction).
    _bind: ClassVar[Callable[..., Any]]
    _family: ClassVar[KernelFamily]
    _paths: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]]
    _default_paths: ClassVar[dict[str, str]]
    _run: ClassVar[Callable[..., Any]]
    _hot: ClassVar[Callable[..., Any]]
    _rebuild: ClassVar[Callable[..., Any]]
    _tracked_needs_backward: ClassVar[bool] = False

    def __init__(self, code_string: str, identity: object, map_name: str | None, combine: object,
                 finalize: object, kwargs: dict[str, object], multi: bool | tuple[int, ...] = False) -> None:
        kwargs = checked_kwargs(kwargs, f"a {self.operation}")
        # What made it: pickling rebuilds it from this, torch.compile names its operator by it.
        self._made_from = (code_string, identity, map_name, combine, finalize, dict(kwargs), multi)
        self.binding = self._bind(code_string, map_name, combine, finalize, list(kwargs), multi)
        self.identity = self._identities(identity)
        self.code = code_string
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        self.name = self.__name__ = self.__qualname__ = self.binding.name
        self._calls = ReductionCalls(self.binding, self._family)
        self.recipe = pickle.dumps((self._rebuild, (*self._made_from[:5], self.kwargs, multi)))  # as JitFunction.recipe

    def _identities(self, identity: object) -> Any:
        """The identity as the calls pass it, checked against the binding."""
        return identity

    # A call: each kind's `__call__` names its options, hands a call under Dynamo to its torch
    # operator, and raises a mistake in the call from its own frame (tests/runtime/test_tracebacks.py).

    def eager(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call on real arrays, its C hot path first, without the facade's tracing check and
        traceback handling: what a torch operator's kernel runs (a call through the facade there
        would ask Dynamo's state eagerly, which a compiled frame may guard on)."""
        if options["out"] is None and not kwargs:  # a call keyed like one before runs in C (runtime/*_hot.py)
            found = self._hot(self._calls, inputs, options)
            if found is not None:
                return found
        return self.run(inputs, options, kwargs)

    def run(self, inputs: tuple, options: dict[str, Any], kwargs: dict[str, object]) -> Any:
        """A call without the facade's tracing and traceback handling: `options` holds the
        keywords of the kind's call (dim, dtype, out and its own)."""
        try:
            if (self._tracked_needs_backward or self.backward is not None) and autograd_tracks(inputs):
                def compute(detached: tuple) -> Any:
                    return self._run(self._calls, self.identity, self.kwargs, detached, options, kwargs)

                return self._tracked_call(compute, inputs, options, {**self.kwargs, **kwargs})
            return self._run(self._calls, self.identity, self.kwargs, inputs, options, kwargs)
        except Delegated as delegated:  # Dask arrays, DTensors, traced tensors: their integration runs the call
            return run_delegated(delegated.adapter, self, inputs, options, kwargs)

    def _tracked_call(self, compute: Callable[[tuple], Any], inputs: tuple, options: dict[str, Any],
                      kwargs: dict[str, object]) -> Any:
        """A call whose results autograd tracks through the backward: `compute` makes the call on
        the detached inputs, `kwargs` are the extras' values."""
        raise NotImplementedError

    @property
    def num_outputs(self) -> int:
        """Arrays a call gives: 1, 2 for values with their indices, or a scan's state's size (the
        values its `outputs=` keeps)."""
        return int(self.binding.outputs)

    # Without a call: one kernel's spec, generated source, build and compiled code.

    def _spec_fields(self, dtypes: tuple[str, ...], path: str, output: str | None,
                     kwargs: dict[str, object]) -> tuple[tuple[str, ...], str, str, tuple[str, ...]]:
        """What a kernel's spec holds, of every kind: the input dtypes (all float32 by default), the
        result's and the accumulator's, and the extras' kinds (kwargs override their defaults)."""
        inputs = tuple(dtypes) or ("float32",) * self.num_inputs
        if len(inputs) != self.num_inputs:
            raise BindError(f"{self.name} takes {self.num_inputs} input(s) {list(self.binding.input_names)}, "
                            f"got {len(inputs)} dtypes")
        if path not in self._paths[0] + self._paths[1]:
            raise InvalidArgumentError(f"path must be one of {list(self._paths[0] + self._paths[1])}, got {path!r}")
        result = result_dtype(inputs[0], output, self.binding.indexed)
        extras = extra_values(self.binding, self.kwargs, kwargs)
        return inputs, result, accumulate_dtype(result), tuple(scalar_kind(v) for v in extras)

    def spec(self, *dtypes: str, **options: Any) -> Any:
        raise NotImplementedError

    def _backend_of(self, path: str) -> str:
        """The backend a kernel shape runs on."""
        return "cpu" if path in self._paths[0] else "cuda"

    def source(self, *dtypes: str, **options: Any) -> str:
        """The generated source of one kernel (no GPU, no compiler needed): input dtype names (all
        float32 by default), the kernel shape (`path`: a host one by default) and the spec's other
        fields as `spec` takes them; kwargs override the extras' defaults."""
        spec = self.spec(*dtypes, **options)
        return self._family.render(self.binding, spec, self._backend_of(spec.path))

    def compile(self, *dtypes: str, backend: str | None = None, path: str | None = None,
                **options: Any) -> Specialization:
        """Build one kernel now (input dtype names, all float32 by default), so errors show early:
        on `backend` ('cpu' or 'cuda'; by default the function's, or where kernels run here) with its
        kernel shape `path` (by default the backend's usual one) and the spec's other fields."""
        if path is None:
            path = self._default_paths[self._chosen_backend(backend)]
        elif backend is not None and self._chosen_backend(backend) != self._backend_of(path):
            raise InvalidArgumentError(f"path={path!r} is a {self._backend_of(path)} kernel shape, not one of "
                                       f"backend={backend!r}")
        return self._compile_spec(self.spec(*dtypes, path=path, **options), self._backend_of(path))

    def inspect(self, *dtypes: str, kind: str = "ptx", path: str | None = None, **options: Any) -> str:
        """The compiled code of one kernel as text (no GPU needed): kind='ptx' or 'sass' of a CUDA
        kernel shape (`path`, the CUDA default by default), compiled by NVRTC, or kind='asm' of a
        host one (the host default by default); other arguments as `source` takes them. The code
        string's lines the compiler's line tables point at are shown as comments before their
        instructions."""
        path = path if path is not None else self._default_paths["cpu" if kind == "asm" else "cuda"]
        backend = self._backend_of(path)
        self._check_inspected(kind, path, backend)
        return self._compiled_text(kind, self.source(*dtypes, path=path, **options), backend)

    def _check_inspected(self, kind: str, path: str, backend: str) -> None:
        """Refuse code of a kind that a kernel shape's backend does not make."""
        raise NotImplementedError

