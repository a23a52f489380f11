"""The shared-memory resources of the attention forward (issue 16, :mod:`tsjit.examples.attention`) and their
works: the Q tile ring (:class:`QTile`), the K ring with the QK^T wgmma and the online softmax (:class:`KTiles`),
the V ring with the rescale and the PV wgmma (:class:`VTiles`), and the O / LSE epilogue (:class:`AttentionOutput`).
The module docstring of :mod:`tsjit.examples.attention` describes the program they make up; the fp8 forward
(:mod:`tsjit.examples.attention_fp8`) subclasses the K and V rings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.examples.attention_config import BOX, TURN_BARRIERS, box_columns, box_swizzle
from tsjit.examples.attention_tiles import AttentionShape
from tsjit.examples.attention_softmax import (NEG_INF, initial_stats, mask_scores, online_softmax,
                                              pack_probabilities, plus, quad_reduce, row_half)
from tsjit.lang.epilogue import store_fragment_global, store_fragment_shared
from tsjit.lang import turns
from tsjit.lang.fragment import Fragment
from tsjit.lang.values import Value, cast_to
from tsjit.backend import emit


def k_step(desc, k):
    """``desc.k_step(k)`` (the descriptor of K-step ``k`` of a wgmma tile), with the start address moved on the
    descriptor's low 32-bit word: its 14-bit address field cannot carry into the upper word for shared addresses
    below 256 KiB (PTX ISA §9.7.15.5.1.2.2).  LLVM, which knows the field's range, would fold the word back into
    a 64-bit add, and ptxas then emits the carry chain and register moves per wgmma; an opaque ``mov.b32`` hides
    the range, so the add stays 32-bit (compile-time Python; ``k`` a compile-time int).  An operand of several
    tiles (:class:`~tsjit.examples.attention_fp8.ValueBoxes`) picks the tile itself."""
    if not isinstance(desc, wgmma.MatrixDescriptor):
        return desc.k_step(k)
    if k == 0:
        return desc
    word = emit.current().inline_asm(emit.I32, "mov.b32 $0, $1;", "=r,r", [cast_to(desc, tsjit.Uint32).ir],
                                     side_effect=False)
    low = Value(word, tsjit.Uint32) + (k * desc.k_step_bytes()) // 16
    moved = cast_to(low, tsjit.Uint64) | (desc & 0xFFFFFFFF00000000)
    return wgmma.MatrixDescriptor(moved.ir, desc.element_dtype, desc.major, desc.swizzle, desc.leading_byte_offset,
                                  desc.stride_byte_offset)



def score_geometry(shape, stage_info, peeled):
    """Where the warpgroup's S tile lies: (its first row in the sequence, its first key, the mask bounds for
    :func:`~tsjit.examples.attention_softmax.mask_scores`, whether this warp's 16 rows need the mask); ``peeled``:
    the pipelined loop's first KV tile, before the loop (compile-time Python in a work body)."""
    warpgroup = tsjit.warp_idx() // 4 - 1
    tile = shape.position(stage_info.work_tile)
    index = stage_info.loop_offset - 1 if peeled else stage_info.loop_offset
    col0 = (tile.kv_range()[0] + index) * shape.block_n
    row0 = tile.row0 + warpgroup * 64
    bounds = (tile.seqlen_k, tile.offset, shape.window_right if shape.causal else None,
              shape.window_left if shape.window else None)
    return row0, col0, bounds, tile.needs_mask(col0, row0 + 16 * (tsjit.warp_idx() % 4), 16)


@dataclass(kw_only=True)
class QTile(ts.MemoryResource):
    """The work tile's Q rows (block_m x head_dim: 64 rows per consumer warpgroup), loaded once per tile by TMA."""

    q_map: object
    shape: AttentionShape
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        box = box_columns(self.q_map.dtype, self.shape.head_dim)
        self.tiles = tsjit.shared_array(self.q_map.dtype, (stages, self.shape.head_dim // box, self.shape.block_m // 64,
                                                           64, box), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the ring stage holding this tile's Q")

    @ts.consumer_work(returns="stage")
    def current_stage(self, stage_info):
        """Which stage of the Q ring the work tile's Q is in (the QK^T works read it)."""
        return stage_info.stage_idx

    def tma_bytes_per_stage(self):
        return self.q_map.box_bytes * (self.shape.head_dim // box_columns(self.q_map.dtype, self.shape.head_dim))

    @ts.producer_work()
    def tma_load(self, stage_info):
        tile = self.shape.position(stage_info.work_tile)
        width = box_columns(self.q_map.dtype, self.shape.head_dim)
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(self.shape.head_dim // width):
                tsjit.tma_load(self.q_map, self.tiles[stage_info.stage_idx, box], stage_info.barrier,
                               (tile.tensor_batch, tile.q_start + tile.row0, tile.head, box * width))


@dataclass(kw_only=True)
class KVRing(ts.MemoryResource):
    """A ring of K or V tiles (BLOCK_N keys x head_dim, ``head_dim / 64`` swizzled boxes per stage), TMA-loaded
    from the work tile's KV head (query head // group)."""

    tmap: object
    shape: AttentionShape
    tiles: object = None

    def __post_init__(self):
        self.tiles = tsjit.shared_array(self.tmap.dtype, self.tile_shape(), align=1024)

    def tile_shape(self):
        """(stages, boxes, BLOCK_N, box columns): the ring's shared-memory tiles."""
        box = box_columns(self.tmap.dtype, self.shape.head_dim)
        return (self.pipeline_config.num_stages, self.shape.head_dim // box, self.shape.block_n, box)

    def tma_bytes_per_stage(self):
        return self.tmap.box_bytes * (self.shape.head_dim // box_columns(self.tmap.dtype, self.shape.head_dim))

    def first_key(self, tile, stage_info, lagging):
        """The first key (a row of the K / V tensor) of the KV tile a load fills (see :meth:`tma_load`)."""
        index = stage_info.loop_offset
        if lagging:
            index = tsjit.math.max(index - 1, 0)
        return tile.k_start + (tile.kv_range()[0] + index) * self.shape.block_n

    @ts.producer_work()
    def tma_load(self, stage_info, *, lagging: tsjit.Constexpr[bool] = False):
        """Load the tile's KV tile ``first + loop_offset`` (``lagging``: ``loop_offset - 1``: the V tile of the
        pipelined loop's PV, one behind its K tile, and the peeled first K tile before the loop, which starts at 1)."""
        shape = self.shape
        tile = shape.position(stage_info.work_tile)
        row = self.first_key(tile, stage_info, lagging)
        width = box_columns(self.tmap.dtype, shape.head_dim)
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(shape.head_dim // width):
                tsjit.tma_load(self.tmap, self.tiles[stage_info.stage_idx, box], stage_info.barrier,
                               (tile.tensor_batch, row, tile.head // shape.group, box * width))


@dataclass(kw_only=True)
class KTiles(KVRing):
    """The K ring; its consumer work computes S = Q K^T and the online softmax (see the module docstring).
    It reads the Q tile of ``q``."""

    q: QTile
    s: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    p: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    stats: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        super().__post_init__()
        n = self.shape.block_n
        self.s = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(n // 2),
                                      docs="S = Q K^T of the current KV tile (fp32 wgmma accumulator)")
        packed = n * self.tmap.dtype.itemsize // 8           # 16-bit pairs (or 8-bit quadruples) per thread
        self.p = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(packed, tsjit.Int32),
                                      docs="P of the current KV tile, packed (wgmma A registers)")
        self.stats = ts.TaskLocalVariable(Fragment, default_factory=initial_stats,
                                          docs="row maxima, thread-partial row sums, rescale factors")
        self.order_slot = tsjit.shared_array(tsjit.Float32, (4,), align=16)

    @ts.consumer_work(returns="stats", work_attrs=ts.WorkAttr.AUXILIARY)
    def reset_statistics(self, stage_info):
        """Before a work tile's first KV tile: the statistics of :func:`initial_stats`."""
        return initial_stats()

    @ts.consumer_work(returns="s")
    def issue_scores(self, stage_info, q_stage, *, peeled: tsjit.Constexpr[bool] = False):
        """Issue S = Q K_j^T (head_dim / 16 wgmma into a fresh accumulator) and commit it as one group;
        with ping-pong, first wait for this warpgroup's turn at the tensor cores (and for the ``peeled`` first
        tile of the pipelined loop, which has no PV to pass the turn on, pass it on here)."""
        shape = self.shape
        warpgroup = tsjit.warp_idx() // 4 - 1
        if tsjit.const_expr(shape.pingpong):
            turns.take_turn(warpgroup, TURN_BARRIERS[shape.block_m // 64])
        stage = stage_info.stage_idx
        s = wgmma.fence_operand(Fragment.zeros(shape.block_n // 2))   # defined before the wgmma fence
        wgmma.fence()
        dtype = self.tmap.dtype
        swizzle = box_swizzle(dtype, shape.head_dim)
        steps = box_columns(dtype, shape.head_dim) * dtype.itemsize // 32        # 32 bytes of K per wgmma
        for kk in tsjit.range_constexpr(shape.head_dim * dtype.itemsize // 32):
            box = kk // steps
            a_desc = wgmma.make_descriptor(self.q.tiles[q_stage, box, warpgroup], major="K", swizzle=swizzle)
            b_desc = wgmma.make_descriptor(self.tiles[stage, box], major="K", swizzle=swizzle)
            s = wgmma.mma_async(s, k_step(a_desc, kk % steps), k_step(b_desc, kk % steps), n=shape.block_n,
                                scale_d=0 if kk == 0 else 1)
        wgmma.commit_group()
        if tsjit.const_expr(shape.pingpong and peeled):
            turns.pass_turn(warpgroup, TURN_BARRIERS[shape.block_m // 64], shape.block_m // 64)
        return s

    @ts.consumer_work(returns=("s", "stats"))
    def softmax(self, stage_info, s, stats, *, overlapped: tsjit.Constexpr[bool] = False,
                peeled: tsjit.Constexpr[bool] = False):
        """Wait for S (``overlapped``: the PV of the previous tile, committed after it, may stay in flight),
        mask it where needed and run the online softmax: (P in fp32, in S's registers; new statistics).
        ``peeled``: the pipelined loop's first KV tile, before the loop (``loop_offset`` is the loop start, 1)."""
        shape = self.shape
        wgmma.wait_group(1 if overlapped else 0)
        s = wgmma.fence_operand(s)
        row0, col0, bounds, masked = score_geometry(shape, stage_info, peeled)
        if masked:                                                              # decided for this warp's 16 rows
            s = mask_scores(s, row0, col0, *bounds)
        p, stats = online_softmax(s, stats, shape.scale_log2, shape.rescale_threshold, shape.exp2_polynomial)
        if tsjit.const_expr(overlapped):
            # a store that never runs (row sums are >= 0) but depends on every exp2: ptxas keeps memory
            # operations before the wgmma wait that follows, so the softmax stays under the PV in flight
            if stats[2] + stats[3] < 0.0:
                self.order_slot[0] = stats[2]
        return p, stats

    @ts.consumer_work(returns="p", work_attrs=ts.WorkAttr.AUXILIARY)
    def convert(self, stage_info, s):
        """P (fp32) -> the packed 16-bit A registers of the PV wgmma (after the previous PV has retired, so the
        new P can take the old one's registers)."""
        return pack_probabilities(s, self.tmap.dtype)


@dataclass(kw_only=True)
class VTiles(KVRing):
    """The V ring; its consumer work computes O = alpha O + P V."""

    o: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        super().__post_init__()
        d = self.shape.head_dim
        self.o = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(d // 2),
                                      docs="the warpgroup's 64 x head_dim fp32 output accumulator")

    @ts.consumer_work(returns="o", work_attrs=ts.WorkAttr.AUXILIARY)
    def zero_output(self, stage_info):
        return Fragment.zeros(self.shape.head_dim // 2)

    @ts.consumer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def start_turns(self, stage_info):
        """Ping-pong: the last warpgroup gives warpgroup 0 the first turn at the tensor cores (once per CTA)."""
        if tsjit.const_expr(self.shape.pingpong):
            if tsjit.warp_idx() // 4 == self.shape.block_m // 64:
                turns.give_first_turn(TURN_BARRIERS[self.shape.block_m // 64])

    @ts.consumer_work(returns="o")
    def issue_accumulate(self, stage_info, p, o, *, last: tsjit.Constexpr[bool] = False):
        """Issue O += P V (register-A wgmma, one per 16 keys) and commit it as one group.  With ping-pong,
        the PV after the loop (``last``) first waits for the turn; every PV then passes the turn on (in the
        loop the turn began at the QK^T issue)."""
        shape = self.shape
        warpgroup = tsjit.warp_idx() // 4 - 1
        if tsjit.const_expr(shape.pingpong and last):
            turns.take_turn(warpgroup, TURN_BARRIERS[shape.block_m // 64])
        b_desc = self.value_descriptor(stage_info.stage_idx)
        o = wgmma.fence_operand(o)           # the rescale and the P conversion stay above the wgmma fence
        p = wgmma.fence_operand(p)
        wgmma.fence()
        for kk in tsjit.range_constexpr(shape.block_n * self.tmap.dtype.itemsize // 32):   # 32 bytes of keys each
            a = Fragment([p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]], tsjit.Int32)
            o = wgmma.mma_async(o, a, k_step(b_desc, kk), n=shape.head_dim, a_dtype=self.tmap.dtype)
        wgmma.commit_group()
        if tsjit.const_expr(shape.pingpong):
            turns.pass_turn(warpgroup, TURN_BARRIERS[shape.block_m // 64], shape.block_m // 64)
        return o

    def value_descriptor(self, stage):
        """The PV wgmma's B descriptor of ring stage ``stage``: V (keys x head_dim), MN-major."""
        return wgmma.make_descriptor(self.tiles[stage], major="MN", swizzle="128B")

    @ts.consumer_work(returns="o", work_attrs=ts.WorkAttr.AUXILIARY)
    def rescale(self, stage_info, o, stats):
        """O *= alpha (the rows' rescale factors of the last softmax); every PV into O has retired.  With a
        rescale threshold, only where the warp's maxima moved (``stats[6]``, warp-uniform: alpha is exactly 1
        on every row of the warp otherwise)."""
        if tsjit.const_expr(self.shape.rescale_threshold is None):
            return Fragment([o[i] * stats[4 + row_half(i)] for i in range(len(o))], tsjit.Float32)
        if stats[6] > 0.0:
            o = Fragment([o[i] * stats[4 + row_half(i)] for i in range(len(o))], tsjit.Float32)
        return o

    @ts.consumer_work(returns="o")
    def retire(self, stage_info, o):
        """Wait for every wgmma of this warpgroup (the last PV)."""
        wgmma.wait_group(0)
        return wgmma.fence_operand(o)


@dataclass(kw_only=True)
class AttentionOutput(ts.MemoryResource):
    """O (bf16/fp16) and the per-row LSE (fp32, ``lse[tensor_batch, head, q_start + row]``).  O goes through a
    128B-swizzled shared-memory staging buffer and TMA stores (clipped at the tensor's end), or, with
    ``shape.direct_store`` (variable-length problems, where the rows past a sequence belong to the next one,
    and head_dim 256, whose staging buffer would not fit), from registers into ``out`` (the rank-2
    ``(tokens, heads * head_dim)`` view of O) with row and column guards.  With ``q`` (``O_IN_Q``), the staging
    buffer is the work tile's own Q stage (every QK^T of the tile has retired by then, and each warpgroup writes
    only its own 64 rows): its 32 KiB at head_dim 128 make room for 160-key tiles with two Q stages.  The Q stage
    is released only after the TMA stores have read it (``store`` waits for them)."""

    o_map: object
    out: object
    lse: object
    shape: AttentionShape
    store_lse: bool = True
    q: object = None
    staging: object = None

    def __post_init__(self):
        if not self.shape.direct_store and self.q is None:
            boxes = self.shape.head_dim // BOX
            self.staging = tsjit.shared_array(self.o_map.dtype, (self.shape.block_m // 64, boxes, 64, BOX), align=1024)

    @ts.producer_work()
    def store(self, stage_info, o, stats, q_stage):
        shape = self.shape
        tile = shape.position(stage_info.work_tile)
        warpgroup = tsjit.warp_idx() // 4 - 1
        tid = tsjit.thread_idx().x % 128
        row0 = tile.row0 + warpgroup * 64
        sums = [quad_reduce(stats[2 + h], plus) for h in range(2)]
        inverse = [tsjit.select(sums[h] > 0.0, shape.output_scale / sums[h], 0.0) for h in range(2)]
        normalized = Fragment([o[i] * inverse[row_half(i)] for i in range(len(o))], tsjit.Float32)
        if tsjit.const_expr(shape.direct_store):
            token0 = tile.tensor_batch * shape.seqlen_q + tile.q_start     # the sequence's first row of `out`
            col0 = tile.head * shape.head_dim
            store_fragment_global(normalized, self.out, token0 + row0, col0, M=token0 + tile.seqlen_q,
                                  N=col0 + shape.head_dim, tid=tid)
        elif tsjit.const_expr(self.q is not None):
            boxes = [self.q.tiles[q_stage, box, warpgroup] for box in range(shape.head_dim // BOX)]
            for box in tsjit.range_constexpr(shape.head_dim // BOX):     # registers 32 b .. 32 b + 31: box b
                store_fragment_shared(Fragment([normalized[i] for i in range(32 * box, 32 * box + 32)], tsjit.Float32),
                                      boxes[box].reshape((1, 64, BOX)), swizzle="128B", tid=tid)
            tsjit.fence_proxy_async()
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            if tid == 0:
                if row0 >= 0:                     # a box wholly before row 0 (bottom-aligned tiles): not stored
                    for box in tsjit.range_constexpr(shape.head_dim // BOX):
                        tsjit.tma_store(self.o_map, boxes[box], (tile.tensor_batch, tile.q_start + row0, tile.head,
                                                                 box * BOX))
                    tsjit.bulk_commit_group()
                tsjit.bulk_wait_group(0, read=True)   # the stores have read the Q stage: it may be released
        else:
            buffer = self.staging[warpgroup]
            if tid == 0:
                tsjit.bulk_wait_group(0, read=True)        # the previous tile's stores have left the buffer
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            store_fragment_shared(normalized, buffer, swizzle="128B", tid=tid)
            tsjit.fence_proxy_async()
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            if (tid == 0) & (row0 >= 0):          # a box wholly before row 0 (bottom-aligned tiles): not stored
                for box in tsjit.range_constexpr(shape.head_dim // BOX):
                    tsjit.tma_store(self.o_map, buffer[box], (tile.tensor_batch, tile.q_start + row0, tile.head,
                                                              box * BOX))
                tsjit.bulk_commit_group()
        if tsjit.const_expr(self.store_lse):
            if tid % 4 == 0:
                for h in tsjit.range_constexpr(2):
                    row = row0 + (tid // 32) * 16 + (tid % 32) // 4 + 8 * h
                    if (row < tile.seqlen_q) & (row >= 0):
                        m_scaled = stats[h] * shape.scale_log2
                        lse = tsjit.select(sums[h] > 0.0, (m_scaled + tsjit.math.log2(sums[h])) * math.log(2.0),
                                           NEG_INF)
                        self.lse[tile.tensor_batch, tile.head, tile.q_start + row] = lse

    @ts.producer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def flush(self, stage_info):
        """Before the CTA exits: TMA stores still reading the staging buffer must finish."""
        if tsjit.thread_idx().x % 128 == 0:
            tsjit.bulk_wait_group(0)


__all__ = ["k_step", "score_geometry", "QTile", "KVRing", "KTiles", "VTiles", "AttentionOutput"]
