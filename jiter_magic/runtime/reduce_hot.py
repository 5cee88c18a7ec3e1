"""The hot path of reduction calls (and, keyed their own way, of scans: scan_hot.py): a call keyed
like one planned before runs in C.

A call of plain arrays of one library, with no keyword values of the map, is keyed
by the adapter's fast key of its inputs (dtypes, shapes, strides, alignment, device: read in C
for torch tensors) and its `dim`, `keepdim` and `dtype`. Once the general path (reduce_call.py)
has planned such a call, it leaves a `HotPlan` of the C call path (native/fast_call.cpp, the one
elementwise calls use) under that key: the `jm_Args` struct packed once, so that a later call only
allocates its result, writes the pointers and launches on the current stream. The general path
in Python costs several times what torch.sum spends on the host, and on a GPU that time passes
before the kernel starts: a single call on a 1 GiB tensor lost several percent of its bandwidth to
it (bench/results/2026-12-06-h100-reductions).

A grid reduction over several blocks a row launches twice, with partials in between, as do a
look-back scan and a scan of split columns, which a `HotPlan` does not do: their hot path is a
Python function writing the pointers into two structs packed at planning. A call with `out=`
torch tensors is keyed by its inputs and outputs together (the key refuses what `out=` may not
be), and its hot path, a Python function too, runs on every call the checks no key can carry:
overlap between the outputs and the inputs, an inference tensor outside inference mode; then it
launches and bumps the outputs' version counters, as the general path does. What stays on the
general path: inputs the fast key refuses (requiring grad, lazy conj/neg views, tensor
subclasses, Dask arrays), an unusual `dim` or `keepdim` (anything but None, an int or a tuple of
ints; a bool), and every call where the C call path is not loaded or the key does not check that
a storage still covers a view (torch's key read in Python).
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from jiter_magic.arrays import BY_TYPE
from jiter_magic.arrays.base import ArrayAdapter
from jiter_magic.native import call_path
from jiter_magic.planning.resolve import check_output_overlap, check_overlap
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


def call_options(options: dict[str, Any]) -> tuple | None:
    """A call's options as part of a hot key (`options_key`)."""
    return options_key(options["dim"], options["keepdim"], options["dtype"])


def fast_key(calls: ReductionCalls, args: tuple) -> Any:
    """The adapter's fast key of the inputs, (key, pointers), or None."""
    key_of = calls._fast_keys.get(type(args[0])) or calls._fast_key_function(type(args[0]))
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


def out_arrays_of(calls: ReductionCalls, out: object) -> tuple | None:
    """A call's `out=` as the tuple of arrays the general path would take from it, or None where
    it would refuse its form (it then says why)."""
    binding = calls.binding
    if binding.indexed or binding.tupled:
        return tuple(out) if type(out) is tuple or type(out) is list else None
    return None if type(out) is tuple or type(out) is list else (out,)


def hot_out_run(calls: ReductionCalls, args: tuple, out: object, options: tuple | None) -> Any:
    """The result of an `out=` call run by its hot path, or None where it takes the general path."""
    given = out_arrays_of(calls, out)
    if options is None or given is None or len(args) != calls.binding.num_inputs:
        return None
    adapter = BY_TYPE.get(type(args[0]))
    if adapter is None or adapter.delegates or not adapter.keys_outputs:
        return None
    fast = calls.out_key_function(adapter, len(given))(args + given)
    if fast is None:
        return None
    try:
        run = calls.hot.get(("out", fast[0], options))
    except TypeError:  # a dtype= that cannot be hashed: the general path says what is wrong with it
        return None
    if run is None:
        return None
    calls.counts.hot += 1
    return run(fast[1], given)


def _packer(calls: ReductionCalls, plan: Any, tail: list, device: int, arrays: int) -> Callable[[int], bytes]:
    """A launch's `jm_Args` by its stage, with every pointer 0 (the outputs', the inputs' and the
    partials', `arrays` + 1 of them)."""
    packer = calls.loader.family.packer(plan.spec, "cpu" if device < 0 else "cuda")

    def packed(stage: int) -> bytes:
        return packer.pack(*[0] * (arrays + 1), *plan.counts, stage, *tail, *plan.geometry)

    return packed


def _launchable(calls: ReductionCalls, plan: Any, adapter: ArrayAdapter, device: int) -> Any:
    """The launcher of `plan`'s kernel where a hot path may launch it in C, else None: the C call
    path not loaded, a kernel without a C launch, a key that does not check that a storage still
    covers a view."""
    if (adapter.shrinkable and not adapter.key_checks_storage) or call_path.current().loaded_core() is None:
        return None
    launcher: Any = calls.loader.launcher(plan.spec, device)  # `Launcher` types the call; both have `native`
    return launcher if launcher.native is not None else None


def keep_hot(calls: ReductionCalls, args: tuple, options: tuple | None, plan: Any, tail: list,
             adapter: ArrayAdapter, device: int) -> None:
    """After the general path planned a call (runtime/reduce_call.py's `FoldPlan`) without `out=` or
    keyword values: its hot path, kept under the inputs' fast key and `options` (the call's options
    as part of a key, None where they take the general path), where the call may have one: inputs
    the adapter's fast key reads (and whose storage it checks), the C call path loaded, a kernel it
    can launch. `tail`: the extras as the kernel's `jm_Args` take them."""
    launcher = None if options is None else _launchable(calls, plan, adapter, device)
    if launcher is None:
        return
    fast = fast_key(calls, args)
    if fast is None or not adapter.reusable(fast[0]):
        return
    native, core = launcher.native, call_path.current().loaded_core()
    assert core is not None  # `_launchable` found it loaded
    packed = _packer(calls, plan, tail, device, len(plan.dtypes) + len(args))
    allocators = tuple(adapter.allocator(plan.shape, plan.strides, d, args[0]) for d in plan.dtypes)
    if len(plan.launches) > 1:
        run = _launches_call(native, packed, plan, allocators, adapter, device, args)
    else:
        (grid, stage), = plan.launches
        wrap = plan.wrap
        run = core.HotPlan(native, launcher, packed(stage), grid, len(args), allocators, adapter.pointer,
                           None if device < 0 else adapter.stream, device, wrap is None)
        run = run if wrap is None else _wrapped(run, wrap)
    try:
        calls.hot.put((fast[0], options), run, plan.spec)
    except TypeError:  # an unhashable dtype=
        return


def _wrapped(run: Callable[[list], tuple], wrap: Callable[..., Any]) -> Callable[[list], Any]:
    def call(pointers: list) -> Any:
        return wrap(*run(pointers))

    return call


def _launches(native: Any, packed: Callable[[int], bytes], plan: Any, adapter: ArrayAdapter, device: int,
              args: tuple) -> Callable[[list], None]:
    """Every launch of `plan` from Python, given the outputs' then the inputs' pointers: each
    `jm_Args` copied from one packed at planning with only the pointers written, the partials (where
    the plan has them) allocated on the call's stream as the general path does."""
    stages = [(packed(stage), grid) for grid, stage in plan.launches]
    partials = None if plan.partials is None else adapter.allocator((plan.partials[0],), (1,), plan.partials[1],
                                                                    args[0])
    pointers_at = struct.Struct(f"<{len(plan.dtypes) + len(args)}Q")
    partials_at = pointers_at.size  # the partials' pointer follows the outputs' and the inputs' (reduce_args)
    pointer, stream = adapter.pointer, adapter.stream

    def launch(pointers: list) -> None:
        keep = None if partials is None else partials()
        on = stream(device) if device >= 0 else 0
        for template, grid in stages:
            args_struct = bytearray(template)
            pointers_at.pack_into(args_struct, 0, *pointers)
            if keep is not None:
                PARTIALS.pack_into(args_struct, partials_at, pointer(keep))
            native.launch(bytes(args_struct), grid, on)
        del keep  # queued: the allocator orders the partials' reuse on the stream

    return launch


def _launches_call(native: Any, packed: Callable[[int], bytes], plan: Any, allocators: tuple, adapter: ArrayAdapter,
                   device: int, args: tuple) -> Callable[[list], Any]:
    """A call of several launches (a grid reduction's partials, then their fold; a scan's look-back
    flags zeroed, then its tiles; split columns' segment folds, then their scans), its results
    allocated here."""
    launch = _launches(native, packed, plan, adapter, device, args)
    pointer, wrap = adapter.pointer, plan.wrap

    def call(pointers: list) -> Any:
        outs = [allocate() for allocate in allocators]
        launch([*[pointer(o) for o in outs], *pointers])
        return outs[0] if wrap is None else wrap(*outs)

    return call


def keep_hot_out(calls: ReductionCalls, args: tuple, outs: list, options: tuple | None, plan: Any, tail: list,
                 adapter: ArrayAdapter, device: int, pairs: tuple[tuple, tuple]) -> None:
    """After the general path planned a call with `out=` arrays and no keyword values: its hot path,
    kept under the fast key of its inputs and outputs together and `options`, where the adapter's
    key covers outputs. `pairs`: planning/resolve.py's overlap pairs of the outputs with the inputs
    and with each other, checked against each call's pointers."""
    launcher = _launchable(calls, plan, adapter, device) if options is not None and adapter.keys_outputs else None
    if launcher is None:
        return
    given = tuple(outs)
    fast = calls.out_key_function(adapter, len(given))(args + given)
    if fast is None or not adapter.reusable(fast[0]):
        return
    run = _out_call(launcher.native, _packer(calls, plan, tail, device, len(given) + len(args)), plan, adapter, device,
                    args, pairs)
    try:
        calls.hot.put(("out", fast[0], options), run, plan.spec)
    except TypeError:  # an unhashable dtype=
        return


def _out_call(native: Any, packed: Callable[[int], bytes], plan: Any, adapter: ArrayAdapter, device: int,
              args: tuple, pairs: tuple[tuple, tuple]) -> Callable[[list, tuple], Any]:
    """A call into given `out=` arrays: the pointer checks, every launch (the key lists the inputs
    first, the struct the outputs), and the outputs' version counters bumped."""
    launch = _launches(native, packed, plan, adapter, device, args)
    inputs, (inputs_pairs, outputs_pairs), wrap = len(args), pairs, plan.wrap

    def call(pointers: list, given: tuple) -> Any:
        written, read = pointers[inputs:], pointers[:inputs]
        if inputs_pairs:
            check_overlap(inputs_pairs, written, read)
        if outputs_pairs:
            check_output_overlap(outputs_pairs, written)
        adapter.check_writable(given)
        launch(written + read)
        adapter.written(list(given))
        return given[0] if wrap is None else wrap(*given)

    return call
