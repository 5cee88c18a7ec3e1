"""A reduction's dtypes and identity, and `ReductionSpec`: everything one reduction kernel depends on.

The dtype rules are torch.sum's: integers and bool give int64, floating types keep their dtype;
the accumulator is int64 for integers, float32 for float16 and bfloat16 (then rounded back), the
dtype itself otherwise; `dtype=` names the result and so the accumulator. The identity is a
Python number checked against the accumulator: an integer accumulator takes integers, and takes
-inf and inf as its lowest and highest value (so that one max reduction serves every dtype).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import KW_ONLY, dataclass

from jiter_magic.errors import ArgumentTypeError, DTypeError, ScalarOverflowError
from jiter_magic.planning.dtypes import DTYPES, dtype

# The kernel shapes (kernels/reduce_*.py): on the host a fold a row or columns walked together, on
# CUDA a warp or a block a dense row, a column walk of the leading dims, a block a dense run of
# rows made of several (two stages), or the two-stage grid.
HOST, HOST_COLUMNS = "host", "host_columns"
WARP_ROWS, BLOCK_ROWS, COLUMNS, DENSE_RUNS, GRID = "warp_rows", "block_rows", "columns", "dense_runs", "grid"
HOST_PATHS = (HOST, HOST_COLUMNS)
CUDA_PATHS = (WARP_ROWS, BLOCK_ROWS, COLUMNS, DENSE_RUNS, GRID)


def accumulate_dtype(result: str) -> str:
    """The accumulator of a result dtype, as torch's reductions choose it."""
    kind = dtype(result).kind
    if kind == "c":
        raise DTypeError(f"reductions of {result} are not supported yet: their accumulator and identity "
                         "would be complex")
    if kind in "bi" or result in ("uint8", "uint16", "uint32"):
        return "int64"
    if result == "uint64":
        return "uint64"
    return "float32" if result in ("float16", "bfloat16") else result


def result_dtype(inputs: str, requested: str | None, indexed: bool = False) -> str:
    """The result dtype of reducing elements of (promoted) dtype `inputs`: `dtype=` when given. A
    reduction with indices keeps the inputs' dtype, as torch.max(x, dim) does: its value is one of
    the elements (or their map), not a sum that could outgrow them."""
    if requested is not None:
        return dtype(requested).name
    kind = dtype(inputs).kind
    if kind == "c":
        accumulate_dtype(inputs)  # the same error
    return "int64" if kind in "bui" and not indexed else inputs


def check_identity(value: object) -> None:
    """At creation: the identity is a bool, int or float (C++ literals depend on it) that some
    accumulator can hold."""
    if isinstance(value, numbers.Real):  # bool, int, float, and NumPy's real scalars
        try:
            float(value)
        except OverflowError:
            text = str(value) if len(str(value)) <= 24 else f"{str(value)[:12]}...({len(str(value))} digits)"
            raise ScalarOverflowError(f"identity {text} is beyond every accumulator's range (an int64 or uint64 "
                                      "holds below 2**64, a float64 about 1.8e308); for a max or min identity "
                                      "give float('-inf') or float('inf')") from None
        return
    raise ArgumentTypeError(f"identity must be a Python number (bool, int or float) that combine(identity, x) "
                            f"leaves x unchanged for, such as 0 for a sum or float('-inf') for a max; got "
                            f"{type(value).__name__}: {value!r}")


_INT_LIMITS = {"int64": ("(-9223372036854775807LL - 1)", "9223372036854775807LL", -(1 << 63), (1 << 63) - 1),
               "uint64": ("0ULL", "18446744073709551615ULL", 0, (1 << 64) - 1)}


def identity_literal(value: object, accumulate: str) -> str:
    """The identity as a C++ expression of the accumulator type, or an error naming why it does not fit."""
    if DTYPES[accumulate].kind == "f":
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            text = "jm_nan()"
        elif math.isinf(number):
            text = "jm_inf()" if number > 0 else "-jm_inf()"
        else:
            text = repr(number)
        return f"((jm_acc_t)({text}))"
    lowest, highest, low, high = _INT_LIMITS[accumulate]
    if isinstance(value, float) or not hasattr(value, "__index__"):
        number = float(value)  # type: ignore[arg-type]
        if math.isinf(number):
            return f"((jm_acc_t){highest if number > 0 else lowest})"
        if not number.is_integer():
            raise DTypeError(f"identity {value!r} is not an integer, but this call accumulates in {accumulate}: "
                             "give an integer identity (or -inf/inf for the lowest/highest value)")
        value = int(number)
    integer = int(value)
    if not low <= integer <= high:
        raise ScalarOverflowError(f"identity {integer} does not fit the {accumulate} accumulator")
    return f"((jm_acc_t){integer}{'ULL' if accumulate == 'uint64' else 'LL'})"


@dataclass(frozen=True, slots=True)
class ReductionSpec:
    """One reduction kernel: dtypes, the identity, the kernel shape and its loop dimensions."""

    inputs: tuple[str, ...]  # storage dtype of each input
    output: str  # storage dtype of the result
    accumulate: str  # the accumulator's dtype (the functors' T)
    extras: tuple[str, ...]  # kind of each extra argument (int64, float64, bool), in the map's order
    identity: str  # a C++ expression of the accumulator type
    _: KW_ONLY
    path: str  # one of HOST_PATHS or CUDA_PATHS
    kept_ndim: int  # loop dims of the output elements (at least 1)
    reduced_ndim: int  # loop dims of the reduced elements (at least 1)
    vec: int = 1  # elements a vector load: along rows (CUDA row and grid paths), or columns a thread (columns)
    indexed: bool = False  # also the index of each result (an int64 output), as argmax gives
    indices_given: bool = False  # with indices: input 1 holds each element's index (a tree's fold)
    index32: bool = False  # with indices: a thread's loop carries its index in 32 bits (fewer than 2^31 reduced)

    @property
    def tupled(self) -> bool:
        """A call gives a tuple of arrays however many it writes (a scan's state of several values)."""
        return False

    def describe(self) -> str:
        """One line for people: dtypes, the kernel shape and its loop dims."""
        ins = ", ".join(self.inputs)
        vector = f", {self.vec}-wide loads" if self.vec > 1 else ""
        output = f"({self.output}, int64 index)" if self.indexed else self.output
        given = ", indices given" if self.indices_given else ""
        narrow = ", 32-bit loop indices" if self.index32 else ""
        return (f"reduce ({ins}{given}) -> {output} accumulating {self.accumulate}, {self.path} "
                f"{self.kept_ndim}-d kept x {self.reduced_ndim}-d reduced{vector}{narrow}")
