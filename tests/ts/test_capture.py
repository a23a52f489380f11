"""Schedule capture: tokens, routes, sections, guards and the grammar rules S1-S15."""
import warnings

import pytest

from tsjit.errors import ScheduleError
from tsjit.ts import (BlockCondition, ScheduleStage, ScheduleStageType, ScheduleWarning,
                      WorkLabelError, domain_loop, schedule, when_false, when_true,
                      work_tile_loop)
from ts_fakes import (Barrier, FakePipelineConfig, FakeValue, FakeWorkQueue, GmemDest,
                      GmemSource, MultiDest, MultiSource, PipedBuffer)

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning")


def ms():
    return MultiSource(name="ms")


def md():
    return MultiDest(name="md")


def capture(fn, *resources):
    return schedule(fn)(*resources)


# -- tokens and routes -------------------------------------------------------------------------
def test_multi_output_returns_tuple_and_single_returns_bare_token():
    seen = {}

    def body(src, dst):
        with domain_loop(4):
            pair = src.load_pair()
            one = src.tma_load()
            seen.update(pair=pair, one=one)
            dst.store(one, pair[1], index=0)

    with pytest.warns(ScheduleWarning, match="'ms.a'"):   # pair[0] is never read
        sched = capture(body, ms(), md())
    assert isinstance(seen["pair"], tuple) and len(seen["pair"]) == 2
    assert [t.variable.name for t in seen["pair"]] == ["a", "b"]
    assert seen["one"].variable.name == "a" and seen["one"].step_id == 1
    assert [str(r) for r in sched.routes] == ["[#1].a -> [#2].a", "[#0].b -> [#2].b"]
    assert sched.steps[0].outputs == (sched.steps[0].resource.a, sched.steps[0].resource.b)


def test_unpacking_a_single_token_raises_naming_variable_and_step():
    def body(src, dst):
        with domain_loop(4):
            a, b = src.tma_load()

    with pytest.raises(ScheduleError) as err:
        capture(body, ms(), md())
    assert "'ms.a'" in str(err.value) and "#0" in str(err.value)


def test_token_has_no_truth_value():
    def body(src, dst):
        with domain_loop(4):
            if src.probe():
                pass

    with pytest.raises(ScheduleError, match="when_true"):
        capture(body, ms(), md())


def _compares_token(compare):
    def body(src, dst):
        with domain_loop(4):
            token = src.tma_load()
            if compare(token):
                dst.store_one(token)
    return body


@pytest.mark.parametrize("compare", [lambda t: t == 0, lambda t: t != 0, lambda t: 0 == t, lambda t: t < 1,
                                     lambda t: t >= 1, lambda t: t == "ready"],
                         ids=["eq", "ne", "reflected-eq", "lt", "ge", "eq-str"])
def test_comparing_a_token_is_s13_at_the_comparison_naming_when_true(compare):
    """``if st == 0:`` used to drop the guarded step silently (newcomer report 6, item 3)."""
    with pytest.raises(ScheduleError, match="S13") as err:
        capture(_compares_token(compare), ms(), md())
    message = str(err.value)
    assert "'ms.a'" in message and "step #0" in message and "when_true(token)" in message
    assert err.value.location.line == compare.__code__.co_firstlineno
    assert message.splitlines()[-1].strip() == "^"        # the source line, then a caret


def test_tokens_still_compare_by_identity_with_tokens_and_none():
    seen = []

    def body(src, dst):
        with domain_loop(4):
            token = src.tma_load()
            seen.extend([token == token, token != token, token == None, token in [None, token]])  # noqa: E711
            dst.store_one(token)

    capture(body, ms(), md())
    assert seen == [True, False, False, True]


def test_token_truth_value_error_points_at_the_if_line():
    def body(src, dst):
        with domain_loop(4):
            token = src.tma_load()
            if token:
                dst.store_one(token)

    with pytest.raises(ScheduleError, match="S13") as err:
        capture(body, ms(), md())
    assert err.value.location.line == body.__code__.co_firstlineno + 3


def test_trace_time_for_loop_unrolls_with_distinct_call_indices():
    def body(src, dst):
        with domain_loop(8):
            for slot in range(3):
                a = src.tma_load(slot=slot)
                dst.store_one(a)

    sched = capture(body, ms(), md())
    loads = [s for s in sched.steps if s.label == "tma_load"]
    assert [s.call_index for s in loads] == [0, 1, 2]
    assert [s.constexpr_kwargs for s in loads] == [{"slot": 0}, {"slot": 1}, {"slot": 2}]
    assert [r.source.id for r in sched.routes] == [0, 2, 4]


def test_head_loop_tail_sections():
    def body(src, dst):
        a = src.init()
        with domain_loop(4):
            dst.store_one(a)
            a = src.tma_load()
        dst.store_one(a)

    sched = capture(body, ms(), md())
    assert [s.section for s in sched.steps] == [
        ScheduleStageType.Head, ScheduleStageType.Loop, ScheduleStageType.Loop,
        ScheduleStageType.Tail]
    assert sched.steps[0].stage is ScheduleStage.ConsumerAuxWork
    assert sched.domain_loop.static_trip_count == 4


def test_generic_call_dispatches_to_single_method():
    def body(src, dst):
        with domain_loop(4):
            item = src.consumer_work()
            dst.producer_work(item)

    sched = capture(body, GmemSource(name="s", src=None), GmemDest(name="d", dst=None))
    assert [s.label for s in sched.steps] == ["load", "store"]


def test_generic_call_with_several_methods_shows_labelled_example():
    def body(src, dst):
        with domain_loop(4):
            src.consumer_work()

    with pytest.raises(ScheduleError) as err:
        capture(body, ms(), md())
    assert "ms.tma_load(...)" in str(err.value)


def test_guards_are_recorded_on_steps():
    def body(src, dst):
        with domain_loop(8) as d:
            flag = src.probe()
            with d.first_iter():
                dst.fence()
            with d.every(2, start=1):
                a = src.tma_load()
                with when_true(flag, key="k"):
                    dst.store_one(a)
            with when_false(flag):
                dst.fence()
            with d.last_iter():
                dst.fence()

    sched = capture(body, ms(), md())
    guards = [tuple(g.condition for g in s.guards) for s in sched.steps]
    assert sched.steps[1].stage is ScheduleStage.ProducerAuxWork
    assert guards == [(), (BlockCondition.FirstIter,), (BlockCondition.Every,),
                      (BlockCondition.Every, BlockCondition.WhenTrue),
                      (BlockCondition.WhenFalse,), (BlockCondition.LastIter,)]
    every = sched.steps[2].guards[0]
    assert (every.period, every.start) == (2, 1)
    when = sched.steps[3].guards[1]
    assert when.variable.name == "flag" and when.key == "k" and when.token.step.id == 0
    assert "every(2, start=1):" in str(sched) and "when_true([#0].flag, key='k'):" in str(sched)


def test_pipeline_ops_are_recorded_in_order():
    buf = PipedBuffer(name="buf", pipeline_config=FakePipelineConfig())

    def body(b):
        with domain_loop(4):
            b.try_acquire()
            b.acquire()
            b.fill()
            b.commit()
            b.try_wait()
            b.wait()
            v = b.read()
            b.release()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleWarning)
        sched = capture(body, buf)
    assert [s.stage for s in sched.steps] == [
        ScheduleStage.ProducerTryAcquire, ScheduleStage.ProducerAcquire,
        ScheduleStage.ProducerWork, ScheduleStage.ProducerCommit, ScheduleStage.ConsumerTryWait,
        ScheduleStage.ConsumerWait, ScheduleStage.ConsumerWork, ScheduleStage.ConsumerRelease]
    assert sched.steps[1].label is None and sched.steps[1].spec is None


def test_pipeline_op_without_pipeline_config_names_the_resource():
    def body(src):
        with domain_loop(4):
            src.acquire()

    with pytest.raises(ScheduleError) as err:
        capture(body, ms())
    assert "resource 'ms' has no pipeline_config" in str(err.value)


def test_error_points_at_the_schedule_line():
    def body(src):
        with domain_loop(4):
            src.tma_laod()   # the line the error must name

    with pytest.raises(ScheduleError) as err:
        capture(body, ms())
    assert "test_capture.py:" in str(err.value) and "src.tma_laod()" in str(err.value)
    assert err.value.location.function == "body"


def test_calling_a_schedule_inside_a_schedule_inlines_it():
    @schedule
    def inner(src, dst):
        dst.store_one(src.tma_load())

    def outer(src, dst):
        with domain_loop(4):
            inner(src, dst)

    sched = capture(outer, ms(), md())
    assert [s.label for s in sched.steps] == ["tma_load", "store_one"]


# -- S2 / S4 / S5 / S6 / S7: domain loop and scopes ---------------------------------------------
def test_s2_nested_domain_loop():
    def body(src):
        with domain_loop(4):
            with domain_loop(2):
                pass
    with pytest.raises(ScheduleError, match="S2"):
        capture(body, ms())


def test_s6_second_domain_loop_names_the_first():
    def body(src):
        with domain_loop(4):
            pass
        with domain_loop(2):
            pass
    with pytest.raises(ScheduleError, match="S6") as err:
        capture(body, ms())
    assert "test_capture.py" in str(err.value).split("first at")[1]


def test_s4_stale_first_iter_handle():
    def body(src):
        with domain_loop(4) as d:
            pass
        with d.first_iter():
            src.init()
    with pytest.raises(ScheduleError, match="S4") as err:
        capture(body, ms())
    assert "stale" in str(err.value)


@pytest.mark.parametrize("bounds,needle", [
    ((), "1 to 3"), ((0, 4, 1, 1), "1 to 3"), ((0, None), "None"), ((0, 4, 0), "step is 0"),
    ((0, 4.5), "int"),
])
def test_s5_bad_bounds(bounds, needle):
    def body(src):
        with domain_loop(*bounds):
            pass
    with pytest.raises(ScheduleError, match="S5") as err:
        capture(body, ms())
    assert needle in str(err.value)


def test_s5_bad_unroll():
    def body(src):
        with domain_loop(4, unroll=0):
            pass
    with pytest.raises(ScheduleError, match="unroll"):
        capture(body, ms())


def test_s5_bound_method_provider_is_rejected():
    class Holder:
        def get_domain(self, coord):
            return 4

    def body(src):
        with domain_loop(0, Holder().get_domain, 1):
            pass
    with pytest.raises(ScheduleError, match="S5"):
        capture(body, ms())


def test_s6_provider_only_for_end():
    def provider(self, coord):
        return 0

    def body(src):
        with domain_loop(provider, 4, 1):
            pass
    with pytest.raises(ScheduleError, match="S6") as err:
        capture(body, ms())
    assert "start" in str(err.value)


def test_dynamic_bounds_are_accepted_and_never_evaluated():
    start, end, step = FakeValue("s"), FakeValue("e"), FakeValue("t")

    def body(src):
        with domain_loop(start, end, step, unroll=2):
            src.probe()
    with pytest.warns(ScheduleWarning):
        loop = capture(body, ms()).domain_loop
    assert (loop.start, loop.end, loop.step, loop.unroll) == (start, end, step, 2)


def test_s7_domain_loop_never_entered():
    def body(src):
        domain_loop(4)
    with pytest.raises(ScheduleError, match="S7") as err:
        capture(body, ms())
    assert "never entered" in str(err.value)


def test_s7_scopes_closed_out_of_order():
    def body(src):
        loop = domain_loop(4)
        loop.__enter__()
        guard = loop.first_iter()
        guard.__enter__()
        loop.__exit__(None, None, None)
    with pytest.raises(ScheduleError, match="S7"):
        capture(body, ms())


def test_s7_scope_left_open():
    def body(src):
        domain_loop(4).__enter__()
    with pytest.raises(ScheduleError, match="never closed"):
        capture(body, ms())


def test_domain_loop_outside_capture():
    with pytest.raises(ScheduleError, match="@schedule"):
        domain_loop(4)


# -- S8 / S9 / S10 / S12 / S13 -------------------------------------------------------------------
def test_s8_non_resource_argument_names_parameter():
    def body(src, count):
        pass
    with pytest.raises(ScheduleError, match="S8") as err:
        capture(body, ms(), 3)
    assert "'count'" in str(err.value)


def test_s9_unknown_operation_suggests_close_label():
    def body(src):
        with domain_loop(4):
            src.tma_laod()
    with pytest.raises(WorkLabelError) as err:
        capture(body, ms())
    assert "Did you mean 'tma_load'" in str(err.value) and isinstance(err.value, AttributeError)


def test_s9_task_local_variable_is_not_an_operation():
    def body(src):
        with domain_loop(4):
            src.a()
    with pytest.raises(ScheduleError, match="S9") as err:
        capture(body, ms())
    assert "ms.a" in str(err.value) and "token" in str(err.value)


def test_s9_plain_method_call_is_rejected_and_data_fields_read_through():
    seen = {}

    def body(src):
        seen["name"] = src.name
        with domain_loop(4):
            src.helper()
    with pytest.raises(ScheduleError, match="S9") as err:
        capture(body, ms())
    assert seen["name"] == "ms" and "ms.helper()" in str(err.value)


def test_s10_work_queue_has_no_generic_shorthand():
    def body(wq):
        with work_tile_loop(wq):
            wq.consumer_work()
    with pytest.raises(ScheduleError, match="S10"):
        capture(body, FakeWorkQueue(name="wq"))


def test_s12_returns_names_unknown_variable():
    from dataclasses import dataclass
    from tsjit.ts import MemoryResource, consumer_work

    @dataclass(kw_only=True)
    class Wrong(MemoryResource):
        @consumer_work(returns="itme")
        def load(self, stage_info):
            pass

    def body(src):
        with domain_loop(4):
            src.load()
    with pytest.raises(ScheduleError, match="S12") as err:
        capture(body, Wrong(name="w"))
    assert "'itme'" in str(err.value)


def _store_with(call):
    def body(src, dst):
        with domain_loop(4):
            a = src.tma_load()
            call(src, dst, a)
    return body


@pytest.mark.parametrize("call,needle", [
    (lambda s, d, a: d.store_one(a, a), "by position"),
    (lambda s, d, a: d.store(a, a=a, index=0), "bound twice"),
    (lambda s, d, a: d.store_one(None), "None"),
    (lambda s, d, a: d.store_one(3), "not a token"),
    (lambda s, d, a: d.store(a, index=a), "Constexpr parameter 'index'"),
    (lambda s, d, a: d.store(a), "'index'"),
    (lambda s, d, a: d.store_one(a, slot=1), "no parameter 'slot'"),
    (lambda s, d, a: d.store_one(), "missing routed input"),
])
def test_s13_token_misuse(call, needle):
    with pytest.raises(ScheduleError, match="S13") as err:
        capture(_store_with(call), ms(), md())
    assert needle in str(err.value)


def test_s13_stale_token_names_variable_and_both_writers():
    def body(src, dst):
        with domain_loop(4):
            old = src.tma_load()
            src.tma_load(slot=1)
            dst.store_one(old)
    with pytest.raises(ScheduleError, match="S13") as err:
        capture(body, ms(), md())
    text = str(err.value)
    assert "'ms.a'" in text and "#0" in text and "#1" in text


def test_s13_token_from_another_schedule():
    leaked = {}

    def first(src, dst):
        with domain_loop(4):
            leaked["a"] = src.tma_load()
            dst.store_one(leaked["a"])

    def second(src, dst):
        with domain_loop(4):
            dst.store_one(leaked["a"])
    source, dest = ms(), md()
    capture(first, source, dest)
    with pytest.raises(ScheduleError, match="another schedule"):
        capture(second, source, dest)


def test_s13_when_true_needs_a_token():
    def body(src):
        with domain_loop(4):
            with when_true(True):
                pass
    with pytest.raises(ScheduleError, match="S13"):
        capture(body, ms())


def test_s15_unrouted_output_warns():
    def body(src, dst):
        with domain_loop(4):
            src.tma_load()
    with pytest.warns(ScheduleWarning, match="S15") as record:
        capture(body, ms(), md())
    assert "'ms.a'" in str(record[0].message) and "#0" in str(record[0].message)


def test_optional_routed_input_may_stay_unrouted():
    def body(src, dst):
        with domain_loop(4):
            dst.store(src.tma_load(), index=1)
    sched = capture(body, ms(), md())
    assert set(sched.steps[1].inputs) == {"a"} and sched.steps[1].constexpr_kwargs == {"index": 1}


# -- S1 / S2 / S3 / S14: work tile loop ---------------------------------------------------------
def wq():
    return FakeWorkQueue(name="wq")


def test_work_tile_loop_with_skippable_records_slots():
    def body(q, src, dst, bar):
        bar.wait_griddep()
        with work_tile_loop(q, skip_if=q.skip_work_tile_if) as wtl:
            with wtl.skippable():
                with domain_loop(4):
                    dst.store_one(src.tma_load())
            q.get_and_advance_work_tile()
        bar.wait_griddep()

    sched = capture(body, wq(), ms(), md(), Barrier(name="pdl"))
    assert sched.work_tile_loop.queue.name == "wq"
    assert sched.work_tile_loop.skip_if.takes_queue is False
    assert [s.work_loop_slot for s in sched.steps] == ["pre", None, None, None, "post"]
    assert sched.steps[1].guards[0].condition is BlockCondition.Skippable


def test_s1_per_tile_step_before_work_tile_loop():
    def body(q, src, dst):
        dst.store_one(src.tma_load())
        with work_tile_loop(q):
            pass
    with pytest.raises(ScheduleError, match="S1") as err:
        capture(body, wq(), ms(), md())
    assert "#0" in str(err.value)


def test_s1_block_after_work_tile_loop():
    def body(q, src):
        with work_tile_loop(q):
            with domain_loop(4):
                pass
        with domain_loop(4):
            pass
    with pytest.raises(ScheduleError, match="S1"):
        capture(body, wq(), ms())


def test_s2_domain_loop_outside_skippable():
    def body(q, src):
        with work_tile_loop(q, skip_if=q.skip_work_tile_if):
            with domain_loop(4):
                pass
    with pytest.raises(ScheduleError, match="S2") as err:
        capture(body, wq(), ms())
    assert "skippable" in str(err.value)


def test_s3_skippable_without_skip_if():
    def body(q):
        with work_tile_loop(q) as wtl:
            with wtl.skippable():
                pass
    with pytest.raises(ScheduleError, match="S3"):
        capture(body, wq())


def test_s3_queue_op_inside_skippable():
    def body(q):
        with work_tile_loop(q, skip_if=lambda tile: False) as wtl:
            with wtl.skippable():
                q.get_and_advance_work_tile()
    with pytest.raises(ScheduleError, match="S3") as err:
        capture(body, wq())
    assert "'wq'" in str(err.value) or "wq" in str(err.value)


def test_s14_skip_if_not_callable_or_other_queue():
    other = FakeWorkQueue(name="other")

    def not_callable(q):
        with work_tile_loop(q, skip_if=3):
            pass

    def other_queue(q):
        with work_tile_loop(q, skip_if=other.skip_work_tile_if):
            pass
    with pytest.raises(ScheduleError, match="S14"):
        capture(not_callable, wq())
    with pytest.raises(ScheduleError, match="S14") as err:
        capture(other_queue, wq())
    assert "'other'" in str(err.value)


def test_s14_skip_if_method_of_another_class():
    def body(q):
        with work_tile_loop(q, skip_if=MultiSource.helper):
            pass
    with pytest.raises(ScheduleError, match="S14"):
        capture(body, wq())


def test_skip_if_arity():
    def two_args(q):
        with work_tile_loop(q, skip_if=lambda queue, tile: False):
            pass
    assert capture(two_args, wq()).work_tile_loop.skip_if.takes_queue

    def three_args(q):
        with work_tile_loop(q, skip_if=lambda a, b, c: False):
            pass
    with pytest.raises(ScheduleError, match=r"\(wq, tile\) or \(tile\)") as err:
        capture(three_args, wq())
    assert "[S14]" in str(err.value)


def test_work_tile_loop_needs_a_work_queue():
    def body(src):
        with work_tile_loop(src):
            pass
    with pytest.raises(ScheduleError, match="WorkQueue"):
        capture(body, ms())


def test_str_snapshot_with_sections_guards_constexprs_and_routes():
    @schedule
    def rich(src, dst):
        flag = src.probe()
        with domain_loop(0, 16, 2, unroll=2) as d:
            with d.first_iter():
                dst.fence()
            for slot in range(2):
                a = src.tma_load(slot=slot)
                with when_true(flag, key="odd"):
                    dst.store(a, index=slot)
            with d.every(4, start=1):
                a, b = src.load_pair()
                dst.store(a, b, index=9)
            with when_false(flag):
                pass
        dst.fence()
        return src.probe()

    with pytest.warns(ScheduleWarning, match="#9"):
        sched = rich(ms(), md())
    assert str(sched) == "\n".join([
        "schedule rich(src, dst)",
        "  #0 ms.probe()  ConsumerWork  [Head] call 0",
        "       flag -> when_true",
        "       flag -> when_false",
        "  domain_loop(start=0, end=16, step=2, unroll=2):",
        "    first_iter():",
        "      #1 md.fence()  ProducerAuxWork  [Loop] call 0",
        "    #2 ms.tma_load(slot=0)  ConsumerWork  [Loop] call 0",
        "         a -> [#3].a",
        "    when_true([#0].flag, key='odd'):",
        "      #3 md.store(index=0)  ProducerWork  [Loop] call 0",
        "           a <- [#2].a",
        "    #4 ms.tma_load(slot=1)  ConsumerWork  [Loop] call 1",
        "         a -> [#5].a",
        "    when_true([#0].flag, key='odd'):",
        "      #5 md.store(index=1)  ProducerWork  [Loop] call 1",
        "           a <- [#4].a",
        "    every(4, start=1):",
        "      #6 ms.load_pair()  ConsumerWork  [Loop] call 2",
        "           a -> [#7].a",
        "           b -> [#7].b",
        "      #7 md.store(index=9)  ProducerWork  [Loop] call 2",
        "           a <- [#6].a",
        "           b <- [#6].b",
        "    when_false([#0].flag):",
        "      pass",
        "  #8 md.fence()  ProducerAuxWork  [Tail] call 0",
        "  #9 ms.probe()  ConsumerWork  [Tail] call 0",
        "       flag -> (not routed)",
    ])


def test_real_tsjit_constexpr_annotation_is_detected():
    from dataclasses import dataclass
    from tsjit.lang.constexpr import Constexpr as RealConstexpr
    from tsjit.ts import MemoryResource, producer_work, work_methods

    @dataclass(kw_only=True)
    class Out(MemoryResource):
        @producer_work
        def store(self, stage_info, value, *, slot: RealConstexpr[int], mode: RealConstexpr = 0):
            pass

    spec = work_methods(Out)["store"]
    assert spec.input_params == ("value",) and spec.required_constexprs == ("slot",)
    assert set(spec.constexpr_params) == {"slot", "mode"}
