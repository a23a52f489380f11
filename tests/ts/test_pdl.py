"""PDL barrier resources (inventory §1.7) and check PDL1."""
import pytest

from tsjit.errors import VerificationError
from tsjit.ts import (PdlLaunchBarrier, PdlWaitBarrier, ScheduleStage, Task, domain_loop,
                      schedule, work_tile_loop)
from tsjit.ts.work import work_methods
from ts_pipeline_fakes import GmemIn, GmemSink, build, persistent_copy

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning")


def test_pdl_resources_are_barriers_with_named_works():
    wait, launch = PdlWaitBarrier(name="w"), PdlLaunchBarrier(name="l")
    assert wait.is_barrier and launch.is_barrier and wait.pipeline_config is None
    assert work_methods(wait)["wait_griddep"].stage is ScheduleStage.ConsumerWork
    assert work_methods(launch)["launch_griddep"].stage is ScheduleStage.ProducerWork


def consumer_kernel(order: str):
    wait, src, dst = PdlWaitBarrier(name="pdl_wait"), GmemIn(name="mid"), GmemSink(name="y")

    @schedule
    def sched(w, s, d):
        if order == "before":
            w.wait_griddep()
        with domain_loop(0, 8):
            d.put(s.load())
        if order == "after":
            w.wait_griddep()

    task = Task("consume", [wait, src], [dst], 0, 4, sched(wait, src, dst))
    return [task], {dst: [src], src: [wait]}


def test_pdl1_wait_before_first_read_passes():
    m = build(*consumer_kernel("before"))
    assert m.findings == []


def test_pdl1_wait_after_first_read():
    with pytest.raises(VerificationError) as err:
        build(*consumer_kernel("after"))
    text = str(err.value)
    assert err.value.check == "PDL1" and "'consume'" in text and "'mid'" in text
    assert "step #2" in text and "before step #0" in text and "pdl_wait.wait_griddep()" in text


def test_pdl1_missing_wait():
    tasks, graph = consumer_kernel("none")
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    assert err.value.check == "PDL1" and "never calls pdl_wait.wait_griddep()" in str(err.value)


def test_assume_pdl_wait_completed_disables_pdl1():
    tasks, graph = consumer_kernel("after")
    assert build(tasks, graph, assume_pdl_wait_completed=True).findings == []


def test_pdl_chain_member_waits_then_launches_after_its_stores():
    wait, launch = PdlWaitBarrier(name="pdl_wait"), PdlLaunchBarrier(name="pdl_launch")
    src, dst = GmemIn(name="x"), GmemSink(name="mid")

    @schedule
    def sched(w, s, d, l):
        w.wait_griddep()
        with domain_loop(0, 8):
            d.put(s.load())
        l.launch_griddep()

    task = Task("produce", [wait, src], [dst, launch], 0, 4, sched(wait, src, dst, launch))
    graph = {dst: [src], src: [wait], launch: [dst]}
    assert build([task], graph, exhaustive=True).findings == []


def test_pdl_wait_before_a_work_tile_loop_runs_once_per_cta():
    wait = PdlWaitBarrier(name="pdl_wait")

    @schedule
    def sched(w, q, s, d):
        w.wait_griddep()
        with work_tile_loop(q):
            with domain_loop(0, 4):
                d.put(s.load())
            q.wait()
            q.get_and_advance_work_tile()
            q.release()

    tasks, graph, wq = persistent_copy()
    src, dst = tasks[0].src_resources[1], tasks[0].dst_resources[0]
    task = Task("copy", [wait, wq, src], [dst], 0, 4, sched(wait, wq, src, dst))
    graph[src] = [wait]
    m = build([task], graph)
    assert m.findings == [] and task.schedule.steps[0].work_loop_slot == "pre"
