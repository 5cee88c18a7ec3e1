"""The look-back over a fixed window of tiles (kernels/scan_window.py) modelled in Python, with no
GPU, as test_scans_lookback.py models the tree: each carry is the ordered fold of exactly the tiles
before it, its grouping (kept as a hash) the same under every schedule, and no schedule deadlocks.
A model of the timing shows why the window exists: with a tile starting every P and a read taking
H, a tile's carry waits about H once the window spans H / P tiles, where the tree's waits chain
about log2(H / P) reads deep."""
from __future__ import annotations

import random

import pytest
from test_scans_lookback import IDENTITY, Board, combine, fenwick, step_one, writer

from jiter_magic.kernels import scan_lookback, scan_window
from jiter_magic.kernels.scan_lookback import tree_size


def window_items(tile, warps):
    """The window's keys, in fold order: I(t - W), then A(t - W + 1) ... A(t - 1); None below tile 0."""
    first = tile - 32 * warps
    return [None if first + q < 0 else ("I" if q == 0 else "A", first + q) for q in range(32 * warps)]


def warp_fold(values):
    """Lane 31's value after the kernel's warp scan: lane l takes lane l - off's value first."""
    for off in (1, 2, 4, 8, 16):
        values = [combine(values[lane - off], values[lane]) if lane >= off else values[lane] for lane in range(32)]
    return values[31]


def window_program(tile, warps, published, rng):
    """One tile as the kernel runs it: publish A(t), wait (lanes in any order) for its window,
    fold each warp's 32 items, the warps' folds in order, then publish I(t). Returns the carry."""
    aggregate = (tile, tile + 1, tile)
    published[("A", tile)] = aggregate
    items = window_items(tile, warps)
    for key in rng.sample([key for key in items if key is not None], sum(key is not None for key in items)):
        assert key[1] < tile  # only earlier tiles: a tile never waits on a later one
        while key not in published:
            yield key
    values = [IDENTITY if key is None else published[key] for key in items]
    carry = IDENTITY
    for w in range(warps):
        carry = combine(carry, warp_fold(values[32 * w:32 * w + 32]))
    published[("I", tile)] = combine(carry, aggregate)
    return carry


def run_window(tiles, warps, resident, seed):
    rng = random.Random(seed)
    runnable: list[int] = []
    published = Board(runnable)
    programs: dict = {}
    carries: dict = {}
    while len(carries) < tiles:
        while len(programs) < tiles and len(programs) - len(carries) < resident:
            programs[len(programs)] = window_program(len(programs), warps, published, rng)
            runnable.append(len(programs) - 1)
        step_one(runnable, programs, published, carries, rng)
    assert len(published) == 2 * tiles == scan_window.row_entries(tiles)
    return carries


@pytest.mark.parametrize(("tiles", "warps"), [(1, 1), (31, 1), (32, 1), (33, 1), (100, 1), (1000, 1), (65, 2),
                                              (300, 2), (255, 8), (257, 8), (600, 8)])
def test_each_carry_is_the_ordered_fold_of_the_tiles_before_and_the_same_every_schedule(tiles, warps):
    first = run_window(tiles, warps, resident=1, seed=0)
    assert first[0] is IDENTITY
    for t in range(1, tiles):
        assert first[t][:2] == (0, t)
    for resident, seed in ((4, 1), (64, 2), (tiles, 3)):
        assert run_window(tiles, warps, resident, seed) == first  # ranges and groupings


def tree_delays(tiles, period, trip):
    """The tree's wait from each tile's aggregate to its carry, a read taking `trip`."""
    published, delays = {}, []
    for tile in range(tiles):
        start = tile * period
        published[(0, tile)] = start
        ends = (~tile & (tile + 1)).bit_length() - 1
        keys = fenwick(tile)
        levels = max([published[key] + trip for key in keys if key[0] < ends] + [start])
        for k in range(1, ends + 1):
            published[(k, ((tile + 1) >> k) - 1)] = levels
        assert all(writer(key) < tile for key in keys)
        delays.append(max([max(published[key], levels) + trip for key in keys if key[0] > ends] + [levels]) - start)
    assert len(published) == tree_size(tiles)
    return delays[tiles // 2:]


def window_delays(tiles, period, trip, warps):
    aggregates, inclusive, delays = {}, {}, []
    for tile in range(tiles):
        aggregates[tile] = tile * period
        ready = [aggregates[tile]] + [(inclusive if key[0] == "I" else aggregates)[key[1]] + trip
                                      for key in window_items(tile, warps) if key is not None]
        inclusive[tile] = max(ready)
        delays.append(inclusive[tile] - aggregates[tile])
    return delays[tiles // 2:]


def test_a_window_wider_than_a_round_trip_waits_one_round_trip_where_the_tree_waits_several():
    period, trip = 1.0, 64.0  # an H100 at copy speed: a 4096-element tile every ~11 ns, a read ~0.7 us
    tree = tree_delays(1 << 13, period, trip)
    window = window_delays(1 << 13, period, trip, warps=8)
    assert max(window) <= trip
    assert sum(tree) / len(tree) > 5 * trip
    assert max(window_delays(1 << 12, period, trip, warps=1)) > 20 * trip  # 32 tiles a round trip fall behind
    assert scan_lookback.WINDOW == 0 or 32 * scan_lookback.WINDOW >= 4 * trip / period  # the default spans it
