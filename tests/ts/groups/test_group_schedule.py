"""Pipeline groups in schedules: member references, collapsed-operation placement, the fan-out,
and the interleaving model's shared barriers and cursors."""
import pytest

from broken.groups import fork_program, fused_program, merge_program
from verify_schedules import FakeValue, GmemDest, Ring, async_config, tma_config

from tsjit.errors import ScheduleError
from tsjit.ts import PipelineGroup, PipelineGroupMode, ScheduleStage, TaskManager, domain_loop, schedule
from tsjit.ts.verify.exhaustive_expand import Variant
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable

M = PipelineGroupMode


def test_group_release_fans_out_to_every_member_in_order():
    tasks, graph, _ = merge_program()
    steps = tasks[2].schedule.steps
    released = [s for s in steps if s.stage is ScheduleStage.ConsumerRelease]
    assert [(s.resource.name, s.fanout_index, s.via_group.name) for s in released] == [("smem_a", 0, "ab"),
                                                                                     ("smem_b", 1, "ab")]
    assert [s.id for s in steps] == list(range(len(steps)))
    assert released[0].display_call == "ab.release()[smem_a]"


def test_fork_commit_fans_out_and_members_keep_their_own_call_indices():
    tasks, _, _ = fork_program()
    steps = tasks[0].schedule.steps
    commits = [s for s in steps if s.stage is ScheduleStage.ProducerCommit]
    assert [s.resource.name for s in commits] == ["smem_a", "smem_b"]
    assert all(s.call_index == 0 for s in steps)


def test_member_reached_through_the_group_proxy_inside_a_schedule():
    a = Ring(name="a", pipeline_config=async_config(4))
    b = Ring(name="b", pipeline_config=tma_config(4))
    group = PipelineGroup("g", [a, b], M.Merge)

    @schedule
    def consume(g):
        with domain_loop(0, 2, 1):
            g.a.wait()
            g.b.wait()
            g.release()
    steps = consume(group).steps
    assert [(s.resource.name, s.stage.name) for s in steps] == [
        ("a", "ConsumerWait"), ("b", "ConsumerWait"), ("a", "ConsumerRelease"), ("b", "ConsumerRelease")]


@pytest.mark.parametrize("op", ["acquire", "commit", "wait", "try_wait", "try_acquire"])
def test_merge_group_accepts_only_release(op):
    tasks_args = merge_program()   # a valid group to reuse
    group = tasks_args[0][2].schedule.steps[-1].via_group

    @schedule
    def bad(g):
        with domain_loop(0, 2, 1):
            getattr(g, op)()
    with pytest.raises(ScheduleError, match=r"only takes release\(\)") as err:
        bad(group)
    assert err.value.rule == "T5" and f"ab.{op}()" in str(err.value)


def test_fused_merge_member_wait_is_rejected():
    a = Ring(name="a", pipeline_config=async_config(4))
    b = Ring(name="b", pipeline_config=tma_config(4))
    group = PipelineGroup("g", [a, b], M.FusedMerge)

    @schedule
    def bad(sa):
        with domain_loop(0, 2, 1):
            sa.wait()
    with pytest.raises(ScheduleError, match=r"g\.wait\(\) once") as err:
        bad(group.a)
    assert "test_group_schedule.py" in str(err.value)   # points at the user's line


def test_bare_member_error_points_at_the_call():
    with pytest.raises(ScheduleError) as err:
        merge_program(bare=True)
    assert err.value.rule == "S8" and "groups.py" in str(err.value)


def _program(tasks, graph):
    counts = {id(t): t.schedule.domain_loop.static_trip_count for t in tasks}
    return compile_program(tasks, graph, Variant("all", False), counts, RegionTable(None), [])


def test_model_shares_the_merge_empty_barrier_and_consumer_cursor():
    tasks, graph, _ = merge_program()
    program = _program(tasks, graph)
    names = {b.name: b.count for b in program.barriers}
    assert names["ab.empty[0]"] == 128 and "smem_a.empty[0]" not in names and "smem_b.empty[0]" not in names
    assert names["smem_a.full[0]"] == 32 and names["smem_b.full[0]"] == 1
    store = next(p for p in program.processes if p.task.name == "st")
    releases = [op for op in store.ops if op.kind == "release"]
    # one arrival per collapsed release; the second fan-out step is empty
    assert [len(op.arrivals) for op in releases[:2]] == [1, 0]


def test_model_fork_arms_the_shared_full_barrier_once():
    tasks, graph, _ = fork_program()
    program = _program(tasks, graph)
    names = {b.name for b in program.barriers}
    assert "ab.full[0]" in names and "smem_a.full[0]" not in names and "smem_b.empty[0]" in names
    producer = next(p for p in program.processes if p.task.name == "p")
    acquires = [op for op in producer.ops if op.kind == "acquire"]
    assert [len(op.arrivals) for op in acquires[:2]] == [1, 0]   # the primary arms, the secondary only waits


def test_model_fused_merge_full_barrier_expects_both_producers():
    tasks, graph, _ = fused_program()
    program = _program(tasks, graph)
    counts = {b.name: b.count for b in program.barriers}
    assert counts["ab.full[0]"] == 33 and counts["ab.empty[0]"] == 128


@pytest.mark.parametrize("build", [merge_program, fork_program, fused_program])
def test_group_programs_verify_safe(build):
    tasks, graph, options = build()
    assert TaskManager(tasks, graph, verbose=False, **options).exhaustive_result.verdict == "SAFE"


def test_merge_with_a_lagging_release_verifies():
    """The merge GEMM's pattern: release the previous stage inside the loop, the last after it."""
    a = Ring(name="a", pipeline_config=async_config(3, advance_on_wait=True))
    b = Ring(name="b", pipeline_config=tma_config(3, advance_on_wait=True))
    group = PipelineGroup("g", [a, b], M.Merge)
    out = GmemDest(name="out", dst=FakeValue("o"), smem=a)

    @schedule
    def load(s):
        with domain_loop(0, 5, 1):
            s.acquire()
            s.fill() if s.pipeline_config.pipeline_type.value == "AsyncAsync" else s.tma_load()
            s.commit()

    @schedule
    def mma(g, sa, sb, o):
        with domain_loop(0, 5, 1) as d:
            sa.wait()
            sb.wait()
            sb.mma()
            with d.every(1, start=1):
                g.release()
        o.store()
        g.release()
    from tsjit.ts import Task
    tasks = [Task("la", [], [a], 0, 1, load(group.a)), Task("lb", [], [b], 1, 1, load(group.b)),
             Task("mma", [a, b], [out], 2, 4, mma(group, group.a, group.b, out))]
    assert TaskManager(tasks, {out: [a, b]}, verbose=False).exhaustive_result.verdict == "SAFE"


def test_a_group_is_not_a_task_resource():
    from tsjit.errors import VerificationError
    from tsjit.ts import Task
    tasks, _, _ = merge_program()
    group = tasks[2].schedule.steps[-1].via_group
    with pytest.raises(VerificationError, match=r"pipeline group 'ab'.*smem_a, smem_b") as err:
        Task("st2", [group], [], 0, 1, tasks[2].schedule)
    assert err.value.check == "PG"
