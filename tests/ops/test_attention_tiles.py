"""The host-built tile table of tsjit.ops.attention (issue 16): every Q tile once, longest first and balanced
over the persistent CTAs under a causal mask, the tiles that exist for variable-length batches (no padding)."""
import numpy as np
import pytest

from tsjit.examples.attention_tiles import BLOCK_M, CAUSAL_HEAD_GROUP, AttentionShape, Tile, tile_table


def work(seqlen_q, seqlen_k, m_block, block_n, left=None, right=None):
    """KV tiles tile m_block visits, at least 1, plus 1 for its epilogue: the keys its first row sees from to the
    keys its last row sees (each row sees a contiguous band; consecutive rows' bands overlap)."""
    first_row, last_row = m_block * BLOCK_M, min((m_block + 1) * BLOCK_M, seqlen_q) - 1
    offset = seqlen_k - seqlen_q
    low = 0 if left is None else max(first_row + offset - left, 0)
    high = seqlen_k - 1 if right is None else min(last_row + offset + right, seqlen_k - 1)
    return max(high // block_n - low // block_n + 1, 1) + 1 if high >= low else 2


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlens_q,seqlens_k,heads", [([4096] * 4, [4096] * 4, 16), ([1000, 0, 1, 129, 300], [700, 5, 0, 129, 2000], 3)])
def test_every_tile_appears_once(seqlens_q, seqlens_k, heads, causal):
    table = tile_table(seqlens_q, seqlens_k, heads, 128, causal, 132)
    expected = {(b * heads + h, m) for b, s in enumerate(seqlens_q) for h in range(heads)
                for m in range(-(-s // BLOCK_M))}
    assert table.dtype == np.int32 and table.shape == (len(expected), 2)
    assert {tuple(row) for row in table.tolist()} == expected


def test_grid_order_without_a_mask_keeps_a_heads_tiles_together():
    table = tile_table([300, 500], [300, 500], 2, 128, False, 132)
    assert table.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2],
                              [2, 0], [2, 1], [2, 2], [2, 3], [3, 0], [3, 1], [3, 2], [3, 3]]


@pytest.mark.parametrize("batch,heads,seqlen", [(4, 16, 4096), (2, 16, 8192), (16, 16, 1024), (8, 16, 2048),
                                                (1, 16, 16384), (4, 32, 4096)])
def test_causal_table_balances_the_ctas(batch, heads, seqlen):
    """The static round-robin queue gives CTA c tiles c, c + 132, ...: the table's order keeps the busiest CTA
    within 1.5% of the mean (row order: 7-55% over on these shapes; the greedy rounds alone: 1.5-4%)."""
    ctas = 132
    table = tile_table([seqlen] * batch, [seqlen] * batch, heads, 128, True, ctas)
    load = np.zeros(ctas)
    for t, (_, m) in enumerate(table.tolist()):
        load[t % ctas] += work(seqlen, seqlen, m, 128, right=0)
    assert load.max() / load.mean() < 1.015


def test_causal_table_runs_longest_tiles_first_within_a_head_group():
    """Rounds of one tile per CTA: the first rounds hold the first head group's longest tiles."""
    table = tile_table([1024] * 2, [1024] * 2, 16, 128, True, CAUSAL_HEAD_GROUP)
    first = table[:CAUSAL_HEAD_GROUP * 8]                       # 8 rounds: the first group's 8 m-blocks
    assert {bh for bh, _ in first.tolist()} == set(range(CAUSAL_HEAD_GROUP))
    assert sorted(first[:CAUSAL_HEAD_GROUP].tolist()) == [[h, 7] for h in range(CAUSAL_HEAD_GROUP)]


def test_window_table_weights_tiles_by_the_kv_tiles_they_visit():
    """A sliding window makes every tile about as long: the table still covers each tile once, balanced."""
    seqlen, left = 4096, 512
    table = tile_table([seqlen] * 2, [seqlen] * 2, 8, 128, False, 20, window=(left, 0))
    load = np.zeros(20)
    for t, (_, m) in enumerate(table.tolist()):
        load[t % 20] += work(seqlen, seqlen, m, 128, left=left, right=0)
    assert len(table) == 2 * 8 * 32 and load.max() / load.mean() < 1.01


def test_tables_are_cached_per_shape():
    a = tile_table([2048] * 2, [2048] * 2, 4, 128, True, 132)
    assert tile_table([2048] * 2, [2048] * 2, 4, 128, True, 132) is a


def shifted_work(seqlen, m_block, block_m, block_n, shift):
    """The causal work of tile m_block of block_m rows starting at row m_block * block_m - shift."""
    last_row = min(m_block * block_m - shift + block_m, seqlen) - 1
    return max(last_row // block_n + 1, 1) + 1


@pytest.mark.parametrize("bottom_aligned", [False, True])
def test_192_row_causal_tables_cover_and_balance(bottom_aligned):
    """Three consumer warpgroups (192-row tiles, head_dim 64): S = 4096 is 22 tiles; bottom-aligned, they end at
    the last row (shifted by the padding rounded down to 64 rows: 128), so the partial tile is the first, the
    shortest: the table's work (KV tiles + 1 per tile) drops by the longest tile's 2/3 that is padding."""
    seqlen, heads, ctas = 4096, 32, 132
    table = tile_table([seqlen] * 4, [seqlen] * 4, heads, 128, True, ctas, block_m=192, bottom_aligned=bottom_aligned)
    assert {tuple(r) for r in table.tolist()} == {(bh, m) for bh in range(4 * heads) for m in range(22)}
    shift = (22 * 192 - seqlen) // 64 * 64 if bottom_aligned else 0
    assert shift == (128 if bottom_aligned else 0)
    load = np.zeros(ctas)
    for t, (_, m) in enumerate(table.tolist()):
        load[t % ctas] += shifted_work(seqlen, m, 192, 128, shift)
    assert load.max() / load.mean() < 1.01
    top = sum(shifted_work(seqlen, m, 192, 128, 0) for m in range(22))
    bottom = sum(shifted_work(seqlen, m, 192, 128, 128) for m in range(22))
    assert (top, bottom) == (406, 385)       # the longest tile is 2/3 padding at the top, the shortest at the bottom
    if bottom_aligned:                         # the first tile: rows -128 .. 63, one KV tile (+1)
        assert shifted_work(seqlen, 0, 192, 128, shift) == 2 and shifted_work(seqlen, 21, 192, 128, shift) == 33


@pytest.mark.parametrize("causal,window", [(True, False), (False, True), (True, True), (False, False)])
def test_needs_mask_of_a_warps_rows_is_exact(causal, window):
    """``Tile.needs_mask(col0, row0, rows)`` (host ints: the same expressions the kernel evaluates per warp) is True
    exactly when some row of ``row0 .. row0 + rows`` must not see some key of the KV tile, brute-forced over random
    geometries (bottom-right aligned band, keys past seqlen_k)."""
    rng = np.random.default_rng(16)
    for _ in range(300):
        seqlen_q, seqlen_k = (int(x) for x in rng.integers(1, 700, 2))
        left, right = (int(x) for x in rng.integers(0, 300, 2))
        right = 0 if causal else right
        shape = AttentionShape(seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads=1, group=1, num_m_blocks=1,
                               scale_log2=1.0, head_dim=64, block_n=128, causal=causal, window=window,
                               window_left=left, window_right=right, block_m=192)
        tile = Tile(shape, 0, 0, 0, 0, 0, 0, seqlen_q, seqlen_k)
        row0, col0 = int(rng.integers(-64, seqlen_q)), 128 * int(rng.integers(0, -(-seqlen_k // 128)))
        rows = np.arange(row0, row0 + 16)[:, None] + (seqlen_k - seqlen_q)
        keys = np.arange(col0, col0 + 128)[None, :]
        visible = keys < seqlen_k
        if causal:
            visible = visible & (keys <= rows + right)
        if window:
            visible = visible & (keys >= rows - left)
        assert bool(tile.needs_mask(col0, row0, 16)) == bool((~visible).any()), (seqlen_q, seqlen_k, row0, col0)
