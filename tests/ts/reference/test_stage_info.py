"""Reference section ``StageInfo``: every field, valid in every phase (Head, Loop, Tail), and the
label-dispatch example (``cutlass.const_expr(stage_info.label == WorkLabel.K_DESC)``) pasted as the
reference writes it, compiled for sm_90a.

Work bodies call :func:`probe`, a plain Python function, which the frontend runs at compile time:
it records the StageInfo each step receives.
"""
import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.lang.values import Value
from tsjit.ts import ResourceContext, StageInfo
from reference_names import cutlass

conformance = pytest.mark.conformance
PROBES: list = []


def probe(tag, stage_info):
    """Compile time: remember what a work body saw."""
    PROBES.append((tag, stage_info))


class WorkLabel:
    K_DESC = "k_desc"
    V_DESC = "v_desc"


@dataclass(kw_only=True)
class KvDescriptors(ts.MemoryResource):
    """Two named consumer works sharing one body that switches on the label."""

    out: object

    def describe(self, stage_info):
        # -- pasted: StageInfo.label ---------------------------------------------------------------
        if cutlass.const_expr(stage_info.label == WorkLabel.K_DESC):
            ...  # K descriptor logic
            probe("k", stage_info)
        elif cutlass.const_expr(stage_info.label == WorkLabel.V_DESC):
            ...  # V descriptor logic
            probe("v", stage_info)

    @ts.consumer_work
    def k_desc(self, stage_info):
        self.describe(stage_info)

    @ts.consumer_work
    def v_desc(self, stage_info):
        self.describe(stage_info)


@dataclass(kw_only=True)
class Staged(ts.MemoryResource):
    x: object
    in_flight: object
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(f"{self.name}.tiles", dtype=tsjit.Float32,
                                            count=self.pipeline_config.num_stages * 32)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work
    def fill(self, stage_info):
        probe("fill", stage_info)
        if tsjit.thread_idx().x == 0:
            self.in_flight[stage_info.loop_offset] = stage_info.num_active_stages
        tiles = self.allocation.tensor((self.pipeline_config.num_stages, 32))
        tiles[stage_info.stage_idx][tsjit.thread_idx().x] = self.x[stage_info.loop_offset * 32 + tsjit.thread_idx().x]

    @ts.consumer_work(returns=stage)
    def take(self, stage_info):
        probe("take", stage_info)
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Sink(ts.MemoryResource):
    y: object
    ring: object

    @ts.producer_work
    def write(self, stage_info, *, stage):
        tiles = self.ring.allocation.tensor((self.ring.pipeline_config.num_stages, 32))
        lane = tsjit.thread_idx().x - 32
        self.y[stage_info.loop_offset * 32 + lane] = tiles[stage][lane] + 1.0


def _kernel(advance_on_acquire):
    @tsjit.kernel
    def staged(x, y, chunks, kv_out, in_flight):
        cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
            4, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32),
            advance_on_acquire=advance_on_acquire)
        ring = Staged(name="ring", pipeline_config=cfg, x=x, in_flight=in_flight)
        sink = Sink(name="sink", y=y, ring=ring)
        kv = KvDescriptors(name="kv", out=kv_out)

        @ts.schedule
        def produce(r: Staged):
            with ts.domain_loop(0, chunks, 1):
                r.acquire()
                r.fill()
                r.commit()

        @ts.schedule
        def consume(r: Staged, s: Sink, d: KvDescriptors):
            d.k_desc()                     # Head
            with ts.domain_loop(0, chunks, 1):
                r.wait()
                stage = r.take()
                s.write(stage=stage)
                r.release()
            d.v_desc()                     # Tail

        producer = ts.Task([], [ring], 0, 1, schedule=produce(ring), name="producer")
        consumer = ts.Task([ring, kv], [sink], 1, 1, schedule=consume(ring, sink, kv), name="consumer")
        manager = ts.TaskManager([producer, consumer], {sink: [ring, kv]}, verbose=False)
        manager.setup_resources_and_tasks()
        manager.run()
    return staged


STAGED = _kernel(False)
STAGED_DELAYED = _kernel(True)


_SEEN: dict = {}


def _compile(kernel):
    """The StageInfo per probe tag of ``kernel``'s one compilation (later calls hit the cache)."""
    if kernel not in _SEEN:
        PROBES.clear()
        x = np.zeros(256, np.float32)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TSJIT_ALWAYS_COMPILE", "1")     # the probes run only when the frontend does
            compiled = tsjit.compile(kernel, x, x, 8, x, np.zeros(8, np.int32), target="sm_90a")
        assert compiled.cubin[:4] == b"\x7fELF"
        _SEEN[kernel] = dict(PROBES)
    return _SEEN[kernel]


@conformance("§1.3", "StageInfo")
def test_stage_info_fields_in_the_reference_order():
    assert [f.name for f in dataclasses.fields(StageInfo)] == [
        "loop_offset", "loop_start", "loop_end", "loop_step", "stage_idx", "label", "barrier", "work_tile",
        "num_active_stages", "context", "task_cache"]
    info = StageInfo(3, 0, 8, 1, None, "load", None, None)
    assert (info.num_active_stages, info.context, info.task_cache) == (0, None, None)


@conformance("A3", "label")
def test_label_example_folds_to_one_branch_per_method():
    probes = _compile(STAGED)
    assert probes["k"].label == "k_desc" and probes["v"].label == "v_desc"


@conformance("A3", "loop_start, loop_end, loop_step")
def test_loop_bounds_are_set_in_head_loop_and_tail():
    probes = _compile(STAGED)
    for tag in ("k", "take", "v"):        # Head, Loop, Tail
        info = probes[tag]
        assert info.loop_start is not None and info.loop_end is not None and info.loop_step is not None, tag
    assert probes["k"].loop_start == 0 and probes["k"].loop_step == 1


@conformance("A3", "stage_idx")
def test_stage_idx_is_none_without_a_pipeline():
    probes = _compile(STAGED)
    assert probes["k"].stage_idx is None and probes["k"].barrier is None
    assert isinstance(probes["take"].stage_idx, Value) and probes["take"].barrier is not None


@conformance("A3", "num_active_stages")
def test_num_active_stages_counts_delayed_commit_stages():
    assert _compile(STAGED)["fill"].num_active_stages == 0
    delayed = _compile(STAGED_DELAYED)["fill"].num_active_stages
    assert isinstance(delayed, Value) and delayed.dtype is tsjit.Int32
    assert _compile(STAGED_DELAYED)["take"].num_active_stages == 0


@conformance("A3", "context")
@conformance("§1.1", "ResourceContext(smem_base, tmem_ptr_i32)")
def test_context_carries_the_allocator_base():
    context = _compile(STAGED)["fill"].context
    assert isinstance(context, ResourceContext)
    assert context.smem_base is not None and context.tmem_ptr_i32 is None


@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("kernel, in_flight", [(STAGED, 0), (STAGED_DELAYED, 1)], ids=["immediate", "delayed_commit"])
def test_staged_ring_runs(kernel, in_flight):
    PROBES.clear()   # the probes' record of earlier compiles holds run-time values no kernel may depend on
    chunks = 8
    x = np.random.default_rng().standard_normal(chunks * 32).astype(np.float32)
    y = tsjit.empty(chunks * 32, tsjit.Float32).fill_bytes(0x7F)
    seen = tsjit.empty(chunks, tsjit.Int32).fill_bytes(0x7F)
    kernel[(1,), (64,)](tsjit.to_device(x), y, chunks, tsjit.empty(1, tsjit.Float32), seen)
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) + 1.0, rtol=1e-6)
    # acquire -> fill -> commit: while fill runs, the stage it fills is the one in flight
    assert (seen.numpy() == in_flight).all()


@conformance("A3", "label")
def test_label_example_compiles_unchanged_for_sm100a():
    """The reference's examples are Blackwell kernels: the pasted label example builds for sm_100a unchanged."""
    from blackwell.toolchain import sm100_unavailable_reason
    if sm100_unavailable_reason():
        pytest.skip(sm100_unavailable_reason())
    x = np.zeros(256, np.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSJIT_ALWAYS_COMPILE", "1")
        PROBES.clear()
        compiled = tsjit.compile(STAGED, x, x, 8, x, np.zeros(8, np.int32), target="sm_100a")
    assert compiled.cubin[:4] == b"\x7fELF" and ".target sm_100a" in compiled.ptx
    assert dict(PROBES)["k"].label == "k_desc" and dict(PROBES)["v"].label == "v_desc"
