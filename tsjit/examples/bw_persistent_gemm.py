"""CUTLASS Task Scheduling tutorial 6 ported: a persistent clustered bf16 GEMM for Blackwell (sm_100a),
``C (M, N) = A (M, K) @ B (N, K)^T + bias (N)`` with fp32 accumulation and bf16 output.

It shows, in one source: split A / B load tasks, TMA multicast of B across the pairs of a cluster,
2-CTA MMA (``tcgen05.mma.cta_group::2``, M = 256 per pair), CLC dynamic persistent scheduling (or a
static persistent queue), programmatic dependent launch, a bias epilogue, and a fallback cluster shape.

**Cluster shapes** (``cta_layout_vmnk = (V, CM, 1, 1)``, cluster ``(V * CM, 1, 1)``): V CTAs per UMMA
pair (2: ``cta_group::2``), CM pairs per cluster along M that share one B tile (multicast).
:data:`CLUSTER_SHAPES` lists the preferred shape first and the fallbacks after it -- :data:`TWO_PAIRS`
``(2, 2, 1, 1)`` (two 2-CTA pairs sharing each B tile by multicast, 512 x 256 per cluster: CUTLASS's
preferred 4 x 1 cluster, combining the 2-CTA MMA with multicast), ``(2, 1, 1, 1)`` (one 2-CTA pair,
256 x 256), ``(1, 2, 1, 1)`` (two one-CTA MMAs sharing a multicast 128-column B tile, for N < 256) and
``(1, 1, 1, 1)`` (a plain one-CTA UMMA kernel, M = 128, ``cta_group::1``); :func:`pick_cluster_shape` takes
the first one the problem fills among those the exhaustive checker proves SAFE with the chosen scheduler
(:data:`PROVEN`; the kernel is compiled per shape: multicast masks and the MMA's CTA group are
compile-time facts).  CUTLASS's run-time fallback (a launch with a preferred and a fallback cluster
dimension, the GPU choosing per cluster) is not modelled: here the shape is picked on the host, per
problem.

**Tiles.** A CTA owns one 128-row slice of C (its TMEM lanes) and ``BN = 128 * V`` columns; a pair owns
``128 * V`` rows.  CTA tile ``t`` (the queue's tile index) sits in cluster ``t // C`` at rank ``t % C``
(``v = rank % V``, ``m = rank // V``); clusters walk M first.  A K tile is 64 wide (128-byte swizzle).
Per K tile each CTA receives A (128 x 64) and its half of B (128 x 64): 16 KiB each.

**Tasks** (8 warps, 256 threads per CTA; every CTA runs every task):

* ``scheduler`` (warp 0): CLC -- ``tiles.acquire`` (CTA 0 arms every CTA's full barrier for the 16-byte
  response), ``fetch_work_tile`` (``clusterlaunchcontrol.try_cancel.multicast::cluster::all``),
  ``commit``; static -- only the queue bookkeeping of each tile (a padding task).
* ``load_a`` (warp 1), ``load_b`` (warp 2): the **split loads** of one **TmaUmma** ring ``ab``
  (``producer_group`` = 2 arming warps, ``num_bytes_per_warp_per_cta`` = 16 KiB).  Each waits on its
  CTA's empty barrier; the **pair leader** arms the full barrier with both CTAs' bytes
  (each arming warp 16 KiB x V), and the copies of both CTAs complete on it (``tma_load(..., cta_group=2)``:
  leader-routed completion).  ``load_b`` multicasts its 1/CM of the B half to the same-``v`` CTA of
  every pair of the cluster (``multicast_mask``).
* ``mma`` (warp 3): ``ab`` is consumed with ``SignalingThreads.CtaLeader``: only the pair leader waits,
  issues the MMAs of both CTAs (``m = 128 V``, ``cta_group = V``) into the accumulator stage and
  releases with a ``tcgen05.commit`` multicast to every CTA of the cluster (their copies filled the stage
  it read).  The accumulator is a 2-stage **UmmaAsync** ring ``acc`` in TMEM (2 x BN columns) produced
  with ``CtaLeader``: the leader's commit is multicast to both CTAs of the pair.
* ``epilogue`` (warps 4-7, one warpgroup): waits for its CTA's accumulator stage, loads TMEM
  (``tcgen05.ld.32x32b``), adds the bias, stores bf16 rows with bounds masks, and releases to the pair
  leader's empty barrier (a remote arrive: 128 x V arrivals).

``load_a``, ``load_b`` and ``epilogue`` start with ``griddepcontrol.wait`` (PdlWaitBarrier, before their
tile loops: A, B and the bias may be the previous kernel's output), and ``load_a`` then lets the next
kernel launch (``griddepcontrol.launch_dependents``: its own wait still waits for this grid to finish);
launch with ``pdl=True`` to overlap.

The host side: :func:`compile_for` (no GPU needed), :func:`tensor_maps`, :func:`launch_grid`,
:func:`run_tutorial6` (a launch on the current device, or the CPU interpreter with ``TSJIT_INTERPRET=1``)
and :func:`reference` (float64 numpy).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import tcgen05, ts
from tsjit.ts.pdl import PdlLaunchBarrier, PdlWaitBarrier
from tsjit.ts.work_queue import CLC_RESPONSE_BYTES, TileSchedulerConfig, WorkQueue

ROWS = 128                      # rows of C per CTA (TMEM lanes)
BK = 64                         # K per stage (64 bf16 = one 128-byte swizzle span)
MMA_K = 16
STAGES = 2
ACC_STAGES = 2
WARPS = 8
THREADS = WARPS * 32
TWO_PAIRS = (2, 2, 1, 1)        # two 2-CTA pairs sharing B by multicast (CUTLASS's preferred 4 x 1 cluster)
CLUSTER_SHAPES = (TWO_PAIRS, (2, 1, 1, 1), (1, 2, 1, 1), (1, 1, 1, 1))    # preferred first, then the fallbacks
STAGE_BYTES_PER_WARP = ROWS * BK * 2                            # one 128 x 64 bf16 box per load warp
PAIR, MULTICAST, ONE_CTA = CLUSTER_SHAPES[1:]
#: (cluster shape, CLC) builds the exhaustive checker proves SAFE within its default state cap, every task of
#: every CTA of the cluster modelled (tests/blackwell/test_tutorial6.py): all eight -- the two pairs with CLC (20
#: processes) in about 4 900 states, with the static queue in about 4 300, the pair with CLC in about 300.
#: :func:`pick_cluster_shape` offers only the builds listed here.
PROVEN = {(layout, clc) for layout in CLUSTER_SHAPES for clc in (False, True)}


def block_n(layout) -> int:
    """Columns of C per pair (and per CTA): 128 x V."""
    return ROWS * layout[0]


def cluster_ctas(layout) -> int:
    v, m, n, k = layout
    return v * m * n * k


def b_box(layout) -> tuple:
    """The B box one CTA's load_b copies: its 1 / CM share of the CTA's 128-row half of the B tile."""
    return (ROWS // layout[1], BK)


def tile_count(M, N, layout):
    """CTA tiles of the problem, whole clusters (ints on the host, Int32 Values in the kernel)."""
    per_cluster_m, bn = ROWS * layout[0] * layout[1], block_n(layout)
    return cluster_ctas(layout) * ((M + per_cluster_m - 1) // per_cluster_m) * ((N + bn - 1) // bn)


def pick_cluster_shape(M: int, N: int, clc: bool = False) -> tuple:
    """The first of :data:`CLUSTER_SHAPES` proven SAFE with this scheduler (``(layout, clc)`` in :data:`PROVEN`)
    that the problem fills: a cluster's rows (``128 V CM``) fit in M and a pair's columns (``128 V``) in N;
    else the one-CTA fallback."""
    for layout in CLUSTER_SHAPES:
        if (layout, clc) in PROVEN and M >= ROWS * layout[0] * layout[1] and N >= block_n(layout):
            return layout
    return CLUSTER_SHAPES[-1]


def cta_tile(tile_idx, M, layout):
    """``(a_row, b_row, col)`` of CTA tile ``tile_idx`` (int or Int32 Value): its first row of A and C, the
    first B row (N) of its half of the pair's B tile, and the first column of C.  Runs at compile time on
    run-time values (no branching)."""
    v_extent, cm_extent = layout[0], layout[1]
    ctas = cluster_ctas(layout)
    clusters_m = (M + ROWS * v_extent * cm_extent - 1) // (ROWS * v_extent * cm_extent)
    cluster, rank = tile_idx // ctas, tile_idx % ctas
    v, m = rank % v_extent, rank // v_extent
    cm, cn = cluster % clusters_m, cluster // clusters_m
    a_row = ((cm * cm_extent + m) * v_extent + v) * ROWS
    col = cn * block_n(layout)
    return a_row, col + v * ROWS, col


@dataclass(kw_only=True)
class ABStages(ts.MemoryResource):
    """The TmaUmma ring of A (128 x 64) and B (128 x 64, this CTA's half of the pair's B tile) stages,
    filled by two load tasks; the MMA warp's consumer work hands the stage index to the accumulator."""

    a_map: object
    b_map: object
    M: object
    layout: tuple
    a_tiles: object = None
    b_tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.a_tiles = tsjit.shared_array(self.a_map.dtype, (STAGES, ROWS, BK), align=1024)
        self.b_tiles = tsjit.shared_array(self.b_map.dtype, (STAGES, ROWS, BK), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the stage the MMAs read")

    @ts.producer_work()
    def load_a(self, stage_info):
        """This CTA's 128 rows of A for K tile ``loop_offset``; completes on the pair leader's barrier."""
        a_row, _, _ = cta_tile(stage_info.work_tile.tile_idx, self.M, self.layout)
        if tsjit.elect_one():
            tsjit.tma_load(self.a_map, self.a_tiles[stage_info.stage_idx], stage_info.barrier,
                           (a_row, stage_info.loop_offset * BK), cta_group=self.layout[0])

    @ts.producer_work()
    def load_b(self, stage_info):
        """This CTA's share of the B half: rows ``m * 128 / CM`` of it, multicast to the same-``v`` CTA of every
        pair of the cluster (CM > 1), or the whole half (CM = 1)."""
        _, b_row, _ = cta_tile(stage_info.work_tile.tile_idx, self.M, self.layout)
        v_extent, cm_extent = self.layout[0], self.layout[1]
        if tsjit.elect_one():
            tile = self.b_tiles[stage_info.stage_idx]
            k = stage_info.loop_offset * BK
            if tsjit.const_expr(cm_extent == 1):
                tsjit.tma_load(self.b_map, tile, stage_info.barrier, (b_row, k), cta_group=v_extent)
            else:
                rank = tsjit.cluster_ctarank()
                share = ROWS // cm_extent
                m = rank // v_extent
                peers = 0
                for other in tsjit.range_constexpr(cm_extent):
                    peers = peers | (1 << (other * v_extent))
                part = tile.reshape((cm_extent, share, BK))[m]
                tsjit.tma_load(self.b_map, part, stage_info.barrier, (b_row + m * share, k),
                               multicast_mask=peers << (rank % v_extent), cta_group=v_extent)

    @ts.consumer_work(returns="stage")
    def operands(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Accumulators(ts.MemoryResource):
    """The 2-stage UmmaAsync ring of fp32 accumulators in TMEM (``ACC_STAGES x BN`` columns): the pair
    leader's MMAs write both CTAs' halves, each CTA's epilogue reads its own."""

    ab: object
    c: object
    bias: object
    M: object
    N: object
    layout: tuple
    tmem: object = None

    def __post_init__(self):
        self.tmem = ts.TmemAllocation("accumulators", ACC_STAGES * block_n(self.layout))

    def get_tmem_requirements(self):
        return [self.tmem]

    @ts.producer_work()
    def mma(self, stage_info, stage):
        """The pair leader's elected thread: four MMAs (K = 16 each) of ring stage ``stage`` into accumulator
        stage ``stage_idx`` (M = 128 V rows over both CTAs, N = 128 V)."""
        v_extent = self.layout[0]
        bn = block_n(self.layout)
        d = stage_info.context.tmem_ptr_i32 + self.tmem.offset + stage_info.stage_idx * bn
        leader = (tsjit.cluster_ctarank() % v_extent) == 0
        if leader:
            if tsjit.elect_one():
                a_desc = tcgen05.make_smem_descriptor(self.ab.a_tiles[stage])
                b_desc = tcgen05.make_smem_descriptor(self.ab.b_tiles[stage])
                for kk in tsjit.range_constexpr(BK // MMA_K):
                    tcgen05.mma(d, a_desc.k_step(kk), b_desc.k_step(kk), m=ROWS * v_extent, n=bn,
                                cta_group=v_extent, accumulate=(stage_info.loop_offset > 0) | (kk > 0))

    def add_bias(self, value, row, column, col0):
        """``value + bias[col0 + column]`` (the last bias element past N: those columns are not stored)."""
        index = tsjit.select(col0 + column < self.N, col0 + column, self.N - 1)
        return value + self.bias[index]

    @ts.consumer_work()
    def store(self, stage_info):
        """This CTA's 128 rows: TMEM -> registers, + bias, bf16 stores (rows < M, columns < N)."""
        a_row, _, col = cta_tile(stage_info.work_tile.tile_idx, self.M, self.layout)
        bn = block_n(self.layout)
        base = stage_info.context.tmem_ptr_i32 + self.tmem.offset + stage_info.stage_idx * bn
        view = tcgen05.accumulator(base, columns=bn)
        view.store_global(self.c, a_row, col, self.M, self.N, chunk=32,
                          fn=lambda value, row, column: self.add_bias(value, row, column, col))


def _configs(layout):
    one = ts.CooperativeGroup(ts.Agent.Thread, 1)
    v, ctas = layout[0], cluster_ctas(layout)
    leader = ts.SignalingThreads.CtaLeader
    ab = ts.PipelineConfig.create_tma_umma_pipeline_cfg(
        STAGES, STAGE_BYTES_PER_WARP * v, ts.CooperativeGroup(ts.Agent.Thread, 2),
        ts.CooperativeGroup(ts.Agent.Thread, ctas // v), layout, consumer_signaling_threads=leader,
        num_bytes_per_warp_per_cta=STAGE_BYTES_PER_WARP)
    acc = ts.PipelineConfig.create_umma_async_pipeline_cfg(
        ACC_STAGES, one, ts.CooperativeGroup(ts.Agent.Thread, 128 * v), layout, producer_signaling_threads=leader)
    clc = ts.PipelineConfig.create_clc_fetch_async_pipeline_cfg(
        2, CLC_RESPONSE_BYTES, one, ts.CooperativeGroup(ts.Agent.Thread, THREADS * ctas), layout)
    return ab, acc, clc


@tsjit.kernel
def persistent_gemm(a_map, b_map, c, bias, K, LAYOUT: tsjit.Constexpr, CLC: tsjit.Constexpr[bool],
                    MAX_STATES: tsjit.Constexpr = None):
    """C = A @ B^T + bias for bf16 A (M, K), B (N, K), C (M, N) and float32 bias (N); launch
    :func:`launch_grid` CTAs of :data:`THREADS` threads (the cluster comes from LAYOUT).  ``MAX_STATES``: the
    exhaustive checker's state cap (None: the default; see :data:`PROVEN`)."""
    M, N = c.shape[0], c.shape[1]
    k_tiles = (K + BK - 1) // BK
    num_tiles = tile_count(M, N, LAYOUT)
    ab_cfg, acc_cfg, clc_cfg = _configs(LAYOUT)
    if tsjit.const_expr(CLC):
        queue = WorkQueue(name="tiles", pipeline_config=clc_cfg,
                          tile_scheduler_config=TileSchedulerConfig.create_clc_dynamic_persistent_tile_scheduler_params(
                              (num_tiles,)))
    else:
        queue = WorkQueue(name="tiles", tile_scheduler_config=
                          TileSchedulerConfig.create_static_persistent_tile_scheduler_params(num_tiles))
    ab = ABStages(name="ab", pipeline_config=ab_cfg, a_map=a_map, b_map=b_map, M=M, layout=LAYOUT)
    acc = Accumulators(name="acc", pipeline_config=acc_cfg, ab=ab, c=c, bias=bias, M=M, N=N, layout=LAYOUT)
    wait = PdlWaitBarrier(name="pdl_wait")
    launch = PdlLaunchBarrier(name="pdl_launch")

    @ts.schedule
    def scheduler_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            if tsjit.const_expr(CLC):
                q.acquire()
                q.fetch_work_tile()
                q.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    def load_schedule(which):
        @ts.schedule
        def body(q: WorkQueue, w: PdlWaitBarrier, s: ABStages, l: PdlLaunchBarrier):
            w.wait_griddep()
            if tsjit.const_expr(which == "a"):
                l.launch_griddep()
            with ts.work_tile_loop(q):
                with ts.domain_loop(0, k_tiles, 1):
                    s.acquire()
                    if tsjit.const_expr(which == "a"):
                        s.load_a()
                    else:
                        s.load_b()
                    s.commit()
                q.wait()
                q.get_and_advance_work_tile()
                q.release()
        return body(queue, wait, ab, launch)

    @ts.schedule
    def mma_schedule(q: WorkQueue, s: ABStages, t: Accumulators):
        with ts.work_tile_loop(q):
            t.acquire()
            with ts.domain_loop(0, k_tiles, 1):
                s.wait()
                stage = s.operands()
                t.mma(stage)
                s.release()
            t.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def epilogue_schedule(q: WorkQueue, w: PdlWaitBarrier, t: Accumulators):
        w.wait_griddep()
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            t.wait()
            t.store()
            t.release()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    scheduler_dst = [queue] if tsjit.const_expr(CLC) else []
    tasks = [ts.Task("scheduler", [queue], scheduler_dst, warp_idx=0, num_warps=1,
                     schedule=scheduler_schedule(queue)),
             ts.Task("load_a", [queue, wait], [ab, launch], warp_idx=1, num_warps=1, schedule=load_schedule("a")),
             ts.Task("load_b", [queue, wait], [ab], warp_idx=2, num_warps=1, schedule=load_schedule("b")),
             ts.Task("mma", [queue, ab], [acc], warp_idx=3, num_warps=1, schedule=mma_schedule(queue, ab, acc)),
             ts.Task("epilogue", [queue, wait, acc], [], warp_idx=4, num_warps=4,
                     schedule=epilogue_schedule(queue, wait, acc))]
    graph = {ab: [wait, queue], acc: [ab, queue], launch: [wait]}
    if tsjit.const_expr(CLC):
        graph[queue] = [queue]
    if tsjit.const_expr(MAX_STATES is None):
        manager = ts.TaskManager(tasks, graph, verbose=False)
    else:
        manager = ts.TaskManager(tasks, graph, verbose=False, max_states=MAX_STATES)
    manager.setup_resources_and_tasks()
    manager.run()


# -- host side --------------------------------------------------------------------------------------------
def compile_for(target: str = "sm_100a", layout=CLUSTER_SHAPES[0], clc: bool = False, M: int = 1024, N: int = 1024,
                K: int = 512, max_states=None):
    """``tsjit.compile`` of :func:`persistent_gemm` for ``target`` (no GPU needed)."""
    a_map = tsjit.tensormap_spec(tsjit.BFloat16, (ROWS, BK), swizzle="128B")
    b_map = tsjit.tensormap_spec(tsjit.BFloat16, b_box(layout), swizzle="128B")
    return tsjit.compile(persistent_gemm, a_map, b_map, tsjit.spec((M, N), tsjit.BFloat16),
                         tsjit.spec((N,), tsjit.Float32), K, LAYOUT=tuple(layout), CLC=clc, MAX_STATES=max_states,
                         target=target)


def launch_grid(M: int, N: int, layout, clc: bool, sms: int = 148) -> int:
    """CTAs to launch: every tile with CLC (CTAs steal the tiles of clusters not yet launched), else at most
    ``sms`` CTAs rounded down to whole clusters (static persistent)."""
    tiles = tile_count(M, N, layout)
    if clc:
        return tiles
    ctas = cluster_ctas(layout)
    return max(ctas, min(tiles, sms // ctas * ctas))


def reference(a, b, bias):
    """Float64 ``a @ b.T + bias``."""
    return a.astype(np.float64) @ b.astype(np.float64).T + bias.astype(np.float64)


def run_tutorial6(M: int, N: int, K: int, layout=None, clc: bool = False, sms: int = 148, rng=None,
                  max_states=None):
    """C = A @ B^T + bias on fresh random bf16 inputs (C poisoned with NaN first) on the current device (or
    the CPU interpreter); returns (C as float64, the float64 reference of the bf16-rounded inputs).
    ``max_states``: the exhaustive checker's cap for this compile (None: the default)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32, float_to_bfloat16_bits
    rng = rng or np.random.default_rng()
    layout = tuple(layout or pick_cluster_shape(M, N, clc))

    def bf16(shape):
        return bfloat16_bits_to_float32(float_to_bfloat16_bits(rng.standard_normal(shape).astype(np.float32)))

    a, b = bf16((M, K)), bf16((N, K))
    bias = rng.standard_normal(N).astype(np.float32)
    da, db = tsjit.to_device(a, dtype=tsjit.BFloat16), tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(da, (ROWS, BK), swizzle="128B")
    b_map = tsjit.TensorMap(db, b_box(layout), swizzle="128B")
    grid = launch_grid(M, N, layout, clc, sms)
    persistent_gemm[(grid,), (THREADS,)](a_map, b_map, c, tsjit.to_device(bias), K, layout, clc, max_states)
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return got, reference(a, b, bias)
