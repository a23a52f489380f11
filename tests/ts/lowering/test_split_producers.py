"""Issue 12 §3: several TMA producer tasks commit to one ring (split A/B loads into one stage,
:mod:`.split_programs`).  Each task waits on the stage's empty barrier with its own cursor and arms the
full barrier once; ``expect_tx`` is additive, so the full barrier expects one arrival per arming warp
(``producer_group`` = 2) and completes when both tasks' bytes have landed.  P2 validates ``num_bytes``
against the stage's bytes (``tma_bytes_per_stage`` / arming warps; ``num_bytes_per_warp_per_cta`` is required
when several tasks fill one stage), and the checker accepts the two tasks' writes into one stage."""
import numpy as np
import pytest

import tsjit
from tsjit import ts

from . import split_programs as sp
from .protocol_readback import barrier_names, init_counts, ir_barrier_events


def _compile(monkeypatch, box_a=32, box_b=16, stages=3):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    return tsjit.compile(sp.split_ab_copy, *sp.specs(480, 64, box_a, box_b), 10, box_a, box_b, 64, stages,
                         target="sm_90a")


def test_each_producer_task_waits_and_arms_the_shared_stage(monkeypatch):
    """The program verifies (every check, the race check included) and lowers as described."""
    compiled = _compile(monkeypatch)
    events = ir_barrier_events(compiled.llir, 64, params={"num_tiles": 2})   # the two producer warps
    names = barrier_names(events, 3)
    counts = init_counts(events, names)
    assert counts == {**{f"full[{i}]": 2 for i in range(3)}, **{f"empty[{i}]": 128 for i in range(3)}}
    stage_bytes = (32 + 16) * 64 * 4
    for tid in (0, 32):               # lane 0 of load_a's and of load_b's warp: the first loop trip (domain 0)
        ops = [e for e in events[tid] if e[0] != "init"]
        first = [(e[0], names[e[1]]) + ((e[3],) if e[0] == "arm" else ()) for e in ops[:2]]
        assert first == [("wait", "empty[0]"), ("arm", "full[0]", stage_bytes // 2)]
    assert compiled.ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 2


def test_p2_checks_the_split_stage_bytes():
    """The stage's bytes are both tasks' boxes; num_bytes is one arming warp's share (additive)."""
    with pytest.raises(tsjit.VerificationError) as err:
        tsjit.compile(tsjit.kernel(_wrong_bytes.fn), *sp.specs(480, 64, 32, 16), 10, target="sm_90a")
    assert err.value.check == "P2" and "6144" in str(err.value)


@tsjit.kernel
def _wrong_bytes(map_a, map_b, dst, num_tiles):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        2, 48 * 64 * 4, ts.CooperativeGroup(ts.Agent.Thread, 2), ts.CooperativeGroup(ts.Agent.Thread, 128),
        num_bytes_per_warp_per_cta=48 * 64 * 4 // 2)
    smem = sp.SplitStage(name="smem", pipeline_config=cfg, map_a=map_a, map_b=map_b, box_a=32, box_b=16, cols=64)
    out = sp.TileRows(name="out", dst=dst, smem=smem)

    @ts.schedule
    def load_a(s: sp.SplitStage):
        with ts.domain_loop(0, num_tiles, 1):
            s.acquire()
            s.load_a()
            s.commit()

    @ts.schedule
    def load_b(s: sp.SplitStage):
        with ts.domain_loop(0, num_tiles, 1):
            s.acquire()
            s.load_b()
            s.commit()

    @ts.schedule
    def store(s: sp.SplitStage, o: sp.TileRows):
        with ts.domain_loop(0, num_tiles, 1):
            s.wait()
            stage = s.read()
            o.store(stage)
            s.release()

    tasks = [ts.Task("load_a", [], [smem], warp_idx=0, num_warps=1, schedule=load_a(smem)),
             ts.Task("load_b", [], [smem], warp_idx=1, num_warps=1, schedule=load_b(smem)),
             ts.Task("store", [smem], [out], warp_idx=2, num_warps=4, schedule=store(smem, out))]
    manager = ts.TaskManager(tasks, {out: [smem]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


@pytest.mark.gpu
@pytest.mark.parametrize("rows,box_a,box_b,stages,blocks", [(480 * 64, 32, 16, 3, 132), (48 * 5, 32, 16, 2, 2),
                                                            (96 * 7, 64, 32, 4, 3), (64, 32, 32, 1, 1)])
def test_split_ab_copy_is_exact_on_the_gpu(rows, box_a, box_b, stages, blocks):
    got, expected = sp.run(rows, 64, box_a, box_b, stages, blocks)
    np.testing.assert_array_equal(got, expected)
