"""Issue 12 §2: several TMA producer tasks commit to one ring (split A/B loads into one stage,
:mod:`.split_programs`).  Each task waits on the stage's empty barrier with its own cursor and arms the
full barrier once with exactly the bytes its own copy brings (per-work bytes from ``tma_bytes_per_stage()``,
:mod:`tsjit.ts.tx_bytes`): the full barrier expects one arrival per arming warp (``producer_group`` = 2) and
completes when both tasks' bytes have landed.  P2 validates ``num_bytes`` (the stage's sum), every work's
bytes and ``num_bytes_per_warp_per_cta``; the lowering arms what the model arms; the checker accepts the two
tasks' writes into one stage."""
from dataclasses import dataclass

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


def test_each_producer_task_arms_exactly_its_own_bytes(monkeypatch):
    """The program verifies (every check, the race check included) and lowers as described: load_a arms its
    32-row box (8192 B), load_b its 16-row box (4096 B), not an average share."""
    compiled = _compile(monkeypatch)
    events = ir_barrier_events(compiled.llir, 64, params={"num_tiles": 2})   # the two producer warps
    names = barrier_names(events, 3)
    counts = init_counts(events, names)
    assert counts == {**{f"full[{i}]": 2 for i in range(3)}, **{f"empty[{i}]": 128 for i in range(3)}}
    for tid, rows in ((0, 32), (32, 16)):    # lane 0 of load_a's and of load_b's warp, both loop trips
        ops = [e for e in events[tid] if e[0] != "init"]
        arms = [(e[0], names[e[1]]) + ((e[3],) if e[0] == "arm" else ()) for e in ops[:4]]
        assert arms == [("wait", "empty[0]"), ("arm", "full[0]", rows * 64 * 4),
                        ("wait", "empty[1]"), ("arm", "full[1]", rows * 64 * 4)]
    assert compiled.ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 2


def _bytes_program(num_bytes, per_warp=None, labels=("load_a", "load_b")):
    """The split A/B program with ``num_bytes`` / ``num_bytes_per_warp_per_cta`` as given; ``labels``: the works
    ``tma_bytes_per_stage()`` lists."""
    def kernel(map_a, map_b, dst, num_tiles):
        cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
            2, num_bytes, ts.CooperativeGroup(ts.Agent.Thread, 2), ts.CooperativeGroup(ts.Agent.Thread, 128),
            num_bytes_per_warp_per_cta=per_warp)
        smem = _Listed(name="smem", pipeline_config=cfg, map_a=map_a, map_b=map_b, box_a=32, box_b=16, cols=64,
                       listed=labels)
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
    return tsjit.kernel(kernel)


@dataclass(kw_only=True)
class _Listed(sp.SplitStage):
    listed: tuple = ("load_a", "load_b")

    def tma_bytes_per_stage(self):
        return {k: v for k, v in super().tma_bytes_per_stage().items() if k in self.listed}


def _p2(monkeypatch, **kwargs) -> str:
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    with pytest.raises(tsjit.VerificationError) as err:
        tsjit.compile(_bytes_program(**kwargs), *sp.specs(480, 64, 32, 16), 10, target="sm_90a")
    assert err.value.check == "P2"
    return str(err.value)


def test_p2_num_bytes_is_the_sum_of_the_stage_works(monkeypatch):
    """The stage's bytes are both tasks' boxes, 8192 ('load_a') + 4096 ('load_b'); the old average share fails."""
    text = _p2(monkeypatch, num_bytes=6144)
    assert "8192 ('load_a') + 4096 ('load_b') = 12288" in text and "num_bytes=12288" in text


def test_p2_names_a_work_missing_from_the_per_work_bytes(monkeypatch):
    text = _p2(monkeypatch, num_bytes=12288, labels=("load_a",))
    assert "'load_b'" in text and "task 'load_b'" in text


def test_p2_checks_num_bytes_per_warp_per_cta_against_each_task(monkeypatch):
    text = _p2(monkeypatch, num_bytes=12288, per_warp=6144)
    assert "'load_a' 8192 B" in text and "'load_b' 4096 B" in text


def test_the_model_arms_what_the_lowering_arms(monkeypatch):
    """Per task, the barrier sequence the interleaving model runs -- waits, arrivals and armed bytes -- equals
    the one read back from the IR, over as many trips as the checker runs."""
    from .protocol_readback import canonical, model_events, model_program
    kept = []

    class Recording(ts.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            kept.append(self)
    monkeypatch.setattr(ts, "TaskManager", Recording)
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    compiled = tsjit.compile(tsjit.kernel(sp.split_ab_copy.fn), *sp.specs(480, 8, 32, 16), 10, 32, 16, 8, 3,
                             target="sm_90a")       # 8 columns: few store iterations to read back
    program, trips = model_program(kept[0], collapse_probes=True)
    events = ir_barrier_events(compiled.llir, 192, params={"num_tiles": trips})
    names = barrier_names(events, 3)
    for process in program.processes:
        first = 32 * process.task.warp_start
        lowered = canonical(events, range(first, first + 32 * process.task.num_warps), names)
        assert lowered == model_events(process, program.barriers), process.name
    arms = {p.task.name: {b for e in model_events(p, program.barriers) if e[0] == "arrivals"
                          for (where, what), b in e[1] if what == "bytes"} for p in program.processes[:2]}
    assert arms == {"load_a": {32 * 8 * 4}, "load_b": {16 * 8 * 4}}


#: the GPU shapes -> the interpreter's: the same boxes and stages, fewer tiles and blocks (still uneven per block)
INTERPRETED = {(480 * 64, 32, 16, 3, 132): (48 * 8, 32, 16, 3, 5), (48 * 5, 32, 16, 2, 2): (48 * 5, 32, 16, 2, 2),
               (96 * 7, 64, 32, 4, 3): (96 * 4, 64, 32, 4, 3), (64, 32, 32, 1, 1): (64, 32, 32, 1, 1)}


@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("rows,box_a,box_b,stages,blocks", list(INTERPRETED))
def test_split_ab_copy_is_exact(rows, box_a, box_b, stages, blocks):
    """Bit-exact split A/B copies (outputs poisoned with NaN); under the CPU interpreter at the reduced shapes of
    :data:`INTERPRETED`."""
    if tsjit.env.interpret():
        rows, box_a, box_b, stages, blocks = INTERPRETED[(rows, box_a, box_b, stages, blocks)]
    got, expected = sp.run(rows, 64, box_a, box_b, stages, blocks)
    np.testing.assert_array_equal(got, expected)
