"""Pipeline groups, tutorial 9 (a port of CUTLASS TS tutorial 07/01, sm_90a): a Merge copy.

``z = x + y`` tile by tile, through shared memory.  Two load tasks fill two rings and one store
task drains both, releasing them once:

* ``load_x`` (warp 0): a thread producer (AsyncAsync member ``smem_x``): its 32 threads copy the
  ``BOX_M x BOX_N`` tile of ``x`` into the stage with ordinary loads and stores (zero outside the
  matrix) and every thread arrives on ``smem_x``'s full barrier at ``commit``;
* ``load_y`` (warp 1): a TMA producer (TmaAsync member ``smem_y``, tutorial 2's ``SmemTiles``): one
  elected lane arms the full barrier with the tile's bytes and the TMA copy completes it;
* ``store`` (warps 2-5): waits on both members, writes ``x + y`` with bounds masks, and calls
  ``xy.release()`` once: the Merge group's one shared empty barrier frees the stage for *both*
  producers (the members' consumer cursor is the group's, ``state_src``).

``GROUPED=False`` builds the same program with two separate rings (the store task releases each):
the group saves one empty barrier array, S mbarriers (:func:`barrier_counts` reads them from the PTX).
``FUSED=True`` makes it a FusedMerge: the full barrier is shared too (its count is both producers'
arrivals: 32 threads and one TMA arming lane), the store task waits once, ``xy.wait()``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.examples.ts_tma_copy import SmemTiles   # tutorial 2's TMA-filled ring of tiles

STORE_WARPS = 4
THREADS = (2 + STORE_WARPS) * 32


@dataclass(kw_only=True)
class ThreadTiles(SmemTiles):
    """Tutorial 2's ring of ``box_m x box_n`` tiles, here written by the 32 threads of one warp from the
    plain array ``src_map`` (AsyncAsync: ordinary loads and stores, zero outside the matrix)."""

    @ts.producer_work()
    def fill(self, stage_info):
        tile = stage_info.loop_offset
        row0 = tile // self.tiles_n * self.box_m
        col0 = tile % self.tiles_n * self.box_n
        dst = self.tiles[stage_info.stage_idx]
        x = self.src_map
        for i in range(tsjit.lane_idx(), self.box_m * self.box_n, 32):
            r = i // self.box_n
            c = i % self.box_n
            value = tsjit.Float32(0)
            if row0 + r < x.shape[0] and col0 + c < x.shape[1]:
                value = x[row0 + r, col0 + c]
            dst[r, c] = value


@dataclass(kw_only=True)
class SumOutput(ts.MemoryResource):
    """``z``: the store task writes ``x + y`` of one tile (bounds-masked)."""

    z: object
    xs: object
    ys: object
    first_thread: int

    @ts.producer_work()
    def store(self, stage_info, sx, sy):
        box_m, box_n = self.xs.box_m, self.xs.box_n
        tile = stage_info.loop_offset
        row0 = tile // self.xs.tiles_n * box_m
        col0 = tile % self.xs.tiles_n * box_n
        a = self.xs.tiles[sx]
        b = self.ys.tiles[sy]
        for i in range(tsjit.thread_idx().x - self.first_thread, box_m * box_n, STORE_WARPS * 32):
            r = i // box_n
            c = i % box_n
            if row0 + r < self.z.shape[0] and col0 + c < self.z.shape[1]:
                self.z[row0 + r, col0 + c] = a[r, c] + b[r, c]


@tsjit.kernel
def merge_copy(x, y_map, z, num_tiles, tiles_n, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
               STAGES: tsjit.Constexpr[int], GROUPED: tsjit.Constexpr[bool] = True, FUSED: tsjit.Constexpr[bool] = False):
    """z = x + y (fp32, (M, N)); block = 192 threads; any grid (CTAs stride over the tiles).  ``FUSED``: a
    FusedMerge group (one shared full barrier too: the store task waits once)."""
    consumers = ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 32)      # every store thread releases
    x_cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        STAGES, ts.CooperativeGroup(ts.Agent.Thread, 32), consumers)         # every load_x thread arrives
    y_cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, BOX_M * BOX_N * 4, ts.CooperativeGroup(ts.Agent.Thread, 1), consumers)
    xs = ThreadTiles(name="smem_x", pipeline_config=x_cfg, src_map=x, box_m=BOX_M, box_n=BOX_N, tiles_n=tiles_n)
    ys = SmemTiles(name="smem_y", pipeline_config=y_cfg, src_map=y_map, box_m=BOX_M, box_n=BOX_N, tiles_n=tiles_n)
    out = SumOutput(name="z", z=z, xs=xs, ys=ys, first_thread=64)
    bx, gx = tsjit.block_idx().x, tsjit.grid_dim().x

    @ts.schedule
    def load_x(s: ThreadTiles):
        with ts.domain_loop(bx, num_tiles, gx):
            s.acquire()
            s.fill()
            s.commit()

    @ts.schedule
    def load_y(s: SmemTiles):
        with ts.domain_loop(bx, num_tiles, gx):
            s.acquire()
            s.tma_load()
            s.commit()

    if tsjit.const_expr(GROUPED):
        xy = ts.PipelineGroup("xy", [xs, ys], ts.PipelineGroupMode.FusedMerge if FUSED else ts.PipelineGroupMode.Merge)

        @ts.schedule
        def store(group: ts.PipelineGroup, sx: ThreadTiles, sy: SmemTiles, o: SumOutput):
            with ts.domain_loop(bx, num_tiles, gx):
                if FUSED:
                    group.wait()         # one full barrier: both producers' arrivals and the TMA bytes
                else:
                    sx.wait()
                    sy.wait()
                o.store(sx.read(), sy.read())
                group.release()          # one arrival on the shared empty barrier frees both members

        store_schedule = store(xy, xy.smem_x, xy.smem_y, out)
        load_x_schedule, load_y_schedule = load_x(xy.smem_x), load_y(xy.smem_y)
    else:
        @ts.schedule
        def store(sx: ThreadTiles, sy: SmemTiles, o: SumOutput):
            with ts.domain_loop(bx, num_tiles, gx):
                sx.wait()
                sy.wait()
                o.store(sx.read(), sy.read())
                sx.release()
                sy.release()

        store_schedule = store(xs, ys, out)
        load_x_schedule, load_y_schedule = load_x(xs), load_y(ys)
    tasks = [ts.Task("load_x", [], [xs], warp_idx=0, num_warps=1, schedule=load_x_schedule),
             ts.Task("load_y", [], [ys], warp_idx=1, num_warps=1, schedule=load_y_schedule),
             ts.Task("store", [xs, ys], [out], warp_idx=2, num_warps=STORE_WARPS, schedule=store_schedule)]
    manager = ts.TaskManager(tasks, {out: [xs, ys]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def compile_args(M: int = 1000, N: int = 780, box=(32, 64), stages: int = 4, grouped: bool = True,
                 fused: bool = False):
    """Arguments for ``tsjit.compile(merge_copy, ...)`` without a GPU (numpy / spec stand-ins)."""
    tiles_m, tiles_n = -(-M // box[0]), -(-N // box[1])
    return (np.zeros((M, N), np.float32), tsjit.tensormap_spec(tsjit.Float32, box), np.zeros((M, N), np.float32),
            tiles_m * tiles_n, tiles_n, box[0], box[1], stages, grouped, fused)


def barrier_counts(stages: int = 4, target: str = "sm_90a") -> dict:
    """``{"group": n, "separate": m}``: the mbarriers each variant initialises, counted in its PTX."""
    return {name: tsjit.compile(merge_copy, *compile_args(stages=stages, grouped=grouped),
                                target=target).ptx.count("mbarrier.init")
            for name, grouped in (("group", True), ("separate", False))}


def run_merge_copy(M: int, N: int, box=(32, 64), stages: int = 4, blocks: int = 132, grouped: bool = True,
                   fused: bool = False, rng=None):
    """z = x + y on fresh random fp32 inputs with z poisoned; returns (z, float64 reference)."""
    rng = rng or np.random.default_rng()
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = rng.standard_normal((M, N)).astype(np.float32)
    dy = tsjit.to_device(y)
    z = tsjit.empty((M, N), tsjit.Float32).fill_bytes(0xFF)
    tiles_m, tiles_n = -(-M // box[0]), -(-N // box[1])
    merge_copy[(min(blocks, tiles_m * tiles_n),), (THREADS,)](
        tsjit.to_device(x), tsjit.TensorMap(dy, box), z, tiles_m * tiles_n, tiles_n, box[0], box[1], stages, grouped, fused)
    return z.numpy(), x.astype(np.float64) + y.astype(np.float64)
