"""Five Task Scheduling programs with one mistake each, and their corrected twins (tutorial 8, "when the
checker says no").

Each ``build_*(fixed)`` function builds the tasks and the resource graph of one small program on the
host: the TaskManager checks a program when it is constructed, before any kernel is compiled, so no GPU
and no device arrays are needed (the resources' ``x`` / ``y`` stay None: the work bodies are read by the
checker, never run).  ``fixed=False`` gives the broken program, ``fixed=True`` its corrected twin.

* :func:`build_wait_with_no_commit`: the producer never commits; the consumer waits forever (C0);
* :func:`build_tma_bytes_short_by_one_tile`: ``num_bytes`` counts the A tile of a stage but not the B
  tile (P2);
* :func:`build_producer_releases_its_own_ring`: the producer task also releases the ring it fills, a
  consumer operation (R0);
* :func:`build_acquire_twice_one_stage`: a one-stage ``advance_on_acquire`` ring acquired twice per
  iteration; the second acquire waits for a release that needs the commit after it (C0, too shallow);
* :func:`build_two_tasks_write_aliased_buffers`: two tasks write shared-memory buffers that an alias
  group lays over the same bytes, at the same time (X, a race).

:data:`MISTAKES` maps each name to ``(what is wrong, build function)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import tsjit
from tsjit import ts

__all__ = ["Chunks", "ScaledOut", "TileLoads", "Result", "Writer", "Trigger", "build_wait_with_no_commit",
           "build_tma_bytes_short_by_one_tile", "build_producer_releases_its_own_ring",
           "build_acquire_twice_one_stage", "build_two_tasks_write_aliased_buffers", "MISTAKES"]

CHUNK = 128                 # Float32 elements per ring stage
TILE_BYTES = 64 * 64 * 2    # one 64 x 64 bf16 TMA tile


def threads(n: int) -> ts.CooperativeGroup:
    """An arrival count of ``n`` threads."""
    return ts.CooperativeGroup(ts.Agent.Thread, n)


@dataclass(kw_only=True)
class Chunks(ts.MemoryResource):
    """A ring of shared-memory chunks: a producer warp copies ``x`` into a stage, consumers read it."""

    x: object = None
    allocation: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(f"{self.name}.buffers", dtype=tsjit.Float32,
                                            count=self.pipeline_config.num_stages * CHUNK)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work
    def fill(self, stage_info):
        buf = self.allocation.tensor((self.pipeline_config.num_stages, CHUNK))[stage_info.stage_idx]
        for i in range(tsjit.lane_idx(), CHUNK, 32):
            buf[i] = self.x[stage_info.loop_offset * CHUNK + i]

    @ts.consumer_work(returns=stage)
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class ScaledOut(ts.MemoryResource):
    """``y = 2 * stage``: the consumer's store reads the ring stage it is given."""

    y: object = None
    ring: object = None

    @ts.producer_work
    def write(self, stage_info, *, stage):
        buf = self.ring.allocation.tensor((self.ring.pipeline_config.num_stages, CHUNK))[stage]
        i = tsjit.thread_idx().x - 32
        self.y[stage_info.loop_offset * CHUNK + i] = buf[i] * 2.0


def _copy_program(config, *, producer_commits=True, producer_releases=False, acquires=1):
    """One producer warp fills ``ring`` (``config``), four consumer warps write ``out`` from it."""
    ring = Chunks(name="ring", pipeline_config=config)
    out = ScaledOut(name="out", ring=ring)

    @ts.schedule
    def produce(r: Chunks):
        with ts.domain_loop(0, 6, 1):
            for _ in range(acquires):
                r.acquire()
            r.fill()
            if producer_commits:
                r.commit()
            if producer_releases:
                r.release()

    @ts.schedule
    def consume(r: Chunks, o: ScaledOut):
        with ts.domain_loop(0, 6, 1):
            r.wait()
            stage = r.take()
            o.write(stage=stage)
            r.release()

    tasks = [ts.Task("prod", [], [ring], 0, 1, schedule=produce(ring)),
             ts.Task("cons", [ring], [out], 1, 4, schedule=consume(ring, out))]
    return tasks, {out: [ring]}, {}


def build_wait_with_no_commit(fixed: bool):
    """The producer acquires and fills each stage but never commits it."""
    return _copy_program(ts.PipelineConfig.create_async_async_pipeline_cfg(4, threads(32), threads(128)),
                         producer_commits=fixed)


def build_producer_releases_its_own_ring(fixed: bool):
    """The producer task also calls ``r.release()``, an operation of the ring's consumers."""
    return _copy_program(ts.PipelineConfig.create_async_async_pipeline_cfg(4, threads(32), threads(128)),
                         producer_releases=not fixed)


def build_acquire_twice_one_stage(fixed: bool):
    """A one-stage ring whose acquire advances the cursor, acquired twice per iteration (fixed: once)."""
    config = ts.PipelineConfig.create_async_async_pipeline_cfg(1, threads(32), threads(128),
                                                               advance_on_acquire=True)
    return _copy_program(config, acquires=1 if fixed else 2)


@dataclass(kw_only=True)
class TileLoads(ts.MemoryResource):
    """A TMA ring whose producer loads an A tile and a B tile into each stage."""

    a_map: object = None
    b_map: object = None
    allocation: object = None

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(f"{self.name}.tiles", 2 * TILE_BYTES * self.pipeline_config.num_stages,
                                            alignment=1024)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work
    def load_a(self, stage_info):
        if tsjit.elect_one():
            tsjit.tma_load(self.a_map, self.allocation.tensor((64, 64), tsjit.BFloat16), stage_info.barrier,
                           (0, stage_info.loop_offset * 64))

    @ts.producer_work
    def load_b(self, stage_info):
        if tsjit.elect_one():
            tsjit.tma_load(self.b_map, self.allocation.tensor((64, 64), tsjit.BFloat16), stage_info.barrier,
                           (0, stage_info.loop_offset * 64))

    @ts.consumer_work
    def mma(self, stage_info):
        pass                # the MMAs on the stage's tiles (beside the point here)


@dataclass(kw_only=True)
class Result(ts.MemoryResource):
    """Where the consumer's results go."""

    c: object = None

    @ts.producer_work
    def store(self, stage_info):
        pass                # the epilogue (beside the point here)


def build_tma_bytes_short_by_one_tile(fixed: bool):
    """Each stage receives two TMA tiles (``num_bytes_per_warp_per_cta``); ``num_bytes`` counts one."""
    config = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        4, (2 if fixed else 1) * TILE_BYTES, threads(1), threads(128), num_bytes_per_warp_per_cta=2 * TILE_BYTES)
    ring = TileLoads(name="ring", pipeline_config=config)
    out = Result(name="out")

    @ts.schedule
    def load(r: TileLoads):
        with ts.domain_loop(0, 6, 1):
            r.acquire()
            r.load_a()
            r.load_b()
            r.commit()

    @ts.schedule
    def mma(r: TileLoads, o: Result):
        with ts.domain_loop(0, 6, 1):
            r.wait()
            r.mma()
            r.release()
        o.store()

    tasks = [ts.Task("prod", [], [ring], 0, 1, schedule=load(ring)),
             ts.Task("cons", [ring], [out], 1, 4, schedule=mma(ring, out))]
    return tasks, {out: [ring]}, {}


@dataclass(kw_only=True)
class Writer(ts.MemoryResource):
    """A 4096-byte shared-memory buffer one task fills."""

    allocation: object = None

    def __post_init__(self):
        self.allocation = ts.SmemAllocation(self.name, 4096)

    def get_smem_requirements(self):
        return [self.allocation]

    @ts.producer_work
    def write(self, stage_info):
        self.allocation.tensor((1024,), tsjit.Float32)[tsjit.lane_idx()] = 1.0


@dataclass(kw_only=True)
class Trigger(ts.MemoryResource):
    """The upstream of a writer (no data of its own)."""

    @ts.consumer_work
    def start(self, stage_info):
        pass


def build_two_tasks_write_aliased_buffers(fixed: bool):
    """Two tasks fill their own buffer at the same time; the broken layout puts both buffers in one alias
    group (its phases may share bytes, so it is only for buffers that are never live together)."""
    starts = [Trigger(name="start_a"), Trigger(name="start_b")]
    buffers = [Writer(name="buf_a"), Writer(name="buf_b")]

    @ts.schedule
    def fill(s: Trigger, b: Writer):
        with ts.domain_loop(0, 4, 1):
            s.start()
            b.write()

    smem = ts.SmemAllocator()
    if fixed:
        smem.add(buffers[0].allocation)
        smem.add(buffers[1].allocation)
    else:
        smem.add_alias_group([[buffers[0].allocation], [buffers[1].allocation]])
    smem.compute_layout()
    tasks = [ts.Task(f"writer_{x}", [s], [b], k, 1, schedule=fill(s, b))
             for k, (x, s, b) in enumerate(zip("ab", starts, buffers))]
    return tasks, {b: [s] for s, b in zip(starts, buffers)}, {"smem_allocator": smem}


#: name -> (the mistake in one line, its build function)
MISTAKES = {
    "wait_with_no_commit": ("the producer never commits: the consumer waits for a full stage forever",
                            build_wait_with_no_commit),
    "tma_bytes_short_by_one_tile": ("num_bytes covers the A tile only; the B tile lands after the stage "
                                    "completed", build_tma_bytes_short_by_one_tile),
    "producer_releases_its_own_ring": ("the producer task also releases the ring it fills (a consumer "
                                       "operation)", build_producer_releases_its_own_ring),
    "acquire_twice_one_stage": ("a one-stage advance_on_acquire ring acquired twice per iteration: the second "
                                "acquire waits for a release that needs the commit after it",
                                build_acquire_twice_one_stage),
    "two_tasks_write_aliased_buffers": ("two tasks write shared-memory buffers that share bytes (one alias "
                                        "group) at the same time", build_two_tasks_write_aliased_buffers),
}
