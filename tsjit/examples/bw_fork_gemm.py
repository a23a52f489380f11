"""CUTLASS Task Scheduling tutorial 13 ported to Blackwell (07/04, sm_100a): a Fork whose members are a UMMA
ring and a thread ring.  One TMA-loaded A tile feeds two consumers: ``C = A @ B^T`` (bf16, fp32 accumulation in
tensor memory) on the MMA warp, and ``R = relu(A)`` written by an activation task, from the same shared-memory
stage; persistent over 128 x ``BN`` tiles.

* ``load_a`` (warp 0): per K tile acquires both members of the Fork group ``fork`` -- ``a_mma``, a
  **TmaUmma** ring and the primary member, whose acquire arms the one shared full barrier with the A
  tile's bytes, and ``a_act``, a **TmaAsync** ring that only waits its own empty barrier -- TMA-loads A
  once and commits the group once, ``fork.commit()``; ``load_b`` (warp 1) fills the B ring (TmaUmma);
* ``mma`` (warp 8): waits ``fork.a_mma`` and B, issues four ``tcgen05.mma`` per K tile into a TMEM
  accumulator stage, and releases ``a_mma`` and B: each a ``tcgen05.commit`` to that member's empty
  barrier (the hardware arrives when the MMAs have read the stage); ``acc.commit()`` hands the
  accumulator to the ``epilogue`` warpgroup (warps 4-7, UmmaAsync), which stores C;
* ``act`` (warps 2-3): waits ``fork.a_act``, writes relu of the tile (tutorial 12's Hopper
  :class:`~tsjit.examples.ts_fork.ReluOutput`: un-swizzling the 128B layout, 16 bytes at a time, only on
  the work tiles of column 0 so each element of R is written once) and releases ``a_act`` with a thread
  arrival: each consumer frees the stage on its own empty barrier, by its own mechanism.

``GROUPED=False`` gives the same program with two rings for A (loaded twice).  The Hopper port is
:mod:`tsjit.examples.ts_fork`.  M, N any; K a multiple of 8.
"""
from __future__ import annotations

import numpy as np

import tsjit
from tsjit import ts
from tsjit.errors import UsageValueError
from tsjit.examples.bw_merge_gemm import LAYOUT, ONE, UmmaOperandB, accumulator_config, tile_end
from tsjit.examples.bw_umma import BK, BM, StoredAccumulator
from tsjit.examples.ts_fork import ForkView, ReluOutput, TmaTilesA
from tsjit.examples.ts_merge_gemm import random_operands
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

THREADS = 9 * 32
ACT_FIRST_WARP, ACT_WARPS = 2, 2


@tsjit.kernel
def fork_gemm_act_umma(a_map, b_map, c, r, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                       GROUP_M: tsjit.Constexpr[int], GROUPED: tsjit.Constexpr[bool] = True):
    """C = A @ B^T and R = relu(A); block = 288 threads, persistent grid (sm_100a)."""
    tiles_m, tiles_n, k_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN, (K + BK - 1) // BK
    wq = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=GROUP_M))
    a_bytes = BM * BK * 2
    a_mma = TmaTilesA(name="a_mma", a_map=a_map, pipeline_config=ts.PipelineConfig.create_tma_umma_pipeline_cfg(
        STAGES, a_bytes, ONE, ONE, LAYOUT))
    act_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, a_bytes, ONE, ts.CooperativeGroup(ts.Agent.Thread, ACT_WARPS * 32), LAYOUT,
        mcast_mode_mn=a_mma.pipeline_config.mcast_mode_mn)      # a Fork's members share one full barrier
    if tsjit.const_expr(GROUPED):
        a_act = ForkView(name="a_act", source=a_mma, pipeline_config=act_cfg)
    else:
        a_act = TmaTilesA(name="a_act", a_map=a_map, pipeline_config=act_cfg)
    b = UmmaOperandB(name="b", b_map=b_map, a_ring=a_mma, a_by_threads=False, block_n=BN,
                     pipeline_config=ts.PipelineConfig.create_tma_umma_pipeline_cfg(STAGES, BN * BK * 2, ONE, ONE,
                                                                                    LAYOUT))
    acc = StoredAccumulator(name="acc", pipeline_config=accumulator_config(), operands=b, block_n=BN, c=c)
    relu = ReluOutput(name="r", r=r, ring=a_act if not GROUPED else a_mma, first_thread=32 * ACT_FIRST_WARP,
                      threads=ACT_WARPS * 32)

    @ts.schedule
    def load_a(q: WorkQueue, fa, fr, *groups):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                fa.acquire()            # the primary member: waits its empty barrier, arms the shared full one
                fr.acquire()            # the secondary: only waits its own empty barrier
                fa.tma_load()
                if groups:
                    groups[0].commit()  # once, for both consumers
                else:
                    fr.tma_load()       # separate rings: the tile is loaded twice
                    fa.commit()
                    fr.commit()
            tile_end(q)

    @ts.schedule
    def load_b(q: WorkQueue, sb: UmmaOperandB):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                sb.acquire()
                sb.tma_load()
                sb.commit()
            tile_end(q)

    @ts.schedule
    def mma(q: WorkQueue, fa, sb: UmmaOperandB, t: StoredAccumulator):
        with ts.work_tile_loop(q):
            t.acquire()
            with ts.domain_loop(0, k_tiles, 1):
                fa.wait()
                sb.wait()
                t.mma(sb.operands())
                fa.release()            # tcgen05.commit to a_mma's own empty barrier
                sb.release()
            t.commit()
            tile_end(q)

    @ts.schedule
    def act(q: WorkQueue, fr, o: ReluOutput):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                fr.wait()
                o.store(fr.read())
                fr.release()            # every activation thread arrives on a_act's own empty barrier
            tile_end(q)

    @ts.schedule
    def epilogue(q: WorkQueue, t: StoredAccumulator):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                t.wait()
                t.store()
                t.release()
            tile_end(q)

    if tsjit.const_expr(GROUPED):
        fork = ts.PipelineGroup("fork", [a_mma, a_act], ts.PipelineGroupMode.Fork)
        fa, fr, groups = fork.a_mma, fork.a_act, (fork,)
    else:
        fa, fr, groups = a_mma, a_act, ()
    tasks = [ts.Task("load_a", [wq], [a_mma, a_act], warp_idx=0, num_warps=1, schedule=load_a(wq, fa, fr, *groups)),
             ts.Task("load_b", [wq], [b], warp_idx=1, num_warps=1, schedule=load_b(wq, b)),
             ts.Task("act", [wq, a_act], [relu], warp_idx=ACT_FIRST_WARP, num_warps=ACT_WARPS,
                     schedule=act(wq, fr, relu)),
             ts.Task("epilogue", [wq, acc], [], warp_idx=4, num_warps=4, schedule=epilogue(wq, acc)),
             ts.Task("mma", [wq, a_mma, b], [acc], warp_idx=8, num_warps=1, schedule=mma(wq, fa, b, acc))]
    graph = {a_mma: [wq], a_act: [wq], b: [wq], acc: [a_mma, b], relu: [a_act]}
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1024, N: int = 1024, K: int = 512, block_n: int = 256, stages: int = 3,
                 grouped: bool = True):
    """Arguments for ``tsjit.compile(fork_gemm_act_umma, ...)`` without a GPU."""
    bf16 = tsjit.BFloat16
    return (tsjit.tensormap_spec(bf16, (BM, BK), swizzle="128B"), tsjit.tensormap_spec(bf16, (block_n, BK), swizzle="128B"),
            tsjit.spec((M, N), bf16), tsjit.spec((M, K), bf16), M, N, K, block_n, stages, 8, grouped)


def compile_for(target: str = "sm_100a", **kwargs):
    """``tsjit.compile`` of :func:`fork_gemm_act_umma` (keyword arguments as :func:`compile_args`)."""
    return tsjit.compile(fork_gemm_act_umma, *compile_args(**kwargs), target=target)


def run_fork_umma(M: int, N: int, K: int, *, block_n: int = 256, stages: int = 3, grouped: bool = True, ctas: int = 2,
                  rng=None):
    """C = A @ B^T and R = relu(A) on fresh random bf16 inputs, C and R poisoned, ``ctas`` persistent CTAs, on a
    Blackwell device or the CPU interpreter; returns ``(C, C reference, R, R reference)`` as float64.

    Raises:
        UsageValueError: K is not a multiple of 8 (16-byte rows of R)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    if K % 8:
        raise UsageValueError(f"fork_gemm_act_umma needs K a multiple of 8 (16-byte rows of R), got K={K}")
    a, b = random_operands(M, N, K, rng)
    da, db = tsjit.to_device(a, dtype=tsjit.BFloat16), tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    r = tsjit.empty((M, K), tsjit.BFloat16).fill_bytes(0xFF)
    fork_gemm_act_umma[(ctas,), (THREADS,)](
        tsjit.TensorMap(da, (BM, BK), swizzle="128B"), tsjit.TensorMap(db, (block_n, BK), swizzle="128B"), c, r,
        M, N, K, block_n, stages, 8, grouped)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (bfloat16_bits_to_float32(c.numpy()).astype(np.float64), a64 @ b64.T,
            bfloat16_bits_to_float32(r.numpy()).astype(np.float64), np.maximum(a64, 0.0))
