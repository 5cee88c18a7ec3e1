"""Dispatch a call: describe its arguments into a key, find or make the plan, launch.

The hot path (plain arrays of one library, no `out=`) asks the adapter for a fast key and
finds a `CallPlan` (plan.py) with one dictionary lookup; then only pointers are packed. Keyword
extras that are Python numbers take it too (keywords.py). `out=` calls of a library whose key
covers the outputs (torch) take it keyed over inputs and outputs together. Any other call
describes each argument (arrays of any library, Python numbers), checks devices and `out=`, and
plans once per key: dtypes, layout and kernel path, the kernel, output allocators, geometry.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable, Hashable
from typing import Any, cast

from jiter_magic.arrays import BY_TYPE, adapter_for, coerce
from jiter_magic.arrays.base import ArrayAdapter, Delegated, DelegatingAdapter, Described, FastKey, run_delegated
from jiter_magic.errors import BindError, DeviceError, DTypeError, device_name, mixed_inputs
from jiter_magic.planning.resolve import check_output_overlap, check_overlap
from jiter_magic.planning.values import scalar_kind
from jiter_magic.runtime import planner
from jiter_magic.runtime.calls import FunctionCalls
from jiter_magic.runtime.keywords import KeywordExtras
from jiter_magic.runtime.loader import KernelLoader
from jiter_magic.runtime.plan import CallPlan
from jiter_magic.runtime.planner import DescribedCall

PLAN_LIMIT = 4096  # plans kept per function (each key of a call: dtypes, shapes, strides, alignment)


class Dispatcher(FunctionCalls):
    """The call path of one jitted elementwise function, with its plan cache."""

    def __init__(self, name: str, loader: KernelLoader, kwargs: dict[str, object], returns_one: bool) -> None:
        super().__init__(name, loader, PLAN_LIMIT)
        binding = loader.binding
        self.input_names = binding.input_names
        self.num_inputs = len(binding.input_names)
        self.extra_names = binding.extra_names
        self.num_outputs = binding.num_outputs
        self.kwargs = kwargs
        self.returns_one = returns_one
        self.keywords = KeywordExtras(binding.extra_names, kwargs)
        self.owner: Callable[[], Any] = lambda: None  # the JitFunction, weakly (a delegated call needs it)

    def call(self, args: tuple, out: object, kwargs: dict) -> Any:
        """One call. The hot path is here: plain arrays, no keywords, no `out=`, a planned key."""
        if out is None and not kwargs and len(args) == self.num_inputs:
            key_of = self._fast_keys.get(type(args[0])) or self._fast_key_function(type(args[0]))
            fast = None if key_of is None else key_of(args)
            if fast is None:
                return self.general_call(args, None, kwargs, None)
            plan = self.plans.get(fast[0])
            if plan is None:
                return self.general_call(args, None, kwargs, fast)
            self.counts.hot += 1
            native = plan.native_calls
            if native is not None:
                if native.default is not None:
                    return native.default(fast[1])
                if not native.default_made:
                    native.make_default(plan, self.num_inputs, self.keywords.defaults, self.returns_one)
            return self._launch_planned(plan, args, fast[1], self.keywords.defaults)
        if len(args) != self.num_inputs:
            raise BindError(f"{self.name} takes {len(self.input_names)} input(s) {list(self.input_names)}, "
                            f"got {len(args)}")
        if out is None:
            return self._keyword_call(args, kwargs)
        if type(out) is tuple or type(out) is list or type(out) in BY_TYPE:
            return self._out_call(args, out, kwargs)
        return self.general_call(args, out, kwargs, None)

    def _launch_planned(self, plan: CallPlan, args: tuple, pointers: list, extras: list) -> Any:
        """A planned call launched from Python: its outputs allocated, its pointers packed."""
        checks = plan.checks
        if checks.storage is not None:
            checks.storage(args, checks.input_extents)
        results = [allocate() for allocate in plan.allocators]
        if plan.launcher is not None:
            plan.launch([plan.pointer(r) for r in results], pointers, extras, ())
        return results[0] if self.returns_one else tuple(results)

    def _keyword_call(self, args: tuple, kwargs: dict) -> Any:
        """A call with keyword values: the hot path where they are Python numbers, keyed by their
        kinds where those differ from the defaults'; C hot paths for values seen twice."""
        keyword = self.keywords.for_hot_path(kwargs)
        key_of = self._fast_keys.get(type(args[0])) or self._fast_key_function(type(args[0]))
        fast = None if keyword is None or key_of is None else key_of(args)
        if keyword is None or fast is None:
            return self.general_call(args, None, kwargs, None)
        extras, kinds, values = keyword
        plan_key = fast[0] if kinds is None else (fast[0], kinds)
        plan = self.plans.get(plan_key)
        if plan is None:
            return self.general_call(args, None, kwargs, fast, plan_key)
        self.counts.hot += 1
        native = plan.native_calls
        if native is not None and values is not None:
            hot = native.by_values.get(values)
            if hot is not None:
                return hot(fast[1])
            native.make_for_values(values, plan, self.num_inputs, extras, self.returns_one)
        return self._launch_planned(plan, args, fast[1], extras)

    def _out_call(self, args: tuple, out: Any, kwargs: dict) -> Any:
        """A call with `out=`: the hot path where the library's fast key covers the outputs too
        (keyed as inputs and outputs together, under "out"); the pointer checks (partial overlap
        with an input or another output) and torch's version counters run on every call."""
        given = tuple(out) if type(out) is tuple or type(out) is list else (out,)
        adapter = BY_TYPE.get(type(args[0]))
        if adapter is None or adapter.delegates or not adapter.keys_outputs or len(given) != self.num_outputs:
            return self.general_call(args, out, kwargs, None)
        keyword = self.keywords.for_hot_path(kwargs) if kwargs else self.keywords.none_given
        if keyword is None:
            return self.general_call(args, out, kwargs, None)
        extras, kinds, _values = keyword
        fast = self.out_key_function(adapter, self.num_outputs)(args + given)
        if fast is None:
            return self.general_call(args, out, kwargs, None)
        plan_key = ("out", fast[0], kinds)
        plan = self.plans.get(plan_key)
        if plan is None:
            return self.general_call(args, out, kwargs, fast, plan_key)
        self.counts.hot += 1
        pointers, inputs, checks = fast[1], self.num_inputs, plan.checks
        out_pointers, in_pointers = pointers[inputs:], pointers[:inputs]
        if checks.storage is not None:
            checks.storage(args, checks.input_extents)
            checks.storage(given, checks.output_extents)
        if checks.overlap_pairs:
            check_overlap(checks.overlap_pairs, out_pointers, in_pointers)
        if checks.output_pairs:
            check_output_overlap(checks.output_pairs, out_pointers)
        adapter.check_writable(given)
        if plan.launcher is not None:
            plan.launch(out_pointers, in_pointers, extras, ())
        adapter.written(list(given))
        return given[0] if self.returns_one else given

    def general_call(self, args: tuple, out: object, kwargs: dict, fast: FastKey | None,
                     plan_key: Hashable | None = None) -> Any:
        """The general path: any library, scalars, out= and kwargs; plans on a miss. With `fast`
        the plan is kept for the hot path too, under `plan_key` (the fast key with the extras'
        kinds where they are not the defaults', or an `out=` call's key), else under `fast[0]`."""
        self.counts.general += 1
        keywords = self.keywords
        extras, kinds = keywords.of_call(kwargs) if kwargs else (keywords.defaults, keywords.default_kinds)
        try:
            items, parts, adapter, device = self.describe(args)
        except Delegated as delegated:
            return run_delegated(delegated.adapter, self.owner(), args, {"out": out}, kwargs)
        outs = None if out is None else self._outputs(out, adapter, device)
        default_float = adapter.default_float() if any(type(p) is str for p in parts) else None
        key = (adapter, device, tuple(parts), kinds, None if outs is None else tuple(o.key for o in outs),
               default_float)
        plan = self.plans.get(key)
        if plan is None:
            plan = planner.plan(DescribedCall(items, adapter, device, outs, kinds, default_float or "float32"),
                                self.num_outputs, self.loader.launcher)
            self.plans.put(key, plan, plan.spec)
        checks = plan.checks
        adapter.check_storage([i.array for i in items if isinstance(i, Described)], checks.input_extents)
        if outs is not None:
            adapter.check_storage([o.array for o in outs], checks.output_extents)
        needing_grad = adapter.gradient_inputs(items, outs)
        if fast is not None and adapter.reusable(fast[0]):
            self.plans.put(fast[0] if plan_key is None else plan_key, plan, plan.spec, miss=False)
        if outs is None:
            results = [allocate() for allocate in plan.allocators]
            pointers = [plan.pointer(r) for r in results]
        else:
            results = [o.array for o in outs]
            pointers = [o.pointer for o in outs]
        input_pointers = [i.pointer for i in items if isinstance(i, Described)]
        if checks.overlap_pairs:
            check_overlap(checks.overlap_pairs, pointers, input_pointers)
        if checks.output_pairs:
            check_output_overlap(checks.output_pairs, pointers)
        if plan.launcher is not None:
            plan.launch(pointers, input_pointers, extras, items)
        if outs is not None:
            adapter.written(results)
        if needing_grad:
            results = adapter.with_gradient(self.name, needing_grad, results, self.backward, args,
                                            {**self.kwargs, **kwargs})
        return results[0] if self.returns_one else tuple(results)

    def describe(self, args: tuple, check_backend: bool = True) -> tuple[list, list, ArrayAdapter, int]:
        """Per input: the adapter's description, or the Python scalar itself; their key parts;
        the one adapter and device every array input shares. Raises `Delegated` on an input whose
        arrays run a call their own way (DTensor, Dask, traced tensors)."""
        items: list = []
        parts: list = []
        adapter: ArrayAdapter | None = None
        device = -1
        numpy_scalars = []
        for position, x in enumerate(args):
            a = BY_TYPE.get(type(x)) or adapter_for(x)
            if a is None:
                if isinstance(x, numbers.Number):
                    if type(x).__module__ == "numpy":
                        numpy_scalars.append(position)
                    items.append(x)
                    parts.append(scalar_kind(x))
                    continue
                x, a = coerce(x)
            if a.delegates:
                raise Delegated(cast(DelegatingAdapter, a))
            described = a.describe(a.materialize(x))
            if adapter is None:
                adapter, device = a, described.device
                if check_backend:
                    self.check_backend(device)
            elif a is not adapter or described.device != device:
                raise mixed_inputs((adapter.library, a.library), (device, described.device))
            items.append(described)
            parts.append(described.key)
        if adapter is None:
            raise BindError(f"{self.name} needs at least one array input; got only Python scalars")
        if numpy_scalars and adapter.rules == "numpy":
            for position in numpy_scalars:  # NumPy scalars are typed: 0-d arrays of their dtype (NEP 50)
                described = adapter.describe(adapter.asarray(args[position]))
                items[position] = described
                parts[position] = described.key
        return items, parts, adapter, device

    def _outputs(self, out: object, adapter: ArrayAdapter, device: int) -> list[Described]:
        given = out if isinstance(out, (tuple, list)) else (out,)
        for o in given:
            if adapter_for(o) is None:
                raise DTypeError(f"out= must be {adapter.library} arrays (a tuple of them for several outputs), "
                                 f"got {type(o).__name__}")
        if len(given) != self.num_outputs:
            raise BindError(f"{self.name} has {self.num_outputs} output(s), but out= gives {len(given)}")
        result = []
        for o in given:
            if adapter_for(o) is not adapter:
                raise DeviceError(f"out= must be a {adapter.library} array like the inputs, got {type(o).__name__}")
            adapter.check_output(o)
            described = adapter.describe(adapter.materialize(o))
            if described.device != device:
                raise DeviceError(f"out= lives on {device_name(described.device)}, the inputs on {device_name(device)}")
            result.append(described)
        return result
