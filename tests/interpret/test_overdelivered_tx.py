"""A TMA load issued by every thread of the producer warp (no `elect_one`) over-delivers a stage's bytes.

The interpreter must say so when it reports the deadlock, not only print a negative byte count
(a newcomer's program, 2026-12-01)."""
from dataclasses import dataclass
import numpy as np
import pytest
import tsjit
from tsjit import ts
from tsjit.errors import InterpretError

PW, CW = 1, 1

@dataclass(kw_only=True)
class Ring(ts.MemoryResource):
    tmap: object
    tiles_n: object
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        bm, bn = self.tmap.box_shape
        self.tiles = tsjit.shared_array(self.tmap.dtype, (self.pipeline_config.num_stages, bm, bn), align=128)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="stage read by consumer")

    @ts.producer_work()
    def load(self, stage_info):
        bm, bn = self.tmap.box_shape
        t = stage_info.loop_offset
        tsjit.tma_load(self.tmap, self.tiles[stage_info.stage_idx], stage_info.barrier,
                       (t // self.tiles_n * bm, t % self.tiles_n * bn))  # every lane issues it: the bug

    @ts.consumer_work(returns="stage")
    def take(self, stage_info):
        return stage_info.stage_idx


@dataclass(kw_only=True)
class Out(ts.MemoryResource):
    out: object
    ring: object
    alpha: object

    @ts.producer_work()
    def write(self, stage_info, stage):
        bm, bn = self.ring.tmap.box_shape
        t = stage_info.loop_offset
        r0, c0 = t // self.ring.tiles_n * bm, t % self.ring.tiles_n * bn
        src = self.ring.tiles[stage]
        for i in range(tsjit.thread_idx().x - PW * 32, bm * bn, CW * 32):
            r, c = i // bn, i % bn
            if r0 + r < self.out.shape[0] and c0 + c < self.out.shape[1]:
                self.out[r0 + r, c0 + c] = src[r, c] * self.alpha


@tsjit.kernel
def scaled_copy(tmap, out, alpha, num_tiles, tiles_n, STAGES: tsjit.Constexpr[int], NBYTES: tsjit.Constexpr[int]):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, NBYTES,
        ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, CW * 32))
    ring = Ring(name="ring", pipeline_config=cfg, tmap=tmap, tiles_n=tiles_n)
    dst = Out(name="dst", out=out, ring=ring, alpha=alpha)
    cta, ctas = tsjit.block_idx().x, tsjit.grid_dim().x

    @ts.schedule
    def produce(r: Ring):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.acquire()
            r.load()
            r.commit()

    @ts.schedule
    def consume(r: Ring, d: Out):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.wait()
            s = r.take()
            d.write(s)
            r.release()

    tasks = [ts.Task("producer", [], [ring], warp_idx=0, num_warps=PW, schedule=produce(ring)),
             ts.Task("consumer", [ring], [dst], warp_idx=PW, num_warps=CW, schedule=consume(ring, dst))]
    m = ts.TaskManager(tasks, {dst: [ring]}, verbose=False)
    m.setup_resources_and_tasks()
    m.run()


def test_a_tma_load_issued_by_every_lane_is_named_in_the_deadlock_report(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    M, N, BM, BN = 16, 16, 8, 16
    a = np.random.default_rng().standard_normal((M, N)).astype(np.float32)
    out = tsjit.empty((M, N), tsjit.Float32)
    tm = tsjit.TensorMap(tsjit.to_device(a), (BM, BN))
    with pytest.raises(InterpretError) as info:
        scaled_copy[(1,), ((PW + CW) * 32,)](tm, out, 1.5, M // BM, 1, 2, tm.box_bytes)
    text = str(info.value)
    assert "deadlock" in text and "bytes more were delivered than expect_tx armed" in text
    assert "elect_one" in text
