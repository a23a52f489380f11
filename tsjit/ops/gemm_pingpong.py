"""The library GEMM with ping-pong consumers: ``D (P, Q) = X (P, K) @ Y (K, Q)`` as
:func:`tsjit.ops.gemm_program.gemm_program` computes it (same arguments, operand layouts, batching
and fused epilogue; no split-K), but each of the two MMA warpgroups multiplies a half of the work tile
of its own, and they take turns at the tensor cores (named barriers, :mod:`tsjit.lang.turns`), so one
warpgroup's epilogue can run while the other's MMAs keep the tensor cores busy.  Two programs:

* :func:`gemm_pingpong` (``GemmConfig.schedule == "pingpong"``): a TMA ring and a loader per warpgroup;
* :func:`gemm_pingpong_shared` (``"pingpong-shared"``): one ring shared by both warpgroups, whose domain
  walks half 0's K tiles, then half 1's (:class:`SharedPingpongRing`), halves of 64 or 128 rows.

Measured on the H200 (BENCHMARKS.md, "Issue 15 ping-pong consumers"), both are slower than the
cooperative program: a ring per warpgroup leaves each 2-4 stages (0.19-0.66x cuBLAS); the shared ring
reaches 0.89-0.94x at 4096^3-8192^3 with 128-row halves and 2 wgmma groups in flight, but each half
re-reads the Y tile, and as both warpgroups release every stage, a warpgroup's epilogue stalls the ring
after ``STAGES`` K tiles.  ``tsjit.ops.matmul``'s cost model therefore keeps the cooperative program
(ping-pong stays a candidate, shown by ``explain``, measured by ``TSJIT_AUTOTUNE``).

:func:`gemm_pingpong` (one CTA = 3 warpgroups, 384 threads; a work tile is ``BM = 128`` rows x ``BN`` columns
of D, as in the cooperative program, in the same grouped persistent order; its two 64-row halves are *lanes*):

* ``load0`` (warp 0) and ``load1`` (warp 1), 40 registers with the ``idle`` padding warps 2-3: lane
  ``w``'s loader walks the K tiles of its half of every work tile into its own TMA ring ``xy<w>`` (the
  half's X tile 64 x BK and the Y tile BN x BK, 128-byte swizzled), exactly as the cooperative
  program's loader does for a whole tile;
* ``mma0`` (warpgroup 1) and ``mma1`` (warpgroup 2), 232 registers: lane ``w``'s warpgroup, per work
  tile, zeroes its 64 x BN fp32 accumulator, **takes its turn** (:func:`tsjit.lang.turns.take_turn`,
  named barrier ``3 + w``), runs the K loop (wait, BK / 16 ``wgmma.mma_async`` m64nBNk16,
  ``commit_group``, ``wait_group(1)``, release the previous stage), **passes the turn**
  (:func:`~tsjit.lang.turns.pass_turn`) while its last MMA group is still in flight, retires it,
  releases the last stage and stores its 64 rows through the fused epilogue (TMA or direct, exactly
  the cooperative ``OutputTile``: staging buffer and named barrier ``1 + w`` of its own).  Before the
  first tile warpgroup 1 gives warpgroup 0 the first turn.

The K loops of the two warpgroups never overlap (the turns order them: half 0 of tile ``t``, half 1
of tile ``t``, half 0 of tile ``t + 1``, ...); everything else does: while warpgroup 1 multiplies its
half, ring 0 already fills with the next tile's first stages and warpgroup 0 stores its half.  All
tasks share one WorkQueue; each lane's ring and tasks form an ordinary TMA -> wgmma pipeline, which
the TaskManager verifies (bracketing, counts, bytes and the exhaustive interleaving check: SAFE).
The turns are named barriers inside the works (the mechanism the attention kernel uses), which the
mbarrier checker does not model; why they can neither deadlock nor overcount is in
:mod:`tsjit.lang.turns` (strict alternation; both warpgroups take one turn per work tile), and the
CPU interpreter executes them.  Rows past M (a last half beyond the matrix) are zero-filled by TMA and
clipped by the epilogue, as in the cooperative program.

Shared memory: two rings of ``STAGES`` stages of ``(64 + BN) * 128`` bytes each, plus the two 64 x STAGED
staging tiles (:func:`tsjit.ops.configs.stages_for` with ``schedule="pingpong"``).

:func:`gemm_pingpong_shared`: the same tasks as the cooperative program (``load`` warp 0, ``idle`` warps
1-3, one ``mma`` task of both warpgroups) over one ring of ``(BM / 2 + BN) * 128``-byte stages and a domain
of ``2 * k_tiles`` (:class:`SharedPingpongRing`; the turns are taken in its ``mma`` work); the checker
proves it SAFE like the others.
"""
from __future__ import annotations

from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit import wgmma
from tsjit.lang import turns
from tsjit.lang.fragment import Fragment
from tsjit.ops.gemm_cluster import cluster_arguments
from tsjit.ops.gemm_deferred import gemm_deferred
from tsjit.ops.gemm_program import (K_STEPS, LOAD_REGISTERS, MMA_REGISTERS, SWIZZLE_BYTES, WARPGROUP, OperandRing,
                                    OutputTile, compile_program, gemm_program, k_tile_elements, mainloop_schedules,
                                    threads_per_cta)
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

LANES = 2                         # consumer warpgroups, each with its own half of every tile, ring and loader
THREADS = WARPGROUP * (1 + LANES)
LANE_ROWS = 64                    # rows of a lane's half: one warpgroup's m64 wgmma
BLOCK_M = LANES * LANE_ROWS       # rows of a work tile


@dataclass(kw_only=True)
class PingpongRing(OperandRing):
    """One lane's TMA ring of its 64-row X tiles and the Y tiles (``block_m`` = 64 of a
    ``lanes * 64``-row work tile), consumed by one MMA warpgroup; adds the works that take and pass
    that warpgroup's turn at the tensor cores."""

    def operand_tiles(self, stage, warpgroup):
        """The stage's whole X tile (the lane's warpgroup owns all 64 rows) and its Y tile."""
        return self.x_tiles[stage, 0], self.x_major, self.y_tiles[stage], self.y_major

    @ts.consumer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def start_turns(self, stage_info):
        """Once per CTA, before the work tile loop: warpgroup 1 gives warpgroup 0 the first turn."""
        if tsjit.warp_idx() // 4 == 2:
            turns.give_first_turn()

    @ts.consumer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def take_turn(self, stage_info):
        """Before the tile's first MMA: wait for this warpgroup's turn."""
        turns.take_turn(tsjit.warp_idx() // 4 - 1)

    @ts.consumer_work(work_attrs=ts.WorkAttr.AUXILIARY)
    def pass_turn(self, stage_info):
        """After the tile's last MMA is issued (still in flight): the other warpgroup's turn."""
        turns.pass_turn(tsjit.warp_idx() // 4 - 1)


@dataclass(kw_only=True)
class SharedPingpongRing(PingpongRing):
    """The shared-ring ping-pong: one TMA ring (``sequential_lanes``) whose domain walks the K tiles of
    the work tile's half 0, then of half 1, consumed by both MMA warpgroups (each stage's release
    counts both).  A half is ``block_m`` = 64 or 128 rows (one or two m64 wgmmas per K step, into a
    ``block_m / 64 * block_n / 2``-register accumulator).  Warpgroup ``w`` multiplies only the stages
    of half ``w`` (``w * k_tiles <= j < (w + 1) * k_tiles``), taking its turn before the first and
    passing it after the last; the other stages it only waits for and releases."""

    lag: int = 1

    def __post_init__(self):
        super().__post_init__()
        registers = self.block_m // 64 * self.block_n // 2
        self.acc = ts.TaskLocalVariable(Fragment, default_factory=lambda: Fragment.zeros(registers),
                                        docs="the warpgroup's half-tile fp32 accumulator")

    @ts.consumer_work(returns="acc", work_attrs=ts.WorkAttr.AUXILIARY)
    def zero_accumulator(self, stage_info):
        return Fragment.zeros(self.block_m // 64 * self.block_n // 2)

    @ts.consumer_work(returns="acc")
    def mma(self, stage_info, acc):
        """Stage ``j`` of the tile: the owner issues its wgmmas (BK / 16 per 64-row fragment); both
        warpgroups then commit (an empty group for the other) and ``wait_group(lag)``, so the owner's
        stage ``j - lag``, and after its half the half's last stages, have retired before the schedule
        releases them.  The commit and wait are unconditional: the checker (async_reads) counts only
        those."""
        warpgroup = tsjit.warp_idx() // 4 - 1
        j = stage_info.loop_offset
        first = warpgroup * self.k_tiles
        if (j >= first) & (j < first + self.k_tiles):
            if j == first:
                turns.take_turn(warpgroup)
            stage = stage_info.stage_idx
            y_desc = wgmma.make_descriptor(self.y_tiles[stage], major=self.y_major, swizzle="128B")
            width = self.block_n // 2
            parts = []
            wgmma.fence()
            for g in tsjit.range_constexpr(self.block_m // 64):
                x_desc = wgmma.make_descriptor(self.x_tiles[stage, g], major=self.x_major, swizzle="128B")
                part = Fragment(acc[g * width:(g + 1) * width])
                for k in tsjit.range_constexpr(K_STEPS):
                    part = wgmma.mma_async(part, x_desc.k_step(k), y_desc.k_step(k), n=self.block_n)
                parts.extend(list(part))
            acc = Fragment(parts)
        wgmma.commit_group()
        wgmma.wait_group(self.lag)
        if j == first + self.k_tiles - 1:
            turns.pass_turn(warpgroup)   # the half's last MMA group is still in flight
        return acc


def pingpong_program(x_map, y_map, c, c_map, operands, M, N, K, batch, BM, BN, STAGES, X_MAJOR, Y_MAJOR, EPILOGUE,
                     STAGED, BATCHED, GROUP_M, FUSED, shared_ring, lag=1):
    """Build and run (at compile time, inside a kernel) the verified TaskManager of a ping-pong
    program: a ring per warpgroup (``shared_ring`` False, :func:`gemm_pingpong`) or one shared ring
    (:func:`gemm_pingpong_shared`)."""
    half = BM // LANES                 # rows of a lane's half of the work tile
    tiles_m = (M + BM - 1) // BM
    tiles_n = (N + BN - 1) // BN
    bk = k_tile_elements(x_map.dtype)
    k_tiles = (K + bk - 1) // bk
    queue_config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles_m, tiles_n, batch, order="grouped", group_size_m=GROUP_M)
    wq = WorkQueue(name="tiles", tile_scheduler_config=queue_config)
    stage_bytes = (half + BN) * SWIZZLE_BYTES
    producer = ts.CooperativeGroup(ts.Agent.Thread, 1)
    out = OutputTile(name="d", c=c, c_map=c_map, block_m=BM, block_n=BN, rows=M, cols=N, fused=FUSED,
                     operands=operands, mode=EPILOGUE, batched=BATCHED, staged_columns=STAGED, warpgroup_rows=half)
    ring_options = dict(x_map=x_map, y_map=y_map, block_m=half, block_n=BN, x_major=X_MAJOR, y_major=Y_MAJOR,
                        batched=BATCHED, k_tiles=k_tiles, lanes=LANES)
    if shared_ring:
        cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
            STAGES, stage_bytes, producer, ts.CooperativeGroup(ts.Agent.Thread, 4 * LANES), advance_on_wait=True)
        ring = SharedPingpongRing(name="xy", pipeline_config=cfg, sequential_lanes=True, lag=lag, **ring_options)
        load_schedule, idle_schedule, mma_schedule = mainloop_schedules(LANES * k_tiles, turns="mma", lag=lag)
        tasks = [ts.Task("load", [wq], [ring], warp_idx=0, num_warps=1, schedule=load_schedule(wq, ring),
                         num_registers=LOAD_REGISTERS),
                 ts.Task("idle", [wq], [], warp_idx=1, num_warps=3, schedule=idle_schedule(wq),
                         num_registers=LOAD_REGISTERS),
                 ts.Task("mma", [wq, ring], [out], warp_idx=4, num_warps=4 * LANES,
                         schedule=mma_schedule(wq, ring, out), num_registers=MMA_REGISTERS)]
        graph = {ring: [wq], out: [ring]}
    else:
        consumer = ts.CooperativeGroup(ts.Agent.Thread, 4)
        cfg0 = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, stage_bytes, producer, consumer,
                                                               advance_on_wait=True)
        cfg1 = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, stage_bytes, producer, consumer,
                                                               advance_on_wait=True)
        ring0 = PingpongRing(name="xy0", pipeline_config=cfg0, lane=0, **ring_options)
        ring1 = PingpongRing(name="xy1", pipeline_config=cfg1, lane=1, **ring_options)
        load_schedule, idle_schedule, mma_schedule = mainloop_schedules(k_tiles, turns="tile")
        tasks = [ts.Task("load0", [wq], [ring0], warp_idx=0, num_warps=1, schedule=load_schedule(wq, ring0),
                         num_registers=LOAD_REGISTERS),
                 ts.Task("load1", [wq], [ring1], warp_idx=1, num_warps=1, schedule=load_schedule(wq, ring1),
                         num_registers=LOAD_REGISTERS),
                 ts.Task("idle", [wq], [], warp_idx=2, num_warps=2, schedule=idle_schedule(wq),
                         num_registers=LOAD_REGISTERS),
                 ts.Task("mma0", [wq, ring0], [out], warp_idx=4, num_warps=4, schedule=mma_schedule(wq, ring0, out),
                         num_registers=MMA_REGISTERS),
                 ts.Task("mma1", [wq, ring1], [out], warp_idx=8, num_warps=4, schedule=mma_schedule(wq, ring1, out),
                         num_registers=MMA_REGISTERS)]
        graph = {ring0: [wq], ring1: [wq], out: [ring0, ring1]}
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def _check_tile(name, BM, BN, SPLITS, shared):
    halves = (BLOCK_M, 2 * BLOCK_M) if shared else (BLOCK_M,)
    if BM not in halves or (BM > BLOCK_M and BN > 128):
        raise tsjit.CompilationError(f"{name}: BM is {BM} with BN {BN}; a ping-pong work tile is {LANES} "
                                     f"warpgroups' halves of {LANE_ROWS} rows (BM={BLOCK_M})"
                                     + (f" or of 128 rows with BN <= 128 (BM={2 * BLOCK_M})" if shared else "")
                                     + ": pass one of those")
    if SPLITS != 1:
        raise tsjit.CompilationError(f"{name}: SPLITS is {SPLITS}; ping-pong has no split-K: use "
                                     f"tsjit.ops.gemm_program.gemm_program for split-K")


@tsjit.kernel
def gemm_pingpong(x_map, y_map, c, c_map, bias, residual, workspace, counters, scale_x, scale_y, M, N, K, batch,
                  alpha: tsjit.Float32, beta: tsjit.Float32,
                  BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                  X_MAJOR: tsjit.Constexpr[str], Y_MAJOR: tsjit.Constexpr[str], EPILOGUE: tsjit.Constexpr[str],
                  STAGED: tsjit.Constexpr[int], SPLITS: tsjit.Constexpr[int], BATCHED: tsjit.Constexpr[bool],
                  GROUP_M: tsjit.Constexpr[int], FUSED: tsjit.Constexpr[object]):
    """D (M, N) = X (M, K) @ Y (K, N) with ping-pong consumers, a TMA ring per warpgroup (module
    docstring); the arguments are :func:`~tsjit.ops.gemm_program.gemm_program`'s.  ``BM`` must be
    128 (two 64-row halves, one per warpgroup) and ``SPLITS`` 1.  Launch with ``block = 384``
    threads and a persistent grid of at most ``ceil(M / 128) * ceil(N / BN) * batch`` CTAs
    (``workspace`` / ``counters`` are not read); ``STAGES`` is each ring's depth."""
    _check_tile("gemm_pingpong", BM, BN, SPLITS, False)
    pingpong_program(x_map, y_map, c, c_map, (bias, residual, c, alpha, beta, scale_x, scale_y), M, N, K, batch, BM,
                     BN, STAGES, X_MAJOR, Y_MAJOR, EPILOGUE, STAGED, BATCHED, GROUP_M, FUSED, False)


@tsjit.kernel
def gemm_pingpong_shared(x_map, y_map, c, c_map, bias, residual, workspace, counters, scale_x, scale_y, M, N, K,
                         batch, alpha: tsjit.Float32, beta: tsjit.Float32,
                         BM: tsjit.Constexpr[int], BN: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int],
                         X_MAJOR: tsjit.Constexpr[str], Y_MAJOR: tsjit.Constexpr[str],
                         EPILOGUE: tsjit.Constexpr[str], STAGED: tsjit.Constexpr[int], SPLITS: tsjit.Constexpr[int],
                         BATCHED: tsjit.Constexpr[bool], GROUP_M: tsjit.Constexpr[int],
                         FUSED: tsjit.Constexpr[object], LAG: tsjit.Constexpr[int]):
    """:func:`gemm_pingpong` with one TMA ring shared by both warpgroups (:class:`SharedPingpongRing`):
    the active warpgroup sees the whole ring's depth (``STAGES``), the other one's epilogue runs
    under its last ``STAGES`` K tiles.  ``LAG`` (1 or 2): wgmma groups kept in flight (the release
    trails the wait by as many stages)."""
    _check_tile("gemm_pingpong_shared", BM, BN, SPLITS, True)
    if LAG not in (1, 2):
        raise tsjit.CompilationError(f"gemm_pingpong_shared: LAG is {LAG}; pass 1 or 2 (wgmma groups in flight)")
    pingpong_program(x_map, y_map, c, c_map, (bias, residual, c, alpha, beta, scale_x, scale_y), M, N, K, batch, BM,
                     BN, STAGES, X_MAJOR, Y_MAJOR, EPILOGUE, STAGED, BATCHED, GROUP_M, FUSED, True, LAG)


def kernel_for(config):
    """The kernel that runs a :class:`~tsjit.ops.configs.GemmConfig`: :func:`gemm_pingpong` for
    ``schedule="pingpong"``, :func:`gemm_pingpong_shared` for ``"pingpong-shared"``,
    :func:`tsjit.ops.gemm_deferred.gemm_deferred` for ``"deferred"``, else the cooperative
    :func:`~tsjit.ops.gemm_program.gemm_program`."""
    return {"pingpong": gemm_pingpong, "pingpong-shared": gemm_pingpong_shared,
            "deferred": gemm_deferred}.get(config.schedule, gemm_program)


def threads_for(config) -> int:
    """Threads per CTA of :func:`kernel_for` ``(config)``."""
    return THREADS if config.schedule.startswith("pingpong") else threads_per_cta(config.block_m)


def extra_arguments(config) -> tuple:
    """The arguments :func:`kernel_for` ``(config)`` takes after :func:`~tsjit.ops.gemm_program.gemm_program`'s:
    ``(LAG,)`` for the shared-ring ping-pong, ``(X_POLICY, Y_POLICY)`` for a cooperative configuration with L2
    eviction priorities, ``(X_POLICY, Y_POLICY, CLUSTER, SHARE)`` for a 2-CTA cluster
    (:func:`~tsjit.ops.gemm_cluster.cluster_arguments`)."""
    if config.schedule == "pingpong-shared":
        return (config.mma_lag,)
    if config.schedule == "cooperative" and (config.cluster_m > 1 or config.cluster_n > 1):
        return cluster_arguments(config)
    if config.schedule == "cooperative" and (config.x_policy or config.y_policy):
        return (config.x_policy, config.y_policy)
    return ()


def compile_config(config, **options):
    """:func:`~tsjit.ops.gemm_program.compile_program` of :func:`kernel_for` ``(config)`` (same options)."""
    return compile_program(config, kernel=kernel_for(config), extra=extra_arguments(config), **options)
