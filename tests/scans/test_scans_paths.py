"""Which kernel path a scan's layout takes, on the host and on CUDA (pure functions, no GPU): the
issue's benchmark shapes, reversed and transposed layouts, and the launches each path makes."""
from __future__ import annotations

import dataclasses

import pytest

from jiter_magic.kernels import scan_cuda, scan_host
from jiter_magic.planning.reduce_layout import dense_strides
from jiter_magic.planning.scan_plan import (
    BLOCK_SCAN,
    COLUMN_SCAN,
    LOOKBACK_SCAN,
    SCAN_COLUMNS,
    SCAN_ROWS,
    WARP_SCAN,
    ScanSpec,
    plan_scan_layout,
)


def layout(shape, dim, reverse=False, strides=None):
    strides = strides or dense_strides(shape)
    return plan_scan_layout(shape, dim % len(shape), [None], [(shape, strides)], reverse)


@pytest.mark.parametrize(("shape", "dim", "path", "blocks"), [
    ((1 << 28,), 0, LOOKBACK_SCAN, 1),
    ((32768, 1024), 1, WARP_SCAN, 1),
    ((1024, 32768), 0, COLUMN_SCAN, 1),  # enough columns to keep the GPU busy: one pass, no split
    ((64, 1 << 22), 1, LOOKBACK_SCAN, 1),
    ((511, 8 * 2048), 1, LOOKBACK_SCAN, 1),
    ((511, 8 * 2048 - 1), 1, BLOCK_SCAN, 1),
    ((512, 1 << 20), 1, BLOCK_SCAN, 1),
    ((8 * 1536, 8192), 1, BLOCK_SCAN, 1),
    ((1 << 20, 8), 0, COLUMN_SCAN, 1024),
])
def test_cuda_paths_of_the_benchmark_shapes(shape, dim, path, blocks):
    chosen = scan_cuda.choose_path(layout(shape, dim), ("float32",), [0])
    assert chosen == (path, 1, blocks)


def test_a_reversed_scan_walks_from_the_last_element_with_negated_steps():
    forward, backward = layout((4, 10), 1), layout((4, 10), 1, reverse=True)
    assert forward.scan_strides == (1, 1) and forward.starts == (0, 0)
    assert backward.scan_strides == (-1, -1) and backward.starts == (9, 9)
    assert scan_host.choose_path(backward) == SCAN_ROWS and scan_host.choose_path(layout((10, 40), 0)) == SCAN_COLUMNS


def test_launches_and_partials_of_each_path():
    spec = ScanSpec(("float32",), "float32", "float32", (), ("0",), path=LOOKBACK_SCAN, kept_ndim=1)
    long_rows = layout((3, 1 << 20), 1)  # 512 tiles a row: A(t) and I(t) each, a word each (packed)
    assert scan_cuda.launches(spec, long_rows, 1) == [((2, 1, 1), 0), ((3 * 512, 1, 1), 1)]
    assert scan_cuda.partials_size(spec, long_rows, 1) == 16 + 3 * 1024
    # Staged, a look-back tile takes TILE_ITEMS elements a thread where its states fit: 32 of 4 bytes
    # (128 tiles a row), 16 of 8 bytes, 8 of 16 bytes (a value and its index).
    staged = dataclasses.replace(spec, staged=True)
    assert scan_cuda.items_of(staged) == 32 and scan_cuda.items_of(dataclasses.replace(staged, state=2)) == 16
    assert scan_cuda.items_of(dataclasses.replace(staged, indexed=True)) == 8
    assert scan_cuda.launches(staged, long_rows, 1) == [((1, 1, 1), 0), ((3 * 128, 1, 1), 1)]
    assert scan_cuda.partials_size(staged, long_rows, 1) == 16 + 3 * 256
    columns = ScanSpec(("float32",), "float32", "float32", (), ("0",), path=COLUMN_SCAN, kept_ndim=1, state=2)
    tall = layout((1 << 20, 8), 0)
    assert scan_cuda.launches(columns, tall, 1) == [((1, 1, 1), 1)]
    assert scan_cuda.launches(columns, tall, 16) == [((1, 15, 1), 0), ((1, 16, 1), 1)]
    assert scan_cuda.partials_size(columns, tall, 16) == 8 * 16 * 2
