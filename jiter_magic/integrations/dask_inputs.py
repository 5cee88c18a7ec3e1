"""What Dask calls share (elementwise in dask.py, reductions in reduce_dask.py, scans in
scan_dask.py): inputs as Dask arrays, their known sizes, their zero-size metas, their dims'
indices broadcast right-aligned, the refusal of `out=` and of unknown sizes, a reduction's or
scan's plan, and the outputs of one layer that computes several together split into one Dask
array each."""
from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import dask.array as da
from dask.array.utils import meta_from_array

from jiter_magic.arrays import adapter_for, coerce
from jiter_magic.errors import DeviceError, InvalidArgumentError, ShapeError, UnsupportedArrayError
from jiter_magic.integrations.kinds import planned


def out_is_refused() -> InvalidArgumentError:
    return InvalidArgumentError(
        "out= is not supported with Dask arrays, which are immutable: use the returned Dask array "
        "(da.store(result, target) writes it into an existing array)")


def as_dask_input(x: Any) -> Any:
    """A Dask array as it is; a NumPy or CuPy array (or what `coerce` brings to one) as a one-chunk
    Dask array, which `blockwise` rechunks to match the others; a number as it is, for every block."""
    if isinstance(x, da.Array) or isinstance(x, numbers.Number):
        return x
    adapter = adapter_for(x)
    if adapter is None:
        x, adapter = coerce(x)
    if adapter.library == "torch":
        raise DeviceError(
            "torch tensors cannot be mixed with Dask arrays in one call: Dask computes block by block on "
            "NumPy or CuPy chunks; pass tensor.numpy() (CPU) or cupy.asarray(tensor) (GPU) instead, or call "
            "the function on torch tensors alone")
    if adapter.delegates:
        raise UnsupportedArrayError(f"{type(x).__name__} cannot be an input of a call on Dask arrays; pass a Dask, "
                                    "NumPy or CuPy array")
    return da.from_array(x, chunks=-1)


def known_sizes(shape: tuple) -> tuple[int, ...]:
    """The shape with unknown sizes (NaN, after boolean indexing) as 1, which broadcasts with anything."""
    return tuple(1 if math.isnan(n) else int(n) for n in shape)


def check_unknown_sizes(arrays: list[Any]) -> None:
    """A dim whose size an input does not know (NaN chunks, after boolean indexing) broadcasts only
    with inputs chunked the same way there, which Dask checks at graph time with its own error:
    neither it nor the eager call's check can tell whether such shapes agree, so say it as the
    eager call says a shape mismatch (a ShapeError), with the way out."""
    ndim = max(a.ndim for a in arrays)
    for axis in range(ndim):
        chunkings = {tuple(str(c) for c in a.chunks[axis - ndim + a.ndim]) for a in arrays
                     if axis - ndim + a.ndim >= 0 and a.shape[axis - ndim + a.ndim] != 1}
        if len(chunkings) > 1 and any("nan" in chunks for chunks in chunkings):
            shapes = ", ".join(str(a.shape) for a in arrays)
            raise ShapeError(f"Dask inputs of shapes {shapes}: a size is unknown (nan, after boolean indexing) along "
                             f"dim {axis} and the others are chunked otherwise there, so whether the shapes broadcast "
                             "cannot be told; call x.compute_chunk_sizes() on the input first")


def check_known_along(arrays: list[Any], ndim: int, dims: tuple[int, ...], prefix: str, where: str, why: str) -> None:
    """Every size along `dims` of the `ndim`-d broadcast shape known (boolean indexing leaves them
    NaN), or an error saying `where` they are unknown and `why` they must be known."""
    for x in arrays:
        offset = ndim - x.ndim
        if any(axis >= offset and math.isnan(x.shape[axis - offset]) for axis in dims):
            raise InvalidArgumentError(f"{prefix}a Dask input has unknown chunk sizes along {where}, and {why}; call "
                                       "x.compute_chunk_sizes() first")


def plan_of(function: Any, arrays: list[Any], options: dict[str, Any]) -> Any:
    """A reduction's or scan's plan (kinds.py) from the Dask inputs' dtypes and known sizes, by
    the promotion rules of their chunks' library (NumPy's or CuPy's)."""
    adapter = adapter_for(arrays[0]._meta)
    if adapter is None or adapter.delegates:
        raise UnsupportedArrayError(f"{function.name}: Dask arrays of {type(arrays[0]._meta).__name__} chunks cannot "
                                    "be reduced; use NumPy or CuPy chunks")
    return planned(function, options, [x.dtype.name for x in arrays], [known_sizes(x.shape) for x in arrays],
                   adapter.rules)


def right_aligned(inputs: list, ndim: int) -> list[Any]:
    """Each input and its dims' indices in `blockwise`'s pairs, broadcast right-aligned as an
    elementwise call broadcasts them (a number with None: the same for every block)."""
    indexed: list[Any] = []
    for x in inputs:
        indexed += (x, tuple(range(ndim - x.ndim, ndim))) if isinstance(x, da.Array) else (x, None)
    return indexed


def zero_size(x: Any) -> Any:
    """An input as the meta call takes it: a Dask array's meta with no elements (at least one
    dimension, as a 0-d meta holds one element and would launch a kernel); a number as it is."""
    return meta_from_array(x._meta, ndim=max(x.ndim, 1)) if isinstance(x, da.Array) else x


def split_outputs(together: da.Array, index: tuple[int, ...], metas: tuple, name: str) -> tuple[da.Array, ...]:
    """One Dask array an output of `together`, whose blocks are tuples of the outputs' blocks: small
    `getitem` layers, each of its output's meta, named after the function."""
    token = together.name.rsplit("-", 1)[-1]
    return tuple(da.blockwise(operator.getitem, index, together, index, i, None, dtype=meta.dtype, meta=meta,
                              name=f"{name}_{i}-{token}")
                 for i, meta in enumerate(metas))
