"""Persistent scheduling (issue 4, tutorials 3 and 4).

* ``persistent_copy``: a static persistent WorkQueue hands each CTA the tiles ``b, b + gridDim.x, ...``
  of a tile grid deliberately larger than the data ("over-launched" tiles); ``skip_if`` marks the
  tiles past the end and ``wtl.skippable()`` omits their copy, while the queue bookkeeping (wait,
  get_and_advance_work_tile, release) still runs so every CTA terminates.
* ``varlen_copy``: variable-length segments of a packed array are copied into the rows of a
  padded matrix; the domain loop of each tile (one row) ends at that row's length, given per tile
  by ``Task.get_domain`` (a dynamic domain).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue


@dataclass(kw_only=True)
class TileSource(ts.MemoryResource):
    src: object
    tile: int
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(self.src.dtype, default=0)

    @ts.consumer_work(returns="item")
    def load(self, stage_info):
        i = stage_info.work_tile.tile_idx * self.tile + stage_info.loop_offset
        return self.src[i] if i < self.src.shape[0] else self.src.dtype(0)


@dataclass(kw_only=True)
class TileDest(ts.MemoryResource):
    dst: object
    tile: int

    @ts.producer_work()
    def store(self, stage_info, item):
        i = stage_info.work_tile.tile_idx * self.tile + stage_info.loop_offset
        if i < self.dst.shape[0]:
            self.dst[i] = item


@tsjit.kernel
def persistent_copy(src, dst, num_tiles_launched, n, TILE: tsjit.Constexpr[int], WARPS: tsjit.Constexpr[int]):
    """dst[:n] = src[:n]; the queue covers ``num_tiles_launched`` tiles of TILE elements (>= the data)."""
    wq = WorkQueue(name="wq", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        num_tiles_launched))
    source = TileSource(name="source", src=src, tile=TILE)
    dest = TileDest(name="dest", dst=dst, tile=TILE)
    tx = tsjit.thread_idx().x

    def past_the_end(tile):
        return tile.tile_idx * TILE >= n

    @ts.schedule
    def copy_schedule(q: WorkQueue, s: TileSource, d: TileDest):
        with ts.work_tile_loop(q, skip_if=past_the_end) as wtl:
            with wtl.skippable():
                with ts.domain_loop(tx, TILE, WARPS * 32):
                    item = s.load()
                    d.store(item)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    task = ts.Task("copy", [wq, source], [dest], warp_idx=0, num_warps=WARPS,
                   schedule=copy_schedule(wq, source, dest))
    manager = ts.TaskManager([task], {dest: [source, wq]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def run_persistent_copy(n: int, tile: int = 2048, extra_tiles: int = 37, blocks: int = 40, warps: int = 4, rng=None):
    rng = rng or np.random.default_rng()
    src = rng.standard_normal(max(n, 1)).astype(np.float32)[:n]
    dst = tsjit.empty(max(n, 1), tsjit.Float32).fill_bytes(0xFF)
    d_src = tsjit.to_device(src) if n else tsjit.empty(1, tsjit.Float32)
    tiles = -(-n // tile) + extra_tiles
    persistent_copy[(blocks,), (warps * 32,)](d_src, dst, tiles, n, tile, warps)
    got = dst.numpy()
    return got[:n], src, got[n:]


# -- variable-length rows ------------------------------------------------------------------------
@dataclass(kw_only=True)
class PackedSegments(ts.MemoryResource):
    values: object
    offsets: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(self.values.dtype, default=0)

    @ts.consumer_work(returns="item")
    def load(self, stage_info):
        row = stage_info.work_tile.tile_idx
        return self.values[self.offsets[row] + stage_info.loop_offset]


@dataclass(kw_only=True)
class PaddedRows(ts.MemoryResource):
    out: object

    @ts.producer_work()
    def store(self, stage_info, item):
        self.out[stage_info.work_tile.tile_idx, stage_info.loop_offset] = item


class VarlenTask(ts.Task):
    """A task whose domain (the row length) is read per tile: ``offsets[row + 1] - offsets[row]``."""

    offsets = None

    def get_domain(self, tile_coord):
        row = tile_coord[0]
        return self.offsets[row + 1] - self.offsets[row]


@tsjit.kernel
def varlen_copy(values, offsets, out, num_rows, WARPS: tsjit.Constexpr[int]):
    """out[r, :len_r] = values[offsets[r]:offsets[r + 1]]; the padding of ``out`` is left untouched."""
    wq = WorkQueue(name="rows", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        num_rows))
    seg = PackedSegments(name="segments", values=values, offsets=offsets)
    rows = PaddedRows(name="padded", out=out)
    tx = tsjit.thread_idx().x

    @ts.schedule
    def varlen_schedule(q: WorkQueue, s: PackedSegments, d: PaddedRows):
        with ts.work_tile_loop(q):
            with ts.domain_loop(tx, VarlenTask.get_domain, WARPS * 32):
                item = s.load()
                d.store(item)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    task = VarlenTask("varlen", [wq, seg], [rows], warp_idx=0, num_warps=WARPS,
                      schedule=varlen_schedule(wq, seg, rows))
    task.offsets = offsets
    manager = ts.TaskManager([task], {rows: [seg, wq]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def run_varlen_copy(num_rows: int = 300, max_len: int = 1000, blocks: int = 64, warps: int = 4, rng=None):
    rng = rng or np.random.default_rng()
    lengths = rng.integers(0, max_len + 1, size=num_rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = rng.standard_normal(max(int(offsets[-1]), 1)).astype(np.float32)
    out = tsjit.empty((num_rows, max_len), tsjit.Float32).fill_bytes(0xFF)
    varlen_copy[(blocks,), (warps * 32,)](tsjit.to_device(values), tsjit.to_device(offsets), out, num_rows, warps)
    expected = np.full((num_rows, max_len), np.nan, np.float32)
    for r in range(num_rows):
        expected[r, :lengths[r]] = values[offsets[r]:offsets[r + 1]]
    return out.numpy(), expected
