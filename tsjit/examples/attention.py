"""FlashAttention-style forward attention on Hopper, written in Task Scheduling (issue 16).

``O = softmax(scale * Q K^T + mask) V`` per (batch, head), with the per-row log-sum-exp
``LSE = log(sum_j exp(scale * s_ij))`` (natural log, fp32).  Q, K, V and O are
``(batch, seqlen, heads, head_dim)`` tensors (FlashAttention's layout; any strides with the last
dimension contiguous), BFloat16 or Float16, head_dim 64 or 128; K and V may have fewer heads than
Q (GQA / MQA: query head ``h`` reads KV head ``h // (heads // kv_heads)``).

Program (one CTA = 3 warpgroups, 384 threads, one 128-row Q tile per work tile):

* ``load`` (warp 0, ``setmaxnreg`` down to 24 with the ``idle`` padding warps 1-3): per work tile
  it TMA-loads the Q tile once (``q`` resource, a 1-stage TmaAsync pipeline), then walks the KV tiles
  of the tile's domain, loading K tile ``j`` into the ``k`` ring and V tile ``j`` into the ``v`` ring
  (separate rings, so the QK^T of a tile can start before its V has arrived).  All tiles are
  128-byte swizzled, ``head_dim / 64`` boxes of 64 columns each; TMA zero-fills rows past the end.
* ``softmax`` (warpgroups 1 and 2, ``setmaxnreg`` up to 240): each warpgroup owns 64 rows of the Q
  tile.  Per KV tile ``j``:

  - ``k.scores``: ``S = Q K_j^T`` with ``wgmma`` (A = Q and B = K from shared memory, N = BLOCK_N),
    masks the columns past ``seqlen_k`` and, causal, above the diagonal (only on tiles that need
    it), and runs the online softmax in fp32: the running row max ``m``, the rescale factor
    ``alpha = exp2((m_old - m_new) * scale * log2 e)`` and ``P = exp2(S * scale * log2 e - m *
    scale * log2 e)`` (one FMA per element, the scale folded in), the running row sums ``l``
    (thread-partial; the 4 threads of a row are summed once, in the epilogue).  P is rounded to
    the input dtype and packed in pairs: the wgmma Float32 accumulator layout of a 16-column slice
    of S is exactly the register A-fragment layout of an m64k16 wgmma, so pair ``t`` of S is
    register ``t`` of the A operand (PTX ISA §9.7.15.5.1.1, Figures 148/149).
  - ``v.accumulate``: ``O = alpha * O + P V_j`` with register-A wgmma (B = V, MN-major).

  After the last tile ``out.store`` normalizes O by ``l``, writes it through a 128B-swizzled
  shared-memory staging buffer (``stmatrix``) with TMA stores (clipped at ``seqlen_q``), and stores
  the LSE.
* Causal masking (bottom-right aligned as in FlashAttention: query row ``i`` sees keys
  ``j <= i + seqlen_k - seqlen_q``): each work tile's domain ends at the last KV tile that has a
  visible key (``AttentionTask.get_domain``), so fully masked tiles are never loaded; the work
  tiles of each head run longest first.
* Every task ends each tile with the queue epilogue; the TaskManager verifies the whole program
  (bracketing, counts, bytes, register budget, the exhaustive interleaving check) before any code
  is emitted.

Rows that see no key (causal with ``seqlen_q > seqlen_k``) get O = 0 and LSE = -inf.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.lang.epilogue import pack_pair, store_fragment_shared
from tsjit.lang.fragment import Fragment
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

BLOCK_M = 128                 # Q rows per work tile (two consumer warpgroups of 64 rows)
CONSUMER_WARPGROUPS = 2
THREADS = 128 * (1 + CONSUMER_WARPGROUPS)
BOX = 64                      # head_dim columns per 128-byte swizzled TMA box (16-bit elements)
HEAD_DIMS = (64, 128)
LOG2_E = 1.4426950408889634
NEG_INF = float("-inf")

#: default KV tile rows and ring stages per head_dim (shared memory: Q + 2 rings + O staging < 227 KiB)
DEFAULT_CONFIG = {64: (128, 3), 128: (128, 2)}


def tile_position(coords, num_m_blocks, causal):
    """(m_block, head, batch) of a work tile.  The queue's grid is (batch * heads, m_blocks): a head's
    Q tiles are consecutive, and with causal masking they run from the longest (last rows) first."""
    bh, order, _ = coords
    m_block = (num_m_blocks - 1 - order) if causal else order
    return m_block, bh


def kv_tiles(m_block, seqlen_q, seqlen_k, block_n, causal):
    """KV tiles a Q tile visits: all ``ceil(seqlen_k / block_n)``, or with causal masking those up to
    the last key the tile's last row sees (``row + seqlen_k - seqlen_q``), at least 0."""
    total = (seqlen_k + block_n - 1) // block_n
    if not causal:
        return total
    last_key = (m_block + 1) * BLOCK_M + (seqlen_k - seqlen_q)   # one past the last visible key
    visible = tsjit.math.max((last_key + block_n - 1) // block_n, 0)
    return tsjit.math.min(visible, total)


class AttentionTask(ts.Task):
    """A task whose domain (the KV tiles of a Q tile) depends on the tile: see :func:`kv_tiles`."""

    seqlen_q = None
    seqlen_k = None
    block_n = 128
    causal = False
    num_m_blocks = None

    def get_domain(self, tile_coord):
        m_block, _ = tile_position(tile_coord, self.num_m_blocks, self.causal)
        return kv_tiles(m_block, self.seqlen_q, self.seqlen_k, self.block_n, self.causal)


# -- softmax helpers (compile-time Python over the registers of one thread) -----------------------
def _row_half(i):
    """Which of its two rows (``r`` or ``r + 8``) accumulator register ``i`` of a thread holds."""
    return (i % 4) // 2


def _quad_reduce(value, combine):
    """Combine ``value`` over the 4 threads that hold one accumulator row (lanes 4q .. 4q + 3)."""
    value = combine(value, tsjit.shuffle_xor(value, 1))
    return combine(value, tsjit.shuffle_xor(value, 2))


def _add(a, b):
    return a + b


def mask_scores(s, row0, col0, seqlen_k, causal_offset, causal):
    """S with ``-inf`` where the key column is past ``seqlen_k`` or (causal) above the diagonal
    ``col > row + causal_offset``; ``row0`` / ``col0`` are the tile origins in rows / keys."""
    tid = tsjit.thread_idx().x
    out = []
    for i in range(len(s)):
        row, col = s.accumulator_coords(i, tid)
        key = col0 + col
        visible = key < seqlen_k
        if causal:
            visible = visible & (key <= row0 + row + causal_offset)
        out.append(tsjit.select(visible, s[i], NEG_INF))
    return Fragment(out, tsjit.Float32)


def online_softmax(s, stats, scale_log2, dtype):
    """One step of the online softmax on the thread's slice of S (raw scores, ``-inf`` masked).

    ``stats`` = (m_r, m_r8, l_r, l_r8, alpha_r, alpha_r8): running row maxima (raw units), the
    thread-partial row sums and the factor the previous O must be scaled by.  Returns (P packed
    in ``dtype`` pairs as Int32 registers, new stats)."""
    maxima = []
    for h in range(2):
        best = stats[h]
        for i in range(len(s)):
            if _row_half(i) == h:
                best = tsjit.math.max(best, s[i])
        maxima.append(_quad_reduce(best, tsjit.math.max))
    scaled, alphas = [], []
    for h in range(2):
        # a row that has seen only -inf keeps max -inf; subtract 0 then so exp2 gives 0, not NaN
        m_scaled = tsjit.select(maxima[h] == NEG_INF, 0.0, maxima[h] * scale_log2)
        scaled.append(m_scaled)
        alphas.append(tsjit.math.exp2(stats[h] * scale_log2 - m_scaled))
    p = [tsjit.math.exp2(tsjit.math.fma(s[i], scale_log2, -scaled[_row_half(i)])) for i in range(len(s))]
    sums = []
    for h in range(2):
        total = stats[2 + h] * alphas[h]
        for i in range(len(s)):
            if _row_half(i) == h:
                total = total + p[i]
        sums.append(total)
    packed = Fragment([pack_pair(p[2 * t], p[2 * t + 1], dtype) for t in range(len(s) // 2)], tsjit.Int32)
    return packed, Fragment([maxima[0], maxima[1], sums[0], sums[1], alphas[0], alphas[1]], tsjit.Float32)


def initial_stats():
    """(m, m, l, l, alpha, alpha) before the first KV tile."""
    return Fragment([NEG_INF, NEG_INF, 0.0, 0.0, 1.0, 1.0], tsjit.Float32)


# -- resources ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttentionShape:
    """The problem's sizes as the work bodies see them (ints or run-time Int32 values; not a resource,
    so holding it does not make one resource's work touch another's buffers)."""

    seqlen_q: object
    seqlen_k: object
    heads: object
    group: object               # query heads per KV head
    num_m_blocks: object
    scale_log2: object
    head_dim: int
    block_n: int
    causal: bool

    def position(self, work_tile):
        """(m_block, batch, head) of a work tile."""
        m_block, bh = tile_position(work_tile.coords, self.num_m_blocks, self.causal)
        return m_block, bh // self.heads, bh % self.heads


@dataclass(kw_only=True)
class QTile(ts.MemoryResource):
    """The work tile's Q rows (BLOCK_M x head_dim), loaded once per tile by TMA."""

    q_map: object
    shape: AttentionShape
    tiles: object = None

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        boxes = self.shape.head_dim // BOX
        self.tiles = tsjit.shared_array(self.q_map.dtype, (stages, boxes, CONSUMER_WARPGROUPS, 64, BOX), align=1024)

    def tma_bytes_per_stage(self):
        return self.q_map.box_bytes * (self.shape.head_dim // BOX)

    @ts.producer_work()
    def tma_load(self, stage_info):
        m_block, batch, head = self.shape.position(stage_info.work_tile)
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(self.shape.head_dim // BOX):
                tsjit.tma_load(self.q_map, self.tiles[stage_info.stage_idx, box], stage_info.barrier,
                               (batch, m_block * BLOCK_M, head, box * BOX))


@dataclass(kw_only=True)
class KVRing(ts.MemoryResource):
    """A ring of K or V tiles (BLOCK_N keys x head_dim, ``head_dim / 64`` swizzled boxes per stage), TMA-loaded
    from the work tile's KV head (query head // group)."""

    tmap: object
    shape: AttentionShape
    tiles: object = None

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        shape = self.shape
        self.tiles = tsjit.shared_array(self.tmap.dtype, (stages, shape.head_dim // BOX, shape.block_n, BOX),
                                        align=1024)

    def tma_bytes_per_stage(self):
        return self.tmap.box_bytes * (self.shape.head_dim // BOX)

    @ts.producer_work()
    def tma_load(self, stage_info):
        shape = self.shape
        _, batch, head = shape.position(stage_info.work_tile)
        if tsjit.elect_one():
            for box in tsjit.range_constexpr(shape.head_dim // BOX):
                tsjit.tma_load(self.tmap, self.tiles[stage_info.stage_idx, box], stage_info.barrier,
                               (batch, stage_info.loop_offset * shape.block_n, head // shape.group, box * BOX))


@dataclass(kw_only=True)
class KTiles(KVRing):
    """The K ring; its consumer work computes S = Q K^T and the online softmax (see the module docstring).
    It reads the Q tile of ``q``."""

    q: QTile
    p: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    stats: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        super().__post_init__()
        n = self.shape.block_n
        self.p = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(n // 4, tsjit.Int32),
                                      docs="P of the current KV tile, packed 16-bit pairs (wgmma A registers)")
        self.stats = ts.TaskLocalVariable(Fragment, default_factory=initial_stats,
                                          docs="row maxima, thread-partial row sums, rescale factors")

    @ts.consumer_work(returns="stats", work_attrs=ts.WorkAttr.AUXILIARY)
    def reset_statistics(self, stage_info):
        return initial_stats()

    @ts.consumer_work(returns=("p", "stats"))
    def scores(self, stage_info, stats):
        shape = self.shape
        warpgroup = tsjit.warp_idx() // 4 - 1
        stage = stage_info.stage_idx
        s = Fragment.zeros(shape.block_n // 2)
        wgmma.fence()
        for kk in tsjit.range_constexpr(shape.head_dim // 16):
            box = kk // 4
            a_desc = wgmma.make_descriptor(self.q.tiles[0, box, warpgroup], major="K", swizzle="128B")
            b_desc = wgmma.make_descriptor(self.tiles[stage, box], major="K", swizzle="128B")
            s = wgmma.mma_async(s, a_desc.k_step(kk % 4), b_desc.k_step(kk % 4), n=shape.block_n,
                                scale_d=0 if kk == 0 else 1)
        wgmma.commit_group()
        wgmma.wait_group(0)
        s = wgmma.fence_operand(s)
        m_block, _, _ = shape.position(stage_info.work_tile)
        col0 = stage_info.loop_offset * shape.block_n
        row0 = m_block * BLOCK_M + warpgroup * 64
        offset = shape.seqlen_k - shape.seqlen_q
        needs_mask = col0 + shape.block_n > shape.seqlen_k
        if tsjit.const_expr(shape.causal):
            needs_mask = needs_mask | (col0 + shape.block_n - 1 > m_block * BLOCK_M + offset)
        if needs_mask:
            s = mask_scores(s, row0, col0, shape.seqlen_k, offset, shape.causal)
        return online_softmax(s, stats, shape.scale_log2, self.tmap.dtype)


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

    @ts.consumer_work(returns="o")
    def accumulate(self, stage_info, p, stats, o):
        shape = self.shape
        rescaled = Fragment([o[i] * stats[4 + _row_half(i)] for i in range(len(o))], tsjit.Float32)
        b_desc = wgmma.make_descriptor(self.tiles[stage_info.stage_idx], major="MN", swizzle="128B")
        wgmma.fence()
        for kk in tsjit.range_constexpr(shape.block_n // 16):
            a = Fragment([p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]], tsjit.Int32)
            rescaled = wgmma.mma_async(rescaled, a, b_desc.k_step(kk), n=shape.head_dim, a_dtype=self.tmap.dtype)
        wgmma.commit_group()
        wgmma.wait_group(0)
        return wgmma.fence_operand(rescaled)


@dataclass(kw_only=True)
class AttentionOutput(ts.MemoryResource):
    """O (bf16/fp16, through shared memory and TMA stores) and the per-row LSE (fp32, (B, H, S_q))."""

    o_map: object
    lse: object
    shape: AttentionShape
    store_lse: bool = True
    staging: object = None

    def __post_init__(self):
        boxes = self.shape.head_dim // BOX
        self.staging = tsjit.shared_array(self.o_map.dtype, (CONSUMER_WARPGROUPS, boxes, 64, BOX), align=1024)

    @ts.producer_work()
    def store(self, stage_info, o, stats):
        shape = self.shape
        m_block, batch, head = shape.position(stage_info.work_tile)
        warpgroup = tsjit.warp_idx() // 4 - 1
        tid = tsjit.thread_idx().x % 128
        row0 = m_block * BLOCK_M + warpgroup * 64
        sums = [_quad_reduce(stats[2 + h], _add) for h in range(2)]
        inverse = [tsjit.select(sums[h] > 0.0, 1.0 / sums[h], 0.0) for h in range(2)]
        normalized = Fragment([o[i] * inverse[_row_half(i)] for i in range(len(o))], tsjit.Float32)
        buffer = self.staging[warpgroup]
        if tid == 0:
            tsjit.bulk_wait_group(0, read=True)        # the previous tile's stores have left the buffer
        tsjit.named_barrier_sync(1 + warpgroup, 128)
        store_fragment_shared(normalized, buffer, swizzle="128B", tid=tid)
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1 + warpgroup, 128)
        if tid == 0:
            for box in tsjit.range_constexpr(shape.head_dim // BOX):
                tsjit.tma_store(self.o_map, buffer[box], (batch, row0, head, box * BOX))
            tsjit.bulk_commit_group()
        if tsjit.const_expr(self.store_lse):
            if tid % 4 == 0:
                for h in tsjit.range_constexpr(2):
                    row = row0 + (tid // 32) * 16 + (tid % 32) // 4 + 8 * h
                    if row < shape.seqlen_q:
                        m_scaled = stats[h] * shape.scale_log2
                        lse = tsjit.select(sums[h] > 0.0, (m_scaled + tsjit.math.log2(sums[h])) * math.log(2.0),
                                           NEG_INF)
                        self.lse[batch, head, row] = lse

    @ts.producer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def flush(self, stage_info):
        """Before the CTA exits: TMA stores still reading the staging buffer must finish."""
        if tsjit.thread_idx().x % 128 == 0:
            tsjit.bulk_wait_group(0)


def queue_epilogue(q):
    """The end of every task's work tile (check Q1): wait for, take and release the next tile."""
    q.wait()
    q.get_and_advance_work_tile()
    q.release()


# -- the kernel ---------------------------------------------------------------------------------
@tsjit.kernel
def attention_forward(q_map, k_map, v_map, o_map, lse, seqlen_q, seqlen_k, heads, group, scale_log2,
                      HEAD_DIM: tsjit.Constexpr[int], BLOCK_N: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                      CAUSAL: tsjit.Constexpr[bool], STORE_LSE: tsjit.Constexpr[bool] = True):
    """Forward attention (module docstring).  ``q_map`` / ``o_map``: TensorMaps of Q and O (B, S_q, H, D)
    with boxes (1, 128, 1, 64) and (1, 64, 1, 64); ``k_map`` / ``v_map``: of K and V (B, S_k, H_kv, D) with
    box (1, BLOCK_N, 1, 64), all 128B-swizzled; ``lse``: Float32 (B, H, S_q); ``group = H // H_kv``;
    ``scale_log2 = softmax scale * log2(e)``.  Launch with 384 threads and a persistent grid."""
    batch = lse.shape[0]
    num_m_blocks = (seqlen_q + BLOCK_M - 1) // BLOCK_M
    queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(batch * heads, num_m_blocks)
    wq = WorkQueue(name="tiles", tile_scheduler_config=queue_config)
    itemsize = q_map.dtype.itemsize
    producer = ts.CooperativeGroup(ts.Agent.Thread, 1)
    consumers = ts.CooperativeGroup(ts.Agent.Thread, CONSUMER_WARPGROUPS * 4)
    q_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(1, BLOCK_M * HEAD_DIM * itemsize, producer, consumers)
    kv_bytes = BLOCK_N * HEAD_DIM * itemsize
    k_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, kv_bytes, producer, consumers)
    v_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, kv_bytes, producer, consumers)
    shape = AttentionShape(seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads=heads, group=group,
                           num_m_blocks=num_m_blocks, scale_log2=scale_log2, head_dim=HEAD_DIM, block_n=BLOCK_N,
                           causal=CAUSAL)
    qs = QTile(name="q", pipeline_config=q_cfg, q_map=q_map, shape=shape)
    ks = KTiles(name="k", pipeline_config=k_cfg, tmap=k_map, q=qs, shape=shape)
    vs = VTiles(name="v", pipeline_config=v_cfg, tmap=v_map, shape=shape)
    out = AttentionOutput(name="o", o_map=o_map, lse=lse, shape=shape, store_lse=STORE_LSE)

    @ts.schedule
    def load_schedule(q: WorkQueue, qt: QTile, kt: KTiles, vt: VTiles):
        with ts.work_tile_loop(q):
            qt.acquire()
            qt.tma_load()
            qt.commit()
            with ts.domain_loop(0, AttentionTask.get_domain, 1):
                kt.acquire()
                kt.tma_load()
                kt.commit()
                vt.acquire()
                vt.tma_load()
                vt.commit()
            queue_epilogue(q)

    @ts.schedule
    def idle_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            queue_epilogue(q)

    @ts.schedule
    def softmax_schedule(q: WorkQueue, qt: QTile, kt: KTiles, vt: VTiles, o: AttentionOutput):
        with ts.work_tile_loop(q):
            stats = kt.reset_statistics()
            acc = vt.zero_output()
            qt.wait()
            with ts.domain_loop(0, AttentionTask.get_domain, 1):
                kt.wait()
                p, stats = kt.scores(stats)
                kt.release()
                vt.wait()
                acc = vt.accumulate(p, stats, acc)
                vt.release()
            qt.release()
            o.store(acc, stats)
            queue_epilogue(q)
        o.flush()

    def attention_task(name, sources, destinations, warp_idx, num_warps, schedule, registers):
        task = AttentionTask(name, sources, destinations, warp_idx=warp_idx, num_warps=num_warps, schedule=schedule,
                             num_registers=registers)
        task.seqlen_q, task.seqlen_k, task.block_n, task.causal = seqlen_q, seqlen_k, BLOCK_N, CAUSAL
        task.num_m_blocks = num_m_blocks
        return task

    load = attention_task("load", [wq], [qs, ks, vs], 0, 1, load_schedule(wq, qs, ks, vs), 24)
    idle = ts.Task("idle", [wq], [], warp_idx=1, num_warps=3, schedule=idle_schedule(wq), num_registers=24)
    softmax = attention_task("softmax", [wq, qs, ks, vs], [out], 4, 4 * CONSUMER_WARPGROUPS,
                             softmax_schedule(wq, qs, ks, vs, out), 240)
    manager = ts.TaskManager([load, idle, softmax], {ks: [wq], vs: [wq], qs: [wq], out: [ks, vs]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def log2_scale(scale: float) -> float:
    """The softmax scale folded with log2(e): scores enter ``exp2`` as ``s * scale * log2 e``."""
    return float(scale) * LOG2_E
