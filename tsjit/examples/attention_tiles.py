"""Work tiles of the attention kernel (issue 16): which Q rows a tile holds, which KV tiles it visits, and the
host-built tile order of causal and variable-length problems.

A work tile is ``block_m`` query rows (64 per consumer warpgroup: ``BLOCK_M`` = 128 with two, 192 with three) of
one (batch, head).  Two ways to enumerate the tiles:

* **grid** (fixed-length, no causal mask): the persistent queue's grid is ``(batch * heads, m_blocks)`` in row
  order, so a head's Q tiles are consecutive (its K and V stay in L2);
* **table**: the queue is 1-D and linear tile ``t`` is row ``t`` of an Int32 ``(tiles, 2)`` table
  ``(batch * heads + head, m_block)`` built on the host by :func:`tile_table`.  Causal problems use it for a
  longest-first, load-balanced order; variable-length problems (``cu_seqlens``) for the tiles that exist.

Each sequence's geometry (its first row in the tensor, its length) comes from ``cu_seqlens_q/k`` on the device
(variable length) or from the run-time lengths.  The KV tiles a tile visits form a per-tile dynamic domain
(:meth:`Tile.kv_range`): causal masking and a sliding window skip the tiles no row of the tile sees.
Masks are bottom-right aligned as in FlashAttention: row ``i`` sees key ``j`` iff
``i + offset - left <= j <= i + offset + right`` with ``offset = seqlen_k - seqlen_q`` (``right = 0``: causal).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import tsjit

BLOCK_M = 128                 # Q rows per work tile with two consumer warpgroups of 64 rows (the default)
#: heads per group of the causal tile order: the longest tiles of this many heads run together, so their K and
#: V stay in L2 (8 heads of 4096 x 128 bf16 K and V: 16 MiB)
CAUSAL_HEAD_GROUP = 8


@dataclass(frozen=True)
class AttentionShape:
    """The problem as the work bodies see it (ints, run-time Int32 values, or global tensors; not a resource, so
    holding it does not make one resource's work touch another's buffers).

    ``seqlen_q`` / ``seqlen_k``: the lengths (fixed-length problems); ``causal``: a right bound
    ``window_right`` (0 for causal masking); ``window``: a left bound ``window_left``; ``table``: the tile table
    (or None: grid order); ``cu_q`` / ``cu_k``: the (batch + 1) Int32 prefix sums of a variable-length problem
    (or None); ``direct_store``: O is stored from registers (variable length, head_dim 256) rather than by TMA;
    ``rescale_threshold``: conditional rescaling (log2 units; None: O is rescaled after every KV tile);
    ``block_m``: Q rows per work tile (64 per consumer warpgroup); ``output_scale``: a factor of O (1.0, or the V
    dequantization scale of the fp8 forward); ``exp2_polynomial``: of every 16 exponentials of P, how many run on the
    FMA pipe (:func:`~tsjit.examples.attention_softmax.online_softmax`).
    """

    seqlen_q: object
    seqlen_k: object
    heads: object
    group: object               # query heads per KV head
    num_m_blocks: object
    scale_log2: object
    head_dim: int
    block_n: int
    causal: bool
    pingpong: bool = False
    window: bool = False
    window_left: object = 0
    window_right: object = 0
    table: object = None
    cu_q: object = None
    cu_k: object = None
    direct_store: bool = False
    rescale_threshold: float | None = None
    block_m: int = BLOCK_M
    output_scale: object = 1.0  # O is multiplied by it when stored (the fp8 forward's V scale)
    exp2_polynomial: int = 0

    @property
    def bottom_aligned(self) -> bool:
        """Whether the Q tiles end at the last row (the first tile partial) rather than start at row 0: under a
        causal mask with TMA-stored O (fixed-length problems), so the partial tile is the one with the fewest
        KV tiles.  The shift is the padding rounded down to 64 rows, so every warpgroup's 64-row box lies wholly
        before row 0 (zero-filled by TMA, masked, not stored: a TMA store must start inside the tensor) or starts
        inside."""
        return self.causal and not self.direct_store

    def tile(self, coords) -> "Tile":
        """The :class:`Tile` of a work tile's coordinates (device code: loads the table and cu_seqlens)."""
        if self.table is not None:
            t, _, _ = coords
            bh, m_block = self.table[t, 0], self.table[t, 1]
        else:
            bh, order, _ = coords
            m_block = (self.num_m_blocks - 1 - order) if self.causal else order
        batch, head = bh // self.heads, bh % self.heads
        if self.cu_q is not None:
            q_start = self.cu_q[batch]
            k_start = self.cu_k[batch]
            return Tile(self, m_block, batch, head, 0, q_start, k_start, self.cu_q[batch + 1] - q_start,
                        self.cu_k[batch + 1] - k_start)
        return Tile(self, m_block, batch, head, batch, 0, 0, self.seqlen_q, self.seqlen_k)

    def position(self, work_tile) -> "Tile":
        return self.tile(work_tile.coords)


class Tile:
    """One work tile: ``m_block`` (Q rows ``row0 = block_m * m_block ..`` of its sequence, less the shift of a
    :attr:`AttentionShape.bottom_aligned` problem: ``row0`` may be negative), ``batch``, ``head``,
    ``tensor_batch`` (the batch coordinate in the tensors: 0 for packed variable-length tensors), the rows
    ``q_start`` / ``k_start`` where its sequences begin in the tensors, and their lengths."""

    def __init__(self, shape, m_block, batch, head, tensor_batch, q_start, k_start, seqlen_q, seqlen_k):
        self.shape = shape
        self.m_block, self.batch, self.head, self.tensor_batch = m_block, batch, head, tensor_batch
        self.q_start, self.k_start, self.seqlen_q, self.seqlen_k = q_start, k_start, seqlen_q, seqlen_k
        self.offset = seqlen_k - seqlen_q          # bottom-right alignment of the masks
        self.row0 = m_block * shape.block_m
        if shape.bottom_aligned:
            self.row0 = self.row0 - (shape.num_m_blocks * shape.block_m - seqlen_q) // 64 * 64

    def kv_range(self):
        """(first KV tile, number of KV tiles) the tile visits: the tiles some row of it sees, at least 1 (the
        software-pipelined loop's PV after the loop needs one; a tile that sees no key is masked whole)."""
        shape = self.shape
        n = shape.block_n
        total = (self.seqlen_k + n - 1) // n
        end = total
        if shape.causal:
            last_key = self.row0 + shape.block_m + self.offset + shape.window_right   # one past the last key
            end = tsjit.math.min(tsjit.math.max((last_key + n - 1) // n, 0), total)
        first = 0
        if shape.window:
            first = tsjit.math.max(self.row0 + self.offset - shape.window_left, 0) // n
            first = tsjit.math.min(first, tsjit.math.max(end - 1, 0))
        return first, tsjit.math.max(end - first, 1)

    def needs_mask(self, col0, row0=None, rows=None):
        """Whether KV tile ``col0 .. col0 + block_n`` has a key some row of this tile must not see (``row0`` /
        ``rows``: of the rows ``row0 .. row0 + rows`` of the sequence only, e.g. one warp's 16; default the whole
        tile)."""
        shape = self.shape
        row0 = self.row0 if row0 is None else row0
        rows = shape.block_m if rows is None else rows
        needs = col0 + shape.block_n > self.seqlen_k
        top = row0 + self.offset
        if shape.causal:
            needs = needs | (col0 + shape.block_n - 1 > top + shape.window_right)
        if shape.window:
            needs = needs | (col0 < top + rows - 1 - shape.window_left)
        return needs


# -- the host side: the tile table -----------------------------------------------------------------------------
def tile_table(seqlens_q, seqlens_k, heads, block_n, causal, ctas, window=(None, None),
               block_m=BLOCK_M, bottom_aligned=False) -> np.ndarray:
    """The ``(tiles, 2)`` Int32 table ``(batch * heads + head, m_block)`` of linear tile ``t`` (host, numpy).

    Every Q tile of every (batch, head) appears once (sequences of length 0 have none).  Without a causal
    mask or window the order is the grid's (a head's tiles consecutive).  With one the tiles are dealt in
    rounds of ``ctas`` (CTA ``c`` runs tiles ``c, c + ctas, ...``: the static persistent queue): within groups
    of ``CAUSAL_HEAD_GROUP`` heads the longest tiles come first, and in each round the longest tile goes to the
    CTA with the least work so far (the work of a tile: its KV tiles plus one for its epilogue).

    Args:
        seqlens_q, seqlens_k: per-batch lengths (sequences of ints).
        heads: query heads; block_n: KV tile rows; causal: right-bounded mask; ctas: the persistent grid size.
        window: (left, right) bounds of a sliding window, None for unbounded; block_m: Q rows per tile;
        bottom_aligned: the tiles end at the last row (:attr:`AttentionShape.bottom_aligned`; the balance only).
    """
    seqlens_q, seqlens_k = tuple(int(s) for s in seqlens_q), tuple(int(s) for s in seqlens_k)
    key = (seqlens_q, seqlens_k, int(heads), int(block_n), bool(causal), int(ctas), tuple(window), int(block_m),
           bool(bottom_aligned))
    return _tile_table(*key)


@functools.lru_cache(maxsize=64)
def _tile_table(seqlens_q, seqlens_k, heads, block_n, causal, ctas, window, block_m, bottom_aligned):
    left, right = window
    if causal and right is None:
        right = 0
    ordered = causal or left is not None or right is not None
    entries, work = [], []
    for batch, (sq, sk) in enumerate(zip(seqlens_q, seqlens_k)):
        m_blocks = -(-sq // block_m)
        m = np.arange(m_blocks)
        row0 = m * block_m - ((m_blocks * block_m - sq) // 64 * 64 if bottom_aligned else 0)
        end = np.full(m_blocks, -(-sk // block_n))
        if right is not None:
            last_key = row0 + block_m + (sk - sq) + right
            end = np.minimum(np.maximum(-(-last_key // block_n), 0), end)
        first = np.zeros(m_blocks, np.int64)
        if left is not None:
            first = np.minimum(np.maximum(row0 + (sk - sq) - left, 0) // block_n, np.maximum(end - 1, 0))
        tiles = np.maximum(end - first, 1) + 1
        if ordered:
            m, tiles = m[::-1], tiles[::-1]                   # longest (last rows) first under a causal mask
        for group in range(0, heads, CAUSAL_HEAD_GROUP if ordered else heads):
            rows = min(heads, group + (CAUSAL_HEAD_GROUP if ordered else heads)) - group
            head = np.arange(group, group + rows)
            if ordered:                                       # heads fastest, then m
                bh, mm, ww = (np.repeat(head[None, :], len(m), 0).ravel(), np.repeat(m, rows), np.repeat(tiles, rows))
            else:                                             # m fastest (grid order)
                bh, mm, ww = np.repeat(head, len(m)), np.tile(m, rows), np.tile(tiles, rows)
            entries.append(np.stack([batch * heads + bh, mm], 1))
            work.append(ww)
    if not entries:
        return np.zeros((0, 2), np.int32)
    table, work = np.concatenate(entries), np.concatenate(work)
    if not ordered:
        return table.astype(np.int32)
    ctas = max(1, min(ctas, len(table)))
    out = np.empty_like(table)
    load = np.zeros(ctas)
    out_work = np.zeros(len(table))
    for start in range(0, len(table), ctas):
        chunk = slice(start, min(start + ctas, len(table)))
        size = chunk.stop - chunk.start
        longest = np.argsort(-work[chunk], kind="stable")
        idle = np.argsort(load[:size], kind="stable")        # a partial last round fills CTAs 0 .. size - 1
        out[start + idle] = table[chunk][longest]
        out_work[start + idle] = work[chunk][longest]
        load[idle] += work[chunk][longest]
    return _rebalance(out, out_work, ctas).astype(np.int32)


def _rebalance(table, work, ctas, steps=2000):
    """Swap tiles between CTAs within a round (so each round keeps its tiles, and with them the heads whose K and V
    are in L2) while that lowers the busiest CTA's work: the greedy rounds leave it 2-4% above the mean on the
    benchmark shapes (the last rounds' short tiles cannot even it out), this brings it within about 0.5%."""
    rounds = -(-len(table) // ctas)
    slots = np.full(rounds * ctas, -1)
    slots[:len(table)] = np.arange(len(table))
    slots = slots.reshape(rounds, ctas)                 # slots[r, c]: the table row CTA c runs in round r
    weights = np.where(slots >= 0, np.append(work, 0.0)[slots], 0.0)
    load = weights.sum(0)
    exists = slots >= 0
    for _ in range(steps):
        c = int(np.argmax(load))
        delta = weights[:, c:c + 1] - weights           # work moved from CTA c to CTA d by swapping round r
        worst = np.maximum(load[c] - delta, load[None, :] + delta)
        worst[~(exists & exists[:, c:c + 1]) | (delta <= 0)] = np.inf
        r, d = np.unravel_index(int(np.argmin(worst)), worst.shape)
        if not worst[r, d] < load[c] - 1e-9:
            break
        slots[r, c], slots[r, d] = slots[r, d], slots[r, c]
        weights[r, c], weights[r, d] = weights[r, d], weights[r, c]
        load[c] -= delta[r, d]
        load[d] += delta[r, d]
    return table[slots[exists]]


__all__ = ["AttentionShape", "Tile", "tile_table", "BLOCK_M", "CAUSAL_HEAD_GROUP"]
