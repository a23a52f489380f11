"""Pipeline groups, tutorial 10 (a port of CUTLASS TS tutorial 07/02, sm_90a): a Merge GEMM with ReLU.

``C = relu(A @ B^T)``, A (M, K) and B (N, K) K-major bf16, fp32 accumulation, bf16 C.  The two
operands come through two rings, merged before the MMA warpgroups:

* ``load`` (warps 0-3, the producer warpgroup at 40 registers) fills both members of each stage:
  first A by ``cp.async`` from all 128 threads (AsyncAsync member ``smem_a`` with
  ``producer_op=AsyncLoad``): each thread copies 8 16-byte chunks straight into the 128B-swizzled
  layout wgmma reads (chunk ``c`` of row ``r`` at position ``c ^ (r % 8)``, what a TMA with
  ``SWIZZLE_128B`` writes), and its arrival on the full barrier lands when its copies have
  (``cp.async.mbarrier.arrive.noinc``); then B by TMA (TmaAsync member ``smem_b``, 128-byte swizzled
  BN x BK tiles; an elected thread of warp 0 issues it and arms the barrier,
  ``SignalingThreads.TaskWarpLeader``).  Rows past M and K columns past K read clamped in-bounds
  data: B is zero there (TMA fill) and C's rows past M are never stored;
* ``mma`` (warps 4-11, two warpgroups of 64 rows): per K tile waits on both members, issues the
  ``wgmma`` of tutorial 5's GEMM (:class:`tsjit.ops.gemm_program.WarpgroupMmaRing`; a
  ``fence.proxy.async`` first, since the A stage was written through the generic proxy), and
  releases the *previous* stage once for both rings, ``ab.release()`` (``advance_on_wait``).  The
  ReLU epilogue is the library GEMM's (``OutputTile`` with ``FusedEpilogue(activation="relu")``):
  stmatrix into a swizzled staging tile, TMA store.

``GROUPED=False`` builds the same program with two separate rings (two releases per stage);
:func:`barrier_counts` counts what each initialises.  M, N any; K a multiple of 8.

Why one producer warpgroup: a second one (512 threads) does not assemble at BN = 256.  ptxas takes a
per-thread cap of 65536 / 512 = 128 registers from ``.maxntid 512`` for the whole kernel; a
``setmaxnreg.inc`` that dominates the MMAs does not lift it, and the m64n256k16 wgmma needs 154 (ptxas
13.0: "C7602 Insufficient registers (128) ... register target of 154").  ``.maxnreg 168`` assembles, but
168 x 512 registers exceed the 65536 of an SM, so it cannot launch.  Neither does a fifth producer warp
(416 threads, a cap of 152).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.examples.gemm import bf16_round
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.lang.fragment import Fragment
from tsjit.ops.gemm_program import BK, OutputTile, WarpgroupMmaRing
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

BM = 128
A_WARPS = 4             # the whole producer warpgroup copies A (warp 0 also issues B's TMA)
THREADS = 384
LOAD_REGISTERS, MMA_REGISTERS = 40, 232


@dataclass(kw_only=True)
class CpAsyncTiles(ts.MemoryResource):
    """A ring of BM x BK bf16 A tiles (two 64-row halves, one per MMA warpgroup), 128B-swizzled,
    filled by ``cp.async`` from the producer task's threads (AsyncLoad)."""

    a: object
    first_thread: int
    threads: int
    tiles: object = None

    def __post_init__(self):
        self.tiles = tsjit.shared_array(self.a.dtype, (self.pipeline_config.num_stages, BM // 64, 64, BK), align=1024)

    @ts.producer_work()
    def fill(self, stage_info):
        """Copy this stage's BM x BK A tile: thread ``t`` of the task owns 16-byte chunk ``t % 8`` of rows
        ``t // 8 + i * R`` (``R = threads / 8`` rows per pass, so each warp reads four whole 128-byte rows:
        coalesced).  The chunk's swizzled position ``c ^ (row % 8)`` and every shared address are fixed per
        thread up to compile-time offsets (``R`` is a multiple of 4, and adding 4 to a row flips bit 2 of
        ``row % 8``), so each copy costs an add, a clamp and an address multiply."""
        m, _, _ = stage_info.work_tile.coords
        rows, cols = self.a.shape[0], self.a.shape[1]
        per_row = BK // 8                              # 16-byte chunks in one row of the tile
        rows_per_pass = self.threads // per_row
        t = tsjit.thread_idx().x - self.first_thread
        c = t & (per_row - 1)
        r0 = t >> 3
        swizzled = c ^ (r0 & 7)
        col = tsjit.math.min(stage_info.loop_offset * BK + c * 8, cols - 8)
        first_row = m * BM + r0
        tile = self.tiles[stage_info.stage_idx]
        # rows r0 + d with d % 8 == 0 land at chunk `swizzled`, with d % 8 == 4 at `swizzled ^ 4`
        starts = (tile.element_pointer((0, r0, swizzled * 8)), tile.element_pointer((0, r0, (swizzled ^ 4) * 8)))
        for i in tsjit.range_constexpr(-(-BM // rows_per_pass)):
            d = i * rows_per_pass
            dst = tsjit.assume_aligned(starts[(d % 8) // 4].offset(d * BK), 16)
            src = tsjit.assume_aligned(self.a.element_pointer((tsjit.math.min(first_row + d, rows - 1), col)), 16)
            if tsjit.const_expr(d + rows_per_pass <= BM):
                tsjit.cp_async(dst, src, 16, cache_global_only=True)   # cp.async.cg: A streams through L2
            else:
                if r0 + d < BM:                                        # the last, partial pass
                    tsjit.cp_async(dst, src, 16, cache_global_only=True)


@dataclass(kw_only=True)
class TmaOperandB(WarpgroupMmaRing):
    """The ring of BN x BK B tiles (TMA, 128B-swizzled); its consumer works run the MMAs on this stage's
    A tile of ``a_ring`` (its ``tiles[stage, warpgroup]``) and its B tile (``zero_accumulator``, ``mma``,
    ``retire`` of WarpgroupMmaRing)."""

    b_map: object
    a_ring: object
    a_by_threads: bool = True        # the A stage is written through the generic proxy (cp.async)
    tma_warp: int | None = None      # in a multi-warp producer task: the warp that issues the TMA
    tiles: object = None
    acc: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tiles = tsjit.shared_array(self.b_map.dtype, (self.pipeline_config.num_stages, self.block_n, BK),
                                        align=1024)
        n = self.block_n
        self.acc = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(n // 2),
                                        docs="the warpgroup's 64 x BN fp32 accumulator")

    @ts.producer_work()
    def tma_load(self, stage_info):
        _, n, _ = stage_info.work_tile.coords
        if tsjit.const_expr(self.tma_warp is None):
            if tsjit.elect_one():
                self._load(stage_info, n)
        else:
            if tsjit.warp_idx() == self.tma_warp:
                if tsjit.elect_one():
                    self._load(stage_info, n)

    def _load(self, stage_info, n):
        tsjit.tma_load(self.b_map, self.tiles[stage_info.stage_idx], stage_info.barrier,
                       (n * self.block_n, stage_info.loop_offset * BK))

    def operand_tiles(self, stage, warpgroup):
        if tsjit.const_expr(self.a_by_threads):
            # the A stage was written by cp.async (generic proxy); wgmma reads through the async proxy
            tsjit.fence_proxy_async()
        return self.a_ring.tiles[stage, warpgroup], "K", self.tiles[stage], "K"


def mainloop_rings(a, b_map, block_n: int, stages: int, grouped: bool, a_first_warp: int = 0,
                   a_warps: int = A_WARPS, b_with_a: bool = True):
    """The two operand rings (and their Merge group when ``grouped``): ``(smem_a, smem_b, group)``;
    A is loaded by warps ``[a_first_warp, a_first_warp + a_warps)``.  ``b_with_a``: one task fills
    both (:func:`operand_load_schedule`), B's TMA issued and armed by its first warp; else B has its
    own one-warp task (``load_b`` of :func:`mainloop_schedules`)."""
    consumers = ts.CooperativeGroup(ts.Agent.Thread, 8)          # one lane per MMA warp releases
    a_cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        stages, ts.CooperativeGroup(ts.Agent.Thread, a_warps * 32), consumers, producer_op=ts.PipelineOp.AsyncLoad,
        advance_on_wait=True)
    b_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        stages, block_n * BK * 2, ts.CooperativeGroup(ts.Agent.Thread, 1), consumers, advance_on_wait=True,
        producer_signaling_threads=ts.SignalingThreads.TaskWarpLeader if b_with_a else ts.SignalingThreads.All)
    smem_a = CpAsyncTiles(name="smem_a", pipeline_config=a_cfg, a=a, first_thread=32 * a_first_warp,
                          threads=a_warps * 32)
    smem_b = TmaOperandB(name="smem_b", pipeline_config=b_cfg, b_map=b_map, a_ring=smem_a, block_n=block_n,
                         tma_warp=a_first_warp if b_with_a else None)
    group = ts.PipelineGroup("ab", [smem_a, smem_b], ts.PipelineGroupMode.Merge) if grouped else None
    return smem_a, smem_b, group


def mainloop_schedules(k_tiles):
    """``(load_b, load_a, mma_loop)``: the two load schedules, and ``mma_loop(a, b, groups)`` which
    records the K loop inside a schedule and returns the retired accumulator token (the caller adds
    the epilogue); ``groups`` is ``(ab,)`` (the Merge group's proxy) or ``()`` for separate rings."""
    def release(a, b, groups):
        if groups:
            groups[0].release()      # one arrival frees the stage of both rings
        else:
            a.release()
            b.release()

    @ts.schedule
    def load_b(q: WorkQueue, b: TmaOperandB):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                b.acquire()
                b.tma_load()
                b.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def load_a(q: WorkQueue, a: CpAsyncTiles):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                a.acquire()
                a.fill()
                a.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    def mma_loop(a, b, groups):
        acc = b.zero_accumulator()
        with ts.domain_loop(0, k_tiles, 1) as d:
            a.wait()
            b.wait()
            acc = b.mma(acc)
            with d.every(1, start=1):
                release(a, b, groups)    # the previous stage: its MMAs retired in wait_group(1)
        acc = b.retire(acc)
        release(a, b, groups)            # the last stage
        return acc

    return load_b, load_a, mma_loop


def operand_load_schedule(k_tiles):
    """The schedule of one producer task filling both rings (``mainloop_rings(..., b_with_a=True)``): per K
    tile it acquires the stage of both, issues A's copies, then B's TMA, and commits both.  A goes first:
    cp.async data comes later than a TMA's (on the H200, issuing B first made the GEMM ~2.5% slower).
    Both works run inside both acquire/commit brackets (the checker counts a task's writes against every
    ring it fills)."""
    @ts.schedule
    def load(q: WorkQueue, a: CpAsyncTiles, b: TmaOperandB):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                a.acquire()
                b.acquire()
                a.fill()
                b.tma_load()
                b.commit()
                a.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    return load


def member_arguments(group, a, b):
    """``(a, b, groups)`` as schedule arguments: ``group.member`` references and ``(group,)`` when
    grouped, else the rings and ``()``."""
    return (group.smem_a, group.smem_b, (group,)) if group is not None else (a, b, ())


@tsjit.kernel
def merge_gemm(a, b_map, c, c_map, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
               GROUP_M: tsjit.Constexpr[int], GROUPED: tsjit.Constexpr[bool] = True):
    """C (M, N) = relu(A (M, K) @ B^T), B (N, K); block = 384 threads, persistent grid."""
    tiles_m, tiles_n, k_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN, (K + BK - 1) // BK
    wq = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=GROUP_M))
    smem_a, smem_b, group = mainloop_rings(a, b_map, BN, STAGES, GROUPED)
    out = OutputTile(name="c", c=c, c_map=c_map, block_m=BM, block_n=BN, rows=M, cols=N,
                     fused=FusedEpilogue(activation="relu"), operands=(c, c, c, 1.0, 0.0), mode="tma",
                     staged_columns=BN if STAGES <= 3 else min(BN, 128))
    _, _, mma_loop = mainloop_schedules(k_tiles)
    load = operand_load_schedule(k_tiles)

    @ts.schedule
    def mma_schedule(q: WorkQueue, a: CpAsyncTiles, b: TmaOperandB, o: OutputTile, *groups):
        with ts.work_tile_loop(q):
            o.store(mma_loop(a, b, groups))
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
        o.flush()

    ma, mb, groups = member_arguments(group, smem_a, smem_b)
    tasks = [ts.Task("load", [wq], [smem_a, smem_b], warp_idx=0, num_warps=A_WARPS, schedule=load(wq, ma, mb),
                     num_registers=LOAD_REGISTERS),
             ts.Task("mma", [wq, smem_a, smem_b], [out], warp_idx=4, num_warps=8,
                     schedule=mma_schedule(wq, ma, mb, out, *groups), num_registers=MMA_REGISTERS)]
    manager = ts.TaskManager(tasks, {smem_a: [wq], smem_b: [wq], out: [smem_a, smem_b]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1024, N: int = 1024, K: int = 512, block_n: int = 256, stages: int = 4,
                 grouped: bool = True):
    """Arguments for ``tsjit.compile(merge_gemm, ...)`` without a GPU."""
    a = tsjit.spec((M, K), tsjit.BFloat16)
    b_map = tsjit.tensormap_spec(tsjit.BFloat16, (block_n, BK), swizzle="128B")
    c_map = tsjit.tensormap_spec(tsjit.BFloat16, (64, 64), swizzle="128B")
    return a, b_map, tsjit.spec((M, N), tsjit.BFloat16), c_map, M, N, K, block_n, stages, 8, grouped


def barrier_counts(stages: int = 4, target: str = "sm_90a") -> dict:
    """``{"group": n, "separate": m}``: the mbarriers each variant initialises, counted in its PTX."""
    return {name: tsjit.compile(merge_gemm, *compile_args(stages=stages, grouped=grouped),
                                target=target).ptx.count("mbarrier.init")
            for name, grouped in (("group", True), ("separate", False))}


def merge_gemm_launcher(a, b, c, *, block_n: int = 256, stages: int = 4, group_m: int = 8, grouped: bool = True,
                        sms: int | None = None, stream=None):
    """A launcher for C = relu(A @ B^T) on device arrays (bf16 A (M, K), B (N, K), C (M, N)).

    Raises:
        ValueError: K is not a multiple of 8 (A's rows must be 16-byte aligned for cp.async)."""
    M, K = a.shape
    N = b.shape[0]
    if K % 8:
        raise ValueError(f"merge_gemm needs K a multiple of 8 (16-byte A rows for cp.async), got K={K}")
    b_map = tsjit.TensorMap(b, (block_n, BK), swizzle="128B")
    c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B")
    tiles = -(-M // BM) * -(-N // block_n)
    if sms is None:
        from tsjit import env
        from tsjit.runtime.driver import device_properties
        sms = 132 if env.interpret() else device_properties().sm_count   # the CPU interpreter: an H200's SMs
    launch = merge_gemm[(min(tiles, sms),), (THREADS,)]
    return lambda: launch(a, b_map, c, c_map, M, N, K, block_n, stages, group_m, grouped, stream=stream)


def random_operands(M: int, N: int, K: int, rng=None):
    """Fresh bf16-representable A (M, K), B (N, K) as float32 numpy arrays."""
    rng = rng or np.random.default_rng()
    return (bf16_round(rng.standard_normal((M, K)).astype(np.float32)),
            bf16_round(rng.standard_normal((N, K)).astype(np.float32)))


def run_merge_gemm(M: int, N: int, K: int, *, block_n: int = 256, stages: int = 4, grouped: bool = True, rng=None):
    """relu(A @ B^T) on fresh random bf16 inputs, C poisoned; returns (C as float64, float64 reference)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    a, b = random_operands(M, N, K, rng)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    merge_gemm_launcher(tsjit.to_device(a, dtype=tsjit.BFloat16), tsjit.to_device(b, dtype=tsjit.BFloat16), c,
                        block_n=block_n, stages=stages, grouped=grouped)()
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return got, np.maximum(a.astype(np.float64) @ b.astype(np.float64).T, 0.0)
