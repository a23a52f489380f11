"""Two broken kernels and their fixed twins, for tutorial 14 (the interpreter finds bugs; issue 13).

* :func:`ring_scale`: y = 2 x + 1 through a 2-stage AsyncAsync ring (one producer warp fills a
  stage of ``CHUNK`` Float32 from ``x``, one consumer warp writes it to ``y``; 64 threads).
  ``COMMIT=False`` drops the producer's ``commit()`` and compiles with ``skip_validation=True``
  (which demotes the TaskManager's deadlock finding to a warning): the consumer waits on the
  stage's full barrier forever, the producer on the empty barrier once the ring is full.
* :func:`tile_scale_store`: y = 2 x + 1 on a 32 x 32 Float32 tile: 128 threads write the tile to
  shared memory, one thread TMA-stores it (PTX ISA §9.7.9.27 cp.async.bulk.tensor).
  ``FENCE=False`` drops the ``fence.proxy.async`` between the generic-proxy writes and the
  asynchronous-proxy read (PTX ISA §9.7.13.4 membar/fence, proxy fences): on a GPU the TMA may
  read stale bytes; the interpreter's race checker (``TSJIT_INTERPRET_CHECK=race``) names both
  lines.

The ``run_*`` helpers launch under the interpreter (or the GPU: they use the ordinary launch API)
on fresh random data with a poisoned output and return (got, float64 reference).
"""
from __future__ import annotations

import numpy as np

import tsjit
from tsjit import ts
from tsjit.examples import ts_async

TILE = 32


def build_ring_scale(x, y, n, chunk: int, commit: bool) -> None:
    """The TS program of :func:`ring_scale` (call it inside a kernel of 64 threads, grid 1): y = 2 x + 1
    through a 2-stage AsyncAsync ring of ``chunk`` Float32; ``commit=False`` omits the producer's commit
    and compiles with ``skip_validation=True`` (also ``tests/gpu/hang_programs.py``'s ``missing_commit``)."""
    cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32))
    chunks = ts_async.StagedChunks(name="chunks", pipeline_config=cfg, x=x, n=n, chunk=chunk, lane_threads=32,
                                   first_producer_thread=0)
    out = ts_async.ScaledOutput(name="out", y=y, n=n, chunks=chunks, first_consumer_thread=32)
    num_chunks = (n + chunk - 1) // chunk

    @ts.schedule
    def produce(c: ts_async.StagedChunks):
        with ts.domain_loop(0, num_chunks, 1):
            c.acquire()
            c.fill()
            if tsjit.const_expr(commit):
                c.commit()      # the broken program omits this: its stage is never handed over

    @ts.schedule
    def consume(c: ts_async.StagedChunks, o: ts_async.ScaledOutput):
        with ts.domain_loop(0, num_chunks, 1):
            c.wait()
            stage = c.take()
            o.write(stage)
            c.release()

    producer = ts.Task("producer", [], [chunks], warp_idx=0, num_warps=1, schedule=produce(chunks))
    consumer = ts.Task("consumer", [chunks], [out], warp_idx=1, num_warps=1, schedule=consume(chunks, out))
    manager = ts.TaskManager([producer, consumer], {out: [chunks]}, verbose=False, skip_validation=not commit)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def ring_scale(x, y, n, CHUNK: tsjit.Constexpr[int], COMMIT: tsjit.Constexpr[bool]):
    """y[i] = 2 x[i] + 1 (Float32, n elements) through a 2-stage ring; block = 64 threads, grid = 1."""
    build_ring_scale(x, y, n, CHUNK, COMMIT)


@tsjit.kernel
def tile_scale_store(dst_map, x, FENCE: tsjit.Constexpr[bool]):
    """dst = 2 x + 1 on one 32 x 32 Float32 tile; block = 128 threads, grid = 1."""
    tile = tsjit.shared_array(tsjit.Float32, (TILE, TILE), align=128)
    tid = tsjit.thread_idx().x
    for i in range(tid, TILE * TILE, 128):
        tile[i // TILE, i % TILE] = x[i // TILE, i % TILE] * tsjit.Float32(2) + tsjit.Float32(1)
    if tsjit.const_expr(FENCE):
        tsjit.fence_proxy_async()   # the broken program omits this: the TMA engine may read stale bytes
    tsjit.syncthreads()
    if tid == 0:
        tsjit.tma_store(dst_map, tile, (0, 0))
        tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0)


def run_ring_scale(n: int = 1000, chunk: int = 128, commit: bool = True):
    """Launch :func:`ring_scale` on ``n`` fresh standard-normal Float32; returns (y, 2 x + 1 in float64)."""
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    y = tsjit.empty((n,), tsjit.Float32).fill_bytes(0xFF)     # poisoned: NaN wherever nothing is written
    ring_scale[(1,), (64,)](tsjit.to_device(x), y, n, chunk, commit)
    return y.numpy(), 2.0 * x.astype(np.float64) + 1.0


def run_tile_scale_store(fence: bool = True):
    """Launch :func:`tile_scale_store` on a fresh 32 x 32 tile; returns (dst, 2 x + 1 in float64)."""
    x = np.random.default_rng().standard_normal((TILE, TILE)).astype(np.float32)
    dst = tsjit.empty((TILE, TILE), tsjit.Float32).fill_bytes(0xFF)
    tile_scale_store[(1,), (128,)](tsjit.TensorMap(dst, (TILE, TILE)), tsjit.to_device(x), fence)
    return dst.numpy(), 2.0 * x.astype(np.float64) + 1.0
