"""CUTLASS Task Scheduling tutorial 12 ported to Blackwell (07/03, sm_100a): a Merge GEMM with a residual add
through a second Merge group whose members are a UMMA accumulator and a TMA ring.

``D = relu(A @ B^T) + R``, all bf16 (fp32 accumulation in tensor memory); persistent over 128 x ``BN``
tiles.  Two pipeline groups:

* ``ab`` merges the operand rings before the MMA warp: ``load_a`` (warp 2) and ``load_b`` (warp 0)
  TMA-load A and B into two **TmaUmma** rings; the MMA warp (warp 1) waits on both members, issues
  four ``tcgen05.mma`` per K tile into a TMEM accumulator stage and frees the stage of both rings with
  one ``ab.release()`` (a ``tcgen05.commit`` to the shared empty barrier);
* ``epi`` merges the *accumulator* with the *residual*: member ``acc`` is a **UmmaAsync** ring of two
  TMEM accumulators (the MMA warp acquires a stage, ``acc.commit()`` is a ``tcgen05.commit`` to its
  full barrier), member ``res`` a **TmaAsync** ring of R tiles (``load_r``, warp 3); both are
  produced into stages freed by one shared empty barrier.  The ``epilogue`` warpgroup (warps 4-7)
  waits on both members, loads its accumulator row from TMEM (``tcgen05.ld``), adds the residual
  row from shared memory, stores D (bounds-masked) and calls ``epi.release()`` once for both.

On Hopper (:mod:`tsjit.examples.ts_merge_resadd`) the accumulator lives in registers, so that port
adds an explicit shared-memory stage; here the accumulator member is the TMEM ring itself.
``GROUPED=False`` gives the same program with four separate rings.  M any; N, K multiples of 8.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.errors import UsageValueError
from tsjit.examples.bw_merge_gemm import LAYOUT, ONE, UmmaOperandB, accumulator_config, tile_end
from tsjit.examples.bw_umma import BK, BM, UmmaAccumulator
from tsjit.examples.ts_fork import TmaTilesA
from tsjit.examples.gemm import bf16_round
from tsjit.examples.ts_merge_gemm import random_operands
from tsjit.examples.ts_merge_resadd import ResidualTiles
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

THREADS = 8 * 32


@dataclass(kw_only=True)
class ResidualSum(ts.MemoryResource):
    """D in global memory: the epilogue warpgroup writes ``relu(accumulator stage) + residual stage``."""

    d: object
    acc: object
    res: object

    @ts.producer_work()
    def store(self, stage_info, acc_stage, res_stage):
        m, n, _ = stage_info.work_tile.coords
        bn = self.acc.block_n
        view = self.acc.view(stage_info, acc_stage)
        r = view.row()
        row = m * BM + r
        rows, cols = self.d.shape[0], self.d.shape[1]
        residual = self.res.tiles[res_stage]
        for chunk in tsjit.range_constexpr(bn // 32):
            values = view.load(chunk * 32, 32)
            for q in tsjit.range_constexpr(4):
                extra = residual.load_vector((r, chunk * 32 + 8 * q), 8)
                for i in tsjit.range_constexpr(8):
                    col = n * bn + chunk * 32 + 8 * q + i
                    if row < rows and col < cols:
                        self.d[row, col] = tsjit.BFloat16(tsjit.math.max(values[8 * q + i], 0.0) + tsjit.Float32(extra[i]))


@tsjit.kernel
def merge_gemm_resadd_umma(a_map, b_map, r_map, d, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                           GROUP_M: tsjit.Constexpr[int], GROUPED: tsjit.Constexpr[bool] = True):
    """D (M, N) = relu(A (M, K) @ B^T) + R, B (N, K); block = 256 threads, persistent grid (sm_100a)."""
    tiles_m, tiles_n, k_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN, (K + BK - 1) // BK
    wq = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=GROUP_M))
    smem_a = TmaTilesA(name="smem_a", a_map=a_map, pipeline_config=ts.PipelineConfig.create_tma_umma_pipeline_cfg(
        STAGES, BM * BK * 2, ONE, ONE, LAYOUT))
    smem_b = UmmaOperandB(name="smem_b", b_map=b_map, a_ring=smem_a, a_by_threads=False, block_n=BN,
                          pipeline_config=ts.PipelineConfig.create_tma_umma_pipeline_cfg(STAGES, BN * BK * 2, ONE, ONE,
                                                                                         LAYOUT))
    acc = UmmaAccumulator(name="acc", pipeline_config=accumulator_config(), operands=smem_b, block_n=BN)
    res = ResidualTiles(name="res", r_map=r_map, block_n=BN, pipeline_config=ts.PipelineConfig.create_tma_async_pipeline_cfg(
        acc.pipeline_config.num_stages, BM * BN * 2, ONE, ts.CooperativeGroup(ts.Agent.Thread, 128), LAYOUT))
    out = ResidualSum(name="d", d=d, acc=acc, res=res)
    ab = ts.PipelineGroup("ab", [smem_a, smem_b], ts.PipelineGroupMode.Merge) if GROUPED else None
    epi = ts.PipelineGroup("epi", [acc, res], ts.PipelineGroupMode.Merge) if GROUPED else None

    @ts.schedule
    def load(q: WorkQueue, s):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                s.acquire()
                s.tma_load()
                s.commit()
            tile_end(q)

    @ts.schedule
    def load_r(q: WorkQueue, s: ResidualTiles):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                s.acquire()
                s.tma_load()
                s.commit()
            tile_end(q)

    @ts.schedule
    def mma(q: WorkQueue, sa: TmaTilesA, sb: UmmaOperandB, t: UmmaAccumulator, *groups):
        with ts.work_tile_loop(q):
            t.acquire()
            with ts.domain_loop(0, k_tiles, 1):
                sa.wait()
                sb.wait()
                t.mma(sb.operands())
                if groups:
                    groups[0].release()     # one tcgen05.commit frees the stage of both operand rings
                else:
                    sa.release()
                    sb.release()
            t.commit()
            tile_end(q)

    @ts.schedule
    def epilogue(q: WorkQueue, t: UmmaAccumulator, sr: ResidualTiles, o: ResidualSum, *groups):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                t.wait()
                sr.wait()
                o.store(t.read(), sr.read())
                if groups:
                    groups[0].release()     # once: frees the accumulator stage and the residual stage
                else:
                    t.release()
                    sr.release()
            tile_end(q)

    ma, mb, ab_groups = (ab.smem_a, ab.smem_b, (ab,)) if GROUPED else (smem_a, smem_b, ())
    macc, mres, epi_groups = (epi.acc, epi.res, (epi,)) if GROUPED else (acc, res, ())
    tasks = [ts.Task("load_b", [wq], [smem_b], warp_idx=0, num_warps=1, schedule=load(wq, mb)),
             ts.Task("mma", [wq, smem_a, smem_b], [acc], warp_idx=1, num_warps=1,
                     schedule=mma(wq, ma, mb, macc, *ab_groups)),
             ts.Task("load_a", [wq], [smem_a], warp_idx=2, num_warps=1, schedule=load(wq, ma)),
             ts.Task("load_r", [wq], [res], warp_idx=3, num_warps=1, schedule=load_r(wq, mres)),
             ts.Task("epilogue", [wq, acc, res], [out], warp_idx=4, num_warps=4,
                     schedule=epilogue(wq, macc, mres, out, *epi_groups))]
    graph = {smem_a: [wq], smem_b: [wq], res: [wq], acc: [smem_a, smem_b], out: [acc, res]}
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1024, N: int = 1024, K: int = 512, block_n: int = 128, stages: int = 4,
                 grouped: bool = True):
    """Arguments for ``tsjit.compile(merge_gemm_resadd_umma, ...)`` without a GPU."""
    bf16 = tsjit.BFloat16
    return (tsjit.tensormap_spec(bf16, (BM, BK), swizzle="128B"), tsjit.tensormap_spec(bf16, (block_n, BK), swizzle="128B"),
            tsjit.tensormap_spec(bf16, (BM, block_n)), tsjit.spec((M, N), bf16), M, N, K, block_n, stages, 8, grouped)


def compile_for(target: str = "sm_100a", **kwargs):
    """``tsjit.compile`` of :func:`merge_gemm_resadd_umma` (keyword arguments as :func:`compile_args`)."""
    return tsjit.compile(merge_gemm_resadd_umma, *compile_args(**kwargs), target=target)


def run_resadd_umma(M: int, N: int, K: int, *, block_n: int = 128, stages: int = 4, grouped: bool = True,
                    ctas: int = 2, rng=None):
    """relu(A @ B^T) + R on fresh random bf16 inputs, D poisoned, ``ctas`` persistent CTAs, on a Blackwell device
    or the CPU interpreter; returns (D as float64, the float64 reference).

    Raises:
        UsageValueError: N or K is not a multiple of 8 (16-byte TMA rows)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    if N % 8 or K % 8:
        raise UsageValueError(f"merge_gemm_resadd_umma needs N and K multiples of 8, got N={N}, K={K}")
    rng = rng or np.random.default_rng()
    a, b = random_operands(M, N, K, rng)
    res = bf16_round(rng.standard_normal((M, N)).astype(np.float32))
    da, db, dr = (tsjit.to_device(x, dtype=tsjit.BFloat16) for x in (a, b, res))
    d = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    merge_gemm_resadd_umma[(ctas,), (THREADS,)](
        tsjit.TensorMap(da, (BM, BK), swizzle="128B"), tsjit.TensorMap(db, (block_n, BK), swizzle="128B"),
        tsjit.TensorMap(dr, (BM, block_n)), d, M, N, K, block_n, stages, 8, grouped)
    reference = np.maximum(a.astype(np.float64) @ b.astype(np.float64).T, 0.0) + res.astype(np.float64)
    return bfloat16_bits_to_float32(d.numpy()).astype(np.float64), reference
