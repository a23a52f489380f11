"""Tutorial 1 (grid-stride GMEM -> GMEM copy), host side: capture, task, manager, data model."""
import pytest

from tsjit.lang.dtypes import Int16
from tsjit.ts import (DomainLoop, ScheduleStage, ScheduleStageType, Task, TaskManager,
                      domain_loop, resolve_work, schedule)
from ts_fakes import FakeValue, GmemDest, GmemSource

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning",
                                        "error::tsjit.ts.VerificationWarning")

WARPS = 4


def build_copy(warps=WARPS):
    """The tutorial kernel body, minus the device code: dynamic start/end/step."""
    source = GmemSource(name="source", src=FakeValue("src"))
    dest = GmemDest(name="dest", dst=FakeValue("dst"))
    bx, tx, bdim = FakeValue("bx"), FakeValue("tx"), FakeValue("grid")
    num_entries = FakeValue("n")
    start = bx * warps * 32 + tx
    stride = bdim * warps * 32

    @schedule
    def copy_schedule(src: GmemSource, dst: GmemDest):
        with domain_loop(start, num_entries, stride):
            item = src.load()
            dst.store(item)

    sched = copy_schedule(source, dest)
    task = Task("copy", [source], [dest], warp_idx=0, num_warps=warps, schedule=sched)
    manager = TaskManager([task], {dest: [source]}, verbose=False)
    return source, dest, sched, task, manager, (start, num_entries, stride)


def test_copy_schedule_str_shows_steps_and_routes():
    *_, sched, _task, _manager, _bounds = build_copy()
    assert str(sched) == "\n".join([
        "schedule copy_schedule(src, dst)",
        "  domain_loop(start=<FakeValue>, end=<FakeValue>, step=<FakeValue>):",
        "    #0 source.load()  ConsumerWork  [Loop] call 0",
        "         item -> [#1].item",
        "    #1 dest.store()  ProducerWork  [Loop] call 0",
        "         item <- [#0].item",
    ])


def test_copy_domain_loop_keeps_dynamic_bounds_by_identity():
    *_, sched, _task, _manager, (start, end, step) = build_copy()
    loop = sched.domain_loop
    assert isinstance(loop, DomainLoop)
    assert loop.start is start and loop.end is end and loop.step is step
    assert loop.end_provider is None and loop.static_trip_count is None


def test_copy_data_model_for_lowering():
    source, dest, sched, task, manager, _ = build_copy()
    load, store = sched.steps
    assert (load.resource, load.stage, load.label, load.section) == (
        source, ScheduleStage.ConsumerWork, "load", ScheduleStageType.Loop)
    assert load.outputs == (source.item,) and load.function is GmemSource.load
    assert (store.stage, store.label, store.function) == (
        ScheduleStage.ProducerWork, "store", GmemDest.store)
    assert set(store.inputs) == {"item"}
    assert store.inputs["item"].variable is source.item and store.inputs["item"].step is load
    assert [str(r) for r in sched.routes] == ["[#0].item -> [#1].item"]
    assert source.item.dtype is Int16 and source.item.make_default() is None
    assert task.local_variables == (source.item,) and manager.variables == (source.item,)
    assert (task.warp_start, task.warp_end) == (0, WARPS)
    assert manager.resources == (dest, source) and manager.total_warps == WARPS
    function, spec = resolve_work(dest, ScheduleStage.ProducerWork, None)
    assert function is GmemDest.store and spec.input_params == ("item",)


def test_copy_schedule_table_snapshot():
    *_, manager, _ = build_copy()
    assert manager.schedule_table() == "\n".join([
        "========= Full (Head + Loop + Tail) =========",
        "step | copy[0:4)",
        "---------------------------------------------",
        "   0 | source     ConsWrk       0",
        "   1 | dest       ProdWrk       0",
        "   2 | source     ConsWrk       0",
        "   3 | dest       ProdWrk       0",
        "====== end of Full (Head + Loop + Tail) =====",
        "phase: H head, F first iter, L last iter, E every(n), W when_true/when_false, "
        "T tail, blank loop; number: the call's index among the section's calls of that resource "
        "operation (0 first; C0's 'ConsumerWait 0'); empty cell: task blocked or done",
    ])


@pytest.mark.parametrize("warps", [1, 4, 8, 12])
def test_copy_verifies_for_several_warp_counts(warps):
    *_, task, manager, _ = build_copy(warps)
    assert manager.findings == [] and task.num_warps == warps


def test_copy_verbose_prints_table_and_registers(capsys):
    source, dest, sched, task, _, _ = build_copy()
    TaskManager([task], {dest: [source]})
    out = capsys.readouterr().out
    assert "copy[0:4)" in out and "source     ConsWrk" in out
    assert "copy[0:4)  4 x (256 - 256) = 0" in out
