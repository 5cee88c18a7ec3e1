"""Jitted functions as torch custom operators, so that tracers see one operator in their graph.

torch.compile (Dynamo, AOTAutograd, Inductor), torch.export and FakeTensor or FunctionalTensor
tracing cannot run a jitted call: the call path reads data pointers a traced tensor does not
have. So a traced call becomes the operator `torch.ops.jiter_magic.<name>_<digest>`, one for
each function and pattern of tensor and Python-number inputs (and one more taking `out=`):
- its CPU and CUDA kernels are the eager call on the real tensors;
- its fake implementation gives the outputs' shapes, dtypes and strides from the same
  promotion and layout rules the call path plans with, so compiled code allocates exactly
  what the eager call returns;
- with `fn.def_backward(code)`, its autograd formula calls the backward's own operator and
  reduces each gradient as the eager backward does; without one, a backward raises.
Operators are registered on first use, once a process, under a name derived from the code
string, and kept (torch.library cannot remove one alone); a `JitFunction` rebuilt from the
same code runs their kernels.
"""
from __future__ import annotations

import hashlib
import pickle
import re
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo import assume_constant_result

from jiter_magic.arrays.torch import _DTYPES, _NAMES
from jiter_magic.errors import BindError, DeviceError, DTypeError, GradientError, InvalidArgumentError
from jiter_magic.planning import dtypes as dt
from jiter_magic.planning.layout import ArrayDesc, plan_layout
from jiter_magic.planning.resolve import result_dtype
from jiter_magic.planning.values import scalar_value
from jiter_magic.runtime.keywords import check_kwarg_names
from jiter_magic.state import RUNTIME

NAMESPACE = "jiter_magic"


class TorchOperators:
    """The operators this process registered with torch: a part of `RUNTIME`."""

    def __init__(self) -> None:
        self.names_by_digest: dict[str, str] = {}  # digest of what makes an operator -> its name
        self.lock = threading.Lock()
        self.library: torch.library.Library | None = None

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()


def operator_call(function: Any, args: tuple, out: Any, kwargs: dict) -> Any:
    """`function(*args, out=out, **kwargs)` as its torch operator (traceable by Dynamo)."""
    if len(args) != function.num_inputs:
        raise BindError(f"{function.name} takes {function.num_inputs} input(s) "
                        f"{list(function.binding.input_names)}, got {len(args)}")
    kinds = "".join("t" if isinstance(a, torch.Tensor) else "s" for a in args)
    if "t" not in kinds:
        raise BindError(f"{function.name} needs at least one array input; got only Python scalars")
    check_kwarg_names(kwargs, function.kwargs)
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            raise InvalidArgumentError(f"extra argument {name!r} is a tensor; under torch.compile extras must be "
                                       "Python numbers (pass value.item() outside the compiled function)")
    values = {**function.kwargs, **{name: scalar_value(v, name) for name, v in kwargs.items()}}
    outs = None if out is None else tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if outs is not None and torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in (*args, *outs)):
        raise GradientError("functions with out=... arguments don't support automatic differentiation, "
                            "but one of the arguments requires grad; call it under torch.no_grad()")
    backward = function.backward
    name = operator_name(function._recipe, None if backward is None else backward._recipe, function.backend,
                         kinds, outs is not None)
    operator = getattr(getattr(torch.ops, NAMESPACE), name)
    keywords = {f"k{i}": values[extra] for i, extra in enumerate(function.binding.extra_names)}
    if outs is None:
        result = operator(*args, **keywords)
        return result if function.num_outputs == 1 else tuple(result)
    if len(outs) != function.num_outputs:
        raise BindError(f"{function.name} has {function.num_outputs} output(s), but out= gives {len(outs)}")
    operator(*args, **keywords, **{f"o{i}": o for i, o in enumerate(outs)})
    return outs[0] if function.num_outputs == 1 else outs


@assume_constant_result
def operator_name(recipe: bytes, backward: bytes | None, backend: str, kinds: str, with_out: bool) -> str:
    """The operator of one function (`JitFunction._recipe`: code string, outputs, kwargs) and input
    pattern, registered on first use. Dynamo runs this while tracing and records its result as a
    constant (registering is no graph operation)."""
    digest = hashlib.sha256(repr((recipe, backward, backend, kinds, with_out)).encode()).hexdigest()[:16]
    registered = RUNTIME.part(TorchOperators)
    with registered.lock:
        if digest in registered.names_by_digest:
            return registered.names_by_digest[digest]
        from jiter_magic.function import _rebuild

        code, num_outputs, kwargs = pickle.loads(recipe)  # noqa: S301 - our own bytes, made in this process
        function = _rebuild(code, num_outputs, kwargs, backend,
                            None if backward is None else pickle.loads(backward)[0])  # noqa: S301
        prefix = re.sub(r"[^A-Za-z0-9_]", "", function.name)
        name = f"{prefix if prefix[:1].isalpha() else 'functor'}_{digest}"
        _register(name, function, kinds, with_out)
        registered.names_by_digest[digest] = name
    if backward is not None and not with_out:
        # The backward's operator too, now: a compiled backward that Inductor or AOTAutograd load
        # from their caches names it without tracing the call that would register it. It takes the
        # inputs, then one gradient tensor an output.
        operator_name(backward, None, backend, kinds + "t" * function.num_outputs, False)
    return name


def _library() -> torch.library.Library:
    registered = RUNTIME.part(TorchOperators)
    if registered.library is None:
        registered.library = torch.library.Library(NAMESPACE, "FRAGMENT")
    return registered.library


def schema(name: str, kinds: str, num_extras: int, num_outputs: int, with_out: bool) -> str:
    """The operator's schema: tensors and Python numbers (`Scalar`) in the function's input order,
    its extras as keyword-only Scalars, and `out=` tensors it writes as keyword-only mutable ones."""
    params = [f"{'Tensor' if kind == 't' else 'Scalar'} x{i}" for i, kind in enumerate(kinds)]
    keywords = [f"Scalar k{i}" for i in range(num_extras)]
    if with_out:
        keywords += [f"Tensor(o{i}!) o{i}" for i in range(num_outputs)]
    if keywords:
        params += ["*", *keywords]
    if with_out:
        returns = "()"
    else:
        returns = "Tensor" if num_outputs == 1 else f"({', '.join(['Tensor'] * num_outputs)})"
    return f"{name}({', '.join(params)}) -> {returns}"


def _register(name: str, function: Any, kinds: str, with_out: bool) -> None:
    library = _library()
    extras = function.binding.extra_names
    library.define(schema(name, kinds, len(extras), function.num_outputs, with_out))
    kernel = _kernel(function, with_out)
    library.impl(name, kernel, "CPU")
    library.impl(name, kernel, "CUDA")
    qualified = f"{NAMESPACE}::{name}"
    torch.library.register_fake(qualified, _fake(function, with_out), lib=library)
    if not with_out:
        backward, setup = _autograd(function, kinds)
        torch.library.register_autograd(qualified, backward, setup_context=setup, lib=library)


def _extras_of(function: Any, keywords: dict) -> dict:
    """The operator's keyword-only extras by the function's names, keeping only those that differ
    from the defaults, so that a call with none goes through the hot path."""
    defaults = function.kwargs
    given = {extra: keywords[f"k{i}"] for i, extra in enumerate(function.binding.extra_names)}
    return {n: v for n, v in given.items() if type(v) is not type(defaults[n]) or v != defaults[n]}


def _kernel(function: Any, with_out: bool) -> Callable[..., Any]:
    count = function.num_outputs

    def run(*args: Any, **keywords: Any) -> Any:
        out = tuple(keywords[f"o{i}"] for i in range(count)) if with_out else None
        result = function._call(args, out, _extras_of(function, keywords))
        if with_out:
            return None
        return result

    return run


def _stand_in(value: Any) -> Any:
    """A Python number of a symbolic one's kind (promotion needs only the kind)."""
    if isinstance(value, torch.SymBool):
        return True
    if isinstance(value, torch.SymInt):
        return 0
    if isinstance(value, torch.SymFloat):
        return 0.0
    return value


def _fake(function: Any, with_out: bool) -> Callable[..., Any]:
    """Outputs as the eager call makes them: dtype by promotion, the broadcast shape, strides dense
    in the inputs' memory order (resolve.py and layout.py, as the call path plans them)."""
    count = function.num_outputs

    def fake(*args: Any, **keywords: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        device = tensors[0].device
        if any(t.device != device for t in tensors):
            raise DeviceError(f"inputs live on different devices ({', '.join(str(t.device) for t in tensors)}); "
                              "move them to one device")
        if function.backend not in ("auto", device.type):
            raise DeviceError(f"{function.name} is set to backend={function.backend!r} but its inputs live on "
                              f"{device}; move them, or set backend='auto'")
        arrays = [_described(a) if isinstance(a, torch.Tensor) else _stand_in(a) for a in args]
        default = _NAMES.get(torch.get_default_dtype(), "float32")
        common = result_dtype(arrays, "torch", default)
        dt.dtype(common)
        dt.compute_dtype(common)
        shapes = [a.shape for a in arrays if isinstance(a, ArrayDesc)]
        strides = [a.strides for a in arrays if isinstance(a, ArrayDesc)]
        if with_out:
            outs = [keywords[f"o{i}"] for i in range(count)]
            for o in outs:
                target = _NAMES[o.dtype]
                if not dt.can_cast(common, target, "torch"):
                    raise DTypeError(f"result type {common} can't be cast to the desired output type {target} (out=)")
            plan_layout(shapes, strides, [tuple(o.shape) for o in outs], [tuple(o.stride()) for o in outs], count)
            return None
        layout = plan_layout(shapes, strides, None, None, count)
        results = [torch.empty_strided(layout.shape, layout.output_strides, dtype=_DTYPES[common], device=device)
                   for _ in range(count)]
        return results[0] if count == 1 else tuple(results)

    return fake


def _described(x: torch.Tensor) -> ArrayDesc:
    try:
        name = _NAMES[x.dtype]
    except KeyError:
        raise DTypeError(f"torch dtype {x.dtype} is not supported by jiter_magic") from None
    return ArrayDesc(name, tuple(x.shape), tuple(x.stride()), 0)


def _autograd(function: Any, kinds: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The operator's backward and setup_context: the jitted gradient (`fn.def_backward`) called
    through its own operator, or a backward that raises, as eager calls do."""
    from jiter_magic.arrays.torch_autograd import input_gradient, no_backward

    extras = function.binding.extra_names
    tensors = [i for i, kind in enumerate(kinds) if kind == "t"]

    def remember(ctx: Any, inputs: tuple, keyword_only_inputs: dict, output: Any) -> None:
        ctx.save_for_backward(*(inputs[i] for i in tensors))
        ctx.numbers = [None if kind == "t" else inputs[i] for i, kind in enumerate(kinds)]
        ctx.extras = {extra: keyword_only_inputs[f"k{i}"] for i, extra in enumerate(extras)}
        results = output if isinstance(output, (tuple, list)) else (output,)
        ctx.result_meta = [(r.shape, r.dtype, r.device) for r in results]

    def backward(ctx: Any, *grads: Any) -> tuple:
        gradient = function.backward
        if gradient is None:
            raise no_backward(function.name)
        args = list(ctx.numbers)
        for position, tensor in zip(tensors, ctx.saved_tensors):
            args[position] = tensor
        grads = tuple(torch.zeros(shape, dtype=dtype, device=device) if g is None else g
                      for g, (shape, dtype, device) in zip(grads, ctx.result_meta))
        computed = gradient(*args, *grads, **ctx.extras)
        if not isinstance(computed, tuple):
            computed = (computed,)
        return tuple(input_gradient(args[i], computed[i]) if kind == "t" and ctx.needs_input_grad[i] else None
                     for i, kind in enumerate(kinds))

    if extras:
        return backward, remember

    def remember_without_extras(ctx: Any, inputs: tuple, output: Any) -> None:
        remember(ctx, inputs, {}, output)

    return backward, remember_without_extras


class TracedAdapter:
    """Tensors being traced (FakeTensor, FunctionalTensor): calls on them go to the operator."""

    library = "torch"
    delegates = True

    def run_call(self, function: Any, args: tuple, out: Any, kwargs: dict) -> Any:
        return operator_call(function, args, out, kwargs)


ADAPTER = TracedAdapter()
