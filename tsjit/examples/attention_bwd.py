"""FlashAttention-2/3-style attention backward on Hopper, written in Task Scheduling (issue 16's stretch).

Given Q, K, V, the forward's output O, its log-sum-exp ``LSE`` per row and the output gradient dO, computes

* ``dV = P^T dO``, ``dK = dS^T Q`` (per KV block, in registers) and
* ``dQ = dS K`` (accumulated over the KV blocks with fp32 atomics into a workspace),

where ``P = exp(scale * Q K^T - LSE)`` (recomputed, masked like the forward) and ``dS = scale * P * (dO V^T - D)``
with the preprocessed ``D_i = rowsum(dO_i * O_i)``.  Tensors are in FlashAttention's ``(batch, seqlen, heads,
head_dim)`` layout, BFloat16 or Float16, head_dim 64 or 128, causal (bottom-right aligned) or not, K / V may have fewer
heads (GQA / MQA: the CTA of a KV head walks every query head of its group, so dK / dV are summed over the group in
registers).  The preprocess kernel and the inline-PTX dQ reductions: :mod:`tsjit.examples.attention_bwd_parts`; the
host side (workspaces, launches, conversion): :mod:`tsjit.ops.attention_bwd`.

Program (one CTA = 3 warpgroups, 384 threads; one work tile = one (batch, KV head, block of ``BLOCK_N`` = 128 keys)):

* ``load_kv`` (warp 0): per work tile, TMA-loads K and V of the block once (``kv``, a TmaAsync ring of
  ``KV_STAGES`` stages, so the next tile's K / V can arrive while the current one is in use);
* ``load_q`` (warp 1): per iteration of the tile's domain (query head ``h`` of the group, 64-row Q block ``m``),
  TMA-loads Q_m, dO_m and the 2 x 64 Float32 row statistics (``LSE * log2 e`` and ``D``, one box of the
  ``(batch, heads, 2, seqlen_q padded to 64)`` statistics tensor) into one stage of the ``qdo`` ring
  (``STAGES`` stages; one mbarrier, the bytes of all three boxes);
* ``idle`` (warps 2-3): the padding of the load warpgroup (``setmaxnreg`` 40 with the load warps);
* ``grad`` (warpgroups 1 and 2, ``setmaxnreg`` 232): warpgroup ``w`` owns keys ``64 w .. 64 w + 63`` of the
  block and holds its dK and dV (64 x head_dim Float32 each).  Per iteration (:meth:`QdOTiles.step`):

  - ``S^T = K_w Q_m^T`` and ``dP^T = V_w dO_m^T`` (wgmma, A = K / V and B = Q / dO from shared memory, K-major;
    two commit groups), so the rows of S^T are the warpgroup's keys and P^T is the register A operand of dV;
  - ``P^T = exp2(S^T * scale * log2 e - LSE * log2 e)`` (one FMA and one ``ex2.approx.ftz`` per element; the
    causal mask, where the block has a key after some row, selects 0); ``dV += P^T dO_m`` (register-A wgmma,
    B = dO MN-major);
  - ``dS^T = scale * P^T * (dP^T - D)``; ``dK += dS^T Q_m`` (register-A wgmma, B = Q MN-major); dS^T is also written
    (``stmatrix``, 128B-swizzled) to the warpgroup's shared buffer, and ``dQ_w = dS K_w`` runs with A = dS from
    there (MN-major) and B = K (MN-major); the thread's ``head_dim / 2`` values of dQ_w are added to the Float32
    workspace with ``atom.global.add.f32`` (PTX ISA §9.7.13.5: relaxed, GPU scope; its result is unused, so ptxas
    emits ``REDG``, a reduction; the order of the additions is not fixed, so dQ is not bit-reproducible, as in
    FlashAttention).

  After the tile's last iteration ``grads.store`` stores dK and dV from registers with row guards.

Rows past ``seqlen_q`` are zero-filled by TMA and their statistics are ``+inf`` / 0 (the host pads them), so
their P is 0; keys past ``seqlen_k`` have zero K / V rows, add nothing to dQ and are not stored.  Causal: the domain
of a KV block starts at the first Q block with a row that sees its first key (fully masked Q blocks are skipped);
a block no row sees (``seqlen_q < seqlen_k`` ... only with bottom-right alignment) runs one fully masked iteration
and stores zeros.  The TaskManager verifies the program (bracketing, counts, bytes, register budget, the exhaustive
interleaving check) before any code is emitted.
"""
from __future__ import annotations

from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.examples.attention import queue_epilogue
from tsjit.examples.attention_config import BOX, LOG2_E, REGISTERS
from tsjit.examples.attention_resources import k_step
from tsjit.examples.attention_softmax import pack_probabilities
from tsjit.lang.epilogue import store_fragment_global, store_fragment_shared
from tsjit.examples.attention_bwd_parts import (PREPROCESS_THREADS, attention_backward_preprocess,  # noqa: F401
                                                tma_reduce_add)
from tsjit.lang.fragment import Fragment
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

#: head_dims the backward supports (256 would need its dK and dV, 256 registers per thread, split)
BWD_HEAD_DIMS = (64, 128)
#: keys per work tile (64 per consumer warpgroup) and query rows per iteration
BWD_BLOCK_N = 128
BWD_BLOCK_M = 64
BWD_WARPGROUPS = BWD_BLOCK_N // 64
BWD_THREADS = 128 * (1 + BWD_WARPGROUPS)
#: default stages of the Q / dO ring per head_dim
BWD_STAGES = {64: 2, 128: 2}
#: whether the consumer warpgroups share dQ per head_dim (``DQ_SHARED``: each computes 64 of its columns over all
#: 128 keys of the block from both warpgroups' dS, half the atomics and accumulators of each computing all columns
#: over its own 64 keys; needs head_dim 128: 64-column halves of the 128B-swizzled K boxes)
BWD_DQ_SHARED = {64: False, 128: True}
#: whether dQ is added by TMA reductions of shared-memory tiles (``DQ_TMA``) rather than ``atom.global.add.f32`` from
#: registers, per head_dim (the CPU interpreter runs the atomics only).  H200, 2026-12-03 (this helper's job 1, (4,
#: 2048, 16, 128) bf16): 1.40x / 1.36x the atomics non-causal / causal (``red.global.v2.f32.add`` of column pairs:
#: 1.37x / 1.25x; not kept)
BWD_DQ_TMA = {64: True, 128: True}
#: the named barrier of the shared dS (1 and 2: each warpgroup's own)
DS_BARRIER = 3


@dataclass(frozen=True)
class BackwardShape:
    """The problem as the work bodies see it (ints or run-time Int32 values): lengths, heads, ``group`` = query
    heads per KV head, ``padded_q`` = seqlen_q rounded up to 64 (the rows of the statistics and dQ workspace),
    the scales, head_dim, the causal flag; ``dq_shared``: the warpgroups share dQ (``DQ_SHARED`` of
    :func:`attention_backward`); ``dq_tma``: dQ is staged in shared memory and added by a TMA reduction
    (``DQ_TMA``)."""

    batch: object
    seqlen_q: object
    seqlen_k: object
    heads: object
    kv_heads: object
    group: object
    padded_q: object
    scale: object
    scale_log2: object
    head_dim: int
    causal: bool
    dq_shared: bool = False
    dq_tma: bool = False
    block_n: int = BWD_BLOCK_N
    block_m: int = BWD_BLOCK_M

    def tile(self, coords) -> "KVBlock":
        bh, n_block, _ = coords
        return KVBlock(self, bh // self.kv_heads, bh % self.kv_heads, n_block)

    def position(self, work_tile) -> "KVBlock":
        return self.tile(work_tile.coords)


class KVBlock:
    """One work tile: keys ``n0 = block_n * n_block ..`` of KV head ``kv_head`` of ``batch``, and the Q blocks it
    visits (:meth:`domain`, :meth:`q_block`)."""

    def __init__(self, shape, batch, kv_head, n_block):
        self.shape, self.batch, self.kv_head, self.n_block = shape, batch, kv_head, n_block
        self.n0 = n_block * shape.block_n
        self.offset = shape.seqlen_k - shape.seqlen_q        # bottom-right alignment of the causal mask
        m_blocks = (shape.seqlen_q + shape.block_m - 1) // shape.block_m
        self.m_first = 0
        if shape.causal:   # the first Q block with a row i >= n0 - offset (one that sees the block's first key)
            self.m_first = tsjit.math.min(tsjit.math.max(self.n0 - self.offset, 0) // shape.block_m, m_blocks - 1)
        self.m_count = m_blocks - self.m_first

    def domain(self):
        """Iterations of the tile: every visited Q block of every query head of the KV head's group."""
        return self.shape.group * self.m_count

    def q_block(self, index):
        """(query head, Q block) of iteration ``index``."""
        return (self.kv_head * self.shape.group + index // self.m_count, self.m_first + index % self.m_count)


class BackwardTask(ts.Task):
    """A task whose domain (the Q blocks of a KV block, over the group's heads) depends on the tile."""

    shape = None

    def get_domain(self, tile_coord):
        return self.shape.tile(tile_coord).domain()


def issue_dk(dk, ds_packed, q_desc, shape, dtype, issue, *, wait=True):
    """``dK += dS^T Q`` (register-A wgmma, one per 16 rows of the Q block) committed as one group, and with ``wait``
    waited for; or nothing where ``issue`` is False (compile-time Python in :meth:`QdOTiles.step`: which of its two
    places dK takes is decided here, outside the work body)."""
    if not issue:
        return dk
    wgmma.fence()
    for kk in range(shape.block_m // 16):
        a = Fragment([ds_packed[4 * kk + r] for r in range(4)], tsjit.Int32)
        dk = wgmma.mma_async(dk, a, k_step(q_desc, kk), n=shape.head_dim, a_dtype=dtype)
    wgmma.commit_group()
    if wait:
        wgmma.wait_group(0)
        dk = wgmma.fence_operand(dk)
    return dk


def _swizzled_tiles(dtype, stages, head_dim, rows):
    """(stages, head_dim / 64 boxes, rows / 64, 64, 64) 128B-swizzled TMA tiles (one box = 64 columns)."""
    return tsjit.shared_array(dtype, (stages, head_dim // BOX, rows // 64, 64, BOX), align=1024)


@dataclass(kw_only=True)
class KVTiles(ts.MemoryResource):
    """K and V of the work tile's KV block (BLOCK_N keys x head_dim each), TMA-loaded once per tile."""

    k_map: object
    v_map: object
    shape: BackwardShape
    k_tiles: object = None
    v_tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages, d, n = self.pipeline_config.num_stages, self.shape.head_dim, self.shape.block_n
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the ring stage holding this tile's K, V")
        self.k_tiles = _swizzled_tiles(self.k_map.dtype, stages, d, n)
        self.v_tiles = _swizzled_tiles(self.v_map.dtype, stages, d, n)

    def tma_bytes_per_stage(self):
        return (self.k_map.box_bytes + self.v_map.box_bytes) * (self.shape.head_dim // BOX)

    @ts.consumer_work(returns="stage")
    def current_stage(self, stage_info):
        """The ring stage holding this tile's K and V."""
        return stage_info.stage_idx

    @ts.producer_work()
    def tma_load(self, stage_info):
        shape = self.shape
        tile = shape.position(stage_info.work_tile)
        stage = stage_info.stage_idx
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(shape.head_dim // BOX):
                coords = (tile.batch, tile.n0, tile.kv_head, box * BOX)
                tsjit.tma_load(self.k_map, self.k_tiles[stage, box], stage_info.barrier, coords)
                tsjit.tma_load(self.v_map, self.v_tiles[stage, box], stage_info.barrier, coords)


def _column_index(i):
    """Which of a thread's N / 4 distinct accumulator columns register ``i`` holds (column
    ``col_base + 8 * (i // 4) + i % 2``)."""
    return 2 * (i // 4) + i % 2


@dataclass(kw_only=True)
class QdOTiles(ts.MemoryResource):
    """The ring of (Q_m, dO_m, statistics) stages of the iterations; its consumer work is the backward step of a
    64-row Q block against the warpgroup's 64 keys (module docstring).  Reads K / V of ``kv`` and adds dQ into
    ``dq`` (the Float32 ``(batch * heads * padded_q, head_dim)`` workspace)."""

    q_map: object
    do_map: object
    st_map: object
    kv: KVTiles
    dq: object
    dq_map: object
    shape: BackwardShape
    dk: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    dv: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages, d, m = self.pipeline_config.num_stages, self.shape.head_dim, self.shape.block_m
        self.q_tiles = _swizzled_tiles(self.q_map.dtype, stages, d, m)
        self.do_tiles = _swizzled_tiles(self.do_map.dtype, stages, d, m)
        self.stats = tsjit.shared_array(tsjit.Float32, (stages, 2, m), align=128)
        # dS^T of each warpgroup (its 64 keys x the 64 rows), the A operand of dQ = dS K
        # (double-buffered by iteration parity: the barrier after one iteration's stores also tells that every dQ
        # wgmma of the iteration before, which read the other buffer, has retired)
        self.ds_tiles = tsjit.shared_array(self.q_map.dtype, (2, BWD_WARPGROUPS, 1, 64, BOX), align=1024)
        if self.shape.dq_tma:   # each warpgroup's 64-row Float32 dQ tile, 64 x 64 boxes: the sources of its TMA reductions
            boxes = 1 if self.shape.dq_shared else d // 64
            self.dq_tiles = tsjit.shared_array(tsjit.Float32, (BWD_WARPGROUPS, boxes, 64, 64), align=128)
        self.dk = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(d // 2),
                                       docs="the warpgroup's 64 x head_dim fp32 dK")
        self.dv = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(d // 2),
                                       docs="the warpgroup's 64 x head_dim fp32 dV")

    def tma_bytes_per_stage(self):
        return (self.q_map.box_bytes + self.do_map.box_bytes) * (self.shape.head_dim // BOX) + self.st_map.box_bytes

    @ts.producer_work()
    def tma_load(self, stage_info):
        shape = self.shape
        tile = shape.position(stage_info.work_tile)
        head, m_block = tile.q_block(stage_info.loop_offset)
        stage = stage_info.stage_idx
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(shape.head_dim // BOX):
                coords = (tile.batch, m_block * shape.block_m, head, box * BOX)
                tsjit.tma_load(self.q_map, self.q_tiles[stage, box], stage_info.barrier, coords)
                tsjit.tma_load(self.do_map, self.do_tiles[stage, box], stage_info.barrier, coords)
            tsjit.tma_load(self.st_map, self.stats[stage], stage_info.barrier,
                           (tile.batch, head, 0, m_block * shape.block_m))

    @ts.consumer_work(returns=("dk", "dv"), work_attrs=ts.WorkAttr.AUXILIARY)
    def zero_grads(self, stage_info):
        d = self.shape.head_dim
        return Fragment.zeros(d // 2), Fragment.zeros(d // 2)

    @ts.consumer_work(returns=("dk", "dv"))
    def step(self, stage_info, kv_stage, dk, dv):
        """One iteration: dV += P^T dO, dK += dS^T Q, dQ += dS K (atomics); every wgmma has retired on return."""
        shape = self.shape
        d, dtype = shape.head_dim, self.q_map.dtype
        warpgroup = tsjit.warp_idx() // 4 - 1
        tid = tsjit.thread_idx().x % 128
        stage = stage_info.stage_idx
        tile = shape.position(stage_info.work_tile)
        head, m_block = tile.q_block(stage_info.loop_offset)
        kt, vt = self.kv.k_tiles, self.kv.v_tiles
        steps = d // 16                                            # K steps of S^T / dP^T (16 head_dim columns)

        # S^T = K_w Q^T and dP^T = V_w dO^T: two groups
        s = wgmma.fence_operand(Fragment.zeros(shape.block_m // 2))
        dp = wgmma.fence_operand(Fragment.zeros(shape.block_m // 2))
        wgmma.fence()
        for kk in tsjit.range_constexpr(steps):
            box, sub = kk // 4, kk % 4
            a = wgmma.make_descriptor(kt[kv_stage, box, warpgroup], major="K", swizzle="128B")
            b = wgmma.make_descriptor(self.q_tiles[stage, box, 0], major="K", swizzle="128B")
            s = wgmma.mma_async(s, k_step(a, sub), k_step(b, sub), n=shape.block_m, scale_d=0 if kk == 0 else 1)
        wgmma.commit_group()
        for kk in tsjit.range_constexpr(steps):
            box, sub = kk // 4, kk % 4
            a = wgmma.make_descriptor(vt[kv_stage, box, warpgroup], major="K", swizzle="128B")
            b = wgmma.make_descriptor(self.do_tiles[stage, box, 0], major="K", swizzle="128B")
            dp = wgmma.mma_async(dp, k_step(a, sub), k_step(b, sub), n=shape.block_m, scale_d=0 if kk == 0 else 1)
        wgmma.commit_group()

        # P^T (rows: the warpgroup's keys, columns: the block's rows)
        row_base, col_base = s.accumulator_coords(0, tid)
        wgmma.wait_group(1)
        s = wgmma.fence_operand(s)
        lse = [self.stats[stage, 0, col_base + 8 * (c // 2) + c % 2] for c in range(shape.block_m // 4)]
        p = Fragment([tsjit.math.exp2(tsjit.math.fma(s[i], shape.scale_log2, -lse[_column_index(i)]), ftz=True)
                      for i in range(len(s))], tsjit.Float32)
        if tsjit.const_expr(shape.causal):
            q0 = m_block * shape.block_m
            key0 = tile.n0 + 64 * warpgroup
            if key0 + 63 > q0 + tile.offset:                       # some key of the warpgroup after some row
                # key k is visible from row r iff k <= r + offset, i.e. (k - offset - q0 - col_base) <= step
                bounds = [key0 + row_base + 8 * h - tile.offset - q0 - col_base for h in range(2)]
                p = Fragment([tsjit.select(bounds[(i % 4) // 2] <= 8 * (i // 4) + i % 2, p[i], 0.0)
                              for i in range(len(p))], tsjit.Float32)
        p_packed = pack_probabilities(p, dtype)

        # dV += P^T dO
        do_desc = wgmma.make_descriptor(self.do_tiles[stage], major="MN",
                                        swizzle="128B", leading_byte_offset=shape.block_m * BOX * dtype.itemsize)
        dv = wgmma.fence_operand(dv)
        p_packed = wgmma.fence_operand(p_packed)
        wgmma.fence()
        for kk in tsjit.range_constexpr(shape.block_m // 16):
            a = Fragment([p_packed[4 * kk + r] for r in range(4)], tsjit.Int32)
            dv = wgmma.mma_async(dv, a, k_step(do_desc, kk), n=d, a_dtype=dtype)
        wgmma.commit_group()

        # dS^T = P^T * (dP^T - D)
        wgmma.wait_group(0 if shape.head_dim > 64 else 1)      # (head_dim 128: dV too, so P's registers are free)
        dp = wgmma.fence_operand(dp)
        dv = wgmma.fence_operand(dv)
        delta = [self.stats[stage, 1, col_base + 8 * (c // 2) + c % 2] for c in range(shape.block_m // 4)]
        # scaled by the softmax scale here, so neither dK nor dQ needs it later
        ds = Fragment([(p[i] * shape.scale) * (dp[i] - delta[_column_index(i)]) for i in range(len(p))],
                      tsjit.Float32)
        ds_packed = pack_probabilities(ds, dtype)
        buffer = stage_info.loop_offset % 2
        store_fragment_shared(ds, self.ds_tiles[buffer, warpgroup], swizzle="128B", tid=tid)
        tsjit.fence_proxy_async()                               # generic-proxy stores, read by the async proxy
        if tsjit.const_expr(shape.dq_shared):                   # both warpgroups' dS^T: all 128 keys
            tsjit.named_barrier_sync(DS_BARRIER, 128 * BWD_WARPGROUPS)
        else:
            tsjit.named_barrier_sync(1 + warpgroup, 128)

        # dK += dS^T Q, then dQ: dQ_w = dS_w K_w (the warpgroup's keys, all head_dim columns) or, with dq_shared,
        # dQ[:, 64 w .. 64 w + 63] = dS K[:, 64 w ..] over all the block's keys
        q_desc = wgmma.make_descriptor(self.q_tiles[stage], major="MN", swizzle="128B",
                                       leading_byte_offset=shape.block_m * BOX * dtype.itemsize)
        if tsjit.const_expr(shape.dq_shared):
            ds_desc = wgmma.make_descriptor(self.ds_tiles[buffer, 0], major="MN", swizzle="128B")
            k_desc = wgmma.make_descriptor(kt[kv_stage, warpgroup, 0], major="MN", swizzle="128B")
            dq_columns, dq_keys = d // BWD_WARPGROUPS, shape.block_n
        else:
            ds_desc = wgmma.make_descriptor(self.ds_tiles[buffer, warpgroup], major="MN", swizzle="128B")
            k_desc = wgmma.make_descriptor(kt[kv_stage, 0, warpgroup], major="MN", swizzle="128B",
                                           leading_byte_offset=shape.block_n * BOX * dtype.itemsize)
            dq_columns, dq_keys = d, 64
        dk = wgmma.fence_operand(dk)
        ds_packed = wgmma.fence_operand(ds_packed)
        # all of a 128-column dQ: dK first and waited for, so dQ's 64 accumulators never share the registers with
        # dS's A fragment and a dK in flight (ptxas would serialize every wgmma, C7512); else dQ first, and dK stays
        # on the tensor cores while dQ is added (the loops' counts chosen at compile time: 0 where a loop is not used)
        sequential = dq_columns > 64
        dk = issue_dk(dk, ds_packed, q_desc, shape, dtype, sequential)          # dK, waited for (or not issued)
        dq = wgmma.fence_operand(Fragment.zeros(dq_columns // 2))
        wgmma.fence()
        for kk in tsjit.range_constexpr(dq_keys // 16):
            dq = wgmma.mma_async(dq, k_step(ds_desc, kk), k_step(k_desc, kk), n=dq_columns,
                                 scale_d=0 if kk == 0 else 1)
        wgmma.commit_group()
        dk = issue_dk(dk, ds_packed, q_desc, shape, dtype, not sequential, wait=False)     # dK after dQ (or not)
        wgmma.wait_group(0 if sequential else 1)                # dQ (and dV) done; dK may stay on the tensor cores
        dq = wgmma.fence_operand(dq)
        row0 = (tile.batch * shape.heads + head) * shape.padded_q + m_block * shape.block_m
        col0 = dq_columns * warpgroup if shape.dq_shared else 0
        if tsjit.const_expr(shape.dq_tma):
            # the warpgroup's tile into its shared buffer (once the previous reductions have read it), then one
            # thread adds each 64 x 64 box of it to the workspace by TMA; register i holds a column of box i // 32
            dq_tile = self.dq_tiles[warpgroup]
            if tid == 0:
                tsjit.bulk_wait_group(0, read=True)
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            for i in tsjit.range_constexpr(0, len(dq), 2):
                row, col = dq.accumulator_coords(i, tid)
                dq_tile[i // 32].store_vector((row, col - 64 * (i // 32)), (dq[i], dq[i + 1]))
            tsjit.fence_proxy_async()
            tsjit.named_barrier_sync(1 + warpgroup, 128)
            if tid == 0:
                for box in tsjit.range_constexpr(dq_columns // 64):
                    tma_reduce_add(self.dq_map, dq_tile[box], (row0, col0 + 64 * box))
                tsjit.bulk_commit_group()
        else:
            for i in tsjit.range_constexpr(len(dq)):
                row, col = dq.accumulator_coords(i, tid)
                tsjit.atomic_add(tsjit.address_of(self.dq, row0 + row, col0 + col), dq[i])
        wgmma.wait_group(0)
        dk = wgmma.fence_operand(dk)
        dv = wgmma.fence_operand(dv)
        return dk, dv

    @ts.consumer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def flush(self, stage_info):
        """Before the CTA exits: the TMA reductions of dQ (``DQ_TMA``) must have read their shared tiles."""
        if tsjit.const_expr(self.shape.dq_tma):
            if tsjit.thread_idx().x % 128 == 0:
                tsjit.bulk_wait_group(0)


@dataclass(kw_only=True)
class Gradients(ts.MemoryResource):
    """dK (dS carries the softmax scale) and dV (the input dtype), stored from registers into their rank-2
    ``(batch * seqlen_k, kv_heads * head_dim)`` views with row guards (keys past ``seqlen_k`` are not stored)."""

    dk_out: object
    dv_out: object
    shape: BackwardShape

    @ts.producer_work()
    def store(self, stage_info, dk, dv):
        shape = self.shape
        tile = shape.position(stage_info.work_tile)
        warpgroup = tsjit.warp_idx() // 4 - 1
        tid = tsjit.thread_idx().x % 128
        token0 = tile.batch * shape.seqlen_k
        row0 = token0 + tile.n0 + 64 * warpgroup
        col0 = tile.kv_head * shape.head_dim
        store_fragment_global(dk, self.dk_out, row0, col0, M=token0 + shape.seqlen_k, N=col0 + shape.head_dim,
                              tid=tid)
        store_fragment_global(dv, self.dv_out, row0, col0, M=token0 + shape.seqlen_k, N=col0 + shape.head_dim,
                              tid=tid)


# -- the kernel ---------------------------------------------------------------------------------
# min_blocks=1 (``.minnctapersm 1``): ptxas then allocates the launch's whole register share at entry; without it a
# kernel whose entry needs fewer registers gets "setmaxnreg ignored; unable to determine register count at entry"
# (C7508) and spills at 168 registers per thread
@tsjit.kernel(min_blocks=1)
def attention_backward(q_map, k_map, v_map, do_map, st_map, dq_map, dq, dk_out, dv_out, batch, seqlen_q, seqlen_k,
                       heads, kv_heads, group, padded_q, scale, scale_log2,
                       HEAD_DIM: tsjit.Constexpr[int], CAUSAL: tsjit.Constexpr[bool],
                       STAGES: tsjit.Constexpr[int] = 2, KV_STAGES: tsjit.Constexpr[int] = 1,
                       DQ_SHARED: tsjit.Constexpr[bool] = False, DQ_TMA: tsjit.Constexpr[bool] = False):
    """Attention backward (module docstring).

    ``q_map`` / ``do_map``: TensorMaps of Q and dO (B, S_q, H, D), box (1, 64, 1, 64); ``k_map`` / ``v_map``: of K
    and V (B, S_k, H_kv, D), box (1, 128, 1, 64), all 128B-swizzled; ``st_map``: of the Float32 statistics
    (B, H, 2, padded_q) (``LSE * log2 e`` with +inf for rows without keys or past S_q, and D = rowsum(dO * O)),
    box (1, 1, 2, 64), no swizzle (:func:`~tsjit.examples.attention_bwd_parts.attention_backward_preprocess` fills
    it); ``dq``: the Float32 (B * H * padded_q, D) workspace, zeroed (dQ is added into it); ``dk_out`` /
    ``dv_out``: rank-2 (B * S_k, H_kv * D) views of dK and dV; ``kv_heads`` = H_kv, ``group = H // H_kv``;
    ``scale``: the softmax scale (dS is multiplied by it, so dQ and dK come out scaled), ``scale_log2 = scale *
    log2 e``.  Launch with :data:`BWD_THREADS` threads and a
    persistent grid over the (B * H_kv, ceil(S_k / 128)) tiles.  ``DQ_SHARED``: see :data:`BWD_DQ_SHARED`;
    ``DQ_TMA``: dQ by TMA reductions through ``dq_map`` (the workspace's TensorMap, box (64, 64), no swizzle;
    see :meth:`QdOTiles.step`; not under the CPU interpreter)."""
    if tsjit.const_expr(HEAD_DIM not in BWD_HEAD_DIMS):
        raise tsjit.CompilationError(f"attention_backward: HEAD_DIM must be one of {BWD_HEAD_DIMS}, got {HEAD_DIM}")
    if tsjit.const_expr(DQ_SHARED and HEAD_DIM != 64 * BWD_WARPGROUPS):
        raise tsjit.CompilationError(f"attention_backward: DQ_SHARED splits dQ's columns into 64-column boxes, one "
                                     f"per warpgroup: it needs HEAD_DIM {64 * BWD_WARPGROUPS}, got {HEAD_DIM}")
    queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        batch * kv_heads, (seqlen_k + BWD_BLOCK_N - 1) // BWD_BLOCK_N)
    wq = WorkQueue(name="tiles", tile_scheduler_config=queue_config)
    itemsize = q_map.dtype.itemsize
    producer = ts.CooperativeGroup(ts.Agent.Thread, 1)
    consumers = ts.CooperativeGroup(ts.Agent.Thread, BWD_WARPGROUPS * 4)
    shape = BackwardShape(batch=batch, seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads=heads, kv_heads=kv_heads,
                          group=group, padded_q=padded_q, scale=scale, scale_log2=scale_log2, head_dim=HEAD_DIM,
                          causal=CAUSAL, dq_shared=DQ_SHARED, dq_tma=DQ_TMA)
    kv_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(KV_STAGES, 2 * BWD_BLOCK_N * HEAD_DIM * itemsize,
                                                             producer, consumers)
    qdo_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, 2 * BWD_BLOCK_M * HEAD_DIM * itemsize
                                                              + 2 * BWD_BLOCK_M * 4, producer, consumers)
    kv = KVTiles(name="kv", pipeline_config=kv_cfg, k_map=k_map, v_map=v_map, shape=shape)
    qdo = QdOTiles(name="qdo", pipeline_config=qdo_cfg, q_map=q_map, do_map=do_map, st_map=st_map, kv=kv, dq=dq,
                   dq_map=dq_map, shape=shape)
    grads = Gradients(name="grads", dk_out=dk_out, dv_out=dv_out, shape=shape)
    run_backward_program(wq, kv, qdo, grads, shape)


def run_backward_program(wq, kv, qdo, grads, shape):
    """The schedules, tasks and verified TaskManager of the backward program (compile-time Python)."""

    @ts.schedule
    def load_kv_schedule(q: WorkQueue, kt: KVTiles):
        with ts.work_tile_loop(q):
            kt.acquire()
            kt.tma_load()
            kt.commit()
            with ts.domain_loop(0, 0, 1):
                pass
            queue_epilogue(q)

    @ts.schedule
    def load_q_schedule(q: WorkQueue, qt: QdOTiles):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, BackwardTask.get_domain, 1):
                qt.acquire()
                qt.tma_load()
                qt.commit()
            queue_epilogue(q)

    @ts.schedule
    def idle_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            queue_epilogue(q)

    @ts.schedule
    def grad_schedule(q: WorkQueue, kt: KVTiles, qt: QdOTiles, g: Gradients):
        with ts.work_tile_loop(q):
            dk, dv = qt.zero_grads()
            kt.wait()
            kv_stage = kt.current_stage()
            with ts.domain_loop(0, BackwardTask.get_domain, 1):
                qt.wait()
                dk, dv = qt.step(kv_stage, dk, dv)
                qt.release()
            kt.release()
            g.store(dk, dv)
            queue_epilogue(q)
        qt.flush()

    def task(name, sources, destinations, warp_idx, num_warps, schedule, registers):
        made = BackwardTask(name, sources, destinations, warp_idx=warp_idx, num_warps=num_warps, schedule=schedule,
                            num_registers=registers)
        made.shape = shape
        return made

    producer_registers, consumer_registers = REGISTERS[BWD_WARPGROUPS]
    load_kv = task("load_kv", [wq], [kv], 0, 1, load_kv_schedule(wq, kv), producer_registers)
    load_q = task("load_q", [wq], [qdo], 1, 1, load_q_schedule(wq, qdo), producer_registers)
    idle = ts.Task("idle", [wq], [], warp_idx=2, num_warps=2, schedule=idle_schedule(wq),
                   num_registers=producer_registers)
    grad = task("grad", [wq, kv, qdo], [grads], 4, 4 * BWD_WARPGROUPS, grad_schedule(wq, kv, qdo, grads),
                consumer_registers)
    manager = ts.TaskManager([load_kv, load_q, idle, grad], {kv: [wq], qdo: [wq], grads: [kv, qdo]}, verbose=False)
    for observer in BACKWARD_OBSERVERS:
        observer(manager)
    manager.setup_resources_and_tasks()
    manager.run()


#: callables given each verified TaskManager a compile of :func:`attention_backward` builds (the CPU tests read
#: its exhaustive verdict)
BACKWARD_OBSERVERS: list = []


def compile_backward(head_dim=128, causal=False, dtype=None, *, stages=None, dq_shared=None, dq_tma=None):
    """Compile :func:`attention_backward` for sm_90a from argument specs alone (no GPU): the configuration
    ``tsjit.ops.attention_backward`` launches.  Returns the CompiledKernel (``.ptx``, ``.cubin``, ``.metadata``)."""
    dtype = tsjit.BFloat16 if dtype is None else dtype
    stages = stages or BWD_STAGES.get(head_dim, 2)
    dq_shared = BWD_DQ_SHARED.get(head_dim, False) if dq_shared is None else dq_shared
    dq_tma = BWD_DQ_TMA.get(head_dim, False) if dq_tma is None else dq_tma
    q = tsjit.tensormap_spec(dtype, (1, BWD_BLOCK_M, 1, BOX), swizzle="128B")
    kv = tsjit.tensormap_spec(dtype, (1, BWD_BLOCK_N, 1, BOX), swizzle="128B")
    st = tsjit.tensormap_spec(tsjit.Float32, (1, 1, 2, BWD_BLOCK_M))
    dq = tsjit.spec((2 * 16 * 1024, head_dim), tsjit.Float32)
    dq_map = tsjit.tensormap_spec(tsjit.Float32, (64, 64))
    dkv = tsjit.spec((2000, 4 * head_dim), dtype)
    return tsjit.compile(attention_backward, q, kv, kv, q, st, dq_map, dq, dkv, dkv, 2, 1000, 1000, 16, 4, 4, 1024,
                         0.125, 0.125 * LOG2_E, head_dim, causal, stages, 1, dq_shared, dq_tma)


__all__ = ["BWD_HEAD_DIMS", "BWD_BLOCK_N", "BWD_BLOCK_M", "BWD_WARPGROUPS", "BWD_THREADS", "BWD_STAGES",
           "BWD_DQ_SHARED", "BWD_DQ_TMA", "DS_BARRIER", "issue_dk", "BackwardShape", "KVBlock", "BackwardTask", "KVTiles", "QdOTiles",
           "Gradients", "attention_backward", "run_backward_program", "BACKWARD_OBSERVERS", "compile_backward"]
