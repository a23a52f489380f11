"""A well-formed split consumer in a 2-CTA cluster (issue 12 §2): the wait runs on every CTA, the
release on the leader only (``consumer_signaling_threads=CtaLeader``,
``consumer_wait_signaling_threads=All``), for the compile, verify and GPU tests of
:mod:`.test_split_consumer` and :mod:`tests.ts.verify.test_split_consumer`.

Each CTA ``r`` of cluster ``c`` copies tiles of ``BOX_M`` rows: tile ``t`` of the cluster's domain is
rows ``[(2 t + r) BOX_M, (2 t + r + 1) BOX_M)``.

* ``load`` (warp 0, every CTA) TMA-loads its tile into its own stage of the ring ``tiles`` and arms its
  own full barrier;
* ``waiter`` (warps 1-4, every CTA) waits on its CTA's full barrier, writes the tile out, then signals
  the ring ``done`` (an ``AsyncAsync`` ring with a ``CtaLeader`` consumer: every CTA's commit lands on
  the leader's full barrier, ``2 x 4`` arrivals, one lane per warp);
* ``releaser`` (warp 5, the leader only: ``run_only_on_cta_id=0``) waits on ``done`` -- all CTAs' waiters
  have read their stage -- then releases ``tiles`` to the empty barrier of every CTA (counted once) and
  releases ``done`` to every CTA.

``done`` is downstream of ``tiles`` (graph ``{done: [tiles]}``): its wait in the releaser is what orders
the release after every CTA's reads (the split-consumer proxy, check B1).  ``broken=True`` leaves ``done``
out: the releaser releases ``tiles`` with nothing ordering it after the waits (refused by B1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts

WAIT_WARPS = 4
THREADS = 32 * (2 + WAIT_WARPS)


@dataclass(kw_only=True)
class Tiles(ts.MemoryResource):
    """A ring of ``(BOX_M, BOX_N)`` float32 stages; each CTA loads its own tile into its own stage."""

    src_map: object
    box_m: int
    box_n: int
    tiles: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.tiles = tsjit.shared_array(self.src_map.dtype, (self.pipeline_config.num_stages, self.box_m, self.box_n),
                                        align=1024)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="ring stage holding the tile")

    @ts.producer_work()
    def load(self, stage_info):
        row = (stage_info.loop_offset * 2 + tsjit.cluster_ctarank()) * self.box_m
        if tsjit.elect_one():
            tsjit.tma_load(self.src_map, self.tiles[stage_info.stage_idx], stage_info.barrier, (row, 0))

    @ts.consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Done(ts.MemoryResource):
    """A signal ring without data: a commit says "this CTA's waiter has read its stage"."""


@dataclass(kw_only=True)
class TileOut(ts.MemoryResource):
    """The destination matrix; the waiter's warps write one staged tile per domain index."""

    dst: object
    smem: object

    @ts.producer_work()
    def store(self, stage_info, stage):
        m, n = self.smem.box_m, self.smem.box_n
        row0 = (stage_info.loop_offset * 2 + tsjit.cluster_ctarank()) * m
        tile = self.smem.tiles[stage]
        for i in range(tsjit.thread_idx().x - 32, m * n, WAIT_WARPS * 32):
            self.dst[row0 + i // n, i % n] = tile[i // n, i % n]


def _config(stages, box_bytes):
    return ts.PipelineConfig.create_tma_async_pipeline_cfg(
        stages, box_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 1),
        cta_layout_vmnk=(1, 2, 1, 1), consumer_signaling_threads=ts.SignalingThreads.CtaLeader,
        consumer_wait_signaling_threads=ts.SignalingThreads.All)


def _done_config(stages):
    return ts.PipelineConfig.create_async_async_pipeline_cfg(
        stages, ts.CooperativeGroup(ts.Agent.Thread, WAIT_WARPS), ts.CooperativeGroup(ts.Agent.Thread, 1),
        cta_layout_vmnk=(1, 2, 1, 1), consumer_signaling_threads=ts.SignalingThreads.CtaLeader)


def build(src_map, dst, num_tiles, box_m, box_n, stages, broken=False, first=None, step=None, releaser_on=0):
    """The three tasks and their TaskManager (see the module docstring); ``first`` / ``step``: the
    domain loop's start and step (default: cluster ``blockIdx.x // 2`` of ``gridDim.x // 2``);
    ``releaser_on``: the releaser's ``run_only_on_cta_id`` (None: every CTA, where only the leader acts)."""
    box_bytes = box_m * box_n * src_map.dtype.itemsize
    tiles = Tiles(name="tiles", pipeline_config=_config(stages, box_bytes), src_map=src_map, box_m=box_m,
                  box_n=box_n)
    out = TileOut(name="out", dst=dst, smem=tiles)
    done = Done(name="done", pipeline_config=_done_config(stages))
    if first is None:
        first, step = tsjit.block_idx().x // 2, tsjit.grid_dim().x // 2

    @ts.schedule
    def load_schedule(t: Tiles):
        with ts.domain_loop(first, num_tiles, step):
            t.acquire()
            t.load()
            t.commit()

    @ts.schedule
    def wait_schedule(t: Tiles, o: TileOut, d: Done):
        with ts.domain_loop(first, num_tiles, step):
            t.wait()
            stage = t.read()
            o.store(stage)
            if not broken:
                d.acquire()
                d.commit()

    @ts.schedule
    def release_schedule(t: Tiles, d: Done):
        with ts.domain_loop(first, num_tiles, step):
            if not broken:
                d.wait()
            t.release()
            if not broken:
                d.release()

    load = ts.Task("load", [], [tiles], warp_idx=0, num_warps=1, schedule=load_schedule(tiles))
    waiter = ts.Task("waiter", [tiles], [out] + ([] if broken else [done]), warp_idx=1, num_warps=WAIT_WARPS,
                     schedule=wait_schedule(tiles, out, done))
    releaser = ts.Task("releaser", [tiles] + ([] if broken else [done]), [], warp_idx=1 + WAIT_WARPS, num_warps=1,
                       schedule=release_schedule(tiles, done), run_only_on_cta_id=releaser_on)
    graph = {out: [tiles]} if broken else {out: [tiles], done: [tiles]}
    return ts.TaskManager([load, waiter, releaser], graph, verbose=False)


@tsjit.kernel
def split_consumer_copy(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
                        STAGES: tsjit.Constexpr[int]):
    """dst = src (see the module docstring); block 192 threads, cluster 2, ``num_tiles`` pairs of tiles."""
    manager = build(src_map, dst, num_tiles, BOX_M, BOX_N, STAGES)
    manager.setup_resources_and_tasks()
    manager.run()


def specs(rows: int, cols: int, box_m: int):
    """(src map spec, dst spec) for compiling without a GPU."""
    return tsjit.tensormap_spec(tsjit.Float32, (box_m, cols)), tsjit.spec((rows, cols), tsjit.Float32)


def run(rows: int, cols: int, box_m: int, stages: int, clusters: int, rng=None):
    """Copy a fresh random ``(rows, cols)`` float32 matrix (rows a multiple of ``2 * box_m``) into a
    poisoned destination; returns (result, expected)."""
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    src = tsjit.to_device(a)
    dst = tsjit.empty((rows, cols), tsjit.Float32).fill_bytes(0xFF)
    split_consumer_copy[(2 * clusters,), (THREADS,)](tsjit.TensorMap(src, (box_m, cols)), dst,
                                                     rows // (2 * box_m), box_m, cols, stages)
    return dst.numpy(), a
