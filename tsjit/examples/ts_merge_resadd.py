"""Pipeline groups, tutorial 11 (a port of CUTLASS TS tutorial 07/03, sm_90a): a Merge GEMM with a
residual add through a second Merge group.

``D = relu(A @ B^T) + R``, all bf16 (fp32 accumulation).  Two groups:

* ``ab`` merges the operand rings before the MMA warpgroups, as in tutorial 10
  (:mod:`tsjit.examples.ts_merge_gemm`): ``load_b`` (warp 0, TMA) and ``load_a`` (warps 2-3,
  ``cp.async`` AsyncLoad), one ``ab.release()`` per stage;
* ``epi`` merges the *accumulator stage* with the *residual*: the MMA warpgroups (warps 4-11) end
  each tile by acquiring ``acc``, writing ``relu(acc)`` into it with ``stmatrix`` and committing
  (AsyncAsync: every thread arrives); ``load_r`` (warp 1) TMA-loads the tile of R into ``res``
  (TmaAsync); the ``epilogue`` warpgroup (warps 12-15) waits on both, stores ``acc + res`` with
  16-byte vector stores (bounds-masked), and calls ``epi.release()`` once for both.

On Hopper the accumulator lives in registers, so its stage is an explicit shared-memory ring here;
it lets the MMA warpgroups start the next tile while the epilogue warpgroup adds the residual.
``GROUPED=False`` gives the same program with four separate rings.  M any; N and K multiples of 8.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.examples.ts_merge_gemm import (BM, CpAsyncTiles, TmaOperandB, mainloop_rings,
                                          mainloop_schedules, random_operands)
from tsjit.lang.epilogue import store_fragment_shared
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

THREADS = 512


def _relu(value, row, col):
    return tsjit.math.max(value, 0.0)


@dataclass(kw_only=True)
class AccumulatorStage(ts.MemoryResource):
    """A ring of BM x BN bf16 tiles (one 64 x BN half per MMA warpgroup, row-major): the MMA
    warpgroups write ``relu(acc)`` into a stage, the epilogue warpgroup reads it."""

    block_n: int
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tiles = tsjit.shared_array(tsjit.BFloat16, (self.pipeline_config.num_stages, BM // 64, 64, self.block_n),
                                        align=128)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.producer_work()
    def write(self, stage_info, acc):
        warpgroup = tsjit.warp_idx() // 4 - 1
        store_fragment_shared(acc, self.tiles[stage_info.stage_idx, warpgroup], swizzle="none", fn=_relu,
                              tid=tsjit.thread_idx().x % 128)

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ResidualTiles(ts.MemoryResource):
    """A ring of BM x BN tiles of R, one TMA box each (no swizzle)."""

    r_map: object
    block_n: int
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tiles = tsjit.shared_array(self.r_map.dtype, (self.pipeline_config.num_stages, BM, self.block_n),
                                        align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.producer_work()
    def tma_load(self, stage_info):
        m, n, _ = stage_info.work_tile.coords
        if tsjit.elect_one():
            tsjit.tma_load(self.r_map, self.tiles[stage_info.stage_idx], stage_info.barrier, (m * BM, n * self.block_n))

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ResidualOutput(ts.MemoryResource):
    """D in global memory: the epilogue warpgroup writes ``acc stage + residual stage`` of one tile."""

    d: object
    acc: object
    res: object
    first_thread: int

    @ts.producer_work()
    def store(self, stage_info, acc_stage, res_stage):
        m, n, _ = stage_info.work_tile.coords
        bn = self.acc.block_n
        rows, cols = self.d.shape[0], self.d.shape[1]
        for chunk in range(tsjit.thread_idx().x - self.first_thread, BM * bn // 8, 128):
            r = chunk // (bn // 8)
            c = chunk % (bn // 8) * 8
            row, col = m * BM + r, n * bn + c
            if row < rows and col < cols:
                y = self.acc.tiles[acc_stage, r // 64].load_vector((r % 64, c), 8)
                z = self.res.tiles[res_stage].load_vector((r, c), 8)
                out = [tsjit.BFloat16(tsjit.Float32(p) + tsjit.Float32(q)) for p, q in zip(y, z)]
                tsjit.assume_aligned(self.d.element_pointer((row, col)), 16).store_vector(out)


@tsjit.kernel
def merge_gemm_resadd(a, b_map, r_map, d, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                      EPI_STAGES: tsjit.Constexpr[int], GROUP_M: tsjit.Constexpr[int],
                      GROUPED: tsjit.Constexpr[bool] = True):
    """D (M, N) = relu(A (M, K) @ B^T) + R, B (N, K); block = 512 threads, persistent grid."""
    tiles_m, tiles_n, k_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN, (K + 63) // 64
    wq = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=GROUP_M))
    smem_a, smem_b, ab = mainloop_rings(a, b_map, BN, STAGES, GROUPED, a_first_warp=2, a_warps=2,
                                        b_with_a=False)
    epilogue_threads = ts.CooperativeGroup(ts.Agent.Thread, 128)            # every epilogue thread releases
    acc = AccumulatorStage(name="acc", block_n=BN, pipeline_config=ts.PipelineConfig.create_async_async_pipeline_cfg(
        EPI_STAGES, ts.CooperativeGroup(ts.Agent.Thread, 256), epilogue_threads))
    res = ResidualTiles(name="res", r_map=r_map, block_n=BN, pipeline_config=ts.PipelineConfig.create_tma_async_pipeline_cfg(
        EPI_STAGES, BM * BN * 2, ts.CooperativeGroup(ts.Agent.Thread, 1), epilogue_threads))
    out = ResidualOutput(name="d", d=d, acc=acc, res=res, first_thread=12 * 32)
    epi = ts.PipelineGroup("epi", [acc, res], ts.PipelineGroupMode.Merge) if GROUPED else None
    load_b, load_a, mma_loop = mainloop_schedules(k_tiles)

    def tile_end(q):
        q.wait()
        q.get_and_advance_work_tile()
        q.release()

    @ts.schedule
    def load_r(q: WorkQueue, s: ResidualTiles):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                s.acquire()
                s.tma_load()
                s.commit()
            tile_end(q)

    @ts.schedule
    def mma(q: WorkQueue, a: CpAsyncTiles, b: TmaOperandB, stage: AccumulatorStage, *groups):
        with ts.work_tile_loop(q):
            total = mma_loop(a, b, groups)
            stage.acquire()
            stage.write(total)
            stage.commit()
            tile_end(q)

    @ts.schedule
    def epilogue(q: WorkQueue, sa: AccumulatorStage, sr: ResidualTiles, o: ResidualOutput, *groups):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 1, 1):
                sa.wait()
                sr.wait()
                o.store(sa.read(), sr.read())
                if groups:
                    groups[0].release()     # once: frees the accumulator stage and the residual stage
                else:
                    sa.release()
                    sr.release()
            tile_end(q)

    ma, mb = (ab.smem_a, ab.smem_b) if GROUPED else (smem_a, smem_b)
    macc, mres = (epi.acc, epi.res) if GROUPED else (acc, res)
    ab_groups, epi_groups = ((ab,), (epi,)) if GROUPED else ((), ())
    tasks = [ts.Task("load_b", [wq], [smem_b], warp_idx=0, num_warps=1, schedule=load_b(wq, mb)),
             ts.Task("load_r", [wq], [res], warp_idx=1, num_warps=1, schedule=load_r(wq, mres)),
             ts.Task("load_a", [wq], [smem_a], warp_idx=2, num_warps=2, schedule=load_a(wq, ma)),
             ts.Task("mma", [wq, smem_a, smem_b], [acc], warp_idx=4, num_warps=8,
                     schedule=mma(wq, ma, mb, macc, *ab_groups)),
             ts.Task("epilogue", [wq, acc, res], [out], warp_idx=12, num_warps=4,
                     schedule=epilogue(wq, macc, mres, out, *epi_groups))]
    graph = {smem_a: [wq], smem_b: [wq], res: [wq], acc: [smem_a, smem_b], out: [acc, res]}
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1024, N: int = 1024, K: int = 512, block_n: int = 128, stages: int = 3,
                 epi_stages: int = 2, grouped: bool = True):
    """Arguments for ``tsjit.compile(merge_gemm_resadd, ...)`` without a GPU."""
    bf16 = tsjit.BFloat16
    return (tsjit.spec((M, K), bf16), tsjit.tensormap_spec(bf16, (block_n, 64), swizzle="128B"),
            tsjit.tensormap_spec(bf16, (BM, block_n)), tsjit.spec((M, N), bf16), M, N, K, block_n, stages,
            epi_stages, 8, grouped)


def barrier_counts(target: str = "sm_90a") -> dict:
    """``{"group": n, "separate": m}``: the mbarriers each variant initialises, counted in its PTX."""
    return {name: tsjit.compile(merge_gemm_resadd, *compile_args(grouped=grouped), target=target).ptx.count(
        "mbarrier.init") for name, grouped in (("group", True), ("separate", False))}


def run_resadd(M: int, N: int, K: int, *, block_n: int = 128, stages: int = 3, epi_stages: int = 2,
               grouped: bool = True, rng=None, sms: int | None = None):
    """relu(A @ B^T) + R on fresh random bf16 inputs, D poisoned; returns (D, float64 reference).

    Raises:
        ValueError: N or K is not a multiple of 8 (16-byte rows for cp.async, TMA and the vector stores)."""
    from tsjit.examples.gemm import bf16_round
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    from tsjit.runtime.driver import device_properties
    if N % 8 or K % 8:
        raise ValueError(f"merge_gemm_resadd needs N and K multiples of 8, got N={N}, K={K}")
    rng = rng or np.random.default_rng()
    a, b = random_operands(M, N, K, rng)
    res = bf16_round(rng.standard_normal((M, N)).astype(np.float32))
    da, db, dr = (tsjit.to_device(x, dtype=tsjit.BFloat16) for x in (a, b, res))
    d = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    grid = min(-(-M // BM) * -(-N // block_n), sms or device_properties().sm_count)
    merge_gemm_resadd[(grid,), (THREADS,)](
        da, tsjit.TensorMap(db, (block_n, 64), swizzle="128B"), tsjit.TensorMap(dr, (BM, block_n)), d, M, N, K,
        block_n, stages, epi_stages, 8, grouped)
    reference = np.maximum(a.astype(np.float64) @ b.astype(np.float64).T, 0.0) + res.astype(np.float64)
    return bfloat16_bits_to_float32(d.numpy()).astype(np.float64), reference
