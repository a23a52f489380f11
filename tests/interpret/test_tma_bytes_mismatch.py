"""A stage that loads two TMA boxes (x and y, two TensorMap fields) with a ``num_bytes`` that does not match
them (a newcomer's program, 2026-12-02).

P2 cannot know what such a stage's copies deliver unless the resource says so (``tma_bytes_per_stage()``
or ``num_bytes_per_warp_per_cta``): without either it checks nothing, and the ``verbose=True`` report must
say so instead of staying silent.  With the override, a wrong ``num_bytes`` is a P2 error at compile time.
The interpreter names the cause of the deadlock when the armed bytes never land."""
from dataclasses import dataclass
import warnings

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import InterpretError, VerificationError

BM, BN = 8, 16


def make_ring(declares: bool):
    @dataclass(kw_only=True)
    class Pair(ts.MemoryResource):
        x_map: object
        y_map: object
        stage: ts.TaskLocalVariable = ts.TaskLocalVariable.uninitialized()

        def __post_init__(self):
            stages = self.pipeline_config.num_stages
            self.stage = ts.TaskLocalVariable(tsjit.Int32, default=0, docs="the stage the consumer reads")
            self.xs = tsjit.shared_array(tsjit.Float32, (stages, BM, BN), align=128)
            self.ys = tsjit.shared_array(tsjit.Float32, (stages, BM, BN), align=128)

        if declares:
            def tma_bytes_per_stage(self):
                return self.x_map.box_bytes + self.y_map.box_bytes

        @ts.producer_work()
        def load(self, stage_info):
            if tsjit.elect_one():
                row = stage_info.loop_offset * BM
                tsjit.tma_load(self.x_map, self.xs[stage_info.stage_idx], stage_info.barrier, (row, 0))
                tsjit.tma_load(self.y_map, self.ys[stage_info.stage_idx], stage_info.barrier, (row, 0))

        @ts.consumer_work(returns="stage")
        def take(self, stage_info):
            return stage_info.stage_idx
    return Pair


@dataclass(kw_only=True)
class Sum(ts.MemoryResource):
    out: object
    pair: object

    @ts.producer_work()
    def write(self, stage_info, stage):
        row = stage_info.loop_offset * BM
        for i in range(tsjit.thread_idx().x - 32, BM * BN, 32):
            self.out[row + i // BN, i % BN] = self.pair.xs[stage, i // BN, i % BN] + self.pair.ys[stage, i // BN, i % BN]


def make_kernel(declares: bool, verbose: bool):
    Pair = make_ring(declares)

    @tsjit.kernel
    def pair_add(x_map, y_map, out, tiles, NBYTES: tsjit.Constexpr[int]):
        cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
            2, NBYTES, ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 32))
        pair = Pair(name="pair", pipeline_config=cfg, x_map=x_map, y_map=y_map)
        dst = Sum(name="dst", out=out, pair=pair)

        @ts.schedule
        def produce(p: Pair):
            with ts.domain_loop(0, tiles, 1):
                p.acquire()
                p.load()
                p.commit()

        @ts.schedule
        def consume(p: Pair, d: Sum):
            with ts.domain_loop(0, tiles, 1):
                p.wait()
                s = p.take()
                d.write(s)
                p.release()

        tasks = [ts.Task("producer", [], [pair], warp_idx=0, num_warps=1, schedule=produce(pair)),
                 ts.Task("consumer", [pair], [dst], warp_idx=1, num_warps=1, schedule=consume(pair, dst))]
        m = ts.TaskManager(tasks, {dst: [pair]}, verbose=verbose)
        m.setup_resources_and_tasks()
        m.run()
    return pair_add


def maps(rows=2 * BM):
    rng = np.random.default_rng()
    x, y = (rng.standard_normal((rows, BN)).astype(np.float32) for _ in range(2))
    return x, y, tsjit.TensorMap(x, (BM, BN)), tsjit.TensorMap(y, (BM, BN))


def test_undeclared_stage_bytes_are_noted_in_the_verbose_report_not_warned(capsys):
    _, _, xm, ym = maps()
    out = np.zeros((2 * BM, BN), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a note is never a VerificationWarning
        tsjit.compile(make_kernel(False, True), xm, ym, out, 2, xm.box_bytes + 4, target="sm_90a")
    text = capsys.readouterr().out
    assert f"num_bytes={xm.box_bytes + 4} is not checked against the TMA copies" in text
    assert "2 TensorMap fields" in text and "tma_bytes_per_stage()" in text


def test_declared_stage_bytes_make_a_wrong_num_bytes_a_p2_error():
    _, _, xm, ym = maps()
    out = np.zeros((2 * BM, BN), np.float32)
    with pytest.raises(VerificationError) as info:
        tsjit.compile(make_kernel(True, False), xm, ym, out, 2, xm.box_bytes + 4, target="sm_90a")
    text = str(info.value)
    assert "[P2]" in text and f"Set num_bytes={2 * xm.box_bytes}" in text


def test_armed_bytes_that_never_land_are_explained_in_the_deadlock(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    x, y, _, _ = maps()
    xd, yd = tsjit.to_device(x), tsjit.to_device(y)
    xm, ym = tsjit.TensorMap(xd, (BM, BN)), tsjit.TensorMap(yd, (BM, BN))
    out = tsjit.empty((2 * BM, BN), tsjit.Float32)
    with pytest.raises(InterpretError) as info:
        make_kernel(False, False)[(1,), (64,)](xm, ym, out, 2, 2 * xm.box_bytes + 256)
    text = str(info.value)
    assert "deadlock" in text and "256 of the bytes expect_tx armed never landed" in text


def test_matching_bytes_add_exactly(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    x, y, _, _ = maps()
    xd, yd = tsjit.to_device(x), tsjit.to_device(y)
    xm, ym = tsjit.TensorMap(xd, (BM, BN)), tsjit.TensorMap(yd, (BM, BN))
    out = tsjit.to_device(np.full((2 * BM, BN), np.nan, np.float32))
    make_kernel(True, False)[(1,), (64,)](xm, ym, out, 2, 2 * xm.box_bytes)
    assert np.array_equal(out.numpy(), x + y)
