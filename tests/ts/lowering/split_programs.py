"""Two TMA producer tasks committing to one ring (issue 12 §2; CUTLASS TS tutorial 04's split A/B loads):
task ``load_a`` copies the top ``BOX_A`` rows of each tile, task ``load_b`` the bottom ``BOX_B`` rows, into the
same stage; each task's warp waits on the stage's empty barrier and arms the full barrier once with exactly
the bytes its own copy brings (``producer_group`` = 2 arming warps; ``tma_bytes_per_stage()`` gives the bytes
of each producer work, :mod:`tsjit.ts.tx_bytes`; ``num_bytes`` is the stage's sum).  Four store warps write
each tile out.  For :mod:`.test_split_producers` (compile, read-back, GPU)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts

STORE_WARPS = 4


@dataclass(kw_only=True)
class SplitStage(ts.MemoryResource):
    """A ring of ``BOX_A + BOX_B``-row stages filled by two TMA descriptors of one matrix."""

    map_a: object
    map_b: object
    box_a: int
    box_b: int
    cols: int
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        stages = self.pipeline_config.num_stages
        self.tiles = tsjit.shared_array(tsjit.Float32, (stages, self.box_a + self.box_b, self.cols), align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="ring stage holding the tile")

    def tma_bytes_per_stage(self):
        """Both tasks' boxes land in one stage: each producer work's bytes."""
        return {"load_a": self.box_a * self.cols * 4, "load_b": self.box_b * self.cols * 4}

    @ts.producer_work()
    def load_a(self, stage_info):
        row = stage_info.loop_offset * (self.box_a + self.box_b)
        if tsjit.elect_one():
            tsjit.tma_load(self.map_a, self.tiles[stage_info.stage_idx], stage_info.barrier, (row, 0))

    @ts.producer_work()
    def load_b(self, stage_info):
        row = stage_info.loop_offset * (self.box_a + self.box_b) + self.box_a
        dst = self.tiles[stage_info.stage_idx].element_pointer((self.box_a, 0))
        if tsjit.elect_one():
            tsjit.tma_load(self.map_b, dst, stage_info.barrier, (row, 0))

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class TileRows(ts.MemoryResource):
    """The destination matrix: one staged tile of ``BOX_A + BOX_B`` rows per domain index."""

    dst: object
    smem: object

    @ts.producer_work()
    def store(self, stage_info, stage):
        rows, n = self.smem.box_a + self.smem.box_b, self.smem.cols
        row0 = stage_info.loop_offset * rows
        tile = self.smem.tiles[stage]
        for i in range(tsjit.thread_idx().x - 64, rows * n, STORE_WARPS * 32):
            self.dst[row0 + i // n, i % n] = tile[i // n, i % n]


@tsjit.kernel
def split_ab_copy(map_a, map_b, dst, num_tiles, BOX_A: tsjit.Constexpr[int], BOX_B: tsjit.Constexpr[int],
                  COLS: tsjit.Constexpr[int], STAGES: tsjit.Constexpr[int]):
    """dst = src through a ring whose stages two TMA tasks fill (see the module docstring); block 192."""
    stage_bytes = (BOX_A + BOX_B) * COLS * 4
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, stage_bytes, ts.CooperativeGroup(ts.Agent.Thread, 2),     # one arming warp per task
        ts.CooperativeGroup(ts.Agent.Thread, STORE_WARPS * 32))
    smem = SplitStage(name="smem", pipeline_config=cfg, map_a=map_a, map_b=map_b, box_a=BOX_A, box_b=BOX_B,
                      cols=COLS)
    out = TileRows(name="out", dst=dst, smem=smem)
    bx, gx = tsjit.block_idx().x, tsjit.grid_dim().x

    @ts.schedule
    def load_a_schedule(s: SplitStage):
        with ts.domain_loop(bx, num_tiles, gx):
            s.acquire()
            s.load_a()
            s.commit()

    @ts.schedule
    def load_b_schedule(s: SplitStage):
        with ts.domain_loop(bx, num_tiles, gx):
            s.acquire()
            s.load_b()
            s.commit()

    @ts.schedule
    def store_schedule(s: SplitStage, o: TileRows):
        with ts.domain_loop(bx, num_tiles, gx):
            s.wait()
            stage = s.read()
            o.store(stage)
            s.release()

    load_a = ts.Task("load_a", [], [smem], warp_idx=0, num_warps=1, schedule=load_a_schedule(smem))
    load_b = ts.Task("load_b", [], [smem], warp_idx=1, num_warps=1, schedule=load_b_schedule(smem))
    store = ts.Task("store", [smem], [out], warp_idx=2, num_warps=STORE_WARPS, schedule=store_schedule(smem, out))
    manager = ts.TaskManager([load_a, load_b, store], {out: [smem]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def specs(rows: int, cols: int, box_a: int, box_b: int):
    return (tsjit.tensormap_spec(tsjit.Float32, (box_a, cols)), tsjit.tensormap_spec(tsjit.Float32, (box_b, cols)),
            tsjit.spec((rows, cols), tsjit.Float32))


def run(rows: int, cols: int, box_a: int, box_b: int, stages: int, blocks: int, rng=None):
    """Copy a fresh random matrix on the device (GPU or CPU interpreter); returns (result, expected).  ``rows`` is
    a multiple of the tile."""
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    src = tsjit.to_device(a)
    dst = tsjit.empty((rows, cols), tsjit.Float32).fill_bytes(0xFF)
    split_ab_copy[(blocks,), (32 * (2 + STORE_WARPS),)](tsjit.TensorMap(src, (box_a, cols)),
                                                         tsjit.TensorMap(src, (box_b, cols)), dst,
                                                         rows // (box_a + box_b), box_a, box_b, cols, stages)
    return dst.numpy(), a
