"""Jitted functions as torch custom operators, so that tracers see one operator in their graph.

torch.compile (Dynamo, AOTAutograd, Inductor), torch.export and FakeTensor or FunctionalTensor
tracing cannot run a jitted call: the call path reads data pointers a traced tensor does not
have. So a traced call becomes the operator `torch.ops.jiter_magic.<name>_<digest>`, one for
each function (and one more taking `out=`), whatever its inputs' kinds. It takes the function's
inputs in order (tensors, and Python numbers as 0-d tensors, torch_extras.py), then its extras as
0-d tensors, then `kinds`, a string naming each input's kind (`t` a tensor, `b`/`i`/`f`/`c` a
Python bool, int, float, complex: promotion depends on it), then, for the `out=` variant,
keyword-only outputs:
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
import re
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo import assume_constant_result

from jiter_magic.arrays.torch import DTYPE_OF, NAME_OF
from jiter_magic.arrays.torch_autograd import out_with_grad
from jiter_magic.errors import BindError, DeviceError, DTypeError
from jiter_magic.integrations import torch_op_parts as parts
from jiter_magic.integrations.torch_extras import (
    STAND_INS,
    GraphNumber,
    as_python_number,
    extras_as_graph_inputs,
    input_as_graph_input,
)
from jiter_magic.planning import dtypes as dt
from jiter_magic.planning.layout import ArrayDesc, plan_layout
from jiter_magic.planning.resolve import result_dtype
from jiter_magic.runtime.keywords import check_kwarg_names
from jiter_magic.state import RUNTIME

# Part of every operator's name: a new schema gets new names, so no graph that torch cached with
# an older one (extras as Scalars, before extras became tensors) calls an operator of this one.
SCHEMA_VERSION = 2


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
    anchor = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if anchor is None:
        raise BindError(f"{function.name} needs at least one array input; got only Python scalars")
    inputs = [input_as_graph_input(a, name, anchor) for a, name in zip(args, function.binding.input_names)]
    kinds = "".join(a.letter if isinstance(a, GraphNumber) else "t" for a in inputs)
    check_kwarg_names(kwargs, function.kwargs)
    outs = None if out is None else tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if outs is not None and torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in (*args, *outs)):
        raise out_with_grad()
    backward = function.backward
    numbers = bool(function.binding.extra_names) or kinds.count("t") != len(kinds)
    name = operator_name(function.recipe, None if backward is None else backward.recipe, function.backend,
                         outs is not None, numbers)
    operator = parts.operator_named(name)
    given = [a.tensor if isinstance(a, GraphNumber) else a for a in inputs]
    extras = extras_as_graph_inputs(function, kwargs, anchor)
    if outs is None:
        result = operator(*given, *extras, kinds)
        return result if function.num_outputs == 1 else tuple(result)
    if len(outs) != function.num_outputs:
        raise BindError(f"{function.name} has {function.num_outputs} output(s), but out= gives {len(outs)}")
    operator(*given, *extras, kinds, **{f"o{i}": o for i, o in enumerate(outs)})
    return outs[0] if function.num_outputs == 1 else outs


@assume_constant_result
def operator_name(recipe: bytes, backward: bytes | None, backend: str, with_out: bool, numbers: bool) -> str:
    """The operator of one function (`JitFunction.recipe`: code string, outputs, kwargs), registered
    on first use; `numbers`: the variant for calls that take numbers (extras, number inputs). Dynamo
    runs this while tracing and records its result as a constant (registering is no graph
    operation)."""
    name = registered_once((SCHEMA_VERSION, recipe, backward, backend, with_out, numbers),
                           lambda: parts.rebuilt(recipe, backward, backend),
                           lambda name, function: _register(name, function, with_out, numbers))
    if backward is not None and not with_out:
        # The backward's operator too, now: a compiled backward that Inductor or AOTAutograd load
        # from their caches names it without tracing the call that would register it. It takes the
        # inputs, then one gradient tensor an output.
        operator_name(backward, None, backend, False, numbers)
    return name


def registered_once(made_of: tuple, make: Callable[[], Any], register: Callable[[str, Any], None]) -> str:
    """The name of the operator that `made_of` (hashable parts, bytes of what makes its function)
    stands for: the first time this process asks, `make()` rebuilds the function and
    `register(name, function)` registers it under a name of the function's and the digest's."""
    digest = hashlib.sha256(repr(made_of).encode()).hexdigest()[:16]
    registered = RUNTIME.part(TorchOperators)
    with registered.lock:
        if digest in registered.names_by_digest:
            return registered.names_by_digest[digest]
        function = make()
        prefix = re.sub(r"[^A-Za-z0-9_]", "", function.name)
        name = f"{prefix if prefix[:1].isalpha() else 'functor'}_{digest}"
        register(name, function)
        registered.names_by_digest[digest] = name
    return name


def register_function_operators(function: Any) -> list[str]:
    """The operators of one jitted function, registered now: with and without `out=`, and its
    backward's operators."""
    backward = None if function.backward is None else function.backward.recipe
    variants = (True,) if function.binding.extra_names else (False, True)
    return [operator_name(function.recipe, backward, function.backend, with_out, numbers)
            for with_out in (False, True) for numbers in variants]


def operator_library() -> torch.library.Library:
    registered = RUNTIME.part(TorchOperators)
    if registered.library is None:
        registered.library = torch.library.Library(parts.NAMESPACE, "FRAGMENT")
    return registered.library


def schema(name: str, num_inputs: int, num_extras: int, num_outputs: int, with_out: bool) -> str:
    """The operator's schema: the inputs in the function's order and then its extras, all tensors
    (numbers as 0-d ones, torch_extras.py says why; positional, as torch.library's autograd wants
    tensors), the kinds of the inputs (torch_op_parts.py), and `out=` tensors it writes as
    keyword-only mutable ones. One schema serves every call of a function, whatever its inputs'
    kinds, so registering a function's operators needs nothing but the function."""
    options = ["str kinds", *(["*", *(f"Tensor(o{i}!) o{i}" for i in range(num_outputs))] if with_out else [])]
    return parts.operator_schema(name, num_inputs, num_extras, options, 0 if with_out else num_outputs)


def define_operator(name: str, signature: str, kernel: Callable[..., Any], fake: Callable[..., Any],
                    autograd: tuple[Callable[..., Any], Callable[..., Any]] | None, numbers: bool) -> None:
    """One operator of any kind of function: its schema, its kernel on CPU and CUDA, its fake and,
    where it has one, its backward with its setup_context.

    A call that takes numbers reads them on the host (0-d CPU tensors) when it runs: captured in
    a CUDA graph, it would launch with the values of the capture on every replay. So that
    variant is cudagraph_unsafe, and Inductor's CUDA graphs (mode="reduce-overhead") run it
    between their graphs; a call of tensors alone only reads device memory and is captured."""
    library = operator_library()
    library.define(signature, tags=(torch.Tag.cudagraph_unsafe,) if numbers else ())
    library.impl(name, kernel, "CPU")
    library.impl(name, kernel, "CUDA")
    qualified = f"{parts.NAMESPACE}::{name}"
    torch.library.register_fake(qualified, fake, lib=library)
    if autograd is not None:
        backward, setup = autograd
        torch.library.register_autograd(qualified, backward, setup_context=setup, lib=library)


def _register(name: str, function: Any, with_out: bool, numbers: bool) -> None:
    define_operator(name, schema(name, function.num_inputs, len(function.binding.extra_names), function.num_outputs,
                                 with_out),
                    _kernel(function, with_out), _fake(function, with_out), None if with_out else _autograd(function),
                    numbers)


def _kernel(function: Any, with_out: bool) -> Callable[..., Any]:
    """The operator's CPU and CUDA kernel: the eager call, on the inputs as the eager call takes them."""
    count, inputs = function.num_outputs, function.num_inputs

    def run(*args: Any, **keywords: Any) -> Any:
        kinds = args[-1]
        out = tuple(keywords[f"o{i}"] for i in range(count)) if with_out else None
        given = tuple(a if kind == "t" else as_python_number(a) for a, kind in zip(args, kinds))
        result = function.run(given, out, parts.extras_of(function, args[inputs:-1]))
        return None if with_out else result

    return run


def _fake(function: Any, with_out: bool) -> Callable[..., Any]:
    """Outputs as the eager call makes them: dtype by promotion, the broadcast shape, strides dense
    in the inputs' memory order (resolve.py and layout.py, as the call path plans them)."""
    count = function.num_outputs

    def outputs(*args: Any, **keywords: Any) -> Any:
        kinds = args[-1]
        device = parts.one_device([a for a, kind in zip(args, kinds) if kind == "t"])
        if function.backend not in ("auto", device.type):
            raise DeviceError(f"{function.name} is set to backend={function.backend!r} but its inputs live on "
                              f"{device}; move them, or set backend='auto'")
        arrays = [parts.described(a) if kind == "t" else STAND_INS[kind] for a, kind in zip(args, kinds)]
        default = NAME_OF.get(torch.get_default_dtype(), "float32")
        common = result_dtype(arrays, "torch", default)
        dt.dtype(common)
        dt.compute_dtype(common)
        shapes = [a.shape for a in arrays if isinstance(a, ArrayDesc)]
        strides = [a.strides for a in arrays if isinstance(a, ArrayDesc)]
        if with_out:
            outs = [keywords[f"o{i}"] for i in range(count)]
            for o in outs:
                target = NAME_OF[o.dtype]
                if not dt.can_cast(common, target, "torch"):
                    raise DTypeError(f"result type {common} can't be cast to the desired output type {target} (out=)")
            plan_layout(shapes, strides, [tuple(o.shape) for o in outs], [tuple(o.stride()) for o in outs], count)
            return None
        layout = plan_layout(shapes, strides, None, None, count)
        results = [torch.empty_strided(layout.shape, layout.output_strides, dtype=DTYPE_OF[common], device=device)
                   for _ in range(count)]
        return results[0] if count == 1 else tuple(results)

    return outputs


def _autograd(function: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The operator's backward and setup_context: the jitted gradient (`fn.def_backward`) called
    through its own operator, or a backward that raises, as eager calls do."""
    from jiter_magic.arrays.torch_autograd import input_gradient, no_backward

    extras = function.binding.extra_names
    count = function.num_inputs

    def remember(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.save_for_backward(*inputs[:-1])  # all tensors: the inputs, numbers as 0-d tensors, then the extras
        ctx.kinds = inputs[-1]
        parts.remember_results(ctx, output)

    def backward(ctx: Any, *grads: Any) -> tuple:
        gradient = function.backward
        if gradient is None:
            raise no_backward(function.name)
        saved, kinds = ctx.saved_tensors, ctx.kinds
        args = [saved[i] if kind == "t" else GraphNumber(saved[i], kind) for i, kind in enumerate(kinds)]
        computed = operator_call(gradient, (*args, *parts.filled(ctx, grads)), None, dict(zip(extras, saved[count:])))
        if not isinstance(computed, tuple):
            computed = (computed,)
        return (*(input_gradient(saved[i], computed[i]) if kind == "t" and ctx.needs_input_grad[i] else None
                  for i, kind in enumerate(kinds)), *([None] * len(extras)), None)

    return backward, remember
