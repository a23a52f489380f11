"""Reference sections "Typical lifecycle" and MemoryResource's state fields: what tsjit does instead
of per-resource pipeline objects, state objects, status flags and variable dicts, pinned by tests.

tsjit is a code generator like the reference, but it keeps every pipeline cursor (stage index,
phase, the lagging commit / release cursors), every try-wait status and every task-local
variable as SSA values of the task that owns them, so none of these exist as resource attributes.
"""
import re
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts import MemoryResource
from reference_names import conformance_rows
from test_pipeline_config import async_async_positional

conformance = pytest.mark.conformance

STATE = ("pipeline cursors and try-wait statuses are SSA values in the owning task's registers "
         "(tsjit/ts/lower_pipeline.py Cursors), not resource attributes")
SETUP = "TaskManager.setup_resources_and_tasks() places and initializes every resource's barriers at once"
VARS = ("task-local variables are TaskLocalVariable fields; values flow as schedule tokens (SSA), no "
        "variable dicts")


def _ring_llir_and_ptx():
    x = np.zeros(256, np.float32)
    kernel = tsjit.compile(async_async_positional, x, x, 8, target="sm_90a")
    return kernel.llir, kernel.ptx


@conformance_rows("A6", "pipeline",
                  "consumer_state",
                  "producer_state",
                  "producer_commit_state",
                  "consumer_release_state",
                  "consumer_status",
                  "producer_status",
                  "consumer_work_stage",
                  reason=STATE)
@conformance("A6", "dummy", reason="no DSL tracer: nothing needs keeping alive across control flow")
@conformance_rows("A6", "get_producer_acquire_state",
                  "get_producer_commit_state",
                  "get_producer_work_state",
                  "store_consumer_status",
                  "load_consumer_status",
                  "store_producer_status",
                  "load_producer_status",
                  reason=STATE)
@conformance("§1.1", "two-phase dispatch", reason="each task initializes its cursors and variables inside its own warp branch; the SSA frontend needs no IR-shape stabilisation")
def test_pipeline_state_lives_in_registers():
    llir, ptx = _ring_llir_and_ptx()
    assert "alloca" not in llir and ".local" not in ptx
    cursor_phis = re.findall(r'%"[^"]*(?:open|close)[^"]*" = phi\s+i32', llir)
    assert len(cursor_phis) >= 4                 # index and phase of each task's cursors, carried by the loop


@conformance_rows("A6", "create_pipeline",
                  "create",
                  reason=SETUP)
@conformance("A6", "initialize_runtime_state_internal", reason=STATE)
@conformance("A9", "resource.create() once per resource from setup_resources_and_tasks()", reason=SETUP)
@conformance("A9", "initialize_runtime_state_internal() once per kernel", reason=STATE)
@conformance("§1.1", "user fence/sync after setup", reason="setup_resources_and_tasks() emits fence.mbarrier_init and the CTA (or cluster) barrier itself")
@conformance("§1.8", "allocate() / assign_barrier_ptrs()", reason=SETUP)
def test_setup_places_and_initializes_every_barrier_once():
    _, ptx = _ring_llir_and_ptx()
    assert ptx.count("mbarrier.init") == 4        # 2 stages x (full, empty)
    assert ptx.count("fence.mbarrier_init") <= 1 and "bar.sync" in ptx


@dataclass(kw_only=True)
class Source(MemoryResource):
    item: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.consumer_work(returns=item)
    def load(self, stage_info):
        return 0


@dataclass(kw_only=True)
class Dest(MemoryResource):
    @ts.producer_work
    def store(self, stage_info, *, item):
        pass


@conformance_rows("A6", "consumer_vars",
                  "producer_vars",
                  "consumer_var_names",
                  "create_consumer_variables_internal",
                  "create_producer_variables_internal",
                  reason=VARS)
@conformance_rows("A9", "create_consumer/producer_variables_internal()",
                  "copy_consumer_vars_to(dst) automatic",
                  reason=VARS)
def test_variables_are_fields_and_flow_as_tokens():
    src, dst = Source(name="src"), Dest(name="dst")
    assert list(src.task_local_variables()) == ["item"]

    @ts.schedule
    def copy(s: Source, d: Dest):
        with ts.domain_loop(0, 4, 1):
            item = s.load()
            d.store(item=item)

    sched = copy(src, dst)
    assert [str(r) for r in sched.routes] == ["[#0].item -> [#1].item"]
    assert sched.steps[1].inputs["item"].variable is src.item


@conformance("A6", "__init__ keyword fields", reason="name and pipeline_config are fields; is_barrier is a "
             "class attribute; variable dicts and the pipeline object do not exist (values flow as schedule "
             "tokens, cursors live in registers)")
@conformance("A6", "consumer_wait_signaling_threads (resource field)", reason="lives on PipelineConfig "
             "(consumer_wait_signaling_threads), the one description of the barrier protocol")
def test_resource_keyword_fields():
    res = Dest(name="d", pipeline_config=None)
    assert res.name == "d" and res.pipeline_config is None and Dest.is_barrier is False
    with pytest.raises(TypeError, match="consumer_vars"):
        Dest(name="d", consumer_vars={})
