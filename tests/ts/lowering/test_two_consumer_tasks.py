"""Two consumer tasks of one TMA ring (newcomer report 8, item 1): check P1 sums every consumer
task's arrivals (ts_features §2 P1: "Σ signalling warps"), the exhaustive model does the same,
and the lowering now counts them the same way, so the counts P1 suggests compile and run."""
import os
from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import CompilationError, VerificationError

M, N, BM, BN = 40, 72, 16, 32


@dataclass(kw_only=True)
class Ring(ts.MemoryResource):
    tmap: object
    tiles_n: object
    stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

    def __post_init__(self):
        bm, bn = self.tmap.box_shape
        self.tiles = tsjit.shared_array(self.tmap.dtype, (self.pipeline_config.num_stages, bm, bn), align=128)
        self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0)

    @ts.producer_work()
    def load(self, si):
        bm, bn = self.tmap.box_shape
        t = si.loop_offset
        if tsjit.elect_one():
            tsjit.tma_load(self.tmap, self.tiles[si.stage_idx], si.barrier, (t // self.tiles_n * bm, t % self.tiles_n * bn))

    @ts.consumer_work(returns="stage")
    def take(self, si):
        return si.stage_idx


@dataclass(kw_only=True)
class RowSums(ts.MemoryResource):
    sums: object
    ring: object

    @ts.producer_work()
    def rowsum(self, si, stage):
        bm, bn = self.ring.tmap.box_shape
        lane = tsjit.lane_idx()
        if lane < bm:
            acc = tsjit.Float32(0)
            for c in range(bn):
                acc += self.ring.tiles[stage, lane, c]
            self.sums[si.loop_offset, lane] = acc


@dataclass(kw_only=True)
class Neg(ts.MemoryResource):
    out: object
    ring: object

    @ts.producer_work()
    def write(self, si, stage):
        bm, bn = self.ring.tmap.box_shape
        t = si.loop_offset
        row0, col0 = t // self.ring.tiles_n * bm, t % self.ring.tiles_n * bn
        for i in range(tsjit.lane_idx(), bm * bn, 32):
            r, c = i // bn, i % bn
            if row0 + r < self.out.shape[0] and col0 + c < self.out.shape[1]:
                self.out[row0 + r, col0 + c] = -self.ring.tiles[stage, r, c]


@tsjit.kernel
def two(tmap, sums, out, num_tiles, tiles_n, STAGES: tsjit.Constexpr[int], NCONS: tsjit.Constexpr[int],
        SKIP: tsjit.Constexpr[bool]):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, tmap.box_bytes,
        ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, NCONS))
    ring = Ring(name="ring", pipeline_config=cfg, tmap=tmap, tiles_n=tiles_n)
    rs = RowSums(name="rs", sums=sums, ring=ring)
    ng = Neg(name="neg", out=out, ring=ring)
    cta, ctas = tsjit.block_idx().x, tsjit.grid_dim().x

    @ts.schedule
    def produce(r: Ring):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.acquire(); r.load(); r.commit()

    @ts.schedule
    def c_rows(r: Ring, s: RowSums):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.wait(); st = r.take(); s.rowsum(st); r.release()

    @ts.schedule
    def c_neg(r: Ring, n: Neg):
        with ts.domain_loop(cta, num_tiles, ctas):
            r.wait(); st = r.take(); n.write(st); r.release()
    tasks = [ts.Task("tma", [], [ring], warp_idx=0, num_warps=1, schedule=produce(ring)),
             ts.Task("rows", [ring], [rs], warp_idx=1, num_warps=1, schedule=c_rows(ring, rs)),
             ts.Task("neg", [ring], [ng], warp_idx=2, num_warps=1, schedule=c_neg(ring, ng))]
    m = ts.TaskManager(tasks, {rs: [ring], ng: [ring]}, skip_validation=SKIP)
    m.setup_resources_and_tasks()
    m.run()


def _run(ncons, skip=False, seed=0):
    a = np.random.default_rng(seed).standard_normal((M, N)).astype(np.float32)
    tiles_m, tiles_n = -(-M // BM), -(-N // BN)
    nt = tiles_m * tiles_n
    sums = np.full((nt, BM), np.nan, np.float32)
    out = np.full_like(a, np.nan)
    two.interpret[(2,), (96,)](tsjit.TensorMap(a, (BM, BN)), sums, out, nt, tiles_n, 2, ncons, skip)
    pad = np.zeros((tiles_m * BM, tiles_n * BN)); pad[:M, :N] = a
    ref = pad.reshape(tiles_m, BM, tiles_n, BN).sum(3).transpose(0, 2, 1).reshape(nt, BM)
    return a, sums, out, ref


@pytest.mark.parametrize("ncons", [64, 2], ids=["every-thread", "lane-per-warp"])
def test_two_consumer_tasks_of_one_ring_run_with_the_count_p1_asks(ncons):
    a, sums, out, ref = _run(ncons, seed=ncons)
    assert np.array_equal(out, -a)
    np.testing.assert_allclose(sums, ref, rtol=1e-5, atol=1e-4)


def test_p1_asks_for_both_tasks_arrivals():
    with pytest.raises(VerificationError) as info:
        _run(32)
    text = str(info.value)
    assert "[P1]" in text and "'rows'" in text and "'neg'" in text
    assert "CooperativeGroup(Agent.Thread, 64)" in text and "(or 2)" in text


def test_lowering_refuses_a_wrong_count_with_p1_and_both_tasks():
    """skip_validation: P1 and the exhaustive model (X) only warn; the model, counting both tasks'
    arrivals as P1 does, finds the 32-arrival ring deadlocked; the lowering refuses it under P1."""
    with pytest.warns(Warning) as record, pytest.raises(CompilationError) as info:
        _run(32, skip=True)
    text = str(info.value)
    assert "[P1]" in text and "'rows', 'neg'" in text and "2 warp(s)" in text
    assert "64 (every thread arrives) or 2 (one lane per warp)" in text
    assert os.path.basename(__file__) in text          # at the user's m.run() line
    assert any(str(w.message).startswith("[X] [deadlock]") for w in record)


def test_exhaustive_model_passes_the_count_p1_asks(recwarn):
    _run(64, skip=True)
    assert not [str(w.message) for w in recwarn if "[X]" in str(w.message) or "[P1]" in str(w.message)]
