"""What a reduction call returns, from its inputs' dtypes and shapes alone: shape, dims and dtypes.

The integrations need a call's result before any data exists: torch.compile's fake operator
allocates it, a Dask graph declares its dtype and a backward unsqueezes the reduced dims. They
read it here, from the same pure functions (and so with the same errors) as the call's own
planning (runtime/reduce_call.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from jiter_magic.planning.dtypes import promote_types
from jiter_magic.planning.layout import broadcast_shape
from jiter_magic.planning.reduce_layout import check_not_empty, normalize_dims, reduced_shape
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
        total = 1
        for axis in self.dims:
            total *= self.shape[axis]
        return total


def reduction_result(dtypes: list[str], shapes: list[tuple[int, ...]], rules: str, dim: object, keepdim: bool,
                     requested: str | None, identity: object, indexed: bool = False) -> ReductionResult:
    """The result of reducing inputs of these dtypes and shapes: `rules` promote them ('torch' or
    'numpy'), `requested` is `dtype=` as a name; the identity must fit the accumulator. `indexed`:
    values with their indices, whose values keep the inputs' dtype and whose reduced dims may not
    be empty."""
    common = dtypes[0]
    for name in dtypes[1:]:
        common = promote_types(common, name, rules)
    result = result_dtype(common, requested, indexed)
    accumulate = accumulate_dtype(result)
    identity_literal(identity, accumulate)  # an identity the accumulator cannot hold: the call's own error
    shape = broadcast_shape(shapes)
    dims = normalize_dims(dim, len(shape))
    if indexed:
        check_not_empty(shape, dims)
    return ReductionResult(shape, dims, reduced_shape(shape, dims, bool(keepdim)), reduced_shape(shape, dims, True),
                           result, accumulate)
