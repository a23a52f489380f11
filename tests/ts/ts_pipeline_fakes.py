"""Resources and schedules of the pipeline tutorials, built on the host (no GPU, no kernel).

(a) 2-D TMA copy: a 1-warp TMA load task, a 4-warp store task, a 3-warp padding task.
(b) static persistent copy with ``work_tile_loop(wq, skip_if=...)`` and ``skippable()``.
(c) an AsyncAsync ping-pong between two warpgroups.
(d) an interleaved AsyncAsync ring (``interleave_stride=2``): warp lanes or domain lanes.
"""
from __future__ import annotations

from dataclasses import dataclass

from tsjit.lang.dtypes import Float32, Int32
from tsjit.ts import (Agent, CooperativeGroup, MemoryResource, PipelineConfig, SmemAllocation,
                      Task, TaskLocalVariable, TaskManager, TileSchedulerConfig, WorkQueue,
                      consumer_work, domain_loop, producer_work, schedule, work_tile_loop)
from ts_fakes import FakeValue

BOX = (64, 64)
BOX_BYTES = BOX[0] * BOX[1] * 4


class FakeTensorMap:
    """What a TensorMap kernel argument looks like to the host checks (P2)."""

    def __init__(self, box=BOX, itemsize=4):
        self.box_shape = box
        self.box_bytes = box[0] * box[1] * itemsize


def group(size: int) -> CooperativeGroup:
    return CooperativeGroup(Agent.Thread, size)


def tma_config(stages=4, num_bytes=BOX_BYTES, producer=1, consumer=128, **kw) -> PipelineConfig:
    return PipelineConfig.create_tma_async_pipeline_cfg(stages, num_bytes, group(producer),
                                                        group(consumer), **kw)


def async_config(stages=2, producer=128, consumer=128, **kw) -> PipelineConfig:
    return PipelineConfig.create_async_async_pipeline_cfg(stages, group(producer),
                                                          group(consumer), **kw)


@dataclass(kw_only=True)
class SmemTiles(MemoryResource):
    """A ring of shared-memory tiles filled by TMA (producer) and read by threads (consumer)."""

    src_map: object = None
    stage: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.stage = TaskLocalVariable(Int32, default=0)

    def get_smem_requirements(self):
        count = self.pipeline_config.num_stages * BOX[0] * BOX[1]
        return [SmemAllocation(f"{self.name}.tiles", dtype=Float32, count=count, alignment=1024)]

    @producer_work
    def tma_load(self, stage_info):
        pass

    @consumer_work(returns="stage")
    def read(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Staged(MemoryResource):
    """A ring written by threads (AsyncThread producer)."""

    stage: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.stage = TaskLocalVariable(Int32, default=0)

    @producer_work
    def fill(self, stage_info):
        pass

    @consumer_work(returns="stage")
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class GmemOut(MemoryResource):
    @producer_work
    def store(self, stage_info, stage):
        pass


@dataclass(kw_only=True)
class GmemIn(MemoryResource):
    item: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.item = TaskLocalVariable(Float32, default=0)

    @consumer_work(returns="item")
    def load(self, stage_info):
        return 0


@dataclass(kw_only=True)
class GmemSink(MemoryResource):
    @producer_work
    def put(self, stage_info, item):
        pass


def build(tasks, graph, **kw) -> TaskManager:
    """A quiet TaskManager.  The exhaustive checker (X, tested in tests/ts/verify) is off unless
    ``exhaustive=True``: these tests pin the structural checks and the credit walk."""
    kw.setdefault("verbose", False)
    kw.setdefault("exhaustive_deadlock_race_check", kw.pop("exhaustive", False))
    return TaskManager(tasks, graph, **kw)


# -- (a) 2-D TMA copy ---------------------------------------------------------------------
@schedule
def tma_load_schedule(s):
    with domain_loop(FakeValue("bx"), FakeValue("num_tiles"), FakeValue("gx")):
        s.try_acquire()
        s.acquire()
        s.tma_load()
        s.commit()


@schedule
def tma_store_schedule(s, g):
    with domain_loop(FakeValue("bx"), FakeValue("num_tiles"), FakeValue("gx")):
        s.try_wait()
        s.wait()
        stage = s.read()
        g.store(stage)
        s.release()


@schedule
def padding_schedule():
    with domain_loop(0, 0, 1):
        pass


def tma_copy(config=None, store_warps=4, load_warps=1, registers=True, load=None, store=None):
    """Tutorial (a): returns (tasks, graph, smem, gmem)."""
    config = config or tma_config(consumer=store_warps * 32, producer=load_warps)
    smem = SmemTiles(name="smem", pipeline_config=config, src_map=FakeTensorMap())
    gmem = GmemOut(name="gmem")
    small, big = (40, 232) if registers else (None, None)
    tasks = [Task("load", [], [smem], 0, load_warps, (load or tma_load_schedule)(smem),
                  num_registers=small),
             Task("padding", [], [], load_warps, 4 - load_warps, padding_schedule(),
                  num_registers=small),
             Task("store", [smem], [gmem], 4, store_warps,
                  (store or tma_store_schedule)(smem, gmem), num_registers=big)]
    return tasks, {gmem: [smem]}, smem, gmem


# -- (b) static persistent copy -----------------------------------------------------------
def past_the_end(tile):
    return tile.tile_idx * 2048 >= FakeValue("n")


@schedule
def persistent_schedule(q, s, d):
    q.init_work_tile()
    with work_tile_loop(q, skip_if=past_the_end) as wtl:
        with wtl.skippable():
            with domain_loop(FakeValue("tx"), 2048, 128):
                d.put(s.load())
        q.try_wait()
        q.wait()
        q.get_and_advance_work_tile()
        q.release()


def persistent_copy(schedule_fn=None, tiles=(40,)):
    """Tutorial (b): returns (tasks, graph, wq)."""
    config = TileSchedulerConfig.create_static_persistent_tile_scheduler_params(*tiles)
    wq = WorkQueue(name="wq", tile_scheduler_config=config)
    src, dst = GmemIn(name="src"), GmemSink(name="dst")
    task = Task("copy", [wq, src], [dst], 0, 4, (schedule_fn or persistent_schedule)(wq, src, dst))
    return [task], {dst: [src, wq]}, wq


# -- (c) ping-pong between two warpgroups --------------------------------------------------
@schedule
def produce_schedule(c):
    with domain_loop(FakeValue("bx"), FakeValue("chunks"), FakeValue("gx")):
        c.acquire()
        c.fill()
        c.commit()


@schedule
def consume_schedule(c, o):
    with domain_loop(FakeValue("bx"), FakeValue("chunks"), FakeValue("gx")):
        c.wait()
        stage = c.take()
        o.store(stage)
        c.release()


def ping_pong(config=None):
    """Tutorial (c): warpgroup 0 fills a 2-stage ring, warpgroup 1 drains it."""
    config = config or async_config(stages=2, producer=128, consumer=128)
    ring = Staged(name="ring", pipeline_config=config)
    out = GmemOut(name="out")
    tasks = [Task("ping", [], [ring], 0, 4, produce_schedule(ring)),
             Task("pong", [ring], [out], 4, 4, consume_schedule(ring, out))]
    return tasks, {out: [ring]}, ring


# -- (d) interleaved ring -------------------------------------------------------------------
def interleaved_warp_lanes(config=None):
    """Tutorial (d): a 2-warp producer and a 2-warp consumer, 4 stages, stride 2."""
    config = config or async_config(stages=4, producer=32, consumer=32, interleave_stride=2)
    ring = Staged(name="ring", pipeline_config=config)
    out = GmemOut(name="out")
    tasks = [Task("producer", [], [ring], 0, 2, produce_schedule(ring)),
             Task("consumer", [ring], [out], 2, 2, consume_schedule(ring, out))]
    return tasks, {out: [ring]}, ring


def lane_schedule(lane: int, stride: int = 2, end: int = 8):
    @schedule
    def produce_lane(c):
        with domain_loop(lane, end, stride):
            c.acquire()
            c.fill()
            c.commit()
    return produce_lane


@schedule
def consume_pairs(c, o):
    with domain_loop(0, 8, 2):
        c.wait()
        stage = c.take()
        o.store(stage)
        c.release()


def interleaved_domain_lanes(lanes=(0, 1), config=None):
    """Tutorial (d'): two 1-warp producer tasks on domain lanes 0 and 1, a 2-warp consumer."""
    config = config or async_config(stages=4, producer=32, consumer=32, interleave_stride=2)
    ring = Staged(name="ring", pipeline_config=config)
    out = GmemOut(name="out")
    tasks = [Task(f"lane{i}", [], [ring], i, 1, lane_schedule(lane)(ring))
             for i, lane in enumerate(lanes)]
    tasks.append(Task("consumer", [ring], [out], len(lanes), 2, consume_pairs(ring, out)))
    return tasks, {out: [ring]}, ring
