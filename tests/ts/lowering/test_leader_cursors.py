"""Stage / phase cursors in leader-routed rings stay consistent on every CTA (issue 12 §2).

A ``CtaLeader`` side's barrier actions run on the cluster's CTA 0 only; every CTA's cursors advance all
the same.  That is right where the other CTAs keep working the ring in lock step -- a producer whose copies
land on the leader's stage skips its arming but must fill the stage the leader's barrier expects next -- and
meaningless where they would not: a task working on a leader-only side elsewhere reads (or writes) a stage
no barrier guards there, which check SG2 refuses.  Here, over as many trips as the checker runs (each ring
wraps twice), the barrier sequence of every task on every CTA read back from the IR -- waits, and arrivals
with the CTA each lands on -- equals the interleaving model's for the leader copies, the multicast copy and
the split consumer.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

import tsjit
from tsjit import ts

from . import leader_programs as lp
from . import multicast_programs as mp
from .protocol_readback import (barrier_names, canonical, init_counts, ir_barrier_events, model_events,
                               model_program)

STAGES = 3


class _Recording(ts.TaskManager):
    kept: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _Recording.kept.append(self)


def _compile(monkeypatch, kernel, specs, *args):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    monkeypatch.setattr(ts, "TaskManager", _Recording)
    _Recording.kept.clear()
    compiled = tsjit.compile(tsjit.kernel(kernel.fn), *specs, *args, target="sm_90a")
    return compiled, _Recording.kept[0]


def _check_every_cta(compiled, manager, threads):
    program, trips = model_program(manager)
    assert trips > 2 * STAGES
    events = {rank: ir_barrier_events(compiled.llir, threads, cta_rank=rank, params={"num_tiles": trips}, grid_x=2)
              for rank in (0, 1)}
    names = barrier_names(events[0], STAGES)
    counts = init_counts(events[0], names)
    explicit = any(p.cta is not None for p in program.processes)
    for barrier in program.barriers:
        assert counts[f"{barrier.kind}[{barrier.slot}]"] == barrier.count, barrier.name
    covered = set()
    for process in program.processes:
        first = 32 * process.task.warp_start
        task_threads = range(first, first + 32 * process.task.num_warps)
        ranks = (process.cta,) if explicit else (0, 1)     # the symmetric process stands for both CTAs
        for rank in ranks:
            lowered = canonical(events[rank], task_threads, names, own_rank=rank if explicit else None)
            assert lowered == model_events(process, program.barriers, with_cta=explicit), (process.name, rank)
            assert any(e[0] == "wait" for e in lowered)
            covered.add((process.task.name, rank))
    for task in manager.tasks:            # a task the model leaves out of a CTA emits nothing there
        first = 32 * task.warp_start
        for rank in (0, 1):
            if (task.name, rank) not in covered:
                assert not any(e[0] != "init" for tid in range(first, first + 32 * task.num_warps)
                               for e in events[rank][tid]), (task.name, rank)
    return program


@pytest.mark.parametrize("leader_producer", [False, True], ids=["leader-consumer", "leader-producer"])
def test_leader_copy_cursors_match_the_model_on_every_cta(monkeypatch, leader_producer):
    kernel = lp.leader_producer_copy if leader_producer else lp.leader_consumer_copy
    compiled, manager = _compile(monkeypatch, kernel, lp.specs(256, 8, 8, leader_producer), 4, 8, 8, STAGES)
    program = _check_every_cta(compiled, manager, 32 * (1 + lp.STORE_WARPS))
    # the non-leader producer of the leader-consumer copy arms nothing, yet waits on its own empty barriers in
    # the leader's order: its cursor advances with the leader's
    names = {p.name for p in program.processes}
    assert names == ({"load@CTA0", "store@CTA0", "store@CTA1"} if leader_producer else
                     {"load@CTA0", "load@CTA1", "store@CTA0"})


def test_multicast_copy_cursors_match_the_model_on_every_cta(monkeypatch):
    compiled, manager = _compile(monkeypatch, mp.multicast_copy, mp.specs(256, 8, 8), 4, 8, 8, STAGES)
    program = _check_every_cta(compiled, manager, mp.THREADS)
    assert all(p.cta is None for p in program.processes)       # symmetric: one CTA stands for both


@dataclass(kw_only=True)
class _FirstStageOut(lp.RowsOut):
    """A store reading the ring's stage 0 through its ``smem`` field (no consumer work on the ring)."""

    @ts.producer_work()
    def store(self, stage_info):
        tile = self.smem.tiles[0]
        for i in range(tsjit.thread_idx().x - self.first_thread, self.rows * self.smem.box_n, lp.STORE_WARPS * 32):
            self.dst[i // self.smem.box_n, i % self.smem.box_n] = tile[0][0][i % self.smem.box_n]


@pytest.mark.parametrize("through", ["consumer work", "referencing resource"])
def test_a_leader_only_consumer_on_every_cta_is_refused(monkeypatch, through):
    """The leader-consumer copy with its store task on both CTAs: CTA 1's store would read a stage nothing
    fills (every CTA's copies land on the leader) -- it verified SAFE under the symmetric reduction.  Found
    whether the task reads the stage with a consumer work or through a resource whose field is the ring."""
    def kernel(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
               STAGES: tsjit.Constexpr[int]):
        box_bytes = BOX_M * BOX_N * src_map.dtype.itemsize
        cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
            STAGES, 2 * box_bytes, ts.CooperativeGroup(ts.Agent.Thread, 1),
            ts.CooperativeGroup(ts.Agent.Thread, lp.STORE_WARPS * 32), cta_layout_vmnk=(1, 2, 1, 1),
            consumer_signaling_threads=ts.SignalingThreads.CtaLeader, num_bytes_per_warp_per_cta=box_bytes)
        smem = lp.SplitTiles(name="smem", pipeline_config=cfg, src_map=src_map, box_m=BOX_M, box_n=BOX_N, parts=2)
        if through == "consumer work":
            lp._copy(smem, lp.RowsOut(name="out", dst=dst, smem=smem, rows=2 * BOX_M, first_thread=32), num_tiles,
                     None, None)
            return
        out = _FirstStageOut(name="out", dst=dst, smem=smem, rows=2 * BOX_M, first_thread=32)

        @ts.schedule
        def load_schedule(s: lp.SplitTiles):
            with ts.domain_loop(0, num_tiles, 1):
                s.acquire()
                s.load()
                s.commit()

        @ts.schedule
        def store_schedule(s: lp.SplitTiles, o: _FirstStageOut):
            with ts.domain_loop(0, num_tiles, 1):
                s.wait()
                o.store()
                s.release()

        tasks = [ts.Task("load", [], [smem], warp_idx=0, num_warps=1, schedule=load_schedule(smem)),
                 ts.Task("store", [smem], [out], warp_idx=1, num_warps=lp.STORE_WARPS,
                         schedule=store_schedule(smem, out))]
        manager = ts.TaskManager(tasks, {out: [smem]}, verbose=False)
        manager.setup_resources_and_tasks()
        manager.run()

    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    with pytest.raises(tsjit.VerificationError) as err:
        tsjit.compile(tsjit.kernel(kernel), *lp.specs(256, 64, 32, False), 4, 32, 64, STAGES, target="sm_90a")
    text = str(err.value)
    assert err.value.check == "SG2"
    assert "'store'" in text and "'smem'" in text and "run_only_on_cta_id=0" in text
    assert "consumer_signaling_threads" in text
    assert ("'out' ProducerWork" in text) == (through == "referencing resource")


def test_a_leader_gated_release_on_every_cta_is_modelled_per_cta(monkeypatch):
    """The split consumer's releaser on both CTAs (it has no works; SG2 lets it): the CTAs differ (CTA 1's
    release and wait on ``done`` are skipped), so every CTA is modelled, and the program is still SAFE."""
    from . import split_consumer_programs as sc

    def kernel(src_map, dst, num_tiles, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int],
               STAGES: tsjit.Constexpr[int]):
        manager = sc.build(src_map, dst, num_tiles, BOX_M, BOX_N, STAGES, first=0, step=1, releaser_on=None)
        manager.setup_resources_and_tasks()
        manager.run()

    _, manager = _compile(monkeypatch, tsjit.kernel(kernel), sc.specs(256, 64, 32), 4, 32, 64, STAGES)
    result = manager.exhaustive_result
    assert result.verdict == "SAFE", result.format()
    processes = [p for v in result.variants for p in v.processes]
    assert any(p.startswith("releaser@CTA1") for p in processes)
