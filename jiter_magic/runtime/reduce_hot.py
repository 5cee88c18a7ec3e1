"""The hot path of reduction calls: a call keyed like one planned before runs in C.

A call of plain arrays of one library, with no `out=` and no keyword values of the map, is keyed
by the adapter's fast key of its inputs (dtypes, shapes, strides, alignment, device: read in C
for torch tensors) and its `dim`, `keepdim` and `dtype`. Once the general path (reduce_call.py)
has planned such a call, it leaves a `HotPlan` of the C call path (native/fast_call.cpp, the one
elementwise calls use) under that key: the `jm_Args` struct packed once, so that a later call only
allocates its result, writes the pointers and launches on the current stream. The general path
in Python costs several times what torch.sum spends on the host, and on a GPU that time passes
before the kernel starts: a single call on a 1 GiB tensor lost several percent of its bandwidth to
it (bench/results/2026-12-06-h100-reductions).

A grid reduction over several blocks a row launches twice, with partials in between, which a
`HotPlan` does not do: its hot path is a Python function writing the pointers into two structs
packed at planning. What stays on the general path: inputs the fast key refuses (requiring grad,
lazy conj/neg views, tensor subclasses, Dask arrays), an unusual `dim` or `keepdim` (anything but
None, an int or a tuple of ints; a bool), and every call where the C call path is not loaded or
the key does not check that a storage still covers a view (torch's key read in Python).
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from jiter_magic.arrays import BY_TYPE
from jiter_magic.arrays.base import ArrayAdapter
from jiter_magic.kernels import reduce_cuda
from jiter_magic.native import call_path
from jiter_magic.runtime.reduce_calls import ReductionCalls

PARTIALS = struct.Struct("<Q")


def options_key(dim: object, keepdim: object, dtype: object) -> tuple | None:
    """`dim`, `keepdim` and `dtype` as part of a hot key, or None where they take the general path
    (a bool is not keyed as the int it equals: the general path refuses `dim=True`)."""
    if type(keepdim) is not bool:
        return None
    if dim is not None and type(dim) is not int:
        if type(dim) is not tuple or any(type(d) is not int for d in dim):
            return None
    return dim, keepdim, dtype


def fast_key(calls: ReductionCalls, args: tuple) -> Any:
    """The adapter's fast key of the inputs, (key, pointers), or None."""
    kind = type(args[0])
    key_of = calls.fast_keys.get(kind, False)
    if key_of is False:
        adapter = BY_TYPE.get(kind)
        if adapter is None:  # a type no call has met yet: the general path registers its adapter
            return None
        key_of = None if adapter.delegates else adapter.fast_key_for(calls.binding.num_inputs)
        calls.fast_keys[kind] = key_of
    return None if key_of is None else key_of(args)


def hot_call(calls: ReductionCalls, args: tuple, dim: object, keepdim: object, dtype: object) -> Any:
    """The result of a call run by its C hot path, or None where the call takes the general path."""
    if not calls.hot or len(args) != calls.binding.num_inputs:
        return None
    return hot_run(calls, args, options_key(dim, keepdim, dtype))


def hot_run(calls: ReductionCalls, args: tuple, options: tuple | None) -> Any:
    """The result of the hot path kept under the inputs' fast key and `options` (a call's options as
    part of a key, None where they take the general path), or None where there is none."""
    if options is None:
        return None
    fast = fast_key(calls, args)
    if fast is None:
        return None
    try:
        run = calls.hot.get((fast[0], options))
    except TypeError:  # a dtype= that cannot be hashed: the general path says what is wrong with it
        return None
    if run is None:
        return None
    calls.counts.hot += 1
    return run(fast[1])


def keep_hot(calls: ReductionCalls, args: tuple, options: dict[str, Any], plan: Any, adapter: ArrayAdapter,
             device: int, packed: Callable[[int], bytes], wrap: Callable[..., Any] | None) -> None:
    """After the general path planned a call without `out=` or keyword values: its hot path, where
    the call may have one (module docstring). `packed(stage)`: the launch's `jm_Args` with every
    pointer 0; `wrap`: what makes the result of the outputs (None: one output, as is)."""
    layout, spec = plan.layout, plan.spec
    if layout.rows == 0:
        return

    def make(core: Any, launcher: Any) -> Callable[[list], Any]:
        # The outputs' allocators are built here, once `keep` has decided to keep the plan.
        dtypes = (spec.output, "int64") if spec.indexed else (spec.output,)
        allocators = tuple(adapter.allocator(layout.out_shape, plan.out_strides, d, args[0]) for d in dtypes)
        if device >= 0 and plan.blocks > 1:
            return _grid_call(launcher.native, packed, spec, layout.rows, plan.blocks, allocators, adapter, device,
                              args, wrap)
        grid = reduce_cuda.launches(spec, layout.rows, plan.blocks)[0][0] if device >= 0 else (1, 1, 1)
        return single_launch(core, launcher, packed(0), grid, args, allocators, adapter, device, wrap)

    keep(calls, args, options_key(options["dim"], options["keepdim"], options["dtype"]), spec, adapter, device, make)


def keep(calls: ReductionCalls, args: tuple, options: tuple | None, spec: Any, adapter: ArrayAdapter, device: int,
         make: Callable[[Any, Any], Callable[[list], Any]]) -> None:
    """Keep `make(core, launcher)`, a call's hot path, under the inputs' fast key and `options`,
    where the call may have one: options that key, inputs the adapter's fast key reads (and whose
    storage it checks), the C call path loaded, a kernel it can launch."""
    if options is None or (adapter.shrinkable and not adapter.key_checks_storage):
        return
    core = call_path.current().loaded_core()
    if core is None:
        return
    fast = fast_key(calls, args)
    if fast is None or not adapter.reusable(fast[0]):
        return
    launcher = calls.launcher(spec, device)
    if launcher.native is None:
        return
    run = make(core, launcher)
    try:
        calls.hot.put((fast[0], options), run, spec)
    except TypeError:  # an unhashable dtype=
        return


def single_launch(core: Any, launcher: Any, packed: bytes, grid: tuple[int, int, int], args: tuple,
                  allocators: tuple, adapter: ArrayAdapter, device: int,
                  wrap: Callable[..., Any] | None) -> Callable[[list], Any]:
    """A hot path of one launch: the C call path's `HotPlan` (outputs allocated, pointers written
    into `packed`, launched on the current stream), its outputs made a result by `wrap`."""
    run = core.HotPlan(launcher.native, launcher, packed, grid, len(args), allocators, adapter.pointer,
                       None if device < 0 else adapter.stream, device, wrap is None)
    return run if wrap is None else _wrapped(run, wrap)


def _wrapped(run: Callable[[list], tuple], wrap: Callable[..., Any]) -> Callable[[list], Any]:
    def call(pointers: list) -> Any:
        return wrap(*run(pointers))

    return call


def _grid_call(native: Any, packed: Callable[[int], bytes], spec: Any, rows: int, blocks: int,
               allocators: tuple, adapter: ArrayAdapter, device: int, args: tuple,
               wrap: Callable[..., Any] | None) -> Callable[[list], Any]:
    """A grid reduction over several blocks a row: its two launches (partials, then their fold)
    from Python, each `jm_Args` copied from one packed at planning with only the pointers
    written, the partials allocated on the call's stream as the general path does."""
    stages = [(packed(stage), grid) for grid, _, stage in reduce_cuda.launches(spec, rows, blocks)]
    size, kind = reduce_cuda.partials_of(spec, rows, blocks)
    partials = adapter.allocator((size,), (1,), kind, args[0])
    pointers_at = struct.Struct(f"<{len(allocators) + len(args)}Q")
    partials_at = pointers_at.size  # the partials' pointer follows the outputs' and the inputs' (reduce_args)
    pointer, stream = adapter.pointer, adapter.stream

    def call(pointers: list) -> Any:
        outs = [allocate() for allocate in allocators]
        keep = partials()
        on = stream(device)
        for template, grid in stages:
            args_struct = bytearray(template)
            pointers_at.pack_into(args_struct, 0, *[pointer(o) for o in outs], *pointers)
            PARTIALS.pack_into(args_struct, partials_at, pointer(keep))
            native.launch(bytes(args_struct), grid, on)
        del keep  # queued: the allocator orders the partials' reuse on the stream
        return outs[0] if wrap is None else wrap(*outs)

    return call
