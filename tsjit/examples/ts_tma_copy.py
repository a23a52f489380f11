"""Task Scheduling tutorial 2: a 2-D copy staged through shared memory by TMA.

One TMA-load warp (task ``load``) fills a ring of ``STAGES`` shared-memory tiles through a
TmaAsync pipeline (``try_acquire``, ``acquire``, TMA copy signalling the stage's full
barrier, ``commit``); four store warps (task ``store``) ``try_wait``/``wait`` for a tile,
write it to global memory with bounds masks (shapes need not be multiples of the tile),
and ``release`` it.  Each CTA walks tiles ``blockIdx.x, blockIdx.x + gridDim.x, ...``.
The TaskManager verifies the program before any code is emitted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts

LOAD_WARPS, STORE_WARPS = 1, 4


@dataclass(kw_only=True)
class SmemTiles(ts.MemoryResource):
    """A ring of shared-memory tiles filled by TMA; consumer work hands out the stage index."""

    src_map: object
    box_m: int
    box_n: int
    tiles_n: object
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        self.tiles = tsjit.shared_array(self.src_map.dtype, (stages, self.box_m, self.box_n), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="ring stage holding the tile")

    @ts.producer_work()
    def tma_load(self, stage_info):
        tile = stage_info.loop_offset
        row = tile // self.tiles_n * self.box_m
        col = tile % self.tiles_n * self.box_n
        if tsjit.elect_one():
            tsjit.tma_load(self.src_map, self.tiles[stage_info.stage_idx], stage_info.barrier, (row, col))

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class GmemTiles(ts.MemoryResource):
    """The destination matrix; producer work copies one staged tile out with bounds masks."""

    dst: object
    smem: object
    first_thread: int

    @ts.producer_work()
    def store(self, stage_info, stage):
        box_m, box_n = self.smem.box_m, self.smem.box_n
        tile = stage_info.loop_offset
        row0 = tile // self.smem.tiles_n * box_m
        col0 = tile % self.smem.tiles_n * box_n
        tile_smem = self.smem.tiles[stage]
        for i in range(tsjit.thread_idx().x - self.first_thread, box_m * box_n, STORE_WARPS * 32):
            r = i // box_n
            c = i % box_n
            if row0 + r < self.dst.shape[0] and col0 + c < self.dst.shape[1]:
                self.dst[row0 + r, col0 + c] = tile_smem[r, c]


@tsjit.kernel
def tma_copy_ts(src_map, dst, num_tiles, tiles_n, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
                STAGES: tsjit.Constexpr[int]):
    """dst = src through shared memory; block = (LOAD_WARPS + STORE_WARPS) * 32 threads."""
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, BOX_M * BOX_N * src_map.dtype.itemsize,
        ts.CooperativeGroup(ts.Agent.Thread, LOAD_WARPS),          # one elected lane per load warp arms
        ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 32))    # every store thread releases
    smem = SmemTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N,
                     tiles_n=tiles_n)
    gmem = GmemTiles(name="gmem", dst=dst, smem=smem, first_thread=LOAD_WARPS * 32)
    bx = tsjit.block_idx().x
    gx = tsjit.grid_dim().x

    @ts.schedule
    def load_schedule(s: SmemTiles):
        with ts.domain_loop(bx, num_tiles, gx):
            s.try_acquire()
            s.acquire()
            s.tma_load()
            s.commit()

    @ts.schedule
    def store_schedule(s: SmemTiles, g: GmemTiles):
        with ts.domain_loop(bx, num_tiles, gx):
            s.try_wait()
            s.wait()
            stage = s.read()
            g.store(stage)
            s.release()

    load = ts.Task("load", [], [smem], warp_idx=0, num_warps=LOAD_WARPS, schedule=load_schedule(smem))
    store = ts.Task("store", [smem], [gmem], warp_idx=LOAD_WARPS, num_warps=STORE_WARPS,
                    schedule=store_schedule(smem, gmem))
    manager = ts.TaskManager([load, store], {gmem: [smem]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def run_tma_copy_ts(M: int, N: int, box=(64, 64), stages: int = 4, blocks: int = 132, dtype=np.float32, rng=None):
    """Copy a fresh random (M, N) matrix; returns (result, expected)."""
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((M, N)).astype(dtype)
    src = tsjit.to_device(a)
    dst = tsjit.empty((M, N), tsjit.Float32 if dtype == np.float32 else tsjit.Float16).fill_bytes(0xFF)
    tiles_m, tiles_n = -(-M // box[0]), -(-N // box[1])
    src_map = tsjit.TensorMap(src, box)
    tma_copy_ts[(min(blocks, tiles_m * tiles_n),), ((LOAD_WARPS + STORE_WARPS) * 32,)](
        src_map, dst, tiles_m * tiles_n, tiles_n, box[0], box[1], stages)
    return dst.numpy(), a


def demo_compile_targets():
    spec = tsjit.tensormap_spec(tsjit.Float32, (64, 64))
    return [("TS TMA copy (tutorial 2, 4 stages)", tma_copy_ts,
             (spec, np.zeros((256, 256), np.float32), 16, 4, 64, 64, 4))]


def demo_gpu_checks():
    return [("TS TMA copy 1000x780 fp32, 64x64 box, 4 stages", lambda: run_tma_copy_ts(1000, 780), 0)]


# -- bandwidth variant: TMA load -> shared ring -> TMA store (one warp each) ---------------------
@dataclass(kw_only=True)
class TmaStoreDest(ts.MemoryResource):
    """The destination written by TMA stores straight from the ring's tiles."""

    dst_map: object
    smem: object
    in_flight: int = 1

    @ts.producer_work()
    def tma_store(self, stage_info, stage):
        tile = stage_info.loop_offset
        row = tile // self.smem.tiles_n * self.smem.box_m
        col = tile % self.smem.tiles_n * self.smem.box_n
        if tsjit.elect_one():
            tsjit.tma_store(self.dst_map, self.smem.tiles[stage], (row, col))
            tsjit.bulk_commit_group()
            # keep `in_flight` stores in flight: older stages have been read once this returns
            tsjit.bulk_wait_group(self.in_flight, read=True)
        tsjit.syncwarp()

    @ts.producer_work()
    def drain(self, stage_info):
        if tsjit.elect_one():
            tsjit.bulk_wait_group(0, read=True)
        tsjit.syncwarp()


@tsjit.kernel
def tma_copy_bw(src_map, dst_map, num_tiles, tiles_n, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
                STAGES: tsjit.Constexpr[int], IN_FLIGHT: tsjit.Constexpr[int] = 1):
    """dst = src with TMA in both directions; block = 64 threads (a load warp and a store warp).
    Up to IN_FLIGHT TMA stores overlap (every CTA must own at least IN_FLIGHT tiles)."""
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, BOX_M * BOX_N * src_map.dtype.itemsize,
        ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 1), advance_on_wait=True)
    smem = SmemTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N, tiles_n=tiles_n)
    out = TmaStoreDest(name="out", dst_map=dst_map, smem=smem, in_flight=IN_FLIGHT)
    bx = tsjit.block_idx().x
    gx = tsjit.grid_dim().x

    @ts.schedule
    def load_schedule(s: SmemTiles):
        with ts.domain_loop(bx, num_tiles, gx):
            s.acquire()
            s.tma_load()
            s.commit()

    @ts.schedule
    def store_schedule(s: SmemTiles, o: TmaStoreDest):
        # Stores overlap: iteration i releases the stage of iteration i - IN_FLIGHT (advance_on_wait keeps
        # a lagging release cursor); the Tail drains the last stores and releases their stages.
        with ts.domain_loop(bx, num_tiles, gx) as d:
            s.wait()
            stage = s.read()
            o.tma_store(stage)
            with d.every(1, start=IN_FLIGHT):
                s.release()
        o.drain()
        for _ in range(IN_FLIGHT):   # every CTA owns >= IN_FLIGHT tiles (the launcher sizes the grid)
            s.release()

    load = ts.Task("load", [], [smem], warp_idx=0, num_warps=1, schedule=load_schedule(smem))
    store = ts.Task("store", [smem], [out], warp_idx=1, num_warps=1, schedule=store_schedule(smem, out))
    # Every CTA owns >= IN_FLIGHT tiles (the launcher guarantees it): simulate that many iterations of
    # the run-time domain so the checks see the lagging releases balance.
    manager = ts.TaskManager([load, store], {out: [smem]}, verbose=False, dynamic_trip_count=max(2, IN_FLIGHT + 1))
    manager.setup_resources_and_tasks()
    manager.run()


def make_tma_copy_bw(src, dst, box=(32, 256), stages: int = 4, blocks: int | None = None, stream=None,
                     in_flight: int = 1):
    """A launcher copying device matrix ``src`` into ``dst`` (same 2-D shape) with :func:`tma_copy_bw`;
    the TensorMaps are encoded once.  The grid is capped so every CTA owns >= ``in_flight`` tiles."""
    M, N = src.shape
    tiles_m, tiles_n = -(-M // box[0]), -(-N // box[1])
    num_tiles = tiles_m * tiles_n
    if in_flight >= stages:
        raise ValueError(f"in_flight ({in_flight}) must be smaller than stages ({stages})")
    src_map, dst_map = tsjit.TensorMap(src, box), tsjit.TensorMap(dst, box)
    grid = max(1, min(blocks or num_tiles, num_tiles // in_flight))
    if num_tiles < in_flight:
        in_flight = 1
    launch = tma_copy_bw[(grid,), (64,)]
    return lambda: launch(src_map, dst_map, num_tiles, tiles_n, box[0], box[1], stages, in_flight, stream=stream)


def launch_tma_copy_bw(src, dst, box=(32, 256), stages: int = 4, blocks: int | None = None, stream=None,
                       in_flight: int = 1):
    """Copy ``src`` into ``dst`` once (see :func:`make_tma_copy_bw`)."""
    make_tma_copy_bw(src, dst, box, stages, blocks, stream, in_flight)()
