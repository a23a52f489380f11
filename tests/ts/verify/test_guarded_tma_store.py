"""A TMA store issued and retired inside ``if tid == 0:`` (newcomer report, issue 10 §3): the
thread that issued it waits for it, and a CTA barrier after the branch orders the task's other
threads behind that wait, so releasing the stage afterwards is safe; without the barrier (or
without the wait) the store still reads the stage when another thread releases it.  The wait may
also sit after the ``if`` (``if tid == 0: store; commit`` then ``bulk_wait_group(0)`` by every
thread, then the barrier): the issuing thread's wait retires its group; a wait that leaves the group
pending (``bulk_wait_group(1)``) does not."""
import numpy as np
from dataclasses import dataclass

import pytest

import tsjit
from tsjit import ts
from tsjit.errors import VerificationError

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

BM, BN = 16, 32


@dataclass(kw_only=True)
class Ring(ts.MemoryResource):
    tmap: object
    buf: object = None
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.buf = tsjit.shared_array(self.tmap.dtype, (self.pipeline_config.num_stages, BM, BN),
                                      align=128)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="stage index")

    @ts.producer_work()
    def load(self, stage_info):
        if tsjit.elect_one():
            tsjit.tma_load(self.tmap, self.buf[stage_info.stage_idx], stage_info.barrier,
                           (stage_info.loop_offset * BM, 0))

    @ts.consumer_work(returns="stage")
    def get(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Out(ts.MemoryResource):
    out: object
    ring: object

    @ts.producer_work()
    def tid0_barrier(self, stage_info, stage):
        tid = tsjit.thread_idx().x - 32
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tid == 0:
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(0, read=True)
        tsjit.named_barrier_sync(1, 64)

    @ts.producer_work()
    def warp1_elect_barrier(self, stage_info, stage):
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tsjit.warp_idx() == 1 and tsjit.elect_one():
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(0, read=True)
        tsjit.named_barrier_sync(1, 64)

    @ts.producer_work()
    def tid0_wait_after_if(self, stage_info, stage):
        tid = tsjit.thread_idx().x - 32
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tid == 0:
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0, read=True)
        tsjit.named_barrier_sync(1, 64)

    @ts.producer_work()
    def warp1_elect_wait_after_if(self, stage_info, stage):
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tsjit.warp_idx() == 1 and tsjit.elect_one():
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0, read=True)
        tsjit.named_barrier_sync(1, 64)

    @ts.producer_work()
    def tid0_wait_after_if_leaves_it_pending(self, stage_info, stage):
        tid = tsjit.thread_idx().x - 32
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tid == 0:
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(1, read=True)
        tsjit.named_barrier_sync(1, 64)

    @ts.producer_work()
    def tid0_no_barrier(self, stage_info, stage):
        tid = tsjit.thread_idx().x - 32
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tid == 0:
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
            tsjit.bulk_wait_group(0, read=True)

    @ts.producer_work()
    def tid0_no_wait(self, stage_info, stage):
        tid = tsjit.thread_idx().x - 32
        tsjit.fence_proxy_async()
        tsjit.named_barrier_sync(1, 64)
        if tid == 0:
            tsjit.tma_store(self.out, self.ring.buf[stage], (stage_info.loop_offset * BM, 0))
            tsjit.bulk_commit_group()
        tsjit.named_barrier_sync(1, 64)


@tsjit.kernel
def copy_through_ring(src, out, tiles, VARIANT: tsjit.Constexpr[str]):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        2, BM * BN * 4, ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, 64))
    ring = Ring(name="ring", pipeline_config=cfg, tmap=src)
    dst = Out(name="dst", out=out, ring=ring)

    @ts.schedule
    def produce(r: Ring):
        with ts.domain_loop(0, tiles, 1):
            r.acquire()
            r.load()
            r.commit()

    @ts.schedule
    def consume(r: Ring, d: Out):
        with ts.domain_loop(0, tiles, 1):
            r.wait()
            s = r.get()
            if tsjit.const_expr(VARIANT == "tid0_barrier"):
                d.tid0_barrier(s)
            elif tsjit.const_expr(VARIANT == "warp1_elect_barrier"):
                d.warp1_elect_barrier(s)
            elif tsjit.const_expr(VARIANT == "tid0_wait_after_if"):
                d.tid0_wait_after_if(s)
            elif tsjit.const_expr(VARIANT == "warp1_elect_wait_after_if"):
                d.warp1_elect_wait_after_if(s)
            elif tsjit.const_expr(VARIANT == "tid0_wait_after_if_leaves_it_pending"):
                d.tid0_wait_after_if_leaves_it_pending(s)
            elif tsjit.const_expr(VARIANT == "tid0_no_barrier"):
                d.tid0_no_barrier(s)
            else:
                d.tid0_no_wait(s)
            r.release()

    p = ts.Task("producer", [], [ring], warp_idx=0, num_warps=1, schedule=produce(ring))
    c = ts.Task("consumer", [ring], [dst], warp_idx=1, num_warps=2, schedule=consume(ring, dst))
    m = ts.TaskManager([p, c], {dst: [ring]}, verbose=False)
    m.setup_resources_and_tasks()
    m.run()


def _compile(variant):
    spec = tsjit.tensormap_spec(tsjit.Float32, (BM, BN))
    return copy_through_ring.compile(spec, spec, 4, variant, interpret=True)


@pytest.mark.parametrize("variant", ["tid0_barrier", "warp1_elect_barrier"])
def test_a_store_retired_in_its_guarded_branch_then_a_barrier_is_safe(variant):
    _compile(variant)


@pytest.mark.parametrize("variant", ["tid0_wait_after_if", "warp1_elect_wait_after_if"])
def test_a_guarded_store_waited_for_after_the_if_then_a_barrier_is_safe_and_copies(variant, monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")          # TensorMaps of host arrays, also with a GPU
    tiles = 4
    src = np.random.default_rng().standard_normal((tiles * BM, BN)).astype(np.float32)
    out = np.full_like(src, np.nan)
    copy_through_ring.interpret[(1,), (96,)](tsjit.TensorMap(src, (BM, BN)), tsjit.TensorMap(out, (BM, BN)),
                                            tiles, variant)
    assert np.array_equal(out, src)


@pytest.mark.parametrize("variant", ["tid0_no_barrier", "tid0_no_wait", "tid0_wait_after_if_leaves_it_pending"])
def test_a_guarded_store_not_ordered_before_the_release_races(variant):
    with pytest.raises(VerificationError, match=r"(?s)race on 'ring' stage .*tma_store at .*still reads it") as info:
        _compile(variant)
    assert "SmemAllocation for it" not in str(info.value)
    assert "aliasing with other buffers is not checked" in str(info.value)
