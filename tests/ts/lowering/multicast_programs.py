"""A 2-CTA cluster copy through a TmaAsync ring under TMA multicast (``mcast_mode_mn=(1, 0)``), for
the compile and GPU tests of the multicast-peer release (issue 12 §2).

Each tile has ``2 * BOX_M`` rows.  CTA ``r`` of the cluster TMA-loads rows ``[r BOX_M, (r + 1) BOX_M)``
of the tile and multicasts them to both CTAs (``multicast_mask=0b11``): the box lands at part ``r`` of
the stage in both CTAs and signals each CTA's own full barrier, which each CTA arms with both parts'
bytes.  Every CTA's consumer warps then write the whole tile into ``dst[rank]`` and release the stage
to the CTAs whose copies filled it: lane ``j < 2`` of each consumer warp arrives on the empty barrier
of multicast peer ``j`` (``mapa`` + remote arrive), so the empty barriers expect ``warps x 2``
arrivals and a CTA's producer may refill a stage only when both CTAs have read it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts

from .leader_programs import RowsOut

STORE_WARPS = 4
THREADS = 32 * (1 + STORE_WARPS)


@dataclass(kw_only=True)
class MulticastTiles(ts.MemoryResource):
    """A ring of ``(2, BOX_M, BOX_N)`` stages; part ``r`` is loaded by cluster CTA ``r`` into both CTAs."""

    src_map: object
    box_m: int
    box_n: int
    parts: int = 2
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        self.tiles = tsjit.shared_array(self.src_map.dtype, (stages, 2, self.box_m, self.box_n), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="ring stage holding the tile")

    def tma_bytes_per_stage(self):
        """Both CTAs' boxes land in each CTA's stage."""
        return 2 * self.box_m * self.box_n * self.src_map.dtype.itemsize

    @ts.producer_work()
    def load(self, stage_info):
        rank = tsjit.cluster_ctarank()
        row = stage_info.loop_offset * (2 * self.box_m) + rank * self.box_m
        if tsjit.elect_one():
            tsjit.tma_load(self.src_map, self.tiles[stage_info.stage_idx][rank], stage_info.barrier, (row, 0),
                           multicast_mask=3)

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@tsjit.kernel
def multicast_copy(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
                   STAGES: tsjit.Constexpr[int]):
    """dst[r] = src for both CTAs r of each cluster (see the module docstring); block 160, cluster 2."""
    box_bytes = BOX_M * BOX_N * src_map.dtype.itemsize
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, 2 * box_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 2), cta_layout_vmnk=(1, 2, 1, 1), mcast_mode_mn=(1, 0))
    smem = MulticastTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N)
    out = RowsOut(name="out", dst=dst, smem=smem, rows=2 * BOX_M, first_thread=32)
    first, step = tsjit.block_idx().x // 2, tsjit.grid_dim().x // 2

    @ts.schedule
    def load_schedule(s: MulticastTiles):
        with ts.domain_loop(first, num_tiles, step):
            s.acquire()
            s.load()
            s.commit()

    @ts.schedule
    def store_schedule(s: MulticastTiles, o: RowsOut):
        with ts.domain_loop(first, num_tiles, step):
            s.wait()
            stage = s.read()
            o.store(stage)
            s.release()

    load = ts.Task("load", [], [smem], warp_idx=0, num_warps=1, schedule=load_schedule(smem))
    store = ts.Task("store", [smem], [out], warp_idx=1, num_warps=STORE_WARPS, schedule=store_schedule(smem, out))
    manager = ts.TaskManager([load, store], {out: [smem]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def specs(rows: int, cols: int, box_m: int):
    """(src map spec, dst spec) for compiling without a GPU."""
    return tsjit.tensormap_spec(tsjit.Float32, (box_m, cols)), tsjit.spec((2, rows, cols), tsjit.Float32)


def run(rows: int, cols: int, box_m: int, stages: int, clusters: int, rng=None):
    """Copy a fresh random ``(rows, cols)`` float32 matrix (rows a multiple of ``2 * box_m``) into both
    planes of a poisoned ``(2, rows, cols)`` destination; returns (result, expected)."""
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    src = tsjit.to_device(a)
    dst = tsjit.empty((2, rows, cols), tsjit.Float32).fill_bytes(0xFF)
    multicast_copy[(2 * clusters,), (THREADS,)](tsjit.TensorMap(src, (box_m, cols)), dst, rows // (2 * box_m),
                                                box_m, cols, stages)
    return dst.numpy(), np.stack([a, a])
