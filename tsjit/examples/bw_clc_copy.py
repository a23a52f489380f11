"""CLC dynamic persistent scheduling (sm_100a): the persistent copy of ``ts_persistent`` with tiles handed
out by cluster launch control instead of a static round-robin.

The grid is launched over every tile: CTA ``b`` starts with tile ``b``.  A one-warp ``scheduler`` task
asks for more work each tile (``acquire`` arms the ``ClcFetchAsync`` stage's full barrier with the
16-byte response, ``fetch_work_tile`` issues ``clusterlaunchcontrol.try_cancel``, ``commit``); every
task (the scheduler too: the queue's self-edge) ends its tile with ``wait``,
``get_and_advance_work_tile`` (``query_cancel``: the canceled CTA's tile) and ``release``.  A CTA keeps
stealing tiles of CTAs that have not launched yet, and stops when a response says nothing was canceled.
"""
from __future__ import annotations

import tsjit
from tsjit import ts
from tsjit.examples.ts_persistent import TileDest, TileSource
from tsjit.ts.work_queue import CLC_RESPONSE_BYTES, TileSchedulerConfig, WorkQueue

STAGES = 2


@tsjit.kernel
def clc_copy(src, dst, num_tiles, TILE: tsjit.Constexpr[int], WARPS: tsjit.Constexpr[int]):
    """dst = src in tiles of TILE elements; launch ``num_tiles`` CTAs of ``(1 + WARPS) * 32`` threads."""
    threads = (1 + WARPS) * 32
    clc = ts.PipelineConfig.create_clc_fetch_async_pipeline_cfg(
        STAGES, CLC_RESPONSE_BYTES, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, threads), (1, 1, 1, 1))
    wq = WorkQueue(name="tiles", pipeline_config=clc,
                   tile_scheduler_config=TileSchedulerConfig.create_clc_dynamic_persistent_tile_scheduler_params(
                       (num_tiles,)))
    source = TileSource(name="source", src=src, tile=TILE)
    dest = TileDest(name="dest", dst=dst, tile=TILE)
    lane = tsjit.thread_idx().x - 32

    @ts.schedule
    def scheduler_schedule(q: WorkQueue):
        with ts.work_tile_loop(q):
            with ts.domain_loop(0, 0, 1):
                pass
            q.acquire()
            q.fetch_work_tile()
            q.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    @ts.schedule
    def copy_schedule(q: WorkQueue, s: TileSource, d: TileDest):
        with ts.work_tile_loop(q):
            with ts.domain_loop(lane, TILE, WARPS * 32):
                item = s.load()
                d.store(item)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    scheduler = ts.Task("scheduler", [wq], [wq], warp_idx=0, num_warps=1, schedule=scheduler_schedule(wq))
    copy = ts.Task("copy", [wq, source], [dest], warp_idx=1, num_warps=WARPS, schedule=copy_schedule(wq, source, dest))
    manager = ts.TaskManager([scheduler, copy], {wq: [wq], dest: [source, wq]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()
