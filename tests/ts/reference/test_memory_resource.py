"""Reference section ``MemoryResource``: the named-work example and its label rules, the raw
schedule-list label form, the hook methods (TMEM requirements, role requirements, physical
ranges), the monolithic consumer_work / producer_work overrides, and the legacy dict-based forms
(an error showing the captured-schedule equivalent).
"""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import ScheduleError, VerificationError
from tsjit.lang.dtypes import Int32
from tsjit.ts import (MemoryResource, ScheduleStage, TaskLocalVariable, TmemAllocation, consumer_work,
                      producer_work, resolve_work, schedule_from_entries, work_methods)
from reference_names import cute

conformance = pytest.mark.conformance


# -- pasted: "Named work functions" ----------------------------------------------------------------
@dataclass(kw_only=True)
class SmemKV(MemoryResource):
    @consumer_work
    @cute.jit
    def k_desc(self, stage_info):
        ...

    @consumer_work
    @cute.jit
    def v_desc(self, stage_info):
        ...


@dataclass(kw_only=True)
class Sink(MemoryResource):
    @producer_work
    def store(self, stage_info):
        pass


@conformance("§1.3", "legacy raw schedule list", reason="schedule_from_entries(entries, end=...) normalises a raw list into the captured Schedule (no ScheduleResult)")
def test_raw_schedule_entry_with_a_label_selects_the_method():
    smem_kv = SmemKV(name="smem_kv")
    sched = schedule_from_entries([(smem_kv, ScheduleStage.ConsumerWork, "k_desc")], end=4)
    assert [s.label for s in sched.steps] == ["k_desc"]


def test_raw_schedule_steps_carry_the_call_line():
    """N1 and the other step messages said ``at schedule step #0 (?)`` for raw schedules (newcomer report 6,
    item 12): each raw step is located at the schedule_from_entries(...) line."""
    import inspect
    smem_kv = SmemKV(name="smem_kv")
    line = inspect.currentframe().f_lineno + 1
    sched = schedule_from_entries([(smem_kv, ScheduleStage.ConsumerWork), (smem_kv, ScheduleStage.ConsumerWork, "v_desc")], end=4)
    assert [step.location.line for step in sched.steps] == [line, line]
    assert f"test_memory_resource.py:{line})" in sched.steps[0].describe()


@conformance("A6", "label validation: typo -> did-you-mean")
def test_label_typo_is_a_value_error_with_a_suggestion():
    with pytest.raises(ValueError, match="Did you mean 'k_desc'"):
        resolve_work(SmemKV(name="smem_kv"), ScheduleStage.ConsumerWork, "k_dsc")


@conformance("A6", "label validation: missing label with >=2 named methods")
def test_missing_label_with_two_methods_is_a_value_error():
    with pytest.raises(ValueError, match="ambiguous"):
        resolve_work(SmemKV(name="smem_kv"), ScheduleStage.ConsumerWork, None)


def test_a_single_named_method_auto_dispatches():
    _, spec = resolve_work(Sink(name="sink"), ScheduleStage.ProducerWork, None)
    assert spec.label == "store"


# -- monolithic hooks ----------------------------------------------------------------------------
@dataclass(kw_only=True)
class MonoSource(MemoryResource):
    src: object

    def consumer_work(self, stage_info):
        if stage_info.loop_offset < self.src.shape[0]:
            self.src[stage_info.loop_offset] = self.src[stage_info.loop_offset] * 3


@tsjit.kernel
def triple_in_place(x, n):
    source = MonoSource(name="source", src=x)
    sink = Sink(name="sink")

    @ts.schedule
    def sched(s: MonoSource, d: Sink):
        with ts.domain_loop(tsjit.thread_idx().x, n, 32):
            s.consumer_work()
            d.store()

    task = ts.Task([source], [sink], 0, 1, schedule=sched(source, sink), name="triple")
    manager = ts.TaskManager([task], {sink: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@conformance("A6", "consumer_work(stage_info) monolithic hook")
@conformance("A6", "producer_work(stage_info) monolithic hook")
@conformance("§1.2", "producer_work()/consumer_work()/producer_aux_work()/consumer_aux_work() unnamed hooks")
def test_monolithic_override_is_the_stage_work_method():
    methods = work_methods(MonoSource)
    assert list(methods) == ["consumer_work"] and methods["consumer_work"].stage is ScheduleStage.ConsumerWork
    source = MonoSource(name="source", src=None)
    sched = schedule_from_entries([(source, ScheduleStage.ConsumerWork)], end=4)
    assert sched.steps[0].label == "consumer_work"


def test_monolithic_override_compiles_for_sm90a():
    kernel = tsjit.compile(triple_in_place, np.zeros(64, np.int32), 64, target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF" and "mul" in kernel.ptx


@pytest.mark.gpu_or_interpret
def test_monolithic_override_runs():
    x = np.random.default_rng().integers(-1000, 1000, size=64, dtype=np.int32)
    d = tsjit.to_device(x)
    triple_in_place[(1,), (32,)](d, 50)
    out = d.numpy()
    np.testing.assert_array_equal(out[:50], x[:50].astype(np.int64) * 3)
    np.testing.assert_array_equal(out[50:], x[50:])


@conformance("A6", "consumer_aux_work / producer_aux_work hooks")
def test_monolithic_aux_override_is_an_aux_stage():
    @dataclass(kw_only=True)
    class Helper(MemoryResource):
        def producer_aux_work(self, stage_info):
            pass

    assert work_methods(Helper)["producer_aux_work"].stage is ScheduleStage.ProducerAuxWork


# -- legacy dict-based forms ------------------------------------------------------------------------
@conformance("A6", "create_consumer_variables", reason="tsjit runs captured schedules only: an override "
             "is a ScheduleError showing the TaskLocalVariable / returns= / routed-parameter form")
@conformance("A6", "create_producer_variables", reason="tsjit runs captured schedules only: an override "
             "is a ScheduleError showing the routed-parameter form (producer work takes tokens as keywords)")
def test_legacy_variable_dicts_fail_with_the_captured_form():
    @dataclass(kw_only=True)
    class Legacy(MemoryResource):
        def create_consumer_variables(self):
            return {"item": 0}

    with pytest.raises(ScheduleError) as err:
        Legacy(name="old").task_local_variables()
    text = str(err.value)
    assert "'old'" in text and "create_consumer_variables" in text
    assert "TaskLocalVariable.uninitialized()" in text and "returns=item" in text

    @dataclass(kw_only=True)
    class LegacyProducer(MemoryResource):
        def create_producer_variables(self):
            return {"item": 0}

    with pytest.raises(ScheduleError, match=r"(?s)'old' .*create_producer_variables.*def store\(self, stage_info, "
                                            r"\*, item\).*dst\.store\(item=item\)"):
        LegacyProducer(name="old").task_local_variables()


@conformance("A6", "set_consumer_var", reason="legacy form: raises with the returns= equivalent")
@conformance("A6", "get_consumer_var", reason="legacy form: raises with the routed-parameter equivalent")
@conformance("A6", "get_producer_var", reason="legacy form: raises with the routed-parameter equivalent")
@conformance("A6", "copy_consumer_vars_to", reason="schedule tokens route values; the method raises "
             "with the token form")
@conformance("A6", "copy_consumer_vars_to_consumer_of", reason="consumer-to-consumer routes are tokens "
             "passed to another src resource's consumer work; the method raises with that form")
def test_legacy_variable_methods_raise_with_the_equivalent():
    res = Sink(name="r")
    for call in (lambda: res.set_consumer_var("item", 1), lambda: res.get_consumer_var("item"),
                 lambda: res.get_producer_var("item")):
        with pytest.raises(ScheduleError, match=r"returns=item.*store\(item=item\)"):
            call()
    for call in (lambda: res.copy_consumer_vars_to(res), lambda: res.copy_consumer_vars_to_consumer_of(res)):
        with pytest.raises(ScheduleError, match="dst.store"):
            call()


# -- consumer-to-consumer routes --------------------------------------------------------------------
@dataclass(kw_only=True)
class Scale(MemoryResource):
    """Consumer work of a second src resource that reads the first one's token."""

    factor: int

    @consumer_work(returns="scaled")
    def scale(self, stage_info, *, item):
        return item * self.factor

    scaled: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.scaled = TaskLocalVariable(Int32, default=0)


@dataclass(kw_only=True)
class Load(MemoryResource):
    src: object
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = TaskLocalVariable(Int32, default=0)

    @consumer_work(returns=item)
    def load(self, stage_info):
        return self.src[stage_info.loop_offset]


@dataclass(kw_only=True)
class Store(MemoryResource):
    dst: object

    @producer_work
    def store(self, stage_info, *, scaled):
        self.dst[stage_info.loop_offset] = scaled


@tsjit.kernel
def consumer_to_consumer(x, y, n):
    load, scale, store = Load(name="load", src=x), Scale(name="scale", factor=5), Store(name="store", dst=y)

    @ts.schedule
    def sched(l: Load, s: Scale, d: Store):
        with ts.domain_loop(tsjit.thread_idx().x, n, 32):
            item = l.load()
            scaled = s.scale(item=item)      # consumer -> consumer route
            d.store(scaled=scaled)

    task = ts.Task([load, scale], [store], 0, 1, schedule=sched(load, scale, store), name="route")
    manager = ts.TaskManager([task], {store: [load, scale]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_consumer_to_consumer_route_compiles_for_sm90a():
    kernel = tsjit.compile(consumer_to_consumer, np.zeros(64, np.int32), np.zeros(64, np.int32), 64,
                           target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"


@pytest.mark.gpu_or_interpret
def test_consumer_to_consumer_route_runs():
    x = np.random.default_rng().integers(-1000, 1000, size=64, dtype=np.int32)
    y = tsjit.empty(64, tsjit.Int32).fill_bytes(0x5A)
    consumer_to_consumer[(1,), (32,)](tsjit.to_device(x), y, 64)
    np.testing.assert_array_equal(y.numpy(), x.astype(np.int64) * 5)


# -- hooks: TMEM requirements, role requirements, physical ranges -----------------------------------
@conformance("A6", "get_tmem_requirements")
def test_base_hook_defaults():
    res = Sink(name="r")
    assert res.get_tmem_requirements() == [] and res.get_smem_requirements() == []
    assert res.get_producer_requirements() is None and res.get_consumer_requirements() is None
    assert res.physical_ranges() == []


@dataclass(kw_only=True)
class Accumulator(MemoryResource):
    """A resource that owns TMEM columns and writes them from its producer work."""

    columns: int = 0
    declared: tuple = ()
    alloc: object = None

    def __post_init__(self):
        self.alloc = TmemAllocation(f"{self.name}.acc", self.columns) if self.columns else None

    def get_tmem_requirements(self):
        return [self.alloc] if self.alloc is not None else []

    def physical_ranges(self):
        return list(self.declared)

    @producer_work
    def accumulate(self, stage_info, *, item):
        pass


@dataclass(kw_only=True)
class Feed(MemoryResource):
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = TaskLocalVariable(Int32, default=0)

    @consumer_work(returns=item)
    def read(self, stage_info):
        return 0


def _two_writers(first, second):
    @ts.schedule
    def writer(f: Feed, acc: Accumulator):
        with ts.domain_loop(0, 4, 1):
            item = f.read()
            acc.accumulate(item=item)

    feeds = Feed(name="feed_a"), Feed(name="feed_b")
    tasks = [ts.Task([feeds[0]], [first], 0, 1, schedule=writer(feeds[0], first), name="a"),
             ts.Task([feeds[1]], [second], 1, 1, schedule=writer(feeds[1], second), name="b")]
    return ts.TaskManager(tasks, {first: [feeds[0]], second: [feeds[1]]}, verbose=False)


@conformance("§1.8", "TmemAllocation(name, num_columns)")
def test_tmem_requirements_are_laid_out_by_the_task_manager():
    first, second = Accumulator(name="acc0", columns=128), Accumulator(name="acc1", columns=256)
    manager = _two_writers(first, second)
    assert (first.alloc.column, second.alloc.column) == (0, 128)
    assert first.alloc.owner is first and manager.tmem_allocator.total_columns == 384


def test_tmem_requirements_over_capacity_are_m2():
    with pytest.raises(VerificationError) as err:
        _two_writers(Accumulator(name="acc0", columns=384), Accumulator(name="acc1", columns=256))
    assert err.value.check == "M2" and "'acc0.acc' 384" in str(err.value)


@conformance("A6", "physical_ranges")
def test_overlapping_physical_ranges_are_a_race():
    shared = (("tmem", 0, 64),)
    with pytest.raises(VerificationError, match=r"race on .*tmem\[0:64\]") as err:
        _two_writers(Accumulator(name="acc0", declared=shared), Accumulator(name="acc1", declared=shared))
    assert err.value.check == "X" and "'acc0'" in str(err.value) and "'acc1'" in str(err.value)


def test_disjoint_physical_ranges_are_not_a_race():
    _two_writers(Accumulator(name="acc0", declared=(("tmem", 0, 64),)),
                 Accumulator(name="acc1", declared=(("tmem", 64, 128),)))


def test_tmem_allocations_of_two_writers_do_not_alias_each_other():
    _two_writers(Accumulator(name="acc0", columns=64), Accumulator(name="acc1", columns=64))


def test_physical_range_over_another_resources_tmem_allocation_is_a_race():
    with pytest.raises(VerificationError, match=r"tmem\[64:96\]"):
        _two_writers(Accumulator(name="acc0", columns=128), Accumulator(name="acc1", declared=(("tmem", 64, 96),)))


def test_same_range_in_another_memory_space_is_not_a_race():
    _two_writers(Accumulator(name="acc0", declared=(("tmem", 0, 64),)),
                 Accumulator(name="acc1", declared=(("dsmem", 0, 64),)))


@dataclass(kw_only=True)
class SplitAccumulator(Accumulator):
    """Two TMEM allocations, of which the producer work writes only the first when ``narrow``."""

    narrow: bool = False
    upper: object = None

    def __post_init__(self):
        self.alloc, self.upper = TmemAllocation(f"{self.name}.lo", 64), TmemAllocation(f"{self.name}.hi", 64)

    def get_tmem_requirements(self):
        return [self.alloc, self.upper]

    def get_producer_requirements(self):
        return [self.alloc] if self.narrow else None


@conformance("A6", "get_producer_requirements() / get_consumer_requirements()")
def test_producer_requirements_narrow_what_the_race_checker_compares():
    """The reference: 'the exhaustive checker uses this to build a producer-specific alias map so that
    prod_work only conflicts with aliases that overlap these ranges'; None (the default) is every
    allocation."""
    other = (("tmem", 64, 128),)      # over the upper allocation only
    with pytest.raises(VerificationError, match=r"race on .*tmem\[64:128\]"):
        _two_writers(SplitAccumulator(name="acc0"), Accumulator(name="acc1", declared=other))
    first = SplitAccumulator(name="acc0", narrow=True)
    _two_writers(first, Accumulator(name="acc1", declared=other))
    assert (first.alloc.column, first.upper.column) == (0, 64)


@pytest.mark.parametrize("keyword, value, names", [
    ("is_barrier", True, "ClassVar[bool] = True"),
    ("consumer_vars", {}, "TaskLocalVariable.uninitialized()"),
    ("producer_vars", {}, "TaskLocalVariable.uninitialized()"),
    ("pipeline", None, "pipeline_config="),
    ("consumer_wait_signaling_threads", None, "PipelineConfig(..., consumer_wait_signaling_threads="),
])
def test_reference_constructor_keyword_says_where_it_lives(keyword, value, names):
    """The reference's MemoryResource keywords that are not fields in tsjit (newcomer report 6, item 11)."""
    from tsjit.errors import UsageTypeError
    with pytest.raises(UsageTypeError) as info:
        MemoryResource(name="m", **{keyword: value})
    assert f"{keyword!r}" in str(info.value) and names in str(info.value)
    with pytest.raises(UsageTypeError, match=keyword):
        Sink(name="s", **{keyword: value})


def test_create_pipeline_names_setup_resources_and_tasks():
    from tsjit.errors import UsageTypeError
    with pytest.raises(UsageTypeError, match=r"'m'.*setup_resources_and_tasks\(\)"):
        MemoryResource(name="m").create_pipeline(None)
