"""The feature inventory's §0 (the reference's caveats: doc-only features, placement asserts) and §4
(printouts) rows of the conformance audit, as a program written against the reference sees them."""
from dataclasses import dataclass

import pytest

from tsjit import ts
from tsjit.examples import checker_mistakes
from tsjit.errors import VerificationError
from tsjit.lang.dtypes import Float32
from tsjit.ts import (MemoryResource, PipelineGroup, PipelineGroupMode, SmemAllocation, SmemAllocator, Task,
                      TaskLocalVariable, TaskManager, TileSchedulerConfig, TmemAllocation, VerificationWarning,
                      WorkQueue, consumer_work, domain_loop, producer_work, schedule, work_tile_loop)
from reference_names import conformance_rows

conformance = pytest.mark.conformance


@dataclass(kw_only=True)
class Source(MemoryResource):
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = TaskLocalVariable(Float32, default=0)

    @consumer_work(returns=item)
    def load(self, stage_info):
        return 0


@dataclass(kw_only=True)
class Sink(MemoryResource):
    @producer_work
    def put(self, stage_info, *, item):
        pass


@dataclass(kw_only=True)
class Ring(MemoryResource):
    """A 4-stage ring of 1 KiB per stage in shared memory."""

    item: TaskLocalVariable = TaskLocalVariable.uninitialized()
    tiles: SmemAllocation = None

    def __post_init__(self):
        self.item = TaskLocalVariable(Float32, default=0)
        self.tiles = SmemAllocation(f"{self.name}.tiles", 4 * 1024)

    def get_smem_requirements(self):
        return [self.tiles]

    @producer_work
    def fill(self, stage_info, *, item):
        pass

    @consumer_work(returns=item)
    def take(self, stage_info):
        return 0


@dataclass(kw_only=True)
class Accumulator(MemoryResource):
    acc: TmemAllocation = None

    def __post_init__(self):
        self.acc = TmemAllocation(f"{self.name}.acc", 128)

    def get_tmem_requirements(self):
        return [self.acc]

    @producer_work
    def put(self, stage_info, *, item):
        pass


def _threads(size):
    return ts.CooperativeGroup(ts.Agent.Thread, size)


def _ring(name="ring"):
    return Ring(name=name, pipeline_config=ts.PipelineConfig.create_async_async_pipeline_cfg(4, _threads(32),
                                                                                             _threads(32)))


def _ring_program(ring, *, consumer_writes_source=False, **options):
    source, sink = Source(name="source"), Sink(name="sink")

    @schedule
    def produce(s, r):
        with domain_loop(0, 8, 1):
            item = s.load()
            r.acquire()
            r.fill(item=item)
            r.commit()

    @schedule
    def consume(r, d):
        with domain_loop(0, 8, 1):
            r.wait()
            item = r.take()
            r.release()
            d.put(item=item)

    tasks = [Task([source], [ring], 0, 1, schedule=produce(source, ring), name="load"),
             Task([ring], [sink], 1, 1, schedule=consume(ring, sink), name="store")]
    return TaskManager(tasks, {ring: [source], sink: [ring]}, **options)


# -- §4 printouts --------------------------------------------------------------------------------
@conformance("§4", "SMEM line and TMEM line")
def test_verbose_manager_prints_the_smem_and_the_tmem_line(capsys):
    source, acc = Source(name="source"), Accumulator(name="accumulator")

    @schedule
    def accumulate(s, a):
        with domain_loop(0, 4, 1):
            a.put(item=s.load())

    ring = _ring()
    _ring_program(ring, verbose=True)
    smem = capsys.readouterr().out
    assert "[smem-layout]" in smem and "ring.tiles" in smem and "/ 232448 B" in smem
    TaskManager([Task([source], [acc], 0, 1, schedule=accumulate(source, acc), name="mma")], {acc: [source]},
                verbose=True)
    tmem = capsys.readouterr().out
    assert "[tmem-layout] 1 allocation(s)" in tmem and "total 128 / 512 columns" in tmem


@conformance("§4", "exhaustive checker printout", reason=(
    "a summary per variant (states, complete runs, time), notes, alias pairs and every finding with the "
    "shortest interleaving that reaches it; no per-state dump of a SAFE program (thousands of lines for a "
    "GEMM)"))
def test_checker_printout_is_the_summary_and_each_findings_interleaving():
    manager = _ring_program(_ring(), verbose=False)
    text = manager.exhaustive_result.format()
    assert text.startswith("[exhaustive]") and "variant" in text and "SAFE" in text.splitlines()[-1]
    tasks, graph, options = checker_mistakes.build_two_tasks_write_aliased_buffers(fixed=False)
    with pytest.warns(VerificationWarning):
        racy = TaskManager(tasks, graph, verbose=False, skip_validation=True, **options)
    text = racy.exhaustive_result.format()
    assert "RACE:" in text and "buf_a" in text and "buf_b" in text and "aliased:" in text
    assert "shortest interleaving" in text and "UNSAFE" in text.splitlines()[-1]


# -- §0 the reference's caveats ------------------------------------------------------------------
@conformance("§0", "WorkQueue placement rules are asserts (skip_validation cannot soften)", reason=(
    "WorkQueue placement is check Q1, a VerificationError like every other check, so skip_validation=True "
    "makes it a VerificationWarning"))
def test_queue_placement_is_q1_and_skip_validation_softens_it():
    def program(**options):
        config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(8)
        wq = WorkQueue(name="wq", tile_scheduler_config=config)
        source, sink = Source(name="source"), Sink(name="sink")

        @schedule
        def out_of_order(q, s, d):
            with work_tile_loop(q):
                with domain_loop(0, 4):
                    d.put(item=s.load())
                q.wait()
                q.release()
                q.get_and_advance_work_tile()
        task = Task("copy", [wq, source], [sink], 0, 4, out_of_order(wq, source, sink))
        return TaskManager([task], {sink: [source, wq]}, verbose=False, **options)

    with pytest.raises(VerificationError) as err:
        program()
    assert err.value.check == "Q1"
    with pytest.warns(VerificationWarning, match=r"\[Q1\]"):
        program(skip_validation=True)


@conformance("§0", "BarrierAllocator (docs only)", reason=(
    "docs-only in the reference and absent from its source: the SmemAllocator lays out every pipeline's "
    "and group's mbarriers next to the data (barrier_bytes, the [smem-layout] report)"))
def test_the_smem_allocator_places_the_barriers():
    assert not hasattr(ts, "BarrierAllocator")
    manager = _ring_program(_ring(), verbose=False)
    assert manager.smem_allocator.barrier_bytes == 2 * 4 * 8      # full + empty per stage, 8 bytes each


@conformance("§0", "group.smem_a.wait() inside a schedule (docs example)")
def test_group_members_are_reached_through_the_group_inside_a_schedule():
    smem_a, smem_b = _ring("smem_a"), _ring("smem_b")
    ab_sync = PipelineGroup("ab_sync", [smem_a, smem_b], PipelineGroupMode.Merge)
    source, sink = Source(name="source"), Sink(name="sink")

    @schedule
    def load(s, r):
        with domain_loop(0, 4, 1):
            item = s.load()
            r.acquire()
            r.fill(item=item)
            r.commit()

    @schedule
    def consume(group, d):
        with domain_loop(0, 4, 1):
            group.smem_a.wait()
            group.smem_b.wait()
            d.put(item=group.smem_a.take())
            group.release()

    allocator = SmemAllocator()
    allocator.add_pipeline_group(ab_sync)
    tasks = [Task([source], [smem_a], 0, 1, schedule=load(source, ab_sync.smem_a), name="la"),
             Task([source], [smem_b], 1, 1, schedule=load(source, ab_sync.smem_b), name="lb"),
             Task([smem_a, smem_b], [sink], 2, 1, schedule=consume(ab_sync, sink), name="st")]
    manager = TaskManager(tasks, {smem_a: [source], smem_b: [source], sink: [smem_a, smem_b]}, verbose=False,
                          smem_allocator=allocator)
    assert manager.exhaustive_result.verdict == "SAFE"


def test_credit_line_of_an_over_acquired_ring_has_no_negative_slot_count():
    """A producer that never commits, under skip_validation: the checker's credit line says the acquires
    ran past the free slots instead of printing a negative slot count (newcomer report #26)."""
    ring, source, sink = _ring(), Source(name="source"), Sink(name="sink")

    @schedule
    def produce(s, r):
        with domain_loop(0, 8, 1):
            item = s.load()
            r.acquire()
            r.fill(item=item)

    @schedule
    def consume(r, d):
        with domain_loop(0, 8, 1):
            r.wait()
            item = r.take()
            r.release()
            d.put(item=item)

    tasks = [Task([source], [ring], 0, 1, schedule=produce(source, ring), name="load"),
             Task([ring], [sink], 1, 1, schedule=consume(ring, sink), name="store")]
    with pytest.warns(VerificationWarning) as caught:
        TaskManager(tasks, {ring: [source], sink: [ring]}, verbose=False, skip_validation=True)
    credits = [line for w in caught for line in str(w.message).splitlines() if "credits of 'ring'" in line]
    assert credits and all("no free slot (" in line and "-" not in line.split("releases),")[1].split(";")[0]
                           for line in credits)
