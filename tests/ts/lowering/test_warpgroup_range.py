"""A wgmma in a task whose warps are not whole warpgroups is a compile-time error naming the task,
its warps and the rule (newcomer report 6, item 7); a task on warps 4-7 compiles."""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts, wgmma
from tsjit.examples import ts_copy


@dataclass(kw_only=True)
class FencedDest(ts.MemoryResource):
    """Stores the routed item after a wgmma.fence (a warpgroup instruction)."""

    dst: object

    @ts.producer_work()
    def store(self, stage_info, item):
        wgmma.fence()
        self.dst[stage_info.loop_offset] = item


@tsjit.kernel
def _fence_in_task(src, dst, num_entries, FIRST_WARP: tsjit.Constexpr[int]):
    source = ts_copy.GmemSource(name="source", src=src)
    dest = FencedDest(name="dest", dst=dst)
    sink = ts_copy.GmemDest(name="sink", dst=dst)

    @ts.schedule
    def idle_schedule(s: ts_copy.GmemSource, d: ts_copy.GmemDest):
        with ts.domain_loop(0, 1, 1):
            item = s.load()
            d.store(item)

    @ts.schedule
    def fenced_schedule(s: ts_copy.GmemSource, d: FencedDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 128):
            item = s.load()
            d.store(item)

    tasks = [ts.Task("first", [source], [sink], warp_idx=0, num_warps=FIRST_WARP,
                     schedule=idle_schedule(source, sink)),
             ts.Task("mma", [source], [dest], warp_idx=FIRST_WARP, num_warps=4,
                     schedule=fenced_schedule(source, dest))]
    manager = ts.TaskManager(tasks, {dest: [source], sink: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_wgmma_in_a_task_on_warps_1_to_4_is_a_compile_error_naming_the_task():
    i16 = np.zeros(64, np.int16)
    with pytest.raises(tsjit.CompilationError) as info:
        tsjit.compile(_fence_in_task, i16, i16, 64, 1, target="sm_90a")
    message = str(info.value)
    assert "tsjit.wgmma.fence" in message and "task 'mma' runs on warps 1-4" in message
    assert "multiple of 4" in message and "9.7.15" in message
    assert info.value.location.line == FencedDest.store.__code__.co_firstlineno + 2   # the wgmma.fence() line


def test_wgmma_in_a_task_on_warps_4_to_7_compiles():
    i16 = np.zeros(64, np.int16)
    kernel = tsjit.compile(_fence_in_task, i16, i16, 64, 4, target="sm_90a")
    assert "wgmma.fence.sync.aligned" in kernel.ptx
