"""Issue 12 §2: ``SignalingThreads.CtaLeader``, ``consumer_wait_signaling_threads`` and
``Task(run_only_on_cta_id=k)`` are lowered (sm_90a, a 2-CTA cluster), not ignored.

The barrier actions of every CTA are read back from the emitted IR (:mod:`.protocol_readback`, one run
per cluster rank) and pinned: a leader-only side acts on rank 0 alone, leader-routed arrivals land on the
leader's barrier (``mapa`` + cluster arrive), a leader's release reaches every CTA, a leader-owned TMA
producer arms every CTA's full barrier; the PTX differs from the same program without them.
(:mod:`.test_protocol_matches_model` checks the leader CTA's sequence against the interleaving model.)
"""
from __future__ import annotations

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts.protocol import PipelineType as T
from tsjit.ts.protocol import SignalingThreads as Sig

from tsjit.ts import protocol

from .protocol_readback import (Done, Out, Ring, barrier_names, done_config, init_counts, ir_barrier_events,
                               ring_prefixes)

STAGES = 2
_SETUP: list = []
_MANAGERS: list = []


def _config(ptype, producer=Sig.All, consumer=Sig.All, wait=None):
    cluster = dict(cta_layout_vmnk=(1, 2, 1, 1))
    if ptype is T.AsyncAsync:
        return ts.PipelineConfig.create_async_async_pipeline_cfg(
            STAGES, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 32),
            producer_signaling_threads=producer, consumer_signaling_threads=consumer,
            consumer_wait_signaling_threads=wait, **cluster)
    leader_waits = (wait if wait is not None else consumer) & Sig.CtaLeader
    return ts.PipelineConfig.create_tma_async_pipeline_cfg(
        STAGES, 1024 * (2 if leader_waits else 1), ts.CooperativeGroup(ts.Agent.Thread, 1),
        ts.CooperativeGroup(ts.Agent.Thread, 32), num_bytes_per_warp_per_cta=1024,
        producer_signaling_threads=producer, consumer_signaling_threads=consumer,
        consumer_wait_signaling_threads=wait, **cluster)


def _kernel_source(dst):
    config, run_on = _SETUP[0]
    ring = Ring(name="ring", pipeline_config=config)
    out = Out(name="out")

    @ts.schedule
    def produce(r: Ring):
        r.acquire()
        r.fill()
        r.commit()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def consume(r: Ring, o: Out):
        r.wait()
        r.read()
        o.store()
        r.release()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def wait_only(r: Ring, o: Out, d: Done):
        r.wait()
        r.read()
        o.store()
        d.acquire()
        d.commit()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def release_only(r: Ring, d: Done):
        d.wait()
        r.release()
        d.release()
        with ts.domain_loop(0, 0, 1):
            pass

    producer = ts.Task("producer", [], [ring], warp_idx=0, num_warps=1, schedule=produce(ring),
                       run_only_on_cta_id=run_on.get("producer"))
    graph = {out: [ring]}
    if config.consumer_wait_signaling_threads is not None:
        # the split consumer: warp 1 waits, warp 2 releases once `done` says warp 1 has read the stage; the
        # leader-only side's task runs on the leader only
        done = Done(name="done", pipeline_config=done_config(config, 1, 1))
        wait_leader = protocol.leader_only(config, "wait")
        consumers = [ts.Task("consumer", [ring], [out, done], warp_idx=1, num_warps=1,
                             schedule=wait_only(ring, out, done), run_only_on_cta_id=0 if wait_leader else None),
                     ts.Task("releaser", [ring, done], [], warp_idx=2, num_warps=1, schedule=release_only(ring, done),
                             run_only_on_cta_id=None if wait_leader else 0)]
        graph[done] = [ring]
    else:
        consumers = [ts.Task("consumer", [ring], [out], warp_idx=1, num_warps=1, schedule=consume(ring, out),
                             run_only_on_cta_id=run_on.get("consumer"))]
    manager = ts.TaskManager([producer] + consumers, graph, verbose=False, skip_validation=run_on["skip_validation"])
    manager.setup_resources_and_tasks()
    manager.run()
    _MANAGERS[:] = [manager]


def _compile(monkeypatch, config, skip_validation=False, **run_on):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _SETUP[:] = [(config, dict(run_on, skip_validation=skip_validation))]
    return tsjit.compile(tsjit.kernel(_kernel_source), np.zeros(4, np.int32), target="sm_90a")


def _actions(llir) -> dict:
    """``{(rank, task): [(kind, barrier, target rank or bytes), ...]}`` of lane 0 of each task's warp
    (waits: the barrier; arrivals: where they land; arms: where, with the bytes), and the init counts
    (a split consumer's ``done`` ring: ``done.full[i]`` ...)."""
    out, counts = {}, None
    order, _ = ring_prefixes(_MANAGERS[0])
    for rank in (0, 1):
        threads = 96 if "releaser" in llir else 64
        events = ir_barrier_events(llir, threads, cta_rank=rank)
        names = barrier_names(events, STAGES, order)
        counts = init_counts(events, names)
        for task, tid in (("producer", 0), ("consumer", 32), ("releaser", 64))[:threads // 32]:
            acts = []
            for e in events[tid]:
                if e[0] == "wait":
                    acts.append(("wait", names[e[1]]))
                elif e[0] == "arrive":
                    acts.append(("arrive", names[e[1]], e[5] if len(e) > 5 else rank))
                elif e[0] == "arm":
                    acts.append(("arm", names[e[1]], e[5] if len(e) > 5 else rank, e[3]))
            out[(rank, task)] = acts
    return out, counts


TAIL = [("wait", "empty[1]"), ("wait", "empty[0]")]     # the producer's drain of both stages
DONE_TAIL = [("wait", "done.empty[1]"), ("wait", "done.empty[0]")]     # the waiter's drain of `done`


def test_without_leader_every_cta_signals_locally_and_releases_everywhere(monkeypatch):
    acts, counts = _actions(_compile(monkeypatch, _config(T.TmaAsync)).llir)
    for rank in (0, 1):
        assert acts[(rank, "producer")] == [("wait", "empty[0]"), ("arm", "full[0]", rank, 1024)] + TAIL
        assert acts[(rank, "consumer")] == [("wait", "full[0]"), ("arrive", "empty[0]", rank),
                                            ("arrive", "empty[0]", 1 - rank)]
    assert counts == {"full[0]": 1, "full[1]": 1, "empty[0]": 64, "empty[1]": 64}


def test_leader_consumer_waits_and_releases_on_the_leader_only(monkeypatch):
    """The CUTLASS split-load pattern: every CTA's copies land on the leader's stage (multicast to rank 0,
    num_bytes = 2 CTAs x 1024); only the leader arms, waits and releases, to both CTAs' empty barriers."""
    compiled = _compile(monkeypatch, _config(T.TmaAsync, consumer=Sig.CtaLeader), consumer=0)
    acts, counts = _actions(compiled.llir)
    assert acts[(0, "producer")] == [("wait", "empty[0]"), ("arm", "full[0]", 0, 2048)] + TAIL
    assert acts[(1, "producer")] == [("wait", "empty[0]")] + TAIL          # waits for the leader's release
    assert acts[(0, "consumer")] == [("wait", "full[0]"), ("arrive", "empty[0]", 0), ("arrive", "empty[0]", 1)]
    assert acts[(1, "consumer")] == []                                      # run_only_on_cta_id=0
    assert counts == {"full[0]": 1, "full[1]": 1, "empty[0]": 32, "empty[1]": 32}
    plain = _compile(monkeypatch, _config(T.TmaAsync)).ptx
    assert compiled.ptx != plain and "%cluster_ctarank" in compiled.ptx


def test_leader_producer_arms_every_cta_and_consumers_release_to_the_leader(monkeypatch):
    compiled = _compile(monkeypatch, _config(T.TmaAsync, producer=Sig.CtaLeader), producer=0)
    acts, counts = _actions(compiled.llir)
    assert acts[(0, "producer")] == [("wait", "empty[0]"), ("arm", "full[0]", 0, 1024),
                                     ("arm", "full[0]", 1, 1024)] + TAIL
    assert acts[(1, "producer")] == []
    for rank in (0, 1):
        assert acts[(rank, "consumer")] == [("wait", "full[0]"), ("arrive", "empty[0]", 0)]
    assert counts == {"full[0]": 1, "full[1]": 1, "empty[0]": 64, "empty[1]": 64}
    assert "mbarrier.arrive.expect_tx.release.cluster.shared::cluster" in compiled.ptx


def test_leader_routed_thread_commits_land_on_the_leader(monkeypatch):
    """AsyncAsync with a leader-only consumer: every CTA's producer threads arrive on the leader's full
    barrier (2 x 32 arrivals); the leader's consumer releases to both CTAs."""
    acts, counts = _actions(_compile(monkeypatch, _config(T.AsyncAsync, consumer=Sig.CtaLeader), consumer=0).llir)
    for rank in (0, 1):
        assert acts[(rank, "producer")] == [("wait", "empty[0]"), ("arrive", "full[0]", 0)] + TAIL
    assert acts[(0, "consumer")] == [("wait", "full[0]"), ("arrive", "empty[0]", 0), ("arrive", "empty[0]", 1)]
    assert counts == {"full[0]": 64, "full[1]": 64, "empty[0]": 32, "empty[1]": 32}


@pytest.mark.parametrize("ptype", [T.AsyncAsync, T.TmaAsync])
def test_split_consumer_waits_everywhere_and_releases_on_the_leader(monkeypatch, ptype):
    """``consumer_signaling_threads=CtaLeader`` with ``consumer_wait_signaling_threads=All``: the wait runs on
    every CTA, the release on the leader only (to every CTA), after ``done`` collected both CTAs' waiters
    (their commits land on the leader's ``done.full``); the reverse split waits on the leader, whose
    ``done`` commit reaches both CTAs, and releases everywhere."""
    acts, counts = _actions(_compile(monkeypatch, _config(ptype, consumer=Sig.CtaLeader, wait=Sig.All)).llir)
    for rank in (0, 1):
        assert acts[(rank, "consumer")] == [("wait", "full[0]"), ("wait", "done.empty[0]"),
                                            ("arrive", "done.full[0]", 0)] + DONE_TAIL
    assert acts[(0, "releaser")] == [("wait", "done.full[0]"), ("arrive", "empty[0]", 0), ("arrive", "empty[0]", 1),
                                     ("arrive", "done.empty[0]", 0), ("arrive", "done.empty[0]", 1)]
    assert acts[(1, "releaser")] == []
    assert counts["done.full[0]"] == 2 and counts["done.empty[0]"] == 1 and counts["empty[0]"] == 32
    # the reverse split: waits on the leader, releases everywhere
    acts, counts = _actions(_compile(monkeypatch, _config(ptype, consumer=Sig.All, wait=Sig.CtaLeader)).llir)
    assert acts[(0, "consumer")] == [("wait", "full[0]"), ("wait", "done.empty[0]"),
                                     ("arrive", "done.full[0]", 0), ("arrive", "done.full[0]", 1)] + DONE_TAIL
    assert acts[(1, "consumer")] == []
    for rank in (0, 1):
        assert acts[(rank, "releaser")] == [("wait", "done.full[0]"), ("arrive", "empty[0]", rank),
                                            ("arrive", "empty[0]", 1 - rank), ("arrive", "done.empty[0]", 0)]
    assert counts["done.full[0]"] == 1 and counts["done.empty[0]"] == 2 and counts["empty[0]"] == 64


@pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")
def test_run_only_on_cta_id_gates_the_whole_task(monkeypatch):
    """The lowering only: the consumer on CTA 1 alone leaves the leader's empty barrier 32 arrivals short, a
    deadlock the checker reports (demoted to a warning here)."""
    compiled = _compile(monkeypatch, _config(T.TmaAsync, producer=Sig.CtaLeader), producer=0, consumer=1,
                        skip_validation=True)
    acts, _ = _actions(compiled.llir)
    assert acts[(1, "producer")] == [] and acts[(0, "consumer")] == []
    assert acts[(1, "consumer")] == [("wait", "full[0]"), ("arrive", "empty[0]", 0)]
    ungated = _compile(monkeypatch, _config(T.TmaAsync, producer=Sig.CtaLeader), producer=0, skip_validation=True).ptx
    assert compiled.ptx != ungated


# -- the two cluster copies of leader_programs: compile here, run on the H200 ---------------------------------
@pytest.mark.parametrize("leader_producer", [False, True], ids=["leader-consumer", "leader-producer"])
def test_leader_copies_compile_and_verify(leader_producer):
    from . import leader_programs as lp
    src, dst = lp.specs(256, 64, 32, leader_producer)
    kernel = lp.leader_producer_copy if leader_producer else lp.leader_consumer_copy
    compiled = tsjit.compile(kernel, src, dst, 4, 32, 64, 3, target="sm_90a")
    assert ".reqnctapercluster 2, 1, 1" in compiled.ptx and "%cluster_ctarank" in compiled.ptx
    assert "multicast::cluster" in compiled.ptx
    if leader_producer:
        assert "mbarrier.arrive.expect_tx.release.cluster.shared::cluster" in compiled.ptx


#: the GPU shapes -> the interpreter's: the same box, stages and uneven tiles-per-cluster, fewer rows and clusters
INTERPRETED = {(4096, 64, 32, 3, 66): (512, 64, 32, 3, 3), (512, 128, 16, 2, 3): (256, 128, 16, 2, 3),
               (64, 32, 32, 4, 1): (64, 32, 32, 4, 1), (2048, 64, 64, 1, 8): (512, 64, 64, 1, 3)}


@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("leader_producer", [False, True], ids=["leader-consumer", "leader-producer"])
@pytest.mark.parametrize("rows,cols,box_m,stages,clusters", list(INTERPRETED))
def test_leader_copies_are_exact(leader_producer, rows, cols, box_m, stages, clusters):
    """Bit-exact copies through the 2-CTA leader pipelines (outputs poisoned with NaN); under the CPU interpreter
    at the reduced shapes of :data:`INTERPRETED` (multicast, remote arrivals and the leader's routing run there too)."""
    from . import leader_programs as lp
    if tsjit.env.interpret():
        rows, cols, box_m, stages, clusters = INTERPRETED[(rows, cols, box_m, stages, clusters)]
    got, expected = lp.run(rows, cols, box_m, stages, clusters, leader_producer)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("side", ["producer", "consumer"])
def test_a_leader_side_under_multicast_counts_what_the_lowering_emits(monkeypatch, side):
    """With a CtaLeader side the release is routed (leader to all, or all to the leader), not per multicast
    peer: P1 accepts one lane (or every thread) per consumer warp, and the lowering emits exactly that."""
    flags = dict(producer_signaling_threads=Sig.CtaLeader) if side == "producer" else \
        dict(consumer_signaling_threads=Sig.CtaLeader)
    leader_waits = side == "consumer"

    def config(consumers):
        return ts.PipelineConfig.create_tma_async_pipeline_cfg(
            STAGES, 1024 * (4 if leader_waits else 1), ts.CooperativeGroup(ts.Agent.Thread, 1),
            ts.CooperativeGroup(ts.Agent.Thread, consumers), num_bytes_per_warp_per_cta=1024,
            cta_layout_vmnk=(1, 2, 2, 1), mcast_mode_mn=(1, 1), **flags)
    run_on = {side: 0}
    acts, _ = _actions(_compile(monkeypatch, config(1), **run_on).llir)   # one lane per consumer warp
    arrivals = [a for a in acts[(0, "consumer")] if a[0] == "arrive"]
    assert len(arrivals) == (4 if side == "consumer" else 1)             # to every CTA / to the leader
    with pytest.raises(tsjit.VerificationError) as err:                  # 3 lanes: a multicast count
        _compile(monkeypatch, config(3), **run_on)
    assert err.value.check == "P1"
