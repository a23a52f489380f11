"""The cooperative library GEMM with a deferred epilogue: tile ``i``'s epilogue runs under tile
``i + 1``'s first MMAs (``GemmConfig.schedule == "deferred"``).

:func:`tsjit.ops.gemm_program.gemm_program`'s MMA warpgroups store a tile between its last MMA and the
next tile's first, so the tensor cores idle for the whole epilogue (register conversion, ``stmatrix``
staging, the TMA store issue) once per tile: on short-K shapes (16 K tiles a tile) that is a large part
of the time.  Here each MMA warpgroup keeps two accumulators: after a tile's K loop it retires its MMAs
and moves the accumulator into ``prev`` (no store); in the next tile's K loop, after the wgmmas of
its *second* K tile are issued (two MMA groups queued at the tensor cores; the first when a tile has one
K tile), it stores ``prev`` -- the tile ``gridDim.x`` tiles back in the static persistent order -- through
the same epilogue code (:func:`tsjit.ops.gemm_program.write_tile`), then waits for the older MMA group as
usual.  After the work tile loop it stores its last tile.  The loader is unchanged: it keeps the ring
full across tile boundaries, as in the cooperative program (the staging tile of the TMA epilogue is its
own shared memory, not a ring stage).

Two accumulators of ``BN / 2`` registers each must fit in a warpgroup's 232 registers, so ``BN <= 128``
(a 128 x 256 tile's accumulator alone is 128 registers).  No split-K (use the cooperative program).

Measured on the H200 (BENCHMARKS.md, issue 15, helper i15-gemm, 2026-12-01) it is *slower* than the
cooperative program at every probed shape (2048^3: 0.946x cuBLAS against 0.988 with the same 128 x 128
tile; 4096 x 4096 x 512: 0.891 against 1.006): the epilogue was not what a short-K tile loses (that is
its operands' row alignment).  ``tsjit.ops.matmul``'s heuristic therefore never picks it; it stays a
forced configuration (``GemmConfig(schedule="deferred")``) for measurements.

The Task Scheduling program is the cooperative one's (:func:`tsjit.ops.gemm_program.run_cooperative`: same
ring, same pipeline operations in the same order; the TaskManager verifies it SAFE); only the ``mma``
task's works differ (``mainloop_schedules(deferred=True)``): ``init_previous`` before the work tile loop,
``mma`` with the deferred store, ``keep`` after ``retire``, and the output's ``store_last`` after the loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.lang.fragment import Fragment
from tsjit.ops.gemm_program import (K_STEPS, SWIZZLE_BYTES, OperandRing, OutputTile, k_tile_elements,
                                    run_cooperative, write_tile)
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

MAX_BLOCK_N = 128       # two BN / 2-register accumulators per thread next to the epilogue's registers


@dataclass(kw_only=True)
class DeferredRing(OperandRing):
    """The cooperative TMA ring whose ``mma`` work also stores the previous work tile (``prev``, the
    accumulator :meth:`keep` saved) through ``out`` once this tile's second K tile is issued.
    ``queue``: the WorkQueue (the previous tile is ``gridDim.x`` tiles back)."""

    out: object = None
    queue: object = None
    prev: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        super().__post_init__()
        n = self.block_n
        self.prev = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(n // 2),
                                         docs="the previous work tile's 64 x BN fp32 accumulator, not yet stored")

    @ts.consumer_work(returns="prev", work_attrs=ts.WorkAttr.AUXILIARY)
    def init_previous(self, stage_info):
        return Fragment.zeros(self.block_n // 2)

    @ts.consumer_work(returns="acc")
    def mma(self, stage_info, acc, prev):
        # the wgmmas, commit and wait stay in the work's own body: the checker's async-read scan reads it
        warpgroup = tsjit.warp_idx() // 4 - 1
        x_tile, x_major, y_tile, y_major = self.operand_tiles(stage_info.stage_idx, warpgroup)
        x_desc = wgmma.make_descriptor(x_tile, major=x_major, swizzle="128B")
        y_desc = wgmma.make_descriptor(y_tile, major=y_major, swizzle="128B")
        wgmma.fence()
        for k in tsjit.range_constexpr(K_STEPS):
            acc = wgmma.mma_async(acc, x_desc.k_step(k), y_desc.k_step(k), n=self.block_n)
        wgmma.commit_group()
        j = stage_info.loop_offset
        if (j == 1) | ((j == 0) & (self.k_tiles == 1)):
            tile = stage_info.work_tile.tile_idx
            if tile >= tsjit.grid_dim().x:               # not this CTA's first tile: store the one before
                m, n, l = self.queue.tile_info(tile - tsjit.grid_dim().x).coords
                write_tile(self.out, prev, m, n, l)
        wgmma.wait_group(1)
        return acc

    @ts.consumer_work(returns="prev")
    def keep(self, stage_info, acc):
        """After ``retire``: the finished accumulator becomes ``prev`` (stored during the next tile)."""
        return acc


@dataclass(kw_only=True)
class DeferredOutput(OutputTile):
    """:class:`~tsjit.ops.gemm_program.OutputTile` plus the store of a CTA's last work tile after its
    work tile loop (``queue``: the WorkQueue; the loop ended on the first tile past the last one)."""

    queue: object = None

    @ts.producer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def store_last(self, stage_info, acc):
        last = stage_info.work_tile.tile_idx - tsjit.grid_dim().x
        m, n, l = self.queue.tile_info(last).coords
        write_tile(self, acc, m, n, l)


@tsjit.kernel
def gemm_deferred(x_map, y_map, c, c_map, bias, residual, workspace, counters, scale_x, scale_y, M, N, K, batch,
                  alpha: tsjit.Float32, beta: tsjit.Float32,
                  BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                  X_MAJOR: tsjit.Constexpr[str], Y_MAJOR: tsjit.Constexpr[str], EPILOGUE: tsjit.Constexpr[str],
                  STAGED: tsjit.Constexpr[int], SPLITS: tsjit.Constexpr[int], BATCHED: tsjit.Constexpr[bool],
                  GROUP_M: tsjit.Constexpr[int], FUSED: tsjit.Constexpr[object]):
    """D (M, N) = X (M, K) @ Y (K, N) as :func:`~tsjit.ops.gemm_program.gemm_program` (same arguments,
    layouts, batching, fused epilogue and launch geometry), each tile's epilogue deferred under the next
    tile's MMAs (module docstring).  ``BN`` must be at most 128 and ``SPLITS`` 1
    (:class:`tsjit.CompilationError` otherwise)."""
    if BN > MAX_BLOCK_N or SPLITS != 1 or BM not in (64, 128):
        raise tsjit.CompilationError(f"gemm_deferred: BM={BM}, BN={BN}, SPLITS={SPLITS}; the deferred epilogue "
                                     f"keeps two accumulators, so it needs BM 64 or 128, BN <= {MAX_BLOCK_N} and "
                                     f"no split-K: use tsjit.ops.gemm_program.gemm_program otherwise")
    groups = BM // 64
    tiles_m = (M + BM - 1) // BM
    tiles_n = (N + BN - 1) // BN
    bk = k_tile_elements(x_map.dtype)
    k_tiles = (K + bk - 1) // bk
    queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, batch, order="grouped", group_size_m=GROUP_M)
    wq = WorkQueue(name="tiles", tile_scheduler_config=queue_config)
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, (BM + BN) * SWIZZLE_BYTES, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, groups * 4), advance_on_wait=True)
    out = DeferredOutput(name="d", c=c, c_map=c_map, block_m=BM, block_n=BN, rows=M, cols=N, fused=FUSED,
                         operands=(bias, residual, c, alpha, beta, scale_x, scale_y), mode=EPILOGUE,
                         batched=BATCHED, staged_columns=STAGED, queue=wq)
    ring = DeferredRing(name="xy", pipeline_config=cfg, x_map=x_map, y_map=y_map, block_m=BM, block_n=BN,
                        x_major=X_MAJOR, y_major=Y_MAJOR, batched=BATCHED, k_tiles=k_tiles, out=out, queue=wq)
    run_cooperative(wq, ring, out, groups, k_tiles, deferred=True)
