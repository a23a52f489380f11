"""Two TS kernels chained with programmatic dependent launch (issue 4, tutorial 4).

``scale_producer`` computes ``mid = x + 1`` (grid-stride, one task) and then lets the dependent
grid launch (``PdlLaunchBarrier.launch_griddep`` in the schedule's Tail).  ``scale_consumer`` is
launched with ``pdl=True``: its task waits for the primary grid (``PdlWaitBarrier.wait_griddep``
in the Head, before its first read of ``mid`` — check PDL1) and writes ``out = 2 * mid``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit import ts
from tsjit.ts.pdl import PdlLaunchBarrier, PdlWaitBarrier


@dataclass(kw_only=True)
class Elementwise(ts.MemoryResource):
    """Reads ``src[i]`` (consumer) ..."""

    src: object
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(tsjit.Float32, default=0)

    @ts.consumer_work(returns="item")
    def load(self, stage_info):
        return self.src[stage_info.loop_offset]


@dataclass(kw_only=True)
class AffineOut(ts.MemoryResource):
    """... and writes ``scale * item + shift`` to ``dst[i]`` (producer)."""

    dst: object
    scale: float
    shift: float

    @ts.producer_work()
    def store(self, stage_info, item):
        self.dst[stage_info.loop_offset] = item * self.scale + self.shift


def _grid_stride():
    threads = tsjit.grid_dim().x * tsjit.block_dim().x
    return tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x, threads


@tsjit.kernel
def scale_producer(x, mid, n, WARPS: tsjit.Constexpr[int]):
    start, stride = _grid_stride()
    src = Elementwise(name="x", src=x)
    out = AffineOut(name="mid", dst=mid, scale=1.0, shift=1.0)
    launch = PdlLaunchBarrier(name="pdl_launch")

    @ts.schedule
    def sched(s: Elementwise, o: AffineOut, l: PdlLaunchBarrier):
        with ts.domain_loop(start, n, stride):
            item = s.load()
            o.store(item)
        l.launch_griddep()

    task = ts.Task("produce", [src], [out, launch], warp_idx=0, num_warps=WARPS, schedule=sched(src, out, launch))
    manager = ts.TaskManager([task], {out: [src], launch: [out]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def scale_consumer(mid, y, n, WARPS: tsjit.Constexpr[int]):
    start, stride = _grid_stride()
    wait = PdlWaitBarrier(name="pdl_wait")
    src = Elementwise(name="mid", src=mid)
    out = AffineOut(name="y", dst=y, scale=2.0, shift=0.0)

    @ts.schedule
    def sched(w: PdlWaitBarrier, s: Elementwise, o: AffineOut):
        w.wait_griddep()
        with ts.domain_loop(start, n, stride):
            item = s.load()
            o.store(item)

    task = ts.Task("consume", [wait, src], [out], warp_idx=0, num_warps=WARPS, schedule=sched(wait, src, out))
    manager = ts.TaskManager([task], {out: [src], src: [wait]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def run_pdl_chain(n: int = 1 << 22, blocks: int = 264, warps: int = 8, rng=None):
    rng = rng or np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    mid = tsjit.empty(n, tsjit.Float32).fill_bytes(0xFF)
    y = tsjit.empty(n, tsjit.Float32).fill_bytes(0xFF)
    scale_producer[(blocks,), (warps * 32,)](tsjit.to_device(x), mid, n, warps)
    scale_consumer[(blocks,), (warps * 32,)](mid, y, n, warps, pdl=True)
    return y.numpy(), 2.0 * (x.astype(np.float64) + 1.0)
