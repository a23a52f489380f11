"""C0's deadlock report gives the source line of every blocked step, not only the step's number."""
import inspect
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts


@dataclass(kw_only=True)
class Chunks(ts.MemoryResource):
    """A ring of 32-float chunks in shared memory written by one producer warp."""

    x: object
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(f"{self.name}.buffers", dtype=tsjit.Float32,
                                            count=self.pipeline_config.num_stages * 32)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work()
    def fill(self, stage_info):
        buffers = self.allocation.tensor((self.pipeline_config.num_stages, 32))
        buffers[stage_info.stage_idx][tsjit.lane_idx()] = self.x[stage_info.loop_offset * 32 + tsjit.lane_idx()]

    @ts.consumer_work(returns="stage")
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Sink(ts.MemoryResource):
    y: object
    chunks: object

    @ts.producer_work()
    def write(self, stage_info, stage):
        buffers = self.chunks.allocation.tensor((self.chunks.pipeline_config.num_stages, 32))
        self.y[stage_info.loop_offset * 32 + tsjit.lane_idx()] = buffers[stage][tsjit.lane_idx()]


@tsjit.kernel
def copy_chunks(x, y, num_chunks, COMMIT: tsjit.Constexpr[bool]):
    cfg = ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32))
    chunks = Chunks(name="chunks", pipeline_config=cfg, x=x)
    sink = Sink(name="sink", y=y, chunks=chunks)

    @ts.schedule
    def produce(c: Chunks):
        with ts.domain_loop(0, num_chunks, 1):
            c.acquire()
            c.fill()
            if tsjit.const_expr(COMMIT):
                c.commit()

    @ts.schedule
    def consume(c: Chunks, s: Sink):
        with ts.domain_loop(0, num_chunks, 1):
            c.wait()   # blocked when the producer never commits
            stage = c.take()
            s.write(stage)
            c.release()

    producer = ts.Task("producer", [], [chunks], warp_idx=0, num_warps=1, schedule=produce(chunks))
    consumer = ts.Task("consumer", [chunks], [sink], warp_idx=1, num_warps=1, schedule=consume(chunks, sink))
    manager = ts.TaskManager([producer, consumer], {sink: [chunks]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_blocked_wait_of_a_missing_commit_names_its_source_line():
    lines, first = inspect.getsourcelines(copy_chunks.fn)
    wait_line = first + next(i for i, line in enumerate(lines) if "c.wait()" in line)
    with pytest.raises(tsjit.VerificationError) as info:
        tsjit.compile(copy_chunks, np.zeros(128, np.float32), np.zeros(128, np.float32), 4, False)
    first_line = str(info.value).splitlines()[0]
    assert info.value.check == "C0" and "task 'consumer'" in first_line and "is blocked!" in first_line
    assert f"test_blocked_step_location.py:{wait_line})" in first_line, first_line


def test_the_program_with_its_commit_compiles():
    tsjit.compile(copy_chunks, np.zeros(128, np.float32), np.zeros(128, np.float32), 4, True)
