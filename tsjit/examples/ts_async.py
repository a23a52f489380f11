"""AsyncAsync pipelines between warps (issue 4, tutorial 5): a ping-pong between two warpgroups
and an interleaved ring (``interleave_stride=2``), patterns no public tutorial exercises.

Both compute ``y = 2 * x + 1`` over chunks of ``CHUNK`` elements: a producer task copies a chunk
of ``x`` from global into a shared-memory stage with ordinary stores and commits it (every
producer thread arrives on the stage's full barrier); a consumer task waits, transforms the
stage into ``y`` and releases it (every consumer thread arrives on the empty barrier).

* ``pingpong_scale``: warpgroup 0 produces, warpgroup 1 consumes, a 2-stage ring: the two
  warpgroups alternate stages (ping-pong).
* ``interleaved_scale``: a 2-warp producer and a 2-warp consumer share a 4-stage ring with
  ``interleave_stride=2``: warp lane ``k`` uses stages ``k, k + 2, k, ...`` and walks its own
  chunks, so the two lanes never touch each other's barriers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts


@dataclass(kw_only=True)
class StagedChunks(ts.MemoryResource):
    """A ring of shared-memory chunks written by threads (AsyncThread producer)."""

    x: object
    n: object
    chunk: int
    lane_threads: int
    first_producer_thread: object
    async_load: bool = False
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        # placed by the TaskManager's SmemAllocator (its layout report lists it next to the barriers)
        self.allocation = ts.SmemAllocation(f"{self.name}.buffers", dtype=tsjit.Float32,
                                            count=self.pipeline_config.num_stages * self.chunk)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @property
    def buffers(self):
        """The ring's (stages, chunk) Float32 view (valid in work bodies, after setup)."""
        return self.allocation.tensor((self.pipeline_config.num_stages, self.chunk))

    @ts.producer_work()
    def fill(self, stage_info):
        base = stage_info.loop_offset * self.chunk
        buf = self.buffers[stage_info.stage_idx]
        for i in range((tsjit.thread_idx().x - self.first_producer_thread) % self.lane_threads, self.chunk,
                       self.lane_threads):
            if tsjit.const_expr(self.async_load):
                if base + i < self.n:      # cp.async; the commit's arrival waits for these copies
                    tsjit.cp_async(buf.ptr + i, self.x.ptr + (base + i), 4)
            else:
                buf[i] = self.x[base + i] if base + i < self.n else tsjit.Float32(0)

    @ts.consumer_work(returns="stage")
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ScaledOutput(ts.MemoryResource):
    y: object
    n: object
    chunks: object
    first_consumer_thread: object

    @ts.producer_work()
    def write(self, stage_info, stage):
        base = stage_info.loop_offset * self.chunks.chunk
        buf = self.chunks.buffers[stage]
        lane_threads = self.chunks.lane_threads
        for i in range((tsjit.thread_idx().x - self.first_consumer_thread) % lane_threads, self.chunks.chunk,
                       lane_threads):
            if base + i < self.n:
                self.y[base + i] = buf[i] * 2.0 + 1.0


def _build(x, y, n, chunk, producer_warps, consumer_warps, stride, stages, async_load=False):
    threads_per_lane_p = producer_warps * 32 // stride
    threads_per_lane_c = consumer_warps * 32 // stride
    cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        stages, ts.CooperativeGroup(ts.Agent.Thread, threads_per_lane_p),
        ts.CooperativeGroup(ts.Agent.Thread, threads_per_lane_c), interleave_stride=stride,
        producer_op=ts.PipelineOp.AsyncLoad if async_load else ts.PipelineOp.AsyncThread)
    chunks = StagedChunks(name="chunks", pipeline_config=cfg, x=x, n=n, chunk=chunk,
                          lane_threads=threads_per_lane_p, first_producer_thread=0, async_load=async_load)
    out = ScaledOutput(name="out", y=y, n=n, chunks=chunks, first_consumer_thread=producer_warps * 32)
    num_chunks = (n + chunk - 1) // chunk
    bx, gx = tsjit.block_idx().x, tsjit.grid_dim().x
    lane = (tsjit.warp_idx() % (producer_warps if stride > 1 else 1)) if stride > 1 else 0

    @ts.schedule
    def produce(c: StagedChunks):
        with ts.domain_loop(bx * stride + lane, num_chunks, gx * stride):
            c.acquire()
            c.fill()
            c.commit()

    @ts.schedule
    def consume(c: StagedChunks, o: ScaledOutput):
        with ts.domain_loop(bx * stride + lane, num_chunks, gx * stride):
            c.wait()
            stage = c.take()
            o.write(stage)
            c.release()

    producer = ts.Task("producer", [], [chunks], warp_idx=0, num_warps=producer_warps, schedule=produce(chunks))
    consumer = ts.Task("consumer", [chunks], [out], warp_idx=producer_warps, num_warps=consumer_warps,
                       schedule=consume(chunks, out))
    manager = ts.TaskManager([producer, consumer], {out: [chunks]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def pingpong_scale(x, y, n, CHUNK: tsjit.Constexpr[int]):
    """Two warpgroups (block = 256 threads) alternating over a 2-stage AsyncAsync ring."""
    _build(x, y, n, CHUNK, 4, 4, 1, 2)


@tsjit.kernel
def interleaved_scale(x, y, n, CHUNK: tsjit.Constexpr[int]):
    """2 producer + 2 consumer warps (block = 128 threads), 4-stage ring, interleave_stride=2."""
    _build(x, y, n, CHUNK, 2, 2, 2, 4)


@tsjit.kernel
def asyncload_scale(x, y, n, CHUNK: tsjit.Constexpr[int]):
    """Like pingpong_scale, with an AsyncLoad producer: cp.async copies, arrival on completion."""
    _build(x, y, n, CHUNK, 4, 4, 1, 3, async_load=True)


def run_async(kind: str, n: int, blocks: int = 66, chunk: int = 1024, rng=None):
    rng = rng or np.random.default_rng()
    x = rng.standard_normal(max(n, 1)).astype(np.float32)[:n]
    y = tsjit.empty(max(n, 1), tsjit.Float32).fill_bytes(0xFF)
    dx = tsjit.to_device(x) if n else tsjit.empty(1, tsjit.Float32)
    kernel, threads = {"pingpong": (pingpong_scale, 256), "interleaved": (interleaved_scale, 128),
                       "asyncload": (asyncload_scale, 256)}[kind]
    kernel[(blocks,), (threads,)](dx, y, n, chunk)
    return y.numpy()[:n], 2.0 * x.astype(np.float64) + 1.0
