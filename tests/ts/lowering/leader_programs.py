"""Two 2-CTA cluster copies through a TmaAsync ring with ``SignalingThreads.CtaLeader`` (issue 12 §2), for
the compile and GPU tests of :mod:`.test_cta_leader`.

``leader_consumer_copy`` (the CUTLASS split-load pattern): each tile has ``2 * BOX_M`` rows; CTA ``r`` of a
cluster TMA-loads rows ``[r * BOX_M, (r + 1) * BOX_M)`` into the *leader's* stage (``multicast_mask=1``: the
copy lands at the same offset in CTA 0 and signals CTA 0's full barrier); only the leader arms that barrier,
with both CTAs' bytes (``num_bytes_per_warp_per_cta`` x 2).  The consumer task runs on the leader only
(``run_only_on_cta_id=0``), writes the whole tile and releases it to both CTAs' empty barriers.

``leader_producer_copy``: only the leader's producer runs; it multicasts each tile to both CTAs and arms
both CTAs' full barriers (remote ``arrive.expect_tx``).  Every CTA's consumer writes its copy into
``dst[rank]`` and releases to the leader's empty barrier (leader-routed arrivals, 2 x 128 per stage).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts

STORE_WARPS = 4


@dataclass(kw_only=True)
class SplitTiles(ts.MemoryResource):
    """A ring of ``(2, BOX_M, BOX_N)`` stages; part ``r`` is loaded by cluster CTA ``r`` into the leader."""

    src_map: object
    box_m: int
    box_n: int
    parts: int
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        self.tiles = tsjit.shared_array(self.src_map.dtype, (stages, self.parts, self.box_m, self.box_n),
                                        align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="ring stage holding the tile")

    def tma_bytes_per_stage(self):
        """One box per loading CTA lands in a stage: ``parts`` boxes."""
        return self.parts * self.box_m * self.box_n * self.src_map.dtype.itemsize

    @ts.producer_work()
    def load(self, stage_info):
        """``parts == 2``: this CTA's part of the tile, into the leader's stage (multicast to rank 0);
        ``parts == 1``: the whole tile, multicast to both CTAs (the leader producer)."""
        if tsjit.const_expr(self.parts == 2):
            rank = tsjit.cluster_ctarank()
            row = stage_info.loop_offset * (self.parts * self.box_m) + rank * self.box_m
            tile, mask = self.tiles[stage_info.stage_idx][rank], 1
        else:
            row = stage_info.loop_offset * self.box_m
            tile, mask = self.tiles[stage_info.stage_idx][0], 3
        if tsjit.elect_one():
            tsjit.tma_load(self.src_map, tile, stage_info.barrier, (row, 0), multicast_mask=mask)

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class RowsOut(ts.MemoryResource):
    """The destination: ``rows`` rows of one staged tile per domain index, at ``dst[plane]``."""

    dst: object
    smem: object
    rows: int
    first_thread: int

    @ts.producer_work()
    def store(self, stage_info, stage):
        n = self.smem.box_n
        row0 = stage_info.loop_offset * self.rows
        tile = self.smem.tiles[stage]
        plane = tsjit.cluster_ctarank() if tsjit.const_expr(len(self.dst.shape) == 3) else 0
        for i in range(tsjit.thread_idx().x - self.first_thread, self.rows * n, STORE_WARPS * 32):
            r = i // n
            if tsjit.const_expr(len(self.dst.shape) == 3):
                self.dst[plane, row0 + r, i % n] = tile[r // self.smem.box_m][r % self.smem.box_m][i % n]
            else:
                self.dst[row0 + r, i % n] = tile[r // self.smem.box_m][r % self.smem.box_m][i % n]


def _copy(smem, out, num_tiles, load_on, store_on):
    """The two tasks over the ring (load: warp 0, store: warps 1-4), each domain index one tile, cluster
    ``blockIdx.x // 2`` taking tiles ``c, c + gridDim.x // 2, ...``; ``*_on``: ``run_only_on_cta_id``."""
    first, step = tsjit.block_idx().x // 2, tsjit.grid_dim().x // 2

    @ts.schedule
    def load_schedule(s: SplitTiles):
        with ts.domain_loop(first, num_tiles, step):
            s.acquire()
            s.load()
            s.commit()

    @ts.schedule
    def store_schedule(s: SplitTiles, o: RowsOut):
        with ts.domain_loop(first, num_tiles, step):
            s.wait()
            stage = s.read()
            o.store(stage)
            s.release()

    load = ts.Task("load", [], [smem], warp_idx=0, num_warps=1, schedule=load_schedule(smem),
                   run_only_on_cta_id=load_on)
    store = ts.Task("store", [smem], [out], warp_idx=1, num_warps=STORE_WARPS, schedule=store_schedule(smem, out),
                    run_only_on_cta_id=store_on)
    manager = ts.TaskManager([load, store], {out: [smem]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def leader_consumer_copy(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
                         STAGES: tsjit.Constexpr[int]):
    """dst = src, tiles of 2 * BOX_M rows (see the module docstring); block 160 threads, cluster 2."""
    box_bytes = BOX_M * BOX_N * src_map.dtype.itemsize
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, 2 * box_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 32), cta_layout_vmnk=(1, 2, 1, 1),
        consumer_signaling_threads=ts.SignalingThreads.CtaLeader, num_bytes_per_warp_per_cta=box_bytes)
    smem = SplitTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N, parts=2)
    _copy(smem, RowsOut(name="out", dst=dst, smem=smem, rows=2 * BOX_M, first_thread=32), num_tiles, None, 0)


@tsjit.kernel
def leader_producer_copy(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
                         STAGES: tsjit.Constexpr[int]):
    """dst[r] = src for both CTAs r of each cluster, tiles of BOX_M rows loaded by the leader only."""
    box_bytes = BOX_M * BOX_N * src_map.dtype.itemsize
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, box_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 32), cta_layout_vmnk=(1, 2, 1, 1),
        producer_signaling_threads=ts.SignalingThreads.CtaLeader)
    smem = SplitTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N, parts=1)
    _copy(smem, RowsOut(name="out", dst=dst, smem=smem, rows=BOX_M, first_thread=32), num_tiles, 0, None)


def specs(rows: int, cols: int, box_m: int, leader_producer: bool):
    """(src map spec, dst spec) for compiling without a GPU."""
    src = tsjit.tensormap_spec(tsjit.Float32, (box_m, cols))
    dst = tsjit.spec((2, rows, cols) if leader_producer else (rows, cols), tsjit.Float32)
    return src, dst


def run(rows: int, cols: int, box_m: int, stages: int, clusters: int, leader_producer: bool, rng=None):
    """Copy a fresh random ``(rows, cols)`` float32 matrix on the device (the GPU, or the CPU interpreter with
    ``TSJIT_INTERPRET=1``); returns (result, expected).  ``rows`` must be a multiple of the tile (``2 * box_m``
    rows, or ``box_m`` for the producer variant)."""
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    src = tsjit.to_device(a)
    src_map = tsjit.TensorMap(src, (box_m, cols))
    if leader_producer:
        dst = tsjit.empty((2, rows, cols), tsjit.Float32).fill_bytes(0xFF)
        leader_producer_copy[(2 * clusters,), (32 * (1 + STORE_WARPS),)](src_map, dst, rows // box_m, box_m, cols,
                                                                          stages)
        return dst.numpy(), np.stack([a, a])
    dst = tsjit.empty((rows, cols), tsjit.Float32).fill_bytes(0xFF)
    leader_consumer_copy[(2 * clusters,), (32 * (1 + STORE_WARPS),)](src_map, dst, rows // (2 * box_m), box_m, cols,
                                                                      stages)
    return dst.numpy(), a
