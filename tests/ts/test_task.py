"""Task construction: T1-T5, get_domain providers and the task cache."""
import pytest

from tsjit.errors import VerificationError
from tsjit.ts import (LoopGuard, ScheduleStage, ScheduleStageType, Task, domain_loop,
                      schedule, schedule_from_entries, work_tile_loop)
from ts_fakes import FakeValue, FakeWorkQueue, MultiDest, MultiSource, copy_resources

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning")


@schedule
def copy_schedule(src, dst):
    with domain_loop(0, 128, 32):
        dst.store(src.load())


def copy_task(**overrides):
    src, dst = copy_resources()
    args = dict(name="copy", src_resources=[src], dst_resources=[dst], warp_idx=0,
                num_warps=4, schedule=copy_schedule(src, dst))
    args.update(overrides)
    return Task(**args)


def test_task_exposes_warp_range_and_resources():
    task = copy_task(warp_idx=4, num_warps=2)
    assert (task.warp_start, task.warp_end, task.label) == (4, 6, "copy[4:6)")
    assert [r.name for r in task.resources] == ["src", "dst"]
    assert not task.is_persistent and task.make_task_cache() is None
    assert task.describe() == "task 'copy' (warps 4-5)"


# -- T1 ------------------------------------------------------------------------------------------
def test_t1_schedule_required():
    with pytest.raises(VerificationError) as err:
        copy_task(schedule=None)
    assert err.value.check == "T1" and "'copy'" in str(err.value)


def test_t1_schedule_without_domain_loop():
    @schedule
    def no_loop(src, dst):
        dst.store(src.load())
    src, dst = copy_resources()
    with pytest.raises(VerificationError) as err:
        Task("copy", [src], [dst], 0, 1, no_loop(src, dst))
    assert err.value.check == "T1" and "'no_loop'" in str(err.value)
    assert "domain_loop(0, 0, 1)" in str(err.value)


def test_t1_uncalled_schedule_function_is_a_type_error():
    with pytest.raises(TypeError, match="my_schedule"):
        copy_task(schedule=copy_schedule)


def test_empty_domain_loop_is_accepted():
    @schedule
    def padding(src):
        with domain_loop(0, 0, 1):
            pass
    src, _ = copy_resources()
    assert Task("pad", [src], [], 0, 1, padding(src)).schedule.domain_loop.static_trip_count == 0


# -- T2 ------------------------------------------------------------------------------------------
class VarlenTask(Task):
    def get_domain(self, tile_coord):
        return FakeValue("len") + 0

    def make_task_cache(self):
        return ("cache", self.name)


class OtherTask(Task):
    def get_domain(self, tile_coord):
        return 1


def varlen_schedule(provider):
    @schedule
    def varlen(src, dst):
        with domain_loop(0, provider, 1):
            dst.store(src.load())
    return varlen


def test_t2_own_get_domain_provider_is_accepted():
    src, dst = copy_resources()
    task = VarlenTask("varlen", [src], [dst], 0, 4, varlen_schedule(VarlenTask.get_domain)(src, dst))
    loop = task.schedule.domain_loop
    assert loop.end is None and loop.end_provider is VarlenTask.get_domain
    assert isinstance(task.get_domain((0, 0, 0)), FakeValue)
    assert task.make_task_cache() == ("cache", "varlen")


@pytest.mark.parametrize("provider", [OtherTask.get_domain, Task.get_domain])
def test_t2_foreign_or_base_provider_is_rejected(provider):
    src, dst = copy_resources()
    with pytest.raises(VerificationError) as err:
        VarlenTask("varlen", [src], [dst], 0, 4, varlen_schedule(provider)(src, dst))
    assert err.value.check == "T2" and "VarlenTask.get_domain" in str(err.value)


# -- T3 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides,needle", [
    (dict(num_registers=100), "multiple of 8"),
    (dict(num_registers=264), "[8, 256]"),
    (dict(num_registers=0), "[8, 256]"),
    (dict(run_only_on_cta_id=-1), "run_only_on_cta_id"),
    (dict(warp_idx=30, num_warps=4), "32 warps"),
    (dict(num_warps=0), "num_warps"),
])
def test_t3_bad_numbers(overrides, needle):
    with pytest.raises(VerificationError) as err:
        copy_task(**overrides)
    assert err.value.check == "T3" and needle in str(err.value) and "'copy'" in str(err.value)


def test_t3_type_errors():
    with pytest.raises(TypeError, match="num_registers"):
        copy_task(num_registers="128")
    with pytest.raises(TypeError, match=r"src_resources=\[src\]"):
        src, dst = copy_resources()
        Task("copy", src, [dst], 0, 1, copy_schedule(src, dst))


def test_t3_resource_listed_twice():
    src, dst = copy_resources()
    with pytest.raises(VerificationError) as err:
        Task("copy", [src, src], [dst], 0, 1, copy_schedule(src, dst))
    assert err.value.check == "T3" and "'src'" in str(err.value)


# -- T4 ------------------------------------------------------------------------------------------
@schedule
def persistent(q, src, dst):
    with work_tile_loop(q):
        with domain_loop(0, 4, 1):
            dst.store(src.load())
        q.get_and_advance_work_tile()


def test_t4_persistent_task_accepted():
    q = FakeWorkQueue(name="wq")
    src, dst = copy_resources()
    task = Task("p", [q, src], [dst], 0, 1, persistent(q, src, dst))
    assert task.is_persistent and task.work_queue is q


def test_t4_two_work_queues():
    q1, q2 = FakeWorkQueue(name="wq1"), FakeWorkQueue(name="wq2")
    src, dst = copy_resources()
    with pytest.raises(VerificationError) as err:
        Task("p", [q1, q2, src], [dst], 0, 1, persistent(q1, src, dst))
    assert err.value.check == "T4" and "wq1" in str(err.value) and "wq2" in str(err.value)


def test_t4_work_tile_loop_queue_not_in_src():
    q = FakeWorkQueue(name="wq")
    src, dst = copy_resources()
    with pytest.raises(VerificationError) as err:
        Task("p", [src], [dst], 0, 1, persistent(q, src, dst))
    assert err.value.check == "T4" and "'wq'" in str(err.value)


def test_t4_queue_without_work_tile_loop():
    q = FakeWorkQueue(name="wq")
    src, dst = copy_resources()
    with pytest.raises(VerificationError) as err:
        Task("p", [q, src], [dst], 0, 1, copy_schedule(src, dst))
    assert err.value.check == "T4" and "work_tile_loop" in str(err.value)


# -- T5 ------------------------------------------------------------------------------------------
def test_t5_raw_entries_normalise():
    src, dst = MultiSource(name="ms"), MultiDest(name="md")
    sched = schedule_from_entries([
        (src, ScheduleStage.ConsumerAuxWork, ScheduleStageType.Head),
        (src, ScheduleStage.ConsumerWork, ScheduleStageType.LoopFirstIter, "tma_load"),
        (dst, ScheduleStage.ProducerWork, "store_one"),
        (dst, ScheduleStage.ProducerAuxWork, ScheduleStageType.Tail),
    ], end=8)
    assert [s.section for s in sched.steps] == [
        ScheduleStageType.Head, ScheduleStageType.Loop, ScheduleStageType.Loop,
        ScheduleStageType.Tail]
    assert sched.steps[1].guards[0].condition.name == "FirstIter"
    assert [str(r) for r in sched.routes] == ["[#1].a -> [#2].a"]
    assert Task("raw", [src], [dst], 0, 1, sched).schedule is sched


def test_t5_sections_out_of_order():
    src, dst = MultiSource(name="ms"), MultiDest(name="md")
    with pytest.raises(VerificationError) as err:
        schedule_from_entries([
            (src, ScheduleStage.ConsumerWork, ScheduleStageType.Loop, "tma_load"),
            (dst, ScheduleStage.ProducerAuxWork, ScheduleStageType.Head),
        ], end=8)
    assert err.value.check == "T5" and "entry 1" in str(err.value)
    assert "Head" in str(err.value) and "Loop" in str(err.value)


def test_t5_guard_on_head_entry():
    src = MultiSource(name="ms")
    with pytest.raises(VerificationError) as err:
        schedule_from_entries([(src, ScheduleStage.ConsumerAuxWork, ScheduleStageType.Head,
                                LoopGuard.FirstIter)], end=8)
    assert err.value.check == "T5" and "entry 0" in str(err.value)


def test_t5_raw_list_given_to_task_is_rejected_with_t5():
    src, dst = copy_resources()
    with pytest.raises(VerificationError, match="schedule_from_entries") as err:
        Task("raw", [src], [dst], 0, 1, [(src, ScheduleStage.ConsumerWork)])
    assert err.value.check == "T5"


# -- call forms ------------------------------------------------------------------------------------
def test_reference_order_with_keyword_only_options():
    src, dst = copy_resources()
    task = Task([src], [dst], 4, 2, schedule=copy_schedule(src, dst), num_registers=120, name="copy",
                debug_print=True, run_only_on_cta_id=1)
    assert (task.name, task.warp_idx, task.num_warps, task.num_registers) == ("copy", 4, 2, 120)
    assert task.debug_print is True and task.run_only_on_cta_id == 1
    assert task.src_resources == (src,) and task.dst_resources == (dst,)


def test_reference_order_without_a_name_gets_one_from_the_class_and_warp():
    src, dst = copy_resources()
    assert Task([src], [dst], 3, 1, schedule=copy_schedule(src, dst)).name == "task_w3"


def test_name_first_form_is_kept_positionally():
    src, dst = copy_resources()
    task = Task("copy", [src], [dst], 0, 4, copy_schedule(src, dst), 240, None, False)
    assert (task.name, task.num_registers, task.num_warps) == ("copy", 240, 4)


def test_a_parameter_given_twice_is_a_usage_error():
    src, dst = copy_resources()
    with pytest.raises(TypeError, match="'warp_idx' both by position and by keyword"):
        Task([src], [dst], 0, 4, schedule=copy_schedule(src, dst), warp_idx=1)


def test_too_many_positionals_in_the_reference_form_say_which_form():
    src, dst = copy_resources()
    with pytest.raises(TypeError, match="at most 4 positional"):
        Task([src], [dst], 0, 4, copy_schedule(src, dst))


def test_unknown_keyword_is_named():
    src, dst = copy_resources()
    with pytest.raises(TypeError, match="unroll"):
        Task([src], [dst], 0, 4, schedule=copy_schedule(src, dst), unroll=2)


def test_make_task_cache_default_and_override():
    class CacheTask(Task):
        def make_task_cache(self):
            return (self.warp_idx, 3.5)

    src, dst = copy_resources()
    assert Task([src], [dst], 0, 1, schedule=copy_schedule(src, dst)).make_task_cache() is None
    assert CacheTask([src], [dst], 2, 1, schedule=copy_schedule(src, dst)).make_task_cache() == (2, 3.5)
