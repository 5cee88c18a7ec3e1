"""`JitFunction`: the callable returned by `create_jit_fn`, and its call path.

A call describes its arguments into a cheap tuple key. A known key (the hot path) finds
a `CallPlan` holding the loaded kernel, the output layout and the argument packer, so
only pointers are packed and the kernel is launched. An unknown key goes through the
pipeline once: resolve dtypes and layout, build (disk cache or compile) and load.
"""
from __future__ import annotations

import numbers
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from .arrays import _BY_TYPE as _ADAPTERS
from .arrays import adapter_for, coerce
from .bind import bind
from .build import Specialization, build, render
from .cache import COUNTERS
from .errors import BindError, DeviceError
from .layout import Layout
from .parse import parse_functor
from .plan import CONTIGUOUS, STRIDED, KernelSpec, fast_divisor
from .resolve import check_overlap, overlap_pairs, resolve_call, spec_for_dtypes
from .values import flattener, scalar_kind, scalar_value

_PLAN_LIMIT = 4096


@dataclass(frozen=True)
class CallPlan:
    """Everything a call with a known key needs besides its pointers and scalar values."""

    spec: KernelSpec
    layout: Layout
    launcher: Callable[[list, tuple, int], None] | None
    geometry: tuple[int, ...]  # sizes, strides, divisors: packed after the values
    allocators: tuple[Callable[[], Any], ...]  # one per output
    flatten: Callable | None  # None when extras pack as they are and no input is a scalar
    stream: Callable[[int], int]  # the library's current raw stream on a device
    device: int  # -1 for the host
    overlap_pairs: tuple = ()  # out= plans: (output, input, same layout) pairs to check per call


def cuda_available() -> bool:
    """Whether a CUDA device can run kernels here (CuPy installed and a device visible)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no device all mean "no"
        return False


class JitFunction:
    """A jitted elementwise function; call it like a Python function on arrays."""

    def __init__(self, code_string: str, num_outputs: int | None, kwargs: dict[str, object]):
        self.functor = parse_functor(code_string)
        self.binding = bind(self.functor, list(kwargs), num_outputs)
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        self.num_outputs = self.binding.num_outputs
        self.multi_output = num_outputs is not None
        self.__name__ = self.__qualname__ = self.functor.name
        self.__doc__ = f"jitted elementwise function: {self.functor.signature}"
        self._backend = "auto"
        self._checked_device: int | None = None
        self._num_inputs = self.binding.num_inputs
        self._returns_one = self.num_outputs == 1 and not self.multi_output
        self._default_extras = [self.kwargs[n] for n in self.binding.extra_names]
        self._default_kinds = tuple(scalar_kind(v) for v in self._default_extras)
        self._plans: dict[tuple, CallPlan] = {}
        self._fast_plans: dict[tuple, CallPlan] = {}
        self._launchers: dict[tuple, Callable] = {}
        self._lock = threading.Lock()
        self._build_lock = threading.RLock()
        self.specializations: list[Specialization] = []
        self.warnings: list[str] = []
        self._listeners: list[Callable[[Specialization], None]] = []

    # ----------------------------------------------------------------- properties
    @property
    def code(self) -> str:
        return self.functor.code

    @property
    def name(self) -> str:
        return self.functor.name

    @property
    def num_inputs(self) -> int:
        """How many arrays (or Python numbers) a call takes."""
        return self._num_inputs

    @property
    def backend(self) -> str:
        """'auto' (by where the inputs live), 'cuda' or 'cpu' (refuse inputs living elsewhere)."""
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        if value not in ("auto", "cuda", "cpu"):
            raise ValueError(f"backend must be 'auto', 'cuda' or 'cpu', got {value!r}")
        self._backend = value
        self._checked_device = None
        self._fast_plans.clear()

    def add_listener(self, callback: Callable[[Specialization], None]) -> None:
        """Call `callback(specialization)` whenever a new specialization is built."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[Specialization], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def __repr__(self) -> str:
        return f"<jiter_magic.JitFunction {self.functor.signature}>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        from .widgets import mimebundle

        return mimebundle(self, include, exclude)

    # ----------------------------------------------------------------- the call
    def __call__(self, *args: object, out: object = None, **kwargs: object):
        if len(args) != self._num_inputs:
            raise BindError(
                f"{self.name} takes {self._num_inputs} input(s) {list(self.binding.input_names)}, got {len(args)}"
            )
        fast_key = None
        if out is None and not kwargs:
            # The hot path for torch tensors: one list of C-level attribute reads and a dict lookup.
            # The device object tells CPU from CUDA from meta; the neg/conj bits mark lazy views
            # (never planned on this path: the general path materializes them).
            try:
                descs = [(x.dtype, x.shape, x.stride(), x.data_ptr(), x.device, x.is_neg(), x.is_conj())
                         for x in args]
            except (AttributeError, TypeError):
                descs = None
            if descs is not None:
                fast_key = tuple([(d[0], d[1], d[2], d[3] & 15, d[4], d[5], d[6]) for d in descs])
                plan = self._fast_plans.get(fast_key)
                if plan is not None:
                    COUNTERS.memory_hits += 1
                    results = [allocate() for allocate in plan.allocators]
                    if plan.launcher is not None:
                        self._launch(plan, [r.data_ptr() for r in results], [d[3] for d in descs],
                                     self._default_extras, (), plan.device)
                    return results[0] if self._returns_one else tuple(results)
        return self._call(args, out, kwargs, fast_key)

    @staticmethod
    def _launch(plan: CallPlan, pointers: list, input_pointers: list, extras: list, items, device: int) -> None:
        """Pack pointers, element count, extras and scalar inputs, and launch on the current stream."""
        values = pointers + input_pointers
        if plan.flatten is None:
            values.append(plan.layout.numel)
            values += extras
        else:
            values += plan.flatten(plan.layout.numel, extras, items)
        plan.launcher(values, plan.geometry, plan.stream(device) if device >= 0 else 0)

    def _call(self, args: tuple, out: object, kwargs: dict, fast_key: tuple | None):
        """The general call path: any library, scalars, out= and kwargs; plans on a miss."""
        if kwargs:
            extras, extra_kinds = self._extras(kwargs)
        else:
            extras, extra_kinds = self._default_extras, self._default_kinds
        items, parts, adapter, device = self._describe(args)
        outs = None if out is None else self._outputs(out, adapter, device)
        key = (adapter, device, tuple(parts), extra_kinds,
               None if outs is None else tuple((o[0], o[1], o[2], o[3] % 16) for o in outs))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(key, items, adapter, device, outs)
        else:
            COUNTERS.memory_hits += 1
        if fast_key is not None and adapter.LIBRARY == "torch" and not any(k[5] or k[6] for k in fast_key):
            with self._lock:
                if len(self._fast_plans) >= _PLAN_LIMIT:
                    self._fast_plans.clear()
                self._fast_plans[fast_key] = plan
        if outs is None:
            results = [allocate() for allocate in plan.allocators]
            pointers = [adapter.pointer(r) for r in results]
        else:
            results = [o[5] for o in outs]
            pointers = [o[3] for o in outs]
        input_pointers = [item[3] for item in items if type(item) is tuple]
        if plan.overlap_pairs:
            check_overlap(plan.overlap_pairs, pointers, input_pointers)
        if plan.launcher is not None:
            self._launch(plan, pointers, input_pointers, extras, items, device)
        if self._returns_one:
            return results[0]
        return tuple(results)

    def _extras(self, kwargs: dict) -> tuple[list, tuple]:
        values = self.kwargs
        for name in kwargs:
            if name not in values:
                raise KeyError(f"{name} is not declared in function definition (declared: {list(values)})")
        values = {**values, **kwargs}
        extras = [scalar_value(values[name], name) for name in self.binding.extra_names]
        return extras, tuple(scalar_kind(v) for v in extras)

    def _describe(self, args: tuple, check_backend: bool = True) -> tuple[list, list, Any, int]:
        """Per input: the adapter's cheap description plus the array, or the Python scalar itself."""
        items: list = []
        parts: list = []
        adapter = device = None
        numpy_scalars = []
        for position, x in enumerate(args):
            a = _ADAPTERS.get(type(x)) or adapter_for(x)
            if a is None:
                if isinstance(x, numbers.Number):
                    if type(x).__module__ == "numpy":
                        numpy_scalars.append(position)
                    items.append(x)
                    parts.append(scalar_kind(x))
                    continue
                x, a = coerce(x)
            x = a.materialize(x)
            desc = a.describe(x)
            if adapter is None:
                adapter, device = a, desc[4]
                if check_backend and device != self._checked_device:
                    self._check_backend(device)
            elif a is not adapter:
                raise DeviceError(f"inputs mix {adapter.LIBRARY} and {a.LIBRARY} arrays; convert them to one library")
            elif desc[4] != device:
                raise DeviceError(
                    f"inputs live on different devices ({_where(device)} and {_where(desc[4])}); move them to one device"
                )
            items.append(desc + (x,))
            parts.append((desc[0], desc[1], desc[2], desc[3] % 16))
        if adapter is None:
            raise BindError(f"{self.name} needs at least one array input; got only Python scalars")
        if numpy_scalars and adapter.RULES == "numpy":
            for position in numpy_scalars:  # NumPy scalars are typed: 0-d arrays of their dtype (NEP 50)
                array = adapter.asarray(args[position])
                desc = adapter.describe(array)
                items[position] = desc + (array,)
                parts[position] = (desc[0], desc[1], desc[2], desc[3] % 16)
        return items, parts, adapter, device

    def _check_backend(self, device: int) -> None:
        lives = "cpu" if device < 0 else "cuda"
        if self._backend != "auto" and self._backend != lives:
            raise DeviceError(
                f"{self.name} is set to backend={self._backend!r} but its inputs live on {_where(device)}; "
                f"move them, or set backend='auto'"
            )
        self._checked_device = device

    def _outputs(self, out: object, adapter, device: int) -> list:
        given = out if isinstance(out, (tuple, list)) else (out,)
        if len(given) != self.num_outputs:
            raise BindError(f"{self.name} has {self.num_outputs} output(s), but out= gives {len(given)}")
        result = []
        for o in given:
            if adapter_for(o) is not adapter:
                raise DeviceError(f"out= must be a {adapter.LIBRARY} array like the inputs, got {type(o).__name__}")
            if adapter.materialize(o) is not o:
                raise ValueError("out= must not be a lazy conj/neg view; pass a plain tensor")
            desc = adapter.describe(o)
            if desc[4] != device:
                raise DeviceError(f"out= lives on {_where(desc[4])}, the inputs on {_where(device)}")
            if not adapter.writable(o):
                raise ValueError("out= array is read-only")
            result.append(desc + (o,))
        return result

    # ----------------------------------------------------------------- planning (once per key)
    def _plan(self, key: tuple, items, adapter, device: int, outs) -> CallPlan:
        arrays = _normalized(items, adapter)
        normal_outs = None if outs is None else _normalized(outs, adapter)
        spec, layout = resolve_call(arrays, adapter.RULES, device >= 0, normal_outs, key[3], self.num_outputs)
        launcher = self._launcher(spec, device) if layout.numel else None
        geometry: tuple[int, ...] = ()
        if spec.path != CONTIGUOUS and layout.numel:
            geometry = tuple(layout.sizes) + tuple(s for op in layout.strides for s in op)
            if spec.path == STRIDED and not spec.index64:
                divisors = [fast_divisor(n) for n in layout.sizes]
                geometry += tuple(m for m, _ in divisors) + tuple(s for _, s in divisors)
        like = next(i[5] for i in items if type(i) is tuple)
        allocators = tuple(adapter.allocator(layout.shape, layout.output_strides, d, like) for d in spec.outputs)
        pairs = () if normal_outs is None else overlap_pairs(normal_outs, [a for a in arrays if type(a) is tuple])
        plan = CallPlan(spec, layout, launcher, geometry, allocators, flattener(spec, adapter.RULES == "torch"),
                        adapter.stream, device, pairs)
        with self._lock:
            if len(self._plans) >= _PLAN_LIMIT:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _launcher(self, spec: KernelSpec, device: int) -> Callable:
        launch_key = (device, spec)
        launcher = self._launchers.get(launch_key)
        if launcher is not None:
            return launcher
        with self._build_lock:  # threads missing together build once
            launcher = self._launchers.get(launch_key)
            if launcher is None:
                launcher = self._build_launcher(spec, device)
        return launcher

    def _build_launcher(self, spec: KernelSpec, device: int) -> Callable:
        launch_key = (device, spec)
        if device >= 0:
            from .backends import cuda as backend

            specialization = build(self.binding, spec, "cuda", backend.compiler(device))
            launcher = backend.CudaLauncher(specialization.binary, spec, device)
        else:
            from .backends import cpu as backend

            specialization = build(self.binding, spec, "cpu", backend.compiler())
            launcher = backend.CpuLauncher(specialization.binary, spec, specialization.cache_key)
        self._launchers[launch_key] = launcher
        self._record(specialization)
        return launcher

    def _record(self, specialization: Specialization) -> None:
        self.specializations.append(specialization)
        if specialization.log.strip():
            self.warnings.append(specialization.log.strip())
        for callback in list(self._listeners):
            try:
                callback(specialization)
            except Exception as exc:  # noqa: BLE001 - a display must never fail the computation
                warnings.warn(f"jiter_magic: a specialization listener failed: {exc!r}", RuntimeWarning, 2)

    # ----------------------------------------------------------------- inspection
    def source(self, *dtypes_or_arrays: object, backend: str = "cuda", path: str = CONTIGUOUS, ndim: int = 1,
               **kwargs: object) -> str:
        """The generated source of one specialization (no GPU, no compiler needed).

        Give dtype names (dense inputs; `path` and `ndim` pick the loop), or example inputs as
        for a call (arrays of any library, Python numbers, kwargs overrides): their dtypes and
        layout then decide, exactly as a call on them would.
        """
        if backend not in ("cuda", "cpu"):
            raise ValueError(f"backend must be 'cuda' or 'cpu', got {backend!r}")
        if all(isinstance(d, str) for d in dtypes_or_arrays):
            spec = self._spec_for(dtypes_or_arrays, backend, path, ndim)
        else:
            spec = self._spec_for_arrays(dtypes_or_arrays, backend, kwargs)
        return render(self.binding, spec, backend)

    def _spec_for_arrays(self, args: tuple, backend: str, kwargs: dict) -> KernelSpec:
        if len(args) != self._num_inputs:
            raise BindError(f"{self.name} takes {self._num_inputs} input(s), got {len(args)}")
        _extras, kinds = self._extras(kwargs) if kwargs else (None, self._default_kinds)
        items, _parts, adapter, _device = self._describe(args, check_backend=False)
        arrays = _normalized(items, adapter)
        spec, _layout = resolve_call(arrays, adapter.RULES, backend == "cuda", None, kinds, self.num_outputs)
        return spec

    def _spec_for(self, dtypes: tuple, backend: str, path: str, ndim: int) -> KernelSpec:
        names = list(dtypes) or ["float32"] * self._num_inputs
        if len(names) != self._num_inputs:
            raise BindError(f"{self.name} takes {self._num_inputs} input(s), got {len(names)} dtypes")
        return spec_for_dtypes(names, self._default_kinds, self.num_outputs, backend, path, ndim)

    def compile(self, *dtypes: str, backend: str | None = None, path: str = CONTIGUOUS, ndim: int = 1) -> Specialization:
        """Build a specialization now (for the given input dtypes, default all float32), so errors show early."""
        backend = backend or (self._backend if self._backend != "auto" else ("cuda" if cuda_available() else "cpu"))
        spec = self._spec_for(dtypes, backend, path, ndim)
        for existing in self.specializations:
            if existing.spec == spec and existing.backend == backend:
                return existing
        if backend == "cpu":
            self._launcher(spec, -1)
        elif cuda_available():
            from .backends.cuda import current_device

            self._launcher(spec, current_device())
        else:
            from .compilers.nvrtc import NvrtcCompiler, default_arch

            self._record(build(self.binding, spec, "cuda", NvrtcCompiler(default_arch())))
        return self.specializations[-1]


def _normalized(items: list, adapter) -> list:
    """(dtype name, shape, element strides, pointer) per array item, for planning; scalars as they are."""
    return [adapter.normalize(i[5]) + (i[3],) if type(i) is tuple else i for i in items]


def _where(device: int) -> str:
    return "the CPU" if device < 0 else f"cuda:{device}"
