"""The reference's ``interleave_stride`` (PipelineConfig): "When the stride is > 1, N lanes share one
pipeline with num_stages total barriers; each lane starts at its lane index and advances by the
stride, which must evenly divide num_stages.  A lane may be selected by a task-local warp or by a
task's domain start.  [...]  A 4-tuple assigns role-specific strides interpreted as (producer_acquire,
producer_commit, consumer_wait, consumer_release)."

Both lane kinds feed one non-interleaved consumer warp that walks every stage in order (the checker
used to call this a deadlock): warp lanes (a 2-warp producer task, lane = its warp) and domain lanes
(two 1-warp producer tasks whose domains start at 0 and 1 with step 2).  Each kernel is compiled for
sm_90a and run on the CPU interpreter on fresh data into a poisoned output.  (The warp lanes' domain
starts at the run-time warp index, so the checker balances their trips against the consumer's.)"""
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts

conformance = pytest.mark.conformance
CHUNK, STAGES, STRIDE = 32, 4, 2


@dataclass(kw_only=True)
class Chunks(ts.MemoryResource):
    """STAGES shared-memory chunks of CHUNK Float32, each filled by one producer warp."""

    x: object
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.allocation = ts.SmemAllocation("chunks.buffers", dtype=tsjit.Float32, count=STAGES * CHUNK)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work
    def fill(self, stage_info):
        buf = self.allocation.tensor((STAGES, CHUNK))[stage_info.stage_idx]
        buf[tsjit.lane_idx()] = self.x[stage_info.loop_offset * CHUNK + tsjit.lane_idx()]

    @ts.consumer_work(returns=stage)
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Scaled(ts.MemoryResource):
    y: object
    chunks: object

    @ts.producer_work
    def write(self, stage_info, *, stage):
        buf = self.chunks.allocation.tensor((STAGES, CHUNK))[stage]
        self.y[stage_info.loop_offset * CHUNK + tsjit.lane_idx()] = buf[tsjit.lane_idx()] * 2.0 + 1.0


def _program(x, y, n_chunks, lanes):
    # producer roles advance by 2 (two lanes), consumer roles by 1: one consumer warp sees every stage
    cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        STAGES, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32),
        (1, 1, 1, 1), ts.SignalingThreads.All, ts.SignalingThreads.All, None, ts.PipelineOp.AsyncThread,
        False, (STRIDE, STRIDE, 1, 1))
    chunks = Chunks(name="chunks", pipeline_config=cfg, x=x)
    out = Scaled(name="out", y=y, chunks=chunks)

    def producer_schedule(start):
        @ts.schedule
        def produce(c: Chunks):
            with ts.domain_loop(start, n_chunks, STRIDE):
                c.acquire()
                c.fill()
                c.commit()
        return produce(chunks)

    @ts.schedule
    def consume(c: Chunks, o: Scaled):
        with ts.domain_loop(0, n_chunks, 1):
            c.wait()
            stage = c.take()
            o.write(stage=stage)
            c.release()

    if lanes == "warp":             # one task of 2 warps: warp k is lane k (its domain starts at k)
        producers = [ts.Task("producer", [], [chunks], 0, STRIDE,
                             schedule=producer_schedule(tsjit.warp_idx() % STRIDE))]
    else:                           # two 1-warp tasks: the domain start selects the lane
        producers = [ts.Task(f"producer{k}", [], [chunks], k, 1, schedule=producer_schedule(k))
                     for k in range(STRIDE)]
    consumer = ts.Task("consumer", [chunks], [out], STRIDE, 1, schedule=consume(chunks, out))
    manager = ts.TaskManager(producers + [consumer], {out: [chunks]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@tsjit.kernel
def lanes_scale(x, y, N_CHUNKS: tsjit.Constexpr[int], LANES: tsjit.Constexpr[str]):
    _program(x, y, N_CHUNKS, LANES)


@conformance("§1.4", "warp-lane vs domain-lane interleave")
@pytest.mark.parametrize("lanes", ["warp", "domain"])
def test_lanes_feed_a_non_interleaved_consumer(lanes, monkeypatch):
    x = np.zeros(10 * CHUNK, np.float32)
    compiled = tsjit.compile(lanes_scale, x, x, 10, lanes, target="sm_90a")
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.ptx.count("mbarrier.init") == 2 * STAGES
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    n_chunks = 10
    x = np.random.default_rng().standard_normal(n_chunks * CHUNK).astype(np.float32)
    y = tsjit.empty(n_chunks * CHUNK, tsjit.Float32).fill_bytes(0xFF)
    lanes_scale[(1,), ((STRIDE + 1) * 32,)](tsjit.to_device(x), y, n_chunks, lanes)
    assert np.array_equal(y.numpy(), x * np.float32(2.0) + np.float32(1.0))
