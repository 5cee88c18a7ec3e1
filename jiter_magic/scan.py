"""`ScanFunction`: the callable `create_scan_fn` returns, a facade over the scan call path.

Binding happens once, here (frontend/scan.py); a call goes to runtime/scan_call.py, which plans
it and launches the scan's kernels through the same state as a reduction's (runtime/reduce_calls.py,
with the scans' kernel family). What it shares with a reduction is `CombineFunction`'s, what
every kind of function shares (specializations, listeners, counts, backend, compiled code,
benchmarking) `KernelFunction`'s.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from jiter_magic.arrays import tracing
from jiter_magic.combine_function import CombineFunction
from jiter_magic.errors import ArgumentTypeError, BindError, InvalidArgumentError, JiterError
from jiter_magic.frontend.scan import ScanBinding, bind_scan
from jiter_magic.kernel_function import for_caller, unpickled
from jiter_magic.kernels.scan_family import SCAN
from jiter_magic.planning.reduce_spec import check_identity, identity_literal
from jiter_magic.planning.scan_plan import CUDA_SCAN_PATHS, HOST_SCAN_PATHS, SCAN_ROWS, WARP_SCAN, ScanSpec
from jiter_magic.runtime import scan_call, scan_hot

__all__ = ["ScanFunction"]


def rebuild(code_string: str, identity: object, map_name: str | None, combine: object, finalize: object,
            kwargs: dict[str, object], multi: bool | tuple[int, ...], backend: str = "auto",
            backward: Callable[..., Any] | None = None, *, kind: type[ScanFunction] | None = None) -> ScanFunction:
    """The same scan, made again from its pickled state, or for torch.compile from its `recipe`;
    `kind`: a subclass to make (a notebook cell's scan)."""
    fn = (kind or ScanFunction)(code_string, identity, map_name, combine, finalize, kwargs, multi)
    fn.backend = backend
    return fn.def_backward(backward)


def _unpickle(*state: Any) -> ScanFunction:
    """Unpickling: the scan rebuilt before from an equal state, unless changed since."""
    return unpickled(state, rebuild)


class ScanFunction(CombineFunction):
    """A jitted scan; call it as torch.cumsum: `fn(*inputs, dim, reverse=False, exclusive=False,
    dtype=None, out=None, **extras)`. One with indices returns `ValuesIndices(values, indices)` as
    torch.cummax does; one whose state holds several values returns a tuple of them (of those its
    `outputs=` keeps, a tuple of one array for one)."""

    operation = "scan"
    binding: ScanBinding
    identity: tuple[object, ...]
    _bind = staticmethod(bind_scan)
    _family = SCAN
    _paths = (HOST_SCAN_PATHS, CUDA_SCAN_PATHS)
    _default_paths = {"cpu": SCAN_ROWS, "cuda": WARP_SCAN}
    _run = staticmethod(scan_call.run)
    _hot = staticmethod(scan_hot.hot_call)
    _rebuild = staticmethod(rebuild)
    _unpickle = staticmethod(_unpickle)
    _tracked_needs_backward = True
    _backward: Callable[..., Any] | None = None
    # The backward as torch.compile names its operator by it: pickled by reference, so None
    # where it cannot be (a lambda, a nested function); see def_backward.
    backward_recipe: bytes | None = None

    def _identities(self, identity: object) -> tuple[object, ...]:
        """The identity as one number a state value: a number, or for a state of several values a tuple."""
        binding = self.binding
        if binding.state == 1:
            if identity is None and binding.indexed:  # no element is compared with it: the index -1 marks none
                identity = 0
            check_identity(identity)
            return (identity,)
        if not isinstance(identity, (tuple, list)) or len(identity) != binding.state:
            raise ArgumentTypeError(f"the state of {binding.name} holds {binding.state} values: identity must be "
                                    f"a tuple of {binding.state} numbers (for a linear recurrence (1, 0)), got "
                                    f"{identity!r}")
        for value in identity:
            check_identity(value)
        return tuple(identity)

    def __call__(self, *inputs: object, dim: object = None, reverse: bool = False, exclusive: bool = False,
                 dtype: object = None, out: object = None, **kwargs: object) -> Any:
        options = {"dim": dim, "reverse": reverse, "exclusive": exclusive, "dtype": dtype, "out": out}
        if tracing.compiling():  # torch.compile / torch.export: the call becomes one torch operator
            return tracing.traced_scan(self, inputs, options, kwargs)
        if out is None and not kwargs:  # as `eager`, inline: the hot path takes no frame more than it must
            found = scan_hot.hot_call(self._calls, inputs, options)
            if found is not None:
                return found
        try:
            return self.run(inputs, options, kwargs)
        except JiterError as error:  # raised from here, as a reduction's (ReductionFunction.__call__)
            raise for_caller(error) from error.__cause__

    def _tracked_call(self, compute: Callable[[tuple], Any], inputs: tuple, options: dict[str, Any],
                      kwargs: dict[str, object]) -> Any:
        """Through the Python backward (arrays/scan_autograd.py); without one, refused."""
        from jiter_magic.arrays import scan_autograd

        if self._backward is None:
            raise scan_autograd.no_backward(self.name)
        return scan_autograd.tracked_call(self, compute, inputs, options, kwargs)

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

    def __reduce__(self) -> tuple:
        """As every kind's, and refused where the backward cannot be pickled by reference."""
        if self._backward is not None and self.backward_recipe is None:
            raise ArgumentTypeError(f"{self.name} cannot be pickled: its backward {self._backward!r} cannot be "
                                    "pickled by reference; define it with def at a module's top level, or remove it "
                                    f"with {self.name}.def_backward(None) before pickling")
        return super().__reduce__()

    def _pickled_state(self) -> tuple:
        return (*self._made_from, self.backend, self._backward)

    def spec(self, *dtypes: str, path: str = SCAN_ROWS, output: str | None = None, kept_ndim: int = 1,
             exclusive: bool = False, vec: int = 1, staged: bool = False, **kwargs: object) -> ScanSpec:
        """The spec of one kernel, as `source` takes it."""
        inputs, result, accumulate, extras = self._spec_fields(dtypes, path, output, kwargs)
        identities = tuple(identity_literal(v, accumulate) for v in self.identity)
        return ScanSpec(inputs, result, accumulate, extras, identities, path=path, kept_ndim=kept_ndim,
                        state=self.binding.state, indexed=self.binding.indexed, exclusive=exclusive, vec=vec,
                        staged=staged, kept_values=self.binding.kept_values)

    def _check_inspected(self, kind: str, path: str, backend: str) -> None:
        if (kind == "asm") != (backend == "cpu"):
            raise InvalidArgumentError(f"kind={kind!r} does not fit path={path!r} (a {backend} kernel shape)")

    def __repr__(self) -> str:
        return f"<jiter_magic.ScanFunction {self.name} combine={self.binding.combine.name}>"
