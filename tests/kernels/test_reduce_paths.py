"""Which CUDA reduction kernel a call's layout takes, its launches, and the host kernel's source."""
from __future__ import annotations

import pytest

from jiter_magic import create_reduction_fn
from jiter_magic.kernels.reduce_common import reduce_args
from jiter_magic.kernels.reduce_cuda import (
    FILL_ROWS,
    LONG_ROW_COUNT,
    MAX_GRID_BLOCKS,
    ROW_BLOCK_COUNT,
    RUN_COUNT,
    blocks_a_row,
    choose_path,
    grid_blocks,
    launches,
    partials_of,
)
from jiter_magic.planning.layout import ArrayDesc
from jiter_magic.planning.reduce_layout import dense_strides, plan_reduction_layout
from jiter_magic.planning.reduce_spec import BLOCK_ROWS, COLUMNS, DENSE_RUNS, GRID, HOST, WARP_ROWS, ReductionSpec
from jiter_magic.runtime.reduce_call import plan_call

ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"


def layout(shape, dims, strides=None):
    if strides is None:
        strides, step = [], 1
        for size in reversed(shape):
            strides.insert(0, step)
            step *= size
    return plan_reduction_layout(shape, [(shape, tuple(strides))], dims, False)


@pytest.mark.parametrize(("shape", "dims", "expected"), [
    ((4096, 1000), (1,), WARP_ROWS),  # short dense rows: a warp each
    ((4096, ROW_BLOCK_COUNT), (1,), BLOCK_ROWS),  # long dense rows: a block each
    ((65536, 4096), (0,), COLUMNS),  # the leading dim: coalesced columns
    ((4096, 65536), (0, 1), GRID),  # everything: the two-stage grid reduction
    ((3, 1_000_000), (1,), GRID),  # a few long rows: several blocks each
    ((512, 6, 7), (0, 2), GRID),  # strided reduced dims
    ((64, 1 << 22), (1,), GRID),  # 64 long rows: a block each would leave half the SMs idle
    ((FILL_ROWS - 1, LONG_ROW_COUNT), (1,), GRID),
    ((FILL_ROWS, LONG_ROW_COUNT), (1,), BLOCK_ROWS),  # rows enough to fill the GPU
    ((64, LONG_ROW_COUNT - 8), (1,), BLOCK_ROWS),  # not long enough to be worth a second launch
    ((512, 8192), (1,), BLOCK_ROWS),
    ((64, 512, 8192), (0, 2), DENSE_RUNS),  # non-adjacent reduced dims, the inner one dense
    ((8, 64, 32, 1024), (0, 2, 3), DENSE_RUNS),  # runs of 32 x 1024 (dims 2 and 3 coalesced)
    ((64, 512, RUN_COUNT - 4), (0, 2), GRID),  # runs too short
    ((2, 3, 65536), (0, 2), GRID),  # too few runs (6 blocks) to fill the GPU
])
def test_choose_path(shape, dims, expected):
    assert choose_path(layout(shape, dims), ("float32",), [4096])[0] == expected


def test_vector_width_needs_aligned_rows():
    dense = layout((256, 1024), (1,))
    assert choose_path(dense, ("float32",), [4096]) == (WARP_ROWS, 4)
    assert choose_path(dense, ("float16",), [4096]) == (WARP_ROWS, 8)
    assert choose_path(dense, ("float32",), [4100]) == (WARP_ROWS, 1)  # a misaligned pointer
    assert choose_path(layout((256, 1022), (1,)), ("float32",), [4096]) == (WARP_ROWS, 1)  # rows not a multiple
    two = plan_reduction_layout((256, 1024), [((256, 1024), (1024, 1)), ((256, 1024), (1024, 1))], (1,), False)
    assert choose_path(two, ("float32", "float64"), [4096, 8192]) == (WARP_ROWS, 1)  # mixed itemsizes


def test_full_reductions_of_dense_arrays_take_the_grid_path_with_vector_loads():
    assert choose_path(layout((1 << 22,), (0,)), ("float32",), [4096]) == (GRID, 4)
    assert choose_path(layout((4096, 65536), (0, 1)), ("bfloat16",), [4096]) == (GRID, 8)
    assert choose_path(layout((3, 1_000_000), (1,)), ("float32",), [4096]) == (GRID, 4)  # a few long rows
    assert choose_path(layout((3, 1_000_001), (1,)), ("float32",), [4096]) == (GRID, 1)  # rows not a multiple
    assert choose_path(layout((512, 6, 7), (0, 2)), ("float32",), [4096]) == (GRID, 1)  # strided: no vectors
    fn = create_reduction_fn(ADD, 0, combine="add")
    vector = fn.source("float32", path=GRID, vec=4)
    assert "jm_vec<float, 4>" in vector and "(jm_index_t)(jm_a.jm_blocks * 256) * 4" in vector
    assert "jm_vec<" not in fn.source("float32", path=GRID)


def test_dense_runs_vector_width_and_blocks():
    runs = layout((64, 512, 8192), (0, 2))
    assert choose_path(runs, ("float32",), [4096]) == (DENSE_RUNS, 4)
    assert choose_path(runs, ("bfloat16",), [4096]) == (DENSE_RUNS, 8)
    assert choose_path(runs, ("float32",), [4104]) == (DENSE_RUNS, 1)  # a misaligned pointer
    assert choose_path(layout((64, 512, 8190), (0, 2)), ("float32",), [4096]) == (DENSE_RUNS, 1)  # odd run length
    assert blocks_a_row(DENSE_RUNS, runs) == 8  # 4096 blocks in all: 8 runs a block
    assert blocks_a_row(DENSE_RUNS, layout((3, 100, 4096), (0, 2))) == 3  # no more blocks than runs
    rows = layout((4, 8192, 1024), (0, 2))  # rows enough: one block a row stores the result
    assert choose_path(rows, ("float32",), [4096]) == (DENSE_RUNS, 4) and blocks_a_row(DENSE_RUNS, rows) == 1
    # A transposed input whose innermost reduced dim has no unit stride: the grid path.
    assert choose_path(layout((64, 512, 8192), (0, 2), strides=(1, 64, 32768)), ("float32",), [4096])[0] == GRID
    # With indices the reduced dims are walked in logical order: dim 2 innermost, still a dense run.
    indexed = plan_reduction_layout((64, 512, 8192), [((64, 512, 8192), (4194304, 8192, 1))], (0, 2), False,
                                    indexed=True)
    assert choose_path(indexed, ("float32",), [4096]) == (DENSE_RUNS, 4)
    spec = ReductionSpec(("float32",), "float32", "float32", (), "0", path=DENSE_RUNS, kept_ndim=1, reduced_ndim=2)
    assert launches(spec, 512, 64) == [((512 * 64, 1, 1), (256, 1, 1), 0), ((512, 1, 1), (256, 1, 1), 1)]
    assert partials_of(spec, 512, 64) == (512 * 64, "float32")


def _planned(fn, shape, dtype, dim, strides=None, device=0):
    desc = ArrayDesc(dtype, shape, strides or dense_strides(shape), 1 << 20)
    return plan_call(fn.binding, [desc], "torch", device, fn.identity, [], {"dim": dim, "keepdim": False}, None, None)


def test_cuda_calls_plan_the_new_paths_from_metadata():
    fn = create_reduction_fn(ADD, 0, combine="add")
    rows = _planned(fn, (64, 1 << 22), "float32", -1)
    assert (rows.spec.path, rows.spec.vec, rows.blocks) == (GRID, 4, 64)  # 64 blocks a row, 4096 in all
    runs = _planned(fn, (64, 512, 8192), "float32", (0, 2))
    assert (runs.spec.path, runs.spec.vec, runs.blocks, runs.spec.reduced_ndim) == (DENSE_RUNS, 4, 8, 2)
    assert runs.layout.reduced_sizes == (8192, 64) and runs.layout.rows == 512
    assert _planned(fn, (64, 512, 8192), "float32", (0, 2), device=-1).spec.path == HOST  # the CPU: host loops
    from jiter_magic import create_multi_output_reduction_fn

    argmax = create_multi_output_reduction_fn(
        "template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
        "  const bool take_b = b > a || (b == a && ib < ia);\n  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n",
        combine="keep_max")
    indexed = _planned(argmax, (64, 512, 8192), "bfloat16", (0, 2))
    assert (indexed.spec.path, indexed.spec.vec, indexed.blocks, indexed.spec.indexed) == (DENSE_RUNS, 8, 8, True)
    columns = _planned(argmax, (4096, 65536), "bfloat16", 0)
    assert (columns.spec.path, columns.spec.vec, columns.blocks) == (COLUMNS, 2, 1)
    everything = _planned(argmax, (1 << 28,), "float32", None)
    assert (everything.spec.path, everything.spec.vec, everything.blocks) == (GRID, 4, MAX_GRID_BLOCKS)


def test_argmax_loops_carry_32_bit_indices_where_fewer_than_2_to_the_31_are_reduced(monkeypatch):
    from jiter_magic import create_multi_output_reduction_fn
    from jiter_magic.kernels import reduce_cuda_loads
    from tests.kernels.test_reduce_golden import ARGMAX

    assert _planned(ARGMAX, (4096, 65536), "bfloat16", 0).spec.index32
    assert _planned(ARGMAX, (1 << 28,), "float32", None).spec.index32
    assert _planned(ARGMAX, (3, 1 << 30), "float32", None).spec.index32 is False  # 3 * 2^30 elements reduced
    assert _planned(ARGMAX, (3, 1 << 30), "float32", 1).spec.index32  # 2^30 a row
    assert _planned(ARGMAX, (4096, 65536), "bfloat16", 0, device=-1).spec.index32 is False  # the host: 64-bit
    assert not _planned(create_reduction_fn(ADD, 0, combine="add"), (1 << 20,), "float32", None).spec.index32
    from jiter_magic.integrations.reduce_parts import tree_parts

    fold = tree_parts(create_multi_output_reduction_fn(ARGMAX.binding.code, combine="keep_max")).fold
    given = [ArrayDesc("float32", (64, 8), (8, 1), 1 << 20), ArrayDesc("int64", (64, 8), (8, 1), 1 << 21)]
    planned = plan_call(fold.calls.binding, given, "torch", 0, fold.identity, [], {"dim": 1, "keepdim": False},
                        None, None)
    assert planned.spec.indices_given and not planned.spec.index32  # given indices keep 64 bits
    monkeypatch.setattr(reduce_cuda_loads, "INDEXED_INDEX32", 0)
    assert not _planned(ARGMAX, (4096, 65536), "bfloat16", 0).spec.index32


def test_indexed_folds_load_in_batches_and_plain_ones_do_not(monkeypatch):
    """With indices a thread loads INDEXED_LOADS steps before folding them in order, its first
    step starting the accumulators (kernels/reduce_cuda_loads.py); plain folds keep their loop,
    and INDEXED_LOADS = 0 gives the unrolled loop of before."""
    from jiter_magic.kernels import reduce_cuda_loads
    from tests.kernels.test_reduce_golden import ARGMAX, SUMSQ

    for path, vec in ((WARP_ROWS, 4), (BLOCK_ROWS, 4), (COLUMNS, 2), (DENSE_RUNS, 4), (GRID, 4)):
        source = ARGMAX.source("bfloat16", path=path, vec=vec)
        assert "for (int jm_u = 0; jm_u < 4; ++jm_u)" in source and "jm_pick_next(" in source
        assert "#pragma unroll 4\n" not in source and "jm_pick_element(" not in source.split("jm_kernel")[-1]
        plain = SUMSQ.source("bfloat16", path=path, vec=vec)
        assert "#pragma unroll 4\n" not in plain and "jm_u" not in plain
    runs = ARGMAX.source("float32", path=DENSE_RUNS, vec=4, reduced_ndim=2)
    # An element's index counts over the whole row, the first step's too.
    assert "(int64_t)(jm_first + jm_j + jm_u * (1024) + jm_e)" in runs and "(int64_t)(jm_first + jm_j)}" in runs
    assert "for (; jm_j + 3 * (1024) < jm_a.jm_rsize[0]; jm_j += 4 * (1024))" in runs
    assert "jm_a.jm_in0 + jm_o0 + jm_j + jm_u * (1024)" in runs
    assert "jm_total = jm_pick(jm_total, jm_acc);" in runs  # a block's runs folded in order
    strided = ARGMAX.source("int8", path=GRID, reduced_ndim=2)
    assert "jm_pick_next" not in strided and "jm_pick_element(" in strided  # strided shares keep their loop
    monkeypatch.setattr(reduce_cuda_loads, "INDEXED_LOADS", 0)
    for path, vec in ((WARP_ROWS, 4), (BLOCK_ROWS, 4), (COLUMNS, 2), (DENSE_RUNS, 4), (GRID, 4)):
        source = ARGMAX.source("bfloat16", path=path, vec=vec)
        assert "#pragma unroll 4\n" in source and "jm_pick_next" not in source


def test_swept_constants_of_reductions_with_indices(monkeypatch):
    """INDEXED_COLUMN_BYTES and INDEXED_MAX_GRID_BLOCKS change argmax's columns and grid paths,
    never a plain reduction's."""
    from jiter_magic.kernels import reduce_cuda

    columns = layout((4096, 65536), (0,))
    indexed = plan_reduction_layout((4096, 65536), [((4096, 65536), (65536, 1))], (0,), False, indexed=True)
    everything = plan_reduction_layout((1 << 28,), [((1 << 28,), (1,))], (0,), False, indexed=True)
    assert indexed.indexed and not columns.indexed and everything.indexed
    assert choose_path(indexed, ("bfloat16",), [4096]) == choose_path(columns, ("bfloat16",), [4096]) == (COLUMNS, 2)
    monkeypatch.setattr(reduce_cuda, "INDEXED_COLUMN_BYTES", 8)
    monkeypatch.setattr(reduce_cuda, "INDEXED_MAX_GRID_BLOCKS", 792)
    assert choose_path(indexed, ("bfloat16",), [4096]) == (COLUMNS, 4)
    assert choose_path(indexed, ("float32",), [4096]) == (COLUMNS, 2)
    assert choose_path(indexed, ("bfloat16",), [4100]) == (COLUMNS, 1)  # 4-byte aligned, not 8
    assert choose_path(columns, ("bfloat16",), [4096]) == (COLUMNS, 2) and grid_blocks(layout((1 << 28,), (0,))) == 1024
    assert grid_blocks(everything) == 792
    monkeypatch.setattr(reduce_cuda, "INDEXED_COLUMN_BYTES", 16)
    assert choose_path(indexed, ("bfloat16",), [4096]) == (COLUMNS, 8)
    assert choose_path(indexed, ("int8",), [4096]) == (COLUMNS, 8)  # at most 8 columns a thread


def test_grid_blocks_and_launches():
    everything = layout((4096, 65536), (0, 1))
    blocks = grid_blocks(everything)
    assert blocks == MAX_GRID_BLOCKS
    spec = ReductionSpec(("float32",), "float32", "float32", (), "0", path=GRID, kept_ndim=1, reduced_ndim=1)
    assert launches(spec, 1, blocks) == [((blocks, 1, 1), (256, 1, 1), 0), ((1, 1, 1), (256, 1, 1), 1)]
    assert launches(spec, 3, 8)[1] == ((3, 1, 1), (256, 1, 1), 1)  # stage 1: a block a row
    assert launches(spec, 10, 1) == [((10, 1, 1), (256, 1, 1), 0)]  # one block a row stores directly
    assert grid_blocks(layout((100_000, 50), (1,))) == 1
    warp = ReductionSpec(("float32",), "float32", "float32", (), "0", path=WARP_ROWS, kept_ndim=1, reduced_ndim=1)
    assert launches(warp, 1000, 1) == [((125, 1, 1), (32, 8, 1), 0)]


def test_args_struct_is_eight_byte_fields_packed_in_order():
    spec = ReductionSpec(("float32", "int32"), "float32", "float32", ("float64", "bool"), "0", path=HOST,
                         kept_ndim=2, reduced_ndim=3)
    args = reduce_args(spec)
    names = [name for name, _, _ in args.fields]
    assert names[:8] == ["jm_out", "jm_in0", "jm_in1", "jm_partials", "jm_rows", "jm_count", "jm_blocks", "jm_stage"]
    # 8 plain fields, 2 extras, sizes and 3 operands' strides of 2 dims, sizes and 2 inputs' strides of 3
    assert args.packer.size == 8 * (8 + 2 + 2 * 4 + 3 * 3)
    assert f"static_assert(sizeof(jm_Args) == {args.packer.size}" in args.declaration()


def test_host_source_folds_in_a_fixed_order_under_the_fault_guard():
    fn = create_reduction_fn(ADD, 0, combine="add")
    source = fn.source("int32")
    assert "typedef int64_t jm_acc_t;" in source
    assert "jm_fold" in source and "jm_split_row" in source and "sigsetjmp" in source
    assert "atomic write" in source and "jm_part[jm_t]" in source  # only the fault status is atomic


def test_host_path_folds_rows_or_walks_columns():
    from jiter_magic.kernels.reduce_host import choose_path as host_path
    from jiter_magic.planning.reduce_spec import HOST_COLUMNS

    assert host_path(layout((300, 70), (1,))) == HOST
    assert host_path(layout((300, 70), (0,))) == HOST_COLUMNS
    assert host_path(layout((300, 4), (0,))) == HOST  # too few neighbouring outputs
    assert host_path(layout((70, 300), (0,), strides=(1, 70))) == HOST  # a transposed input: rows are dense
    assert "jm_by_columns" in create_reduction_fn(ADD, 0, combine="add").source("float32", path=HOST_COLUMNS)
