"""Steps after the domain loop see the loop's last index as ``stage_info.loop_offset`` (Head / Loop /
Tail, inventory §1.2) also inside a persistent ``work_tile_loop``, where each tile has its own Head and
Tail (issue 16 found a tail TMA load inside the tile loop reading loop_offset 0)."""
import re
from dataclasses import dataclass

import tsjit
from tsjit import ts
from tsjit.ts.work_queue import TileSchedulerConfig, WorkQueue

MARK_HEAD, MARK_TAIL = 7000, 9000


@dataclass(kw_only=True)
class Offsets(ts.MemoryResource):
    dst: object

    @ts.producer_work()
    def record(self, stage_info, *, where: tsjit.Constexpr[int]):
        if tsjit.thread_idx().x == 0:
            self.dst[stage_info.work_tile.tile_idx * 2 + (where // MARK_TAIL)] = stage_info.loop_offset + where


@tsjit.kernel
def tail_offsets(dst, tiles, START: tsjit.Constexpr[int], END: tsjit.Constexpr[int]):
    wq = WorkQueue(name="wq", tile_scheduler_config=TileSchedulerConfig.create_static_persistent_tile_scheduler_params(
        tiles))
    offsets = Offsets(name="offsets", dst=dst)

    @ts.schedule
    def sched(q: WorkQueue, o: Offsets):
        with ts.work_tile_loop(q):
            o.record(where=MARK_HEAD)
            with ts.domain_loop(START, END, 1):
                pass
            o.record(where=MARK_TAIL)
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    task = ts.Task("t", [wq], [offsets], warp_idx=0, num_warps=1, schedule=sched(wq, offsets))
    manager = ts.TaskManager([task], {offsets: [wq]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def stored_constants(start, end):
    kernel = tsjit.compile(tail_offsets, tsjit.spec((64,), tsjit.Int32), 64, start, end)
    return {int(v) for v in re.findall(r"st\.global(?:\.\w+)*\s+\[[^\]]+\],\s*(\d+);", kernel.ptx)} | \
        {int(v) for v in re.findall(r"mov\.(?:b|u|s)32\s+%r\d+,\s*(\d+);", kernel.ptx)}


def test_tail_inside_the_tile_loop_sees_the_last_index():
    assert MARK_TAIL + 4 in stored_constants(2, 5)
    assert MARK_TAIL not in stored_constants(2, 5)


def test_head_inside_the_tile_loop_sees_the_loop_start():
    assert MARK_HEAD + 2 in stored_constants(2, 5)
