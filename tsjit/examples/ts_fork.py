"""Pipeline groups, tutorial 12 (a port of CUTLASS TS tutorial 07/04, sm_90a): a Fork.

One TMA-loaded A tile feeds two consumers: ``C = A @ B^T`` (bf16, fp32 accumulation) on the MMA
warpgroups, and ``R = relu(A)`` written by an activation task, from the same shared-memory stage.

* ``load_a`` (warp 0): per K tile acquires both members of the Fork group ``fork`` (``a_mma``, the
  primary, whose acquire arms the one shared full barrier with the A tile's bytes, and ``a_act``,
  which only waits its own empty barrier), TMA-loads A once and commits the group once,
  ``fork.commit()``; ``load_b`` (warp 1) fills the B ring;
* ``mma`` (warps 4-11): waits ``fork.a_mma`` and B, runs the wgmma of tutorial 10's
  :class:`~tsjit.examples.ts_merge_gemm.TmaOperandB`, releases ``a_mma`` and B one stage late;
* ``act`` (warps 2-3): waits ``fork.a_act``, writes relu of the tile (un-swizzling the 128B layout,
  16 bytes at a time; only for the work tiles of column 0, so each element of R is written once),
  releases ``a_act``: each consumer frees the stage on its own empty barrier.

``GROUPED=False`` gives the same program with two rings for A (loaded twice).  M, N any; K a
multiple of 8.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.examples.ts_merge_gemm import BM, THREADS, TmaOperandB, mainloop_schedules, random_operands
from tsjit.lang.epilogue import FusedEpilogue
from tsjit.ops.gemm_program import BK, OutputTile
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

ACT_WARPS = 2


@dataclass(kw_only=True)
class TmaTilesA(ts.MemoryResource):
    """A ring of BM x BK A tiles loaded by one 128B-swizzled TMA box (two 64-row halves)."""

    a_map: object
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tiles = tsjit.shared_array(self.a_map.dtype, (self.pipeline_config.num_stages, BM // 64, 64, BK),
                                        align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.producer_work()
    def tma_load(self, stage_info):
        m, _, _ = stage_info.work_tile.coords
        if tsjit.elect_one():
            tsjit.tma_load(self.a_map, self.tiles[stage_info.stage_idx], stage_info.barrier,
                           (m * BM, stage_info.loop_offset * BK))

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ForkView(ts.MemoryResource):
    """The second consumer's member of the Fork: the same stages as ``source`` (no data of its own)."""

    source: object
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def tma_bytes_per_stage(self):
        return self.source.tma_bytes_per_stage()

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ReluOutput(ts.MemoryResource):
    """R (M, K) = relu(A): the activation task writes one A stage (on the work tiles of column 0)."""

    r: object
    ring: object
    first_thread: int
    threads: int

    @ts.producer_work()
    def store(self, stage_info, stage):
        m, n, _ = stage_info.work_tile.coords
        if n == 0:
            k0 = stage_info.loop_offset * BK
            rows, cols = self.r.shape[0], self.r.shape[1]
            tile = self.ring.tiles[stage]
            for chunk in range(tsjit.thread_idx().x - self.first_thread, BM * (BK // 8), self.threads):
                r = chunk // (BK // 8)
                c = chunk % (BK // 8)
                local = r % 64
                row = m * BM + r
                col = k0 + c * 8
                if row < rows and col < cols:
                    values = tile[r // 64].load_vector((local, (c ^ (local % 8)) * 8), 8)
                    out = [tsjit.BFloat16(tsjit.math.max(tsjit.Float32(v), 0.0)) for v in values]
                    tsjit.assume_aligned(self.r.element_pointer((row, col)), 16).store_vector(out)


@tsjit.kernel
def fork_gemm_act(a_map, b_map, c, c_map, r, M, N, K, BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                  GROUP_M: tsjit.Constexpr[int], GROUPED: tsjit.Constexpr[bool] = True):
    """C = A @ B^T and R = relu(A); block = 384 threads, persistent grid."""
    tiles_m, tiles_n, k_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN, (K + BK - 1) // BK
    wq = WorkQueue(name="tiles", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, order="grouped", group_size_m=GROUP_M))
    one = ts.CooperativeGroup(ts.Agent.Thread, 1)
    mma_lanes = ts.CooperativeGroup(ts.Agent.Thread, 8)                    # one lane per MMA warp
    a_bytes = BM * BK * 2
    a_mma = TmaTilesA(name="a_mma", a_map=a_map, pipeline_config=ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, a_bytes, one, mma_lanes, advance_on_wait=True))
    a_act = ForkView(name="a_act", source=a_mma, pipeline_config=ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, a_bytes, one, ts.CooperativeGroup(ts.Agent.Thread, ACT_WARPS * 32), advance_on_wait=True))
    if tsjit.const_expr(not GROUPED):
        a_act = TmaTilesA(name="a_act", a_map=a_map, pipeline_config=a_act.pipeline_config)
    b = TmaOperandB(name="b", b_map=b_map, a_ring=a_mma, a_by_threads=False, block_n=BN,
                    pipeline_config=ts.PipelineConfig.create_tma_async_pipeline_cfg(
                        STAGES, BN * BK * 2, one, mma_lanes, advance_on_wait=True))
    out = OutputTile(name="c", c=c, c_map=c_map, block_m=BM, block_n=BN, rows=M, cols=N, fused=FusedEpilogue(),
                     operands=(c, c, c, 1.0, 0.0), mode="tma", staged_columns=min(BN, 128))
    relu = ReluOutput(name="r", r=r, ring=a_act if not GROUPED else a_mma, first_thread=64,
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
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    load_b = mainloop_schedules(k_tiles)[0]       # tutorial 10's B loader

    @ts.schedule
    def mma(q: WorkQueue, fa, sb: TmaOperandB, o: OutputTile):
        with ts.work_tile_loop(q):
            acc = sb.zero_accumulator()
            with ts.domain_loop(0, k_tiles, 1) as d:
                fa.wait()
                sb.wait()
                acc = sb.mma(acc)
                with d.every(1, start=1):
                    fa.release()
                    sb.release()
            acc = sb.retire(acc)
            fa.release()
            sb.release()
            o.store(acc)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
        o.flush()

    @ts.schedule
    def act(q: WorkQueue, fr, o: ReluOutput):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, k_tiles, 1):
                fr.wait()
                o.store(fr.read())
                fr.release()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    if tsjit.const_expr(GROUPED):
        fork = ts.PipelineGroup("fork", [a_mma, a_act], ts.PipelineGroupMode.Fork)
        fa, fr, groups = fork.a_mma, fork.a_act, (fork,)
    else:
        fa, fr, groups = a_mma, a_act, ()
    tasks = [ts.Task("load_a", [wq], [a_mma, a_act], warp_idx=0, num_warps=1, schedule=load_a(wq, fa, fr, *groups),
                     num_registers=40),
             ts.Task("load_b", [wq], [b], warp_idx=1, num_warps=1, schedule=load_b(wq, b), num_registers=40),
             ts.Task("act", [wq, a_act], [relu], warp_idx=2, num_warps=ACT_WARPS, schedule=act(wq, fr, relu),
                     num_registers=40),
             ts.Task("mma", [wq, a_mma, b], [out], warp_idx=4, num_warps=8, schedule=mma(wq, fa, b, out),
                     num_registers=232)]
    graph = {a_mma: [wq], a_act: [wq], b: [wq], out: [a_mma, b], relu: [a_act]}
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1024, N: int = 1024, K: int = 512, block_n: int = 256, stages: int = 3,
                 grouped: bool = True):
    """Arguments for ``tsjit.compile(fork_gemm_act, ...)`` without a GPU."""
    bf16 = tsjit.BFloat16
    return (tsjit.tensormap_spec(bf16, (BM, BK), swizzle="128B"), tsjit.tensormap_spec(bf16, (block_n, BK), swizzle="128B"),
            tsjit.spec((M, N), bf16), tsjit.tensormap_spec(bf16, (64, 64), swizzle="128B"), tsjit.spec((M, K), bf16),
            M, N, K, block_n, stages, 8, grouped)


def barrier_counts(stages: int = 3, target: str = "sm_90a") -> dict:
    """``{"group": n, "separate": m}``: the mbarriers each variant initialises, counted in its PTX."""
    return {name: tsjit.compile(fork_gemm_act, *compile_args(stages=stages, grouped=grouped),
                                target=target).ptx.count("mbarrier.init")
            for name, grouped in (("group", True), ("separate", False))}


def run_fork(M: int, N: int, K: int, *, block_n: int = 256, stages: int = 3, grouped: bool = True, rng=None,
             sms: int | None = None):
    """C = A @ B^T and R = relu(A) on fresh random bf16 inputs, C and R poisoned; returns
    ``(C, C reference, R, R reference)`` as float64 (the references from float64 numpy)."""
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    from tsjit.runtime.driver import device_properties
    if K % 8:
        raise ValueError(f"fork_gemm_act needs K a multiple of 8 (16-byte rows of R), got K={K}")
    a, b = random_operands(M, N, K, rng)
    da, db = tsjit.to_device(a, dtype=tsjit.BFloat16), tsjit.to_device(b, dtype=tsjit.BFloat16)
    c = tsjit.empty((M, N), tsjit.BFloat16).fill_bytes(0xFF)
    r = tsjit.empty((M, K), tsjit.BFloat16).fill_bytes(0xFF)
    tiles = -(-M // BM) * -(-N // block_n)
    grid = min(tiles, sms or device_properties().sm_count)
    fork_gemm_act[(grid,), (THREADS,)](
        tsjit.TensorMap(da, (BM, BK), swizzle="128B"), tsjit.TensorMap(db, (block_n, BK), swizzle="128B"), c,
        tsjit.TensorMap(c, (64, 64), swizzle="128B"), r, M, N, K, block_n, stages, 8, grouped)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (bfloat16_bits_to_float32(c.numpy()).astype(np.float64), a64 @ b64.T,
            bfloat16_bits_to_float32(r.numpy()).astype(np.float64), np.maximum(a64, 0.0))
