"""CUTLASS Task Scheduling tutorial 9 ported: a split-K GEMM whose K slices are reduced across a
cluster through distributed shared memory (a DSMEM reduce-scatter), with the epilogue's staging
buffer aliasing the A/B ring (an SMEM alias group).  ``C (M, N) = A (M, K) @ B (N, K)^T``, bf16
inputs, fp32 accumulation and reduction, bf16 C.  One source builds for Blackwell (sm_100a:
tcgen05 UMMA into TMEM) and Hopper (sm_90a: wgmma into registers); the kernel picks the MMA
resources with ``tsjit.const_expr(tsjit.tcgen05.available())``.

**Grid.** ``(ceil(N / 128), ceil(M / 128), SPLIT)`` in clusters of ``(1, 1, SPLIT)``: the SPLIT CTAs
of a cluster share one 128 x 128 tile of C; the CTA of cluster rank ``r`` multiplies K tiles
``[r * T / SPLIT, (r + 1) * T / SPLIT)`` of the ``T = ceil(K / 64)`` (a rank with none contributes
zeros), through a CTA-local 4-stage A/B ring (TMA, 128-byte swizzled boxes of 128 x 64).

**Reduce-scatter.** CTA ``j`` owns rows ``[j * 128 / SPLIT, (j + 1) * 128 / SPLIT)`` of the tile.
Each CTA writes the rows of its fp32 partial that CTA ``j`` owns into slot ``r`` of CTA ``j``'s
staging buffer (``st.shared::cluster`` through ``mapa``), then each CTA sums the SPLIT slots of its
rows in slot order (deterministic: reruns are bit-identical) and stores them as bf16.  The staging
buffer (``SPLIT x 128 / SPLIT x 132`` fp32, rows padded by 4 words) lives in the same bytes as the
A/B ring: :func:`smem_layout` puts both in one alias group, so the kernel needs the ring's 128 KiB,
not 128 + 66 KiB.  Two handshakes on mbarriers outside the TS pipelines (the reference's "manual
DSMEM traffic"; the exhaustive checker sees one CTA) make the aliasing safe across the cluster:

1. ``free``: each epilogue warp, once its CTA's MMAs have retired (so its ring will not be read or
   written again), arrives on the ``free`` barrier of every CTA of the cluster; a CTA writes into
   its peers' staging only after its own ``free`` barrier saw every warp of every CTA
   (``SPLIT x warps`` arrivals): no peer's ring is still in use;
2. ``full``: each epilogue thread, after its DSMEM stores, arrives (``release.cluster``) on the
   ``full`` barrier of the CTA it wrote to; a CTA reduces once all its rows' writers arrived
   (``threads`` arrivals, one per writing thread of any CTA).

Every remote access to a CTA happens before that CTA's own waits complete, so no CTA exits while a
peer still writes into it or arrives on its barriers.

**sm_100a** (6 warps): ``load`` (warp 0, TmaUmma ring ``ab``), ``mma`` (warp 1: ``tcgen05.mma``
m128n128k16 into a 128-column TMEM accumulator, the stage released by a ``tcgen05.commit``, the
accumulator handed over by a commit: UmmaAsync ``acc``), ``epilogue`` (warps 2-5: waits ``acc``,
``tcgen05.ld`` of its row, the reduce-scatter, releases ``acc``).

**sm_90a** (12 warps): ``load`` (warp 0, TmaAsync ring), an idle padding task (warps 1-3), and two
MMA warpgroups (warps 4-11, 64 rows each, wgmma m64n128k16) that wait, multiply, retire and release
each stage, then do the reduce-scatter from their register accumulators.

``SPLIT`` is 2 or 4 (each warp's 16- or 32-row slab then belongs to one CTA).  M, N any; K a
multiple of 8 (16-byte TMA rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import tcgen05, ts
from tsjit.errors import UsageValueError
from tsjit.frontend import structured
from tsjit.examples.bw_umma import UmmaAccumulator
from tsjit.lang.fragment import Fragment
from tsjit.ops.gemm_program import WarpgroupMmaRing

BM, BN, BK = 128, 128, 64
STAGES = 4
MMA_K = 16
PAD = 4                      # fp32 words of padding per staging row (spreads rows over the banks)
SPLITS = (2, 4)
BLACKWELL_WARPS, HOPPER_WARPS = 6, 12


def threads_for(target: str) -> int:
    """Threads per CTA of :func:`splitk_gemm` on ``target`` (192 on sm_100a/sm_100f, 384 on sm_90a)."""
    return 32 * (BLACKWELL_WARPS if target.startswith("sm_100") else HOPPER_WARPS)


@tsjit.func
def open_peers(free, split):
    """Handshake 1 (``free``, the mbarrier in shared memory): this warp's MMAs retired, so lane 0 tells
    each of the ``split`` CTAs of the cluster; then wait until every warp of every CTA did (every
    peer's ring, which its staging aliases, is no longer in use)."""
    if tsjit.lane_idx() == 0:
        for peer in tsjit.range_constexpr(split):
            tsjit.mbarrier_arrive_cluster(free, peer)
    tsjit.mbarrier_wait(free, 0)


@dataclass(kw_only=True)
class SliceTiles(WarpgroupMmaRing):
    """The CTA's ring of A (128 x 64) and B (128 x 64) tiles of its K slice, loaded by TMA into
    allocations of the alias group (:func:`smem_layout`).  sm_90a: its consumer works (of
    :class:`~tsjit.ops.gemm_program.WarpgroupMmaRing`) run the wgmma; sm_100a: ``operands`` routes the
    stage to :class:`~tsjit.examples.bw_umma.UmmaAccumulator`, which reads :meth:`umma_tiles`."""

    a_map: object
    b_map: object
    k_begin: object
    a_alloc: object = None
    b_alloc: object = None
    acc: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.a_alloc = ts.SmemAllocation("a_tiles", dtype=tsjit.BFloat16, count=STAGES * BM * BK, alignment=1024)
        self.b_alloc = ts.SmemAllocation("b_tiles", dtype=tsjit.BFloat16, count=STAGES * BN * BK, alignment=1024)
        self.acc = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(BN // 2),
                                        docs="sm_90a: the warpgroup's 64 x 128 fp32 partial")
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="sm_100a: the stage the MMAs read")

    def get_smem_requirements(self):
        return [self.a_alloc, self.b_alloc]

    def umma_tiles(self, stage):
        """The A and B tiles of ``stage`` (128 x 64 each)."""
        return self.a_alloc.tensor((STAGES, BM, BK))[stage], self.b_alloc.tensor((STAGES, BN, BK))[stage]

    def operand_tiles(self, stage, warpgroup):
        """sm_90a: this warpgroup's 64 rows of A and the B tile of ``stage``, both K-major."""
        return self.a_alloc.tensor((STAGES, BM // 64, 64, BK))[stage, warpgroup], "K", \
            self.b_alloc.tensor((STAGES, BN, BK))[stage], "K"

    @ts.producer_work()
    def tma_load(self, stage_info):
        k = (self.k_begin + stage_info.loop_offset) * BK
        if tsjit.elect_one():
            a_tile, b_tile = self.umma_tiles(stage_info.stage_idx)
            tsjit.tma_load(self.a_map, a_tile, stage_info.barrier, (tsjit.block_idx().y * BM, k))
            tsjit.tma_load(self.b_map, b_tile, stage_info.barrier, (tsjit.block_idx().x * BN, k))

    @ts.consumer_work(returns="stage")
    def operands(self, stage_info):
        """sm_100a: the ring stage whose tiles the MMA warp multiplies (routed to ``acc.mma``)."""
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ReduceScatter(ts.MemoryResource):
    """The split-K epilogue: the staging buffer (aliasing the A/B ring), the two handshake mbarriers,
    and C.  ``scatter_tmem`` (sm_100a, from the TMEM ``partial``) / ``scatter_registers`` (sm_90a, from
    the warpgroups' accumulators) write this CTA's partial into its peers (:func:`open_peers`,
    :meth:`remote_row`, :meth:`publish`); ``reduce`` sums this CTA's rows and stores them.

    ``free`` and ``full`` are ``tsjit.shared_array`` mbarriers the kernel initialises (thread 0) before
    the cluster barrier that precedes ``manager.run()``."""

    c: object
    split: int
    k_count: object
    first_thread: int
    threads: int
    partial: object = None
    staging: object = None
    free: object = None
    full: object = None

    def __post_init__(self):
        if self.split not in SPLITS:
            raise UsageValueError(f"split-K GEMM {self.name!r}: SPLIT must be one of {SPLITS} (each warp's 16-row "
                                  f"slab then belongs to one CTA), got {self.split!r}")
        self.staging = ts.SmemAllocation("partials", dtype=tsjit.Float32, count=BM * (BN + PAD), alignment=1024)
        self.free = tsjit.shared_array(tsjit.Int64, (1,), align=8)
        self.full = tsjit.shared_array(tsjit.Int64, (1,), align=8)

    def get_smem_requirements(self):
        return [self.staging]

    @property
    def rows_per_cta(self) -> int:
        return BM // self.split

    @property
    def slots(self):
        """``(split, 128 / split, 132)`` fp32: slot ``r`` holds rank ``r``'s partial of this CTA's rows."""
        return self.staging.tensor((self.split, self.rows_per_cta, BN + PAD))

    @property
    def free_arrivals(self) -> int:
        """``free`` expects one arrival per epilogue warp of every CTA of the cluster."""
        return self.split * (self.threads // 32)

    def owner(self, row):
        return row // self.rows_per_cta

    def remote_row(self, row):
        """Where this CTA's ``row`` of the partial goes: slot ``rank`` of the owner's staging."""
        local = self.slots.element_pointer((tsjit.cluster_ctarank(), row % self.rows_per_cta, 0))
        return tsjit.map_shared_rank(tsjit.assume_aligned(local, 16), self.owner(row))

    def publish(self, row):
        """Handshake 2: this thread's stores into the owner of ``row`` are done (release.cluster)."""
        tsjit.mbarrier_arrive_cluster(self.full.ptr, self.owner(row))

    @ts.producer_work()
    def scatter_tmem(self, stage_info):
        """sm_100a: this thread's row of the TMEM partial (``partial``), 32 columns at a time, into the
        owner's staging slot (zeros where this CTA had no K tile)."""
        view = self.partial.view(stage_info)          # the one-stage accumulator
        row = view.row()
        open_peers(self.free.ptr, self.split)
        slot = self.remote_row(row)
        for chunk in tsjit.range_constexpr(BN // 32):
            values = view.load(chunk * 32, 32)
            for q in tsjit.range_constexpr(8):
                quad = [tsjit.select(self.k_count > 0, values[4 * q + i], 0.0) for i in range(4)]
                tsjit.assume_aligned(slot.offset(chunk * 32 + 4 * q), 16).store_vector(quad)
        self.publish(row)

    @ts.producer_work()
    def scatter_registers(self, stage_info, acc):
        """sm_90a: this warpgroup's 64 x 128 register partial into its owners' staging slots (each warp's
        16 rows belong to one CTA)."""
        warpgroup = tsjit.warp_idx() // 4 - 1
        slab_row = warpgroup * 64 + (tsjit.warp_idx() % 4) * 16
        open_peers(self.free.ptr, self.split)
        base = self.remote_row(slab_row)       # row slab_row of the owner's slot; the slab's rows follow
        for i in tsjit.range_constexpr(len(acc) // 2):
            row, col = acc.accumulator_coords(2 * i)
            pair = [tsjit.select(self.k_count > 0, acc[2 * i + j], 0.0) for j in range(2)]
            offset = (row % 16) * (BN + PAD) + col
            tsjit.assume_aligned(base.offset(offset), 8).store_vector(pair)
        self.publish(slab_row)

    @ts.producer_work()
    def reduce(self, stage_info):
        """Wait until every writer of this CTA's rows published, sum the slots in rank order, store bf16."""
        tsjit.mbarrier_wait(self.full.ptr, 0)
        tsjit.threadfence()
        rows, cols = self.c.shape[0], self.c.shape[1]
        row0 = tsjit.block_idx().y * BM + tsjit.cluster_ctarank() * self.rows_per_cta
        col0 = tsjit.block_idx().x * BN
        slots = self.slots
        for e in range(tsjit.thread_idx().x - self.first_thread, self.rows_per_cta * BN, self.threads):
            r = e // BN
            col = e % BN
            total = slots[0, r, col]
            for s in tsjit.range_constexpr(1, self.split):
                total = total + slots[s, r, col]
            if row0 + r < rows and col0 + col < cols:
                self.c[row0 + r, col0 + col] = tsjit.BFloat16(total)


def require_cluster(split: int) -> None:
    """Declare the launch contract's cluster ``(1, 1, split)`` (``.reqnctapercluster``): a launch with
    another cluster shape is a LaunchError naming it, not a DSMEM fault.  Called at compile time."""
    structured.context("splitk_gemm").require_launch(cluster=(1, 1, split))


def smem_layout(ab: SliceTiles, exchange: ReduceScatter, resources) -> ts.SmemAllocator:
    """The kernel's shared-memory layout: the A/B ring and the staging buffer in one alias group (two
    phases: the main loop, then the epilogue), then the pipelines' barriers."""
    allocator = ts.SmemAllocator()
    allocator.add_alias_group([[ab.a_alloc, ab.b_alloc], [exchange.staging]])
    for resource in resources:
        allocator.add_barriers(resource)
    return allocator


@tsjit.kernel
def splitk_gemm(a_map, b_map, c, K, SPLIT: tsjit.Constexpr[int]):
    """C = A @ B^T, bf16 A (M, K), B (N, K), C (M, N); grid ``(ceil(N / 128), ceil(M / 128), SPLIT)``,
    cluster ``(1, 1, SPLIT)``, block :func:`threads_for` the target."""
    require_cluster(SPLIT)
    k_tiles = (K + BK - 1) // BK
    rank = tsjit.cluster_ctarank()
    k_begin = rank * k_tiles // SPLIT
    k_count = (rank + 1) * k_tiles // SPLIT - k_begin
    stage_bytes = (BM + BN) * BK * 2
    one = ts.CooperativeGroup(ts.Agent.Thread, 1)

    @ts.schedule
    def load_schedule(s: SliceTiles):
        with ts.domain_loop(0, k_count, 1):
            s.acquire()
            s.tma_load()
            s.commit()

    if tsjit.const_expr(tcgen05.available()):
        ab_cfg = ts.PipelineConfig.create_tma_umma_pipeline_cfg(STAGES, stage_bytes, one, one, (1, 1, 1, 1))
        acc_cfg = ts.PipelineConfig.create_umma_async_pipeline_cfg(1, one, ts.CooperativeGroup(ts.Agent.Thread, 128),
                                                                   (1, 1, 1, 1))
        ab = SliceTiles(name="ab", pipeline_config=ab_cfg, a_map=a_map, b_map=b_map, k_begin=k_begin, block_n=BN)
        acc = UmmaAccumulator(name="acc", pipeline_config=acc_cfg, operands=ab, block_n=BN)
        out = ReduceScatter(name="c", c=c, split=SPLIT, k_count=k_count, first_thread=64, threads=128, partial=acc)

        @ts.schedule
        def mma_schedule(s: SliceTiles, t: UmmaAccumulator):
            t.acquire()
            with ts.domain_loop(0, k_count, 1):
                s.wait()
                stage = s.operands()
                t.mma(stage)
                s.release()
            t.commit()

        @ts.schedule
        def epilogue_schedule(t: UmmaAccumulator, o: ReduceScatter):
            with ts.domain_loop(0, 0, 1):
                pass
            t.wait()
            o.scatter_tmem()
            t.release()
            o.reduce()

        load = ts.Task("load", [], [ab], warp_idx=0, num_warps=1, schedule=load_schedule(ab))
        mma = ts.Task("mma", [ab], [acc], warp_idx=1, num_warps=1, schedule=mma_schedule(ab, acc))
        epilogue = ts.Task("epilogue", [acc], [out], warp_idx=2, num_warps=4, schedule=epilogue_schedule(acc, out))
        manager = ts.TaskManager([load, mma, epilogue], {acc: [ab], out: [acc]}, verbose=False,
                                 smem_allocator=smem_layout(ab, out, [ab, acc]))
    else:
        ab_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, stage_bytes, one,
                                                                 ts.CooperativeGroup(ts.Agent.Thread, 8))
        ab = SliceTiles(name="ab", pipeline_config=ab_cfg, a_map=a_map, b_map=b_map, k_begin=k_begin, block_n=BN)
        out = ReduceScatter(name="c", c=c, split=SPLIT, k_count=k_count, first_thread=128, threads=256)

        @ts.schedule
        def idle_schedule():
            with ts.domain_loop(0, 0, 1):
                pass

        @ts.schedule
        def mma_schedule(s: SliceTiles, o: ReduceScatter):
            acc = s.zero_accumulator()
            with ts.domain_loop(0, k_count, 1):
                s.wait()
                acc = s.mma(acc)
                acc = s.retire(acc)      # wait_group(0): the stage's reads are done before its release
                s.release()
            o.scatter_registers(acc)
            o.reduce()

        load = ts.Task("load", [], [ab], warp_idx=0, num_warps=1, schedule=load_schedule(ab))
        idle = ts.Task("idle", [], [], warp_idx=1, num_warps=3, schedule=idle_schedule())
        mma = ts.Task("mma", [ab], [out], warp_idx=4, num_warps=8, schedule=mma_schedule(ab, out))
        manager = ts.TaskManager([load, idle, mma], {out: [ab]}, verbose=False, smem_allocator=smem_layout(ab, out, [ab]))
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_init(out.free.ptr, out.free_arrivals)
        tsjit.mbarrier_init(out.full.ptr, out.threads)   # one arrival per thread writing this CTA's rows
    manager.setup_resources_and_tasks()
    tsjit.cluster_sync()           # the handshake barriers are initialised on every CTA of the cluster
    manager.run()


def compile_for(target: str, M: int = 512, N: int = 512, K: int = 1024, split: int = 2):
    """``tsjit.compile`` of :func:`splitk_gemm` for ``target`` with bf16 specs (no GPU needed)."""
    a_map = tsjit.tensormap_spec(tsjit.BFloat16, (BM, BK), swizzle="128B")
    b_map = tsjit.tensormap_spec(tsjit.BFloat16, (BN, BK), swizzle="128B")
    return tsjit.compile(splitk_gemm, a_map, b_map, tsjit.spec((M, N), tsjit.BFloat16), K, split, target=target)


def random_operands(M: int, N: int, K: int, rng=None):
    """Fresh bf16-representable A (M, K), B (N, K) as float32 numpy arrays."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32, float_to_bfloat16_bits
    rng = rng or np.random.default_rng()
    return tuple(bfloat16_bits_to_float32(float_to_bfloat16_bits(rng.standard_normal(shape).astype(np.float32)))
                 for shape in ((M, K), (N, K)))


def check_arguments(split: int, K: int) -> None:
    """Raise UsageValueError unless ``split`` is 2 or 4 and K a multiple of 8 (TMA rows of 16 bytes)."""
    if split not in SPLITS:
        raise UsageValueError(f"split-K GEMM: split must be one of {SPLITS}, got {split!r}")
    if K % 8:
        raise UsageValueError(f"split-K GEMM needs K a multiple of 8 (16-byte TMA rows), got K={K}")


def splitk_launcher(a, b, c, split: int = 2, target: str | None = None):
    """A zero-argument launcher of C = A @ B^T on device arrays (or torch tensors): bf16 A (M, K), B (N, K),
    C (M, N); ``target`` defaults to the current device's.

    Raises:
        UsageValueError: ``split`` not 2 or 4, or K not a multiple of 8 (TMA rows of 16 bytes)."""
    M, K = a.shape
    N = b.shape[0]
    check_arguments(split, K)
    if target is None:
        from tsjit.runtime.driver import device_properties
        target = device_properties().default_target
    a_map = tsjit.TensorMap(a, (BM, BK), swizzle="128B")
    b_map = tsjit.TensorMap(b, (BN, BK), swizzle="128B")
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM, split)
    launch = splitk_gemm[grid, (threads_for(target),)]       # cluster (1, 1, split): the kernel's launch contract
    return lambda: launch(a_map, b_map, c, K, split)


def run_splitk(a: np.ndarray, b: np.ndarray, split: int = 2, target: str | None = None) -> np.ndarray:
    """C = A @ B^T (bf16 A (M, K), B (N, K) given as float32 arrays of bf16 values) on the current device
    (or the CPU interpreter with ``TSJIT_INTERPRET=1``), C poisoned with 0xFFFF (a bf16 NaN) first;
    returns C as float64.

    Raises:
        UsageValueError: as :func:`splitk_launcher`."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    check_arguments(split, a.shape[1])
    c = tsjit.empty((a.shape[0], b.shape[0]), tsjit.BFloat16).fill_bytes(0xFF)
    splitk_launcher(tsjit.to_device(a, dtype=tsjit.BFloat16), tsjit.to_device(b, dtype=tsjit.BFloat16), c, split,
                    target)()
    return bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
