"""The look-back scan's tree (kernels/scan_lookback.py) modelled in Python, with no GPU: where each
entry sits, which entries a tile folds and in which order, and the protocol run under random
schedules of tiles (each waiting on flags as the kernel's warp does) with few or many tiles
resident. A combine that checks its operands are adjacent ranges, left before right, shows each
carry is the ordered fold of exactly the tiles before it; its grouping, kept as a hash, is the same
whatever the schedule; no schedule deadlocks; a tile reads only what earlier tiles publish."""
from __future__ import annotations

import random

import pytest

from jiter_magic.kernels import scan_cuda, scan_entries, scan_lookback
from jiter_magic.kernels.scan_lookback import entry, tree_size
from jiter_magic.planning.scan_plan import LOOKBACK_SCAN, ScanSpec

TILE_COUNTS = (1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 100, 255, 1000, 2047, 2048, 2049, 3001)
IDENTITY = None


def combine(x, y):
    """The state of tiles [lo, hi) with the hash of its grouping; refuses operands out of order."""
    if x is IDENTITY:
        return y
    assert x[1] == y[0], f"combined {x[:2]} with {y[:2]}: not adjacent, left first"
    return x[0], y[1], hash((x[2], y[2]))


def fenwick(tile):
    """The entries a tile's carry folds, in their order: one a set bit, highest first."""
    return [(b, (tile >> b) - 1) for b in range(tile.bit_length() - 1, -1, -1) if tile >> b & 1]


def writer(key):
    """The tile that publishes entry (k, m): the last tile of its range."""
    k, m = key
    return (m + 1 << k) - 1


def ends(tile):
    """How many levels a tile ends: its trailing 1 bits."""
    return (~tile & (tile + 1)).bit_length() - 1


def tile_program(tile, published, rng):
    """One tile as the kernel runs it: publish level 0, read the left siblings of the levels it ends
    (its lowest set bits), publish those levels, then read the carry's other entries (the lanes'
    reads, in any order) and fold its carry. Yields each entry it waits for; returns the carry."""
    aggregate = (tile, tile + 1, tile)
    published[(0, tile)] = aggregate
    read = {}
    keys = fenwick(tile)
    siblings = [key for key in keys if key[0] < ends(tile)]
    for key in rng.sample(siblings, len(siblings)):
        assert writer(key) < tile  # only earlier tiles: a tile never waits on a later one
        while key not in published:
            yield key
        read[key[0]] = published[key]
    level = aggregate
    k = 1
    while tile >> (k - 1) & 1:  # a level a trailing 1 bit: the left sibling, then the level below
        level = combine(read[k - 1], level)
        key = (k, ((tile + 1) >> k) - 1)
        assert level[:2] == (key[1] << k, key[1] + 1 << k) and writer(key) == tile
        published[key] = level
        k += 1
    higher = [key for key in keys if key[0] > ends(tile)]
    for key in rng.sample(higher, len(higher)):
        assert writer(key) < tile
        while key not in published:
            yield key
        read[key[0]] = published[key]
    carry = IDENTITY
    for key in fenwick(tile):
        carry = combine(carry, read[key[0]])
    return carry


class Board(dict):
    """Published entries; publishing one makes the tiles waiting on it runnable."""

    def __init__(self, runnable: list) -> None:
        super().__init__()
        self.waiting: dict = {}
        self.runnable = runnable

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.runnable.extend(self.waiting.pop(key, ()))


def run_tiles(tiles, resident, seed):
    """Every tile's carry, tiles started in id order (the kernel's counter), at most `resident` at
    once, the next step taken by a random runnable tile."""
    rng = random.Random(seed)
    runnable: list[int] = []
    published = Board(runnable)
    programs, carries = {}, {}
    while len(carries) < tiles:
        while len(programs) < tiles and len(programs) - len(carries) < resident:
            programs[len(programs)] = tile_program(len(programs), published, rng)
            runnable.append(len(programs) - 1)
        step_one(runnable, programs, published, carries, rng)
    return carries, published


def step_one(runnable, programs, published, carries, rng):
    """One step of a random runnable tile; the tile, if that step finished it."""
    assert runnable, "deadlock: every running tile waits"
    at = rng.randrange(len(runnable))
    runnable[at], runnable[-1] = runnable[-1], runnable[at]
    t = runnable.pop()
    try:
        published.waiting.setdefault(next(programs[t]), []).append(t)
    except StopIteration as done:
        carries[t] = done.value
        return t
    return None


@pytest.mark.parametrize("tiles", TILE_COUNTS)
def test_each_carry_is_the_ordered_fold_of_the_tiles_before_and_the_same_every_schedule(tiles):
    first, published = run_tiles(tiles, resident=1, seed=0)
    assert first[0] is IDENTITY
    for t in range(1, tiles):
        assert first[t][:2] == (0, t)
    assert len(published) == tree_size(tiles)
    for resident, seed in ((4, 1), (64, 2), (tiles, 3)):
        again, _ = run_tiles(tiles, resident, seed)
        assert again == first  # ranges and groupings: independent of timing


def run_persistent(tiles, blocks, seed):
    """Every tile's carry with PERSIST's blocks: each starts with a number from the counter and, as
    it starts a tile, takes the number of its next one (blocks take them in any order); it starts
    that tile only once the current one is done."""
    rng = random.Random(seed)
    runnable: list[int] = []
    published = Board(runnable)
    programs, carries, following = {}, {}, {}
    counter = iter(range(tiles + 2 * blocks))

    def start(tile):
        programs[tile] = tile_program(tile, published, rng)
        following[tile] = next(counter)
        runnable.append(tile)

    for tile in rng.sample([next(counter) for _ in range(blocks)], blocks):
        if tile < tiles:
            start(tile)
    while len(carries) < tiles:
        t = step_one(runnable, programs, published, carries, rng)
        if t is not None and following[t] < tiles:
            start(following[t])
    return carries


@pytest.mark.parametrize("tiles", [1, 7, 100, 1000, 3001])
def test_persistent_blocks_taking_their_next_tile_early_never_deadlock(tiles):
    """A block holds its current tile and its next one's number: the lowest unfinished tile is
    always some block's current one, waiting only on finished tiles."""
    first, _ = run_tiles(tiles, resident=1, seed=0)
    for blocks, seed in ((1, 4), (3, 5), (64, 6)):
        assert run_persistent(tiles, blocks, seed) == first


@pytest.mark.parametrize("tiles", range(1, 300))
def test_tree_entries_fill_their_row_once(tiles):
    places = [entry(tiles, k, m) for k in range(tiles.bit_length()) for m in range(tiles >> k)]
    assert sorted(places) == list(range(tree_size(tiles)))


def test_a_carry_reads_at_most_one_entry_a_bit():
    assert fenwick(0) == [] and fenwick(1) == [(0, 0)]
    assert fenwick(6) == [(2, 0), (1, 2)]  # tiles [0, 4) then [4, 6)
    assert fenwick(11) == [(3, 0), (1, 4), (0, 10)]  # [0, 8), [8, 10), [10, 11)
    assert all(len(fenwick(t)) <= 31 for t in (scan_lookback.MAX_TILES, 1 << 30, 12345678))


def test_workspace_and_launches(monkeypatch):
    monkeypatch.setattr(scan_lookback, "WINDOW", 0)  # the tree's entries (the window's: test_scans_paths)
    spec = ScanSpec(("float32",), "float32", "float32", (), ("0",), path=LOOKBACK_SCAN, kept_ndim=1)
    pairs = ScanSpec(("float32",), "float32", "float32", (), ("0",), path=LOOKBACK_SCAN, kept_ndim=1, indexed=True)
    linear = ScanSpec(("float32", "float32"), "float32", "float32", (), ("1", "0"), path=LOOKBACK_SCAN, kept_ndim=1,
                      state=2)
    tiles = (1 << 28) // scan_cuda.TILE
    assert tree_size(tiles) == 2 * tiles - 1
    # Packed: the counter's 128-byte line, then an 8-byte word a 4-byte piece of each entry's state,
    # all zeroed by stage 0.
    assert (scan_entries.pieces(spec), scan_entries.pieces(pairs), scan_entries.pieces(linear)) == (1, 4, 2)
    words = 16 + 2 * tiles - 1
    assert scan_lookback.workspace_words(spec, 1, 1 << 28, scan_cuda.TILE) == words
    assert scan_lookback.launches(spec, 1, 1 << 28, scan_cuda.TILE) == [((-(-words // scan_cuda.TILE), 1, 1), 0),
                                                                         ((tiles, 1, 1), 1)]
    assert scan_lookback.workspace_words(pairs, 3, 5 * scan_cuda.TILE + 1, scan_cuda.TILE) == 16 + 3 * 10 * 4
    monkeypatch.setattr(scan_entries, "PACKED", 0)
    flags = 16 + tiles  # the counter's 128-byte line and 2 * tiles - 1 int32 flags
    assert scan_lookback.workspace_words(spec, 1, 1 << 28, scan_cuda.TILE) == flags + 2 * tiles - 1
    assert scan_lookback.launches(spec, 1, 1 << 28, scan_cuda.TILE) == [((-(-flags // scan_cuda.TILE), 1, 1), 0),
                                                                         ((tiles, 1, 1), 1)]
    assert scan_lookback.workspace_words(pairs, 3, 5 * scan_cuda.TILE + 1, scan_cuda.TILE) == \
        16 + (3 * 10 + 1) // 2 + 3 * 10 * 2  # 6 tiles a row: 6 + 3 + 1 entries


def publish_depth(tile, depth):
    """Waits, one after another, before `tile` publishes the levels it ends (level 0 waits on none)."""
    return 1 + max((depth[writer(key)] for key in fenwick(tile) if 0 < key[0] < ends(tile)), default=0)


@pytest.mark.parametrize("tiles", [2, 1000, 1 << 16, (1 << 16) + 12345])
def test_no_tile_waits_on_a_chain_longer_than_the_tree_is_deep(tiles):
    """With every tile running at once, the longest chain of waits before a tile's levels are out,
    and before its carry is known, grows as log2(tiles): a tile publishing only after its whole
    carry would chain each tile to the ones before it (the first H100 run: 0.6-0.9 us a tile)."""
    depth: dict[int, int] = {}
    for tile in range(tiles):
        depth[tile] = publish_depth(tile, depth)
    deepest = tiles.bit_length()
    assert max(depth.values()) <= deepest
    carry_depth = max(1 + max((depth[writer(key)] for key in fenwick(tile)), default=0) for tile in range(tiles))
    assert carry_depth <= deepest + 1
