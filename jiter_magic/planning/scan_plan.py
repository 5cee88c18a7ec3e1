"""What a scan call computes and how its kernel walks it: the dim, dtypes, `ScanSpec` and `ScanLayout`.

The dtype rules are torch.cumsum's, which are torch.sum's (planning/reduce_spec.py): integers and
bool give int64, float16 and bfloat16 accumulate in float32; a scan with indices keeps the
inputs' dtype, as torch.cummax does. The scanned dim is required, as torch.cumsum's is. The
other dims are kept: coalesced innermost first, one loop row a position of theirs. Each operand
steps along the scanned dim with its own stride; a reversed scan walks it from its last element
with the strides negated, so that every kernel walks forward and knows nothing of `reverse`.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from jiter_magic.errors import ArgumentTypeError
from jiter_magic.frontend.scan import ScanArrays
from jiter_magic.planning.layout import broadcast_shape, broadcast_strides, coalesce
from jiter_magic.planning.reduce_layout import dense_strides, dim_index, product
from jiter_magic.planning.reduce_result import common_dtype
from jiter_magic.planning.reduce_spec import accumulate_dtype, identity_literal, result_dtype

# The kernel shapes (kernels/scan_*.py): on the host rows (split over the threads where they are
# few and long) or columns scanned together; on CUDA a warp a row, a block a row, a thread a column,
# and a few long rows split into tiles, a block each, scanned in one pass from a look-back's carry.
SCAN_ROWS, SCAN_COLUMNS = "scan_rows", "scan_columns"
WARP_SCAN, BLOCK_SCAN, COLUMN_SCAN, LOOKBACK_SCAN = "warp_scan", "block_scan", "column_scan", "lookback_scan"
HOST_SCAN_PATHS = (SCAN_ROWS, SCAN_COLUMNS)
CUDA_SCAN_PATHS = (WARP_SCAN, BLOCK_SCAN, COLUMN_SCAN, LOOKBACK_SCAN)


def scan_dim(dim: object, ndim: int) -> int:
    """The scanned dim of an `ndim`-d array, in range(max(ndim, 1)): required, an int (a 0-d array
    takes 0 or -1, as torch.cumsum's does)."""
    if dim is None:
        raise ArgumentTypeError("a scan needs dim= (the dimension to scan along), as torch.cumsum does: "
                                "pass an int, such as dim=-1")
    return dim_index(dim, ndim, "an int (a scan runs along one dimension)")


@dataclass(frozen=True, slots=True)
class ScanResult:
    """A scan call's result, from its inputs' dtypes and shapes alone."""

    shape: tuple[int, ...]  # the inputs' broadcast shape, the result's too
    dim: int  # the scanned dim of that shape (0 for a 0-d one)
    dtype: str  # each result's dtype (the indices of a scan with indices are int64)
    accumulate: str  # the state's dtype (the functors' T)
    identity: tuple[str, ...]  # C++ literals of the identity's values, in the accumulator type


def scan_result(dtypes: list[str], shapes: list[tuple[int, ...]], rules: str, dim: object, requested: str | None,
                identity: tuple[object, ...], indexed: bool, indices_given: bool = False) -> ScanResult:
    """What scanning inputs of these dtypes and shapes gives: `rules` promote them ('torch' or
    'numpy'), `requested` is `dtype=` as a name; each identity value must fit the accumulator."""
    valued = dtypes[:1] if indices_given else dtypes
    result = result_dtype(common_dtype(valued, shapes[:len(valued)], rules), requested, indexed)
    accumulate = accumulate_dtype(result)
    literals = tuple(identity_literal(value, accumulate) for value in identity)
    shape = broadcast_shape(shapes)
    return ScanResult(shape, scan_dim(dim, len(shape)), result, accumulate, literals)


@dataclass(frozen=True, slots=True)
class ScanSpec(ScanArrays):
    """One scan kernel: dtypes, the identity, the kernel shape and its loop dims."""

    inputs: tuple[str, ...]  # storage dtype of each input
    output: str  # storage dtype of each result (the indices' are int64)
    accumulate: str  # the state's dtype (the functors' T)
    extras: tuple[str, ...]  # kind of each extra argument (int64, float64, bool), in the map's order
    identity: tuple[str, ...]  # a C++ expression a state value, in the accumulator type
    _: KW_ONLY
    path: str  # one of HOST_SCAN_PATHS or CUDA_SCAN_PATHS
    kept_ndim: int  # loop dims of the rows (at least 1)
    state: int = 1  # values the state holds
    indexed: bool = False  # values and their indices, as torch.cummax gives
    exclusive: bool = False  # each result folds the elements before its own
    vec: int = 1  # elements a vector load (CUDA paths)
    staged: bool = False  # CUDA row paths: a tile's loads and stores go through shared memory, coalesced
    kept_values: tuple[int, ...] | None = None  # the state values written, by position (None: all of them)

    @property
    def written(self) -> tuple[int, ...]:
        """The position in the state of each array written (the first `outputs` of the operands)."""
        return tuple(range(self.outputs)) if self.kept_values is None else self.kept_values

    def describe(self) -> str:
        """One line for people: dtypes, the kernel shape and its loop dims."""
        ins = ", ".join(self.inputs)
        output = f"({self.output}, int64 index)" if self.indexed else \
            self.output if self.state == 1 else f"{self.state} x {self.output}"
        if self.kept_values is not None:  # a state of several values, some of them written
            output = f"values {self.kept_values} of {output}"
        kind = "exclusive scan" if self.exclusive else "scan"
        vector = f", {self.vec}-wide loads" if self.vec > 1 else ""
        vector += ", staged" if self.staged else ""
        return (f"{kind} ({ins}) -> {output} accumulating {self.accumulate}, {self.path} "
                f"{self.kept_ndim}-d kept{vector}")


@dataclass(frozen=True, slots=True)
class ScanLayout:
    """How one scan call iterates: rows (positions of the kept dims), each `count` elements long.
    Operands are the outputs first (each state value, or values and indices), then the inputs."""

    shape: tuple[int, ...]
    kept_sizes: tuple[int, ...]  # coalesced kept dims, innermost first
    kept_strides: tuple[tuple[int, ...], ...]  # per operand
    scan_strides: tuple[int, ...]  # per operand, negated for a reversed scan
    starts: tuple[int, ...]  # per operand: the offset of a row's first element walked
    rows: int
    count: int

    @property
    def rows_dense(self) -> bool:
        """Every operand steps one element along the scanned dim: each row a dense run."""
        return all(s == 1 for s in self.scan_strides)

    @property
    def columns_dense(self) -> bool:
        """Neighbouring rows are neighbouring elements of every operand (a scan along a leading dim)."""
        return bool(self.kept_sizes) and all(s[0] == 1 for s in self.kept_strides)


def plan_scan_layout(shape: tuple[int, ...], dim: int, outputs: list[tuple[int, ...] | None],
                     inputs: list[tuple[tuple[int, ...], tuple[int, ...]]], reverse: bool) -> ScanLayout:
    """The layout of scanning `dim` of `shape`: `outputs` are the `out=` arrays' element strides
    (None: dense), `inputs` each input's own (shape, element strides), broadcast here."""
    if not shape:  # a 0-d array scans its one element
        shape, dim = (1,), 0
        outputs = [None for _ in outputs]
        inputs = [((1,), (0,)) for _ in inputs]
    operands = [list(s if s is not None else dense_strides(shape)) for s in outputs]
    operands += [list(broadcast_strides(s, st, shape)) for s, st in inputs]
    kept = [axis for axis in range(len(shape)) if axis != dim][::-1]
    kept_sizes, kept_strides = coalesce([shape[a] for a in kept], [[st[a] for a in kept] for st in operands])
    count = shape[dim]
    steps = [st[dim] for st in operands]
    starts = [0] * len(steps)
    if reverse:
        starts = [(count - 1) * step if count else 0 for step in steps]
        steps = [-step for step in steps]
    return ScanLayout(shape, kept_sizes, kept_strides, tuple(steps), tuple(starts), product([shape[a] for a in kept]),
                      count)
