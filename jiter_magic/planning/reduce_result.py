"""What a reduction call returns, from its inputs' dtypes and shapes alone: shape, dims and dtypes.

The integrations need a call's result before any data exists: torch.compile's fake operator
allocates it, a Dask graph declares its dtype and a backward unsqueezes the reduced dims. They
read it here, from the same pure functions (and so with the same errors) as the call's own
planning (runtime/reduce_call.py). A reduction's and a scan's plan check their flags and `out=`
arrays here alike.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jiter_magic.errors import ArgumentTypeError, DTypeError, ShapeError
from jiter_magic.planning.dtypes import DIMENSIONED, ZERO_DIM, promote_types, torch_result_type
from jiter_magic.planning.layout import ArrayDesc, broadcast_shape
from jiter_magic.planning.reduce_layout import check_not_empty, normalize_dims, product, reduced_shape
from jiter_magic.planning.reduce_spec import accumulate_dtype, identity_literal, result_dtype


@dataclass(frozen=True, slots=True)
class ReductionResult:
    """A reduction call's result, as planning would find it."""

    shape: tuple[int, ...]  # the inputs' broadcast shape
    dims: tuple[int, ...]  # the reduced dims of that shape, sorted
    out_shape: tuple[int, ...]  # the result's shape (keepdim applied)
    kept_shape: tuple[int, ...]  # the result's shape with every reduced dim kept as 1
    dtype: str  # the result's dtype
    accumulate: str  # the accumulator's dtype

    @property
    def count(self) -> int:
        """How many elements each result element folds."""
        return product([self.shape[axis] for axis in self.dims])


def check_flag(value: object, name: str) -> bool:
    """`keepdim=`, `reverse=` and `exclusive=` are True or False (a NumPy bool too), as torch takes
    them: a string such as "False" would otherwise count as true."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    if not isinstance(value, bool) and not numpy_bool:
        raise ArgumentTypeError(f"{name} must be True or False, got {type(value).__name__}: {value!r}")
    return bool(value)


def checked_out(out: tuple[ArrayDesc, ...], expected: tuple[int, ...], dtypes: Sequence[str], result: str,
                verb: str = "reduce") -> None:
    """`out=` arrays of the result's shape and dtypes (the values', then the indices' int64, or each
    value of a scan's state); `result` names the result in a message, `verb` what a call does."""
    for position, (desc, wanted) in enumerate(zip(out, dtypes)):
        which = "out=" if len(out) == 1 else f"out[{position}]"
        if desc.shape != expected:
            raise ShapeError(f"{which} has shape {desc.shape}, but {result} has shape {expected}")
        if desc.dtype != wanted:
            hint = f"pass dtype={desc.dtype} to {verb} into it, or " if position == 0 or wanted != "int64" else ""
            raise DTypeError(f"{which} has dtype {desc.dtype}, but the result is {wanted}; {hint}an {which} of "
                             f"dtype {wanted}")




def common_dtype(dtypes: list[str], shapes: list[tuple[int, ...]], rules: str) -> str:
    """The inputs' promoted dtype, as an elementwise call's: under torch's rules a 0-d tensor
    promotes only within its category (a float32 tensor with a 0-d float64 one stays float32);
    NumPy's rules (NEP 50) treat a 0-d array as any other."""
    if rules == "torch":
        return torch_result_type(tuple((d, ZERO_DIM if s == () else DIMENSIONED) for d, s in zip(dtypes, shapes)))
    common = dtypes[0]
    for name in dtypes[1:]:
        common = promote_types(common, name, rules)
    return common


def reduction_result(dtypes: list[str], shapes: list[tuple[int, ...]], rules: str, dim: object, keepdim: bool,
                     requested: str | None, identity: object, indexed: bool = False) -> ReductionResult:
    """The result of reducing inputs of these dtypes and shapes: `rules` promote them ('torch' or
    'numpy'), `requested` is `dtype=` as a name; the identity must fit the accumulator. `indexed`:
    values with their indices, whose values keep the inputs' dtype and whose reduced dims may not
    be empty."""
    check_flag(keepdim, "keepdim")
    result = result_dtype(common_dtype(dtypes, shapes, rules), requested, indexed)
    accumulate = accumulate_dtype(result)
    identity_literal(identity, accumulate)  # an identity the accumulator cannot hold: the call's own error
    shape = broadcast_shape(shapes)
    dims = normalize_dims(dim, len(shape))
    if indexed:
        check_not_empty(shape, dims)
    return ReductionResult(shape, dims, reduced_shape(shape, dims, bool(keepdim)), reduced_shape(shape, dims, True),
                           result, accumulate)
