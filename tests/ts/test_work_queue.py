"""WorkQueue / TileSchedulerConfig (inventory §1.5), its capture and check Q1."""
from collections import namedtuple

import pytest

from tsjit.errors import CompilationError, VerificationError
from tsjit.lang import builtins as lang_builtins
from tsjit.ts import (BlockCondition, PipelineConfig, ScheduleStage, ScheduleStageType, Task,
                      TileSchedulerConfig, TileSchedulerType, WorkQueue, WorkTileInfo,
                      domain_loop, schedule, work_tile_loop)
from tsjit.ts.work import work_methods
from ts_fakes import FakeValue
from ts_pipeline_fakes import (GmemIn, GmemSink, build, group, past_the_end, persistent_copy,
                               persistent_schedule)

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning")
Dim3 = namedtuple("Dim3", "x y z")


def static(*tiles, **kw):
    return TileSchedulerConfig.create_static_persistent_tile_scheduler_params(*tiles, **kw)


# -- tile order ---------------------------------------------------------------------------------
def test_row_order_coords():
    config = static(3, 4, 2)
    assert config.num_tiles == 24
    assert [config.coords(t) for t in (0, 1, 4, 11, 12, 23)] == [
        (0, 0, 0), (0, 1, 0), (1, 0, 0), (2, 3, 0), (0, 0, 1), (2, 3, 1)]


@pytest.mark.parametrize("m,n,g", [(10, 7, 4), (8, 3, 8), (5, 5, 1), (9, 2, 16)])
def test_grouped_order_is_a_permutation_in_column_major_groups(m, n, g):
    config = static(m, n, 2, order="grouped", group_size_m=g)
    coords = [config.coords(t) for t in range(config.num_tiles)]
    assert sorted(coords) == sorted((i, j, l) for l in range(2) for i in range(m) for j in range(n))
    # within a group, consecutive tiles walk down the group's rows first
    first_rows = min(g, m)
    assert coords[:first_rows] == [(i, 0, 0) for i in range(first_rows)]


def test_config_validation():
    with pytest.raises(ValueError, match="order"):
        static(4, order="zigzag")
    with pytest.raises(ValueError, match="num_tiles_m"):
        static(0)
    config = static(FakeValue("tm"), 4)       # run-time tile counts are accepted
    assert config.is_static


# -- the resource --------------------------------------------------------------------------------
def test_work_queue_requires_a_config():
    with pytest.raises(TypeError, match="tile_scheduler_config"):
        WorkQueue(name="wq")


def test_static_queue_has_named_works_and_no_pipeline():
    wq = WorkQueue(name="wq", tile_scheduler_config=static(8))
    assert wq.is_work_queue and wq.is_static and wq.pipeline_config is None
    assert wq.scheduler_type is TileSchedulerType.StaticPersistent
    methods = work_methods(wq)
    assert methods["init_work_tile"].stage is ScheduleStage.ConsumerAuxWork
    assert methods["get_and_advance_work_tile"].stage is ScheduleStage.ConsumerWork
    assert methods["fetch_work_tile"].stage is ScheduleStage.ProducerWork
    variables = wq.task_local_variables()
    assert variables["work_tile"].dtype is WorkTileInfo
    assert variables["skip_work_tile"].default is False
    assert wq.get_smem_requirements() == []
    with pytest.raises(VerificationError, match="no pipeline"):
        WorkQueue(name="wq", tile_scheduler_config=static(8),
                  pipeline_config=PipelineConfig.create_async_async_pipeline_cfg(
                      2, group(32), group(32)))


def test_static_work_bodies_walk_tiles_of_one_cta(monkeypatch):
    monkeypatch.setattr(lang_builtins, "block_idx", lambda: Dim3(3, 0, 0))
    monkeypatch.setattr(lang_builtins, "grid_dim", lambda: Dim3(5, 1, 1))
    wq = WorkQueue(name="wq", tile_scheduler_config=static(4, 3))
    tile = wq.init_work_tile(None)
    seen = []
    while tile.is_valid:
        seen.append((tile.tile_idx, tile.coords))
        tile = wq.get_and_advance_work_tile(type("Info", (), {"work_tile": tile})())
    assert seen == [(3, (1, 0, 0)), (8, (2, 2, 0))]
    assert wq.task_local_variables()["work_tile"].make_default() == tile._replace(
        tile_idx=3, coords=(1, 0, 0), is_valid=True)


def test_clc_queue_is_data_and_needs_sm100_when_lowered():
    clc_pipe = PipelineConfig.create_clc_fetch_async_pipeline_cfg(2, 16, group(1), group(128))
    config = TileSchedulerConfig.create_clc_dynamic_persistent_tile_scheduler_params(static(4, 4))
    assert config.scheduler_type is TileSchedulerType.ClcDynamicPersistent
    wq = WorkQueue(name="wq", tile_scheduler_config=config, pipeline_config=clc_pipe)
    assert [a.size_bytes for a in wq.get_smem_requirements()] == [32]
    with pytest.raises(CompilationError, match="kernel is being compiled"):   # device code (sm_100a:
        wq.fetch_work_tile(None)                                              # tests/blackwell/test_clc_*)
    with pytest.raises(VerificationError, match=r"\[Q1\].*create_clc_fetch_async_pipeline_cfg"):
        WorkQueue(name="wq", tile_scheduler_config=config)


# -- capture ----------------------------------------------------------------------------------------
def test_persistent_schedule_captures_loop_skippable_and_tail():
    wq = WorkQueue(name="wq", tile_scheduler_config=static(40))
    sched = persistent_schedule(wq, GmemIn(name="src"), GmemSink(name="dst"))
    wtl = sched.work_tile_loop
    assert wtl.queue is wq and wtl.skip_if.function is past_the_end
    assert not wtl.skip_if.takes_queue
    guard = wtl.body[0]
    assert guard.guard.condition is BlockCondition.Skippable
    init = sched.steps[0]
    assert init.label == "init_work_tile" and init.work_loop_slot == "pre"
    tail = [s for s in sched.steps if s.resource is wq and s.work_loop_slot is None]
    assert [(s.stage, s.label) for s in tail] == [
        (ScheduleStage.ConsumerTryWait, None), (ScheduleStage.ConsumerWait, None),
        (ScheduleStage.ConsumerWork, "get_and_advance_work_tile"),
        (ScheduleStage.ConsumerRelease, None)]
    assert all(s.section is ScheduleStageType.Tail for s in tail)


def test_skip_if_forms():
    wq = WorkQueue(name="wq", tile_scheduler_config=static(40))

    def body(skip):
        @schedule
        def sched(q):
            with work_tile_loop(q, skip_if=skip) as wtl:
                with wtl.skippable():
                    with domain_loop(0, 1):
                        pass
                q.wait()
                q.get_and_advance_work_tile()
                q.release()
        return sched(wq).work_tile_loop.skip_if

    assert body(lambda q, tile: False).takes_queue
    assert not body(wq.skip_work_tile_if).takes_queue
    predicate = body(WorkQueue.skip_work_tile_if)
    assert predicate.takes_queue and predicate(wq, WorkTileInfo(0, (0, 0, 0), True)) is False


# -- Q1 ----------------------------------------------------------------------------------------------
def test_q1_tutorial_persistent_copy_verifies():
    tasks, graph, wq = persistent_copy()
    m = build(tasks, graph, exhaustive=True)
    assert m.findings == [] and m.tasks[0].is_persistent


def test_q1_tail_out_of_order():
    @schedule
    def bad(q, s, d):
        with work_tile_loop(q):
            with domain_loop(0, 4):
                d.put(s.load())
            q.wait()
            q.release()
            q.get_and_advance_work_tile()
    tasks, graph, _ = persistent_copy(bad)
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    text = str(err.value)
    assert err.value.check == "Q1" and "'copy'" in text
    assert "wait, release, get_and_advance_work_tile" in text
    assert "wait, get_and_advance_work_tile, release" in text


def test_q1_step_after_queue_epilogue():
    @schedule
    def bad(q, s, d):
        with work_tile_loop(q):
            item = s.load()
            with domain_loop(0, 4):
                pass
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
            d.put(item)
    tasks, graph, _ = persistent_copy(bad)
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    assert err.value.check == "Q1" and "put" in str(err.value)


def test_q1_init_inside_the_loop():
    @schedule
    def bad(q, s, d):
        with work_tile_loop(q):
            q.init_work_tile()
            with domain_loop(0, 4):
                d.put(s.load())
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
    tasks, graph, _ = persistent_copy(bad)
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    assert err.value.check == "Q1" and "init_work_tile" in str(err.value)


def test_q1_queue_op_in_loop_section():
    @schedule
    def bad(q, s, d):
        with work_tile_loop(q):
            with domain_loop(0, 4):
                d.put(s.load())
                q.wait()
                q.get_and_advance_work_tile()
                q.release()
    tasks, graph, _ = persistent_copy(bad)
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    assert err.value.check == "Q1" and "Loop section" in str(err.value)


def test_q1_all_or_none_persistent():
    tasks, graph, wq = persistent_copy()
    src, dst = GmemIn(name="src2"), GmemSink(name="dst2")

    @schedule
    def plain(s, d):
        with domain_loop(0, 4):
            d.put(s.load())
    tasks.append(Task("plain", [src], [dst], 4, 1, plain(src, dst)))
    graph[dst] = [src]
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    assert err.value.check == "Q1" and "'plain'" in str(err.value)


def test_q1_static_queue_has_no_producer():
    tasks, graph, wq = persistent_copy()

    @schedule
    def scheduler(q):
        with work_tile_loop(q):
            with domain_loop(0, 0, 1):
                pass
            q.acquire()
            q.fetch_work_tile()
            q.commit()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
    tasks.append(Task("sched", [wq], [wq], 4, 1, scheduler(wq)))
    graph[wq] = [wq]
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    assert err.value.check == "Q1" and "'sched'" in str(err.value) and "static" in str(err.value)


def clc_kernel(scheduler_tail):
    clc_pipe = PipelineConfig.create_clc_fetch_async_pipeline_cfg(2, 16, group(1), group(32 + 128))
    wq = WorkQueue(name="wq", pipeline_config=clc_pipe,
                   tile_scheduler_config=TileSchedulerConfig.
                   create_clc_dynamic_persistent_tile_scheduler_params((8, 8)))
    src, dst = GmemIn(name="src"), GmemSink(name="dst")

    @schedule
    def scheduler(q):
        with work_tile_loop(q):
            with domain_loop(0, 0, 1):
                pass
            scheduler_tail(q)

    @schedule
    def worker(q, s, d):
        with work_tile_loop(q):
            with domain_loop(0, 4):
                d.put(s.load())
            q.try_wait()
            q.wait()
            q.get_and_advance_work_tile()
            q.release()
    tasks = [Task("sched", [wq], [wq], 0, 1, scheduler(wq)),
             Task("work", [wq, src], [dst], 1, 4, worker(wq, src, dst))]
    return tasks, {wq: [wq], dst: [src, wq]}


def good_scheduler_tail(q):
    q.try_acquire()
    q.acquire()
    q.fetch_work_tile()
    q.commit()
    q.wait()
    q.get_and_advance_work_tile()
    q.release()


def test_q1_clc_scheduler_task_verifies():
    assert build(*clc_kernel(good_scheduler_tail)).findings == []


def test_clc_advancing_before_fetching_deadlocks():
    def bad(q):
        q.wait()
        q.get_and_advance_work_tile()
        q.release()
        q.acquire()
        q.fetch_work_tile()
        q.commit()
    with pytest.raises(VerificationError) as err:
        build(*clc_kernel(bad))
    text = str(err.value)
    assert err.value.check == "C0" and "task 'sched' (warp 0): wq ConsumerWait 0 is blocked!" in text


def test_q1_clc_needs_exactly_one_scheduler_task():
    tasks, graph = clc_kernel(good_scheduler_tail)
    wq = tasks[0].src_resources[0]
    tasks.insert(1, Task("sched2", [wq], [wq], 5, 1, tasks[0].schedule))
    with pytest.raises(VerificationError) as err:
        build(tasks, graph)
    text = str(err.value)
    assert err.value.check == "Q1" and "found 2" in text and "'sched2'" in text
