"""CUTLASS Task Scheduling tutorial 11 ported to Blackwell (07/02, sm_100a): a Merge GEMM with ReLU
whose members are UMMA rings.  ``C = relu(A @ B^T)``, A (M, K) and B (N, K) K-major bf16, fp32
accumulation in tensor memory, bf16 C; a persistent kernel over 128 x ``BN`` tiles (static queue).

The two operands come through two rings merged before the MMA warp (one ``PipelineGroup`` in
``Merge`` mode: a full barrier per member, one shared empty barrier):

* ``load_b`` (warp 0): B by TMA -- member ``smem_b``, a **TmaUmma** ring (128B-swizzled BN x 64 boxes);
* ``load_a`` (warps 2-3, 64 threads): A by ``cp.async`` -- member ``smem_a``, an **AsyncUmma** ring
  with ``producer_op=AsyncLoad``: each thread copies 16-byte chunks into the 128B-swizzled layout
  the MMA reads and its arrival lands when its copies have (tutorial 10's
  :class:`~tsjit.examples.ts_merge_gemm.CpAsyncTiles`);
* ``mma`` (warp 1): per tile acquires an accumulator stage, per K tile waits on both members,
  issues four ``tcgen05.mma`` m128nBNk16 (a ``fence.proxy.async`` first: the A stage was written
  through the generic proxy) and releases the stage of *both* rings once, ``ab.release()``: one
  ``tcgen05.commit`` to the shared empty barrier, which the hardware arrives on when those MMAs
  have read the stage; ``acc.commit()`` hands the accumulator over (**UmmaAsync**, two stages of
  BN TMEM columns, so the epilogue of one tile overlaps the MMAs of the next);
* ``epilogue`` (warps 4-7): waits the accumulator, ``tcgen05.ld`` of its row, ReLU, bf16 stores
  (bounds-masked), ``acc.release()``.

``GROUPED=False`` builds the same program with two separate rings (two commits per stage).  The
Hopper port of the same tutorial is :mod:`tsjit.examples.ts_merge_gemm` (wgmma consumes the merged
rings, the accumulator stays in registers).  M, N any; K a multiple of 8.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.errors import UsageValueError
from tsjit.examples.bw_umma import BK, BM, StoredAccumulator, relu
from tsjit.examples.ts_merge_gemm import CpAsyncTiles, TmaOperandB, random_operands
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

THREADS = 8 * 32
A_FIRST_WARP, A_WARPS = 2, 2
ACC_STAGES = 2
ONE = ts.CooperativeGroup(ts.Agent.Thread, 1)
LAYOUT = (1, 1, 1, 1)


@dataclass(kw_only=True)
class UmmaOperandB(TmaOperandB):
    """The B ring (TMA) of tutorial 10, read by the UMMA: :meth:`umma_tiles` gives the MMA this stage's A
    tile of ``a_ring`` (128 x 64) and its B tile; ``operands`` routes the stage index to the MMA."""

    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        super().__post_init__()
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the stage the MMAs read")

    def umma_tiles(self, stage):
        if tsjit.const_expr(self.a_by_threads):
            tsjit.fence_proxy_async()       # A was written by cp.async (generic proxy); UMMA reads via async proxy
        stages = self.pipeline_config.num_stages
        return self.a_ring.tiles.reshape((stages, BM, BK))[stage], self.tiles[stage]

    @ts.consumer_work(returns="stage")
    def operands(self, stage_info):
        return stage_info.stage_idx


def operand_rings(a, b_map, block_n: int, stages: int, grouped: bool):
    """``(smem_a, smem_b, group)``: the AsyncUmma ring of A (cp.async by warps 2-3), the TmaUmma ring of B,
    and their Merge group (None when not ``grouped``)."""
    a_cfg = ts.PipelineConfig.create_async_umma_pipeline_cfg(
        stages, ts.CooperativeGroup(ts.Agent.Thread, A_WARPS * 32), ONE, LAYOUT, producer_op=ts.PipelineOp.AsyncLoad)
    b_cfg = ts.PipelineConfig.create_tma_umma_pipeline_cfg(stages, block_n * BK * 2, ONE, ONE, LAYOUT)
    smem_a = CpAsyncTiles(name="smem_a", pipeline_config=a_cfg, a=a, first_thread=32 * A_FIRST_WARP,
                          threads=A_WARPS * 32)
    smem_b = UmmaOperandB(name="smem_b", pipeline_config=b_cfg, b_map=b_map, a_ring=smem_a, block_n=block_n)
    group = ts.PipelineGroup("ab", [smem_a, smem_b], ts.PipelineGroupMode.Merge) if grouped else None
    return smem_a, smem_b, group


def accumulator_config():
    """The UmmaAsync ring of TMEM accumulators: the MMA warp's commit fills a stage, the epilogue
    warpgroup's 128 threads release it."""
    return ts.PipelineConfig.create_umma_async_pipeline_cfg(ACC_STAGES, ONE, ts.CooperativeGroup(ts.Agent.Thread, 128),
                                                            LAYOUT)


def tile_end(q):
    """The queue epilogue every task ends a work tile with."""
    q.wait()
    q.get_and_advance_work_tile()
    q.release()


@tsjit.kernel
def merge_gemm_umma(a, b_map, c, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                    GROUP_M: tsjit.Constexpr[int], GROUPED: tsjit.Constexpr[bool] = True):
    """C (M, N) = relu(A (M, K) @ B^T), B (N, K); block = 256 threads, persistent grid (sm_100a)."""
    tiles_m, tiles_n, k_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN, (K + BK - 1) // BK
    wq = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=GROUP_M))
    smem_a, smem_b, ab = operand_rings(a, b_map, BN, STAGES, GROUPED)
    acc = StoredAccumulator(name="acc", pipeline_config=accumulator_config(), operands=smem_b, block_n=BN, c=c,
                            fn=relu)

    @ts.schedule
    def load_b(q: WorkQueue, b: UmmaOperandB):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                b.acquire()
                b.tma_load()
                b.commit()
            tile_end(q)

    @ts.schedule
    def load_a(q: WorkQueue, sa: CpAsyncTiles):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                sa.acquire()
                sa.fill()
                sa.commit()
            tile_end(q)

    @ts.schedule
    def mma(q: WorkQueue, sa: CpAsyncTiles, b: UmmaOperandB, t: StoredAccumulator, *groups):
        with ts.work_tile_loop(q):
            t.acquire()
            with ts.domain_loop(0, k_tiles, 1):
                sa.wait()
                b.wait()
                t.mma(b.operands())
                if groups:
                    groups[0].release()     # one tcgen05.commit frees the stage of both rings
                else:
                    sa.release()
                    b.release()
            t.commit()
            tile_end(q)

    @ts.schedule
    def epilogue(q: WorkQueue, t: StoredAccumulator):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                t.wait()
                t.store()
                t.release()
            tile_end(q)

    ma, mb, groups = (ab.smem_a, ab.smem_b, (ab,)) if GROUPED else (smem_a, smem_b, ())
    tasks = [ts.Task("load_b", [wq], [smem_b], warp_idx=0, num_warps=1, schedule=load_b(wq, mb)),
             ts.Task("mma", [wq, smem_a, smem_b], [acc], warp_idx=1, num_warps=1, schedule=mma(wq, ma, mb, acc, *groups)),
             ts.Task("load_a", [wq], [smem_a], warp_idx=A_FIRST_WARP, num_warps=A_WARPS, schedule=load_a(wq, ma)),
             ts.Task("epilogue", [wq, acc], [], warp_idx=4, num_warps=4, schedule=epilogue(wq, acc))]
    manager = ts.TaskManager(tasks, {smem_a: [wq], smem_b: [wq], acc: [smem_a, smem_b]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1024, N: int = 1024, K: int = 512, block_n: int = 256, stages: int = 4,
                 grouped: bool = True):
    """Arguments for ``tsjit.compile(merge_gemm_umma, ...)`` without a GPU."""
    bf16 = tsjit.BFloat16
    return (tsjit.spec((M, K), bf16), tsjit.tensormap_spec(bf16, (block_n, BK), swizzle="128B"), tsjit.spec((M, N), bf16),
            M, N, K, block_n, stages, 8, grouped)


def compile_for(target: str = "sm_100a", **kwargs):
    """``tsjit.compile`` of :func:`merge_gemm_umma` (keyword arguments as :func:`compile_args`)."""
    return tsjit.compile(merge_gemm_umma, *compile_args(**kwargs), target=target)


def run_merge_gemm_umma(M: int, N: int, K: int, *, block_n: int = 256, stages: int = 4, grouped: bool = True,
                        ctas: int = 2, rng=None):
    """relu(A @ B^T) on fresh random bf16 inputs, C poisoned (0xFFFF, a bf16 NaN), ``ctas`` persistent CTAs,
    on a Blackwell device or the CPU interpreter (``TSJIT_INTERPRET=1``, ``TSJIT_TARGET=sm_100a``); returns
    (C as float64, the float64 reference).

    Raises:
        UsageValueError: K is not a multiple of 8 (16-byte A rows for cp.async)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    if K % 8:
        raise UsageValueError(f"merge_gemm_umma needs K a multiple of 8 (16-byte A rows for cp.async), got K={K}")
    a, b = random_operands(M, N, K, rng)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    b_map = tsjit.TensorMap(tsjit.to_device(b, dtype=tsjit.BFloat16), (block_n, BK), swizzle="128B")
    merge_gemm_umma[(ctas,), (THREADS,)](tsjit.to_device(a, dtype=tsjit.BFloat16), b_map, c, M, N, K, block_n, stages,
                                         8, grouped)
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return got, np.maximum(a.astype(np.float64) @ b.astype(np.float64).T, 0.0)
