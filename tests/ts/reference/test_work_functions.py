"""Reference section ``consumer_work`` / ``producer_work``: the decorator's bare and factory forms
with the reference's keywords, ``work_attrs=WorkAttr.AUXILIARY``, and the raw schedule-list labels
of the Notes (``(smem, ScheduleStage.ConsumerWork, "build_desc_a")``,
``(smem, ScheduleStage.ProducerWork, "tma_load_a")``).
"""
from dataclasses import dataclass

import pytest

from tsjit.lang.dtypes import Int32
from tsjit.ts import (MemoryResource, ScheduleStage, TaskLocalVariable, WorkAttr, consumer_work,
                      producer_work, schedule_from_entries, work_methods)
from reference_names import cute

conformance = pytest.mark.conformance


@dataclass(kw_only=True)
class Smem(MemoryResource):
    desc: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.desc = TaskLocalVariable(dtype=Int32, default=0)

    @producer_work
    @cute.jit
    def tma_load_a(self, stage_info):
        pass

    @producer_work(work_attrs=WorkAttr.AUXILIARY)
    def prefetch(self, stage_info):
        pass

    @consumer_work(method=None, work_attrs=WorkAttr.NONE, returns=desc)
    def build_desc_a(self, stage_info):
        return 0

    @consumer_work(work_attrs=WorkAttr.AUXILIARY)
    def note(self, stage_info):
        pass


@conformance("A5", "@consumer_work bare and factory forms")
def test_decorator_forms_register_each_method_at_its_stage():
    methods = work_methods(Smem)
    assert {label: spec.stage for label, spec in methods.items()} == {
        "tma_load_a": ScheduleStage.ProducerWork, "prefetch": ScheduleStage.ProducerAuxWork,
        "build_desc_a": ScheduleStage.ConsumerWork, "note": ScheduleStage.ConsumerAuxWork}
    assert methods["build_desc_a"].returns == ("desc",)


def test_bare_consumer_work_with_method_keyword():
    def load(self, stage_info):
        return 0
    assert consumer_work(method=load) is load and load.__tsjit_work__.label == "load"


def test_raw_schedule_labels_of_the_notes():
    smem = Smem(name="smem")
    sched = schedule_from_entries([(smem, ScheduleStage.ProducerWork, "tma_load_a"),
                                   (smem, ScheduleStage.ConsumerWork, "build_desc_a")], end=2)
    assert [(s.stage, s.label) for s in sched.steps] == [
        (ScheduleStage.ProducerWork, "tma_load_a"), (ScheduleStage.ConsumerWork, "build_desc_a")]
    assert sched.steps[1].outputs == (smem.desc,)
