"""The lowering and the interleaving model execute the same barrier protocol (issue 12 §1).

For every PipelineType x operation x SignalingThreads, a small two-task program (a producer task
and a consumer task over one ring) is compiled; the barrier sequence of each task read back from
the emitted LLVM IR (:mod:`protocol_readback`: every thread's run, folded) must equal the one the
interleaving model executes for that task, with the probe failing and succeeding.  The barrier
init counts must equal the model's.  Blackwell rows are not lowered yet: for them the model side
is checked against the inventory's protocol (marked for the Blackwell issue).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts import protocol
from tsjit.ts.enums import ScheduleStage as S
from tsjit.ts.protocol import PipelineType as T
from tsjit.ts.protocol import SignalingThreads as Sig
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable

from .protocol_readback import (Done, Out, Ring, barrier_names, canonical, done_config, init_counts, ir_barrier_events,
                               model_events, ring_prefixes)

STAGES = 2


@dataclass(frozen=True)
class Case:
    ptype: T
    op: S
    signaling: Sig
    producer_warps: int = 2
    consumer_warps: int = 2
    cluster: int = 1
    async_load: bool = False
    advance: bool = False          # advance_on_acquire / advance_on_wait on the op's side
    mcast: bool = False            # 2 x 2 cluster with TMA multicast (1, 1): 3 arrivals per consumer warp
    wait_signaling: Sig | None = None   # consumer_wait_signaling_threads (the consumer's wait side)

    @property
    def id(self) -> str:
        extra = "".join(f"-{k}" for k, on in (("cluster2", self.cluster > 1), ("asyncload", self.async_load),
                                              ("advance", self.advance)) if on)
        if self.wait_signaling is not None:
            extra += f"-wait{self.wait_signaling.name}"
        return f"{self.ptype.value}-{self.op.name}-{self.signaling.name or int(self.signaling)}{extra}"

    def config(self):
        producer_side = self.op.is_producer
        sig = dict(producer_signaling_threads=self.signaling) if producer_side else \
            dict(consumer_signaling_threads=self.signaling)
        if self.wait_signaling is not None:
            sig["consumer_wait_signaling_threads"] = self.wait_signaling
        layout = dict(cta_layout_vmnk=(1, self.cluster, 1, 1)) if self.cluster > 1 else {}
        if self.ptype is T.AsyncAsync:
            op = ts.PipelineOp.AsyncLoad if self.async_load else ts.PipelineOp.AsyncThread
            return ts.PipelineConfig.create_async_async_pipeline_cfg(
                STAGES, ts.CooperativeGroup(ts.Agent.Thread, 32 * self.producer_warps),
                ts.CooperativeGroup(ts.Agent.Thread, 32 * self.consumer_warps), producer_op=op,
                advance_on_acquire=self.advance and producer_side,
                advance_on_wait=self.advance and not producer_side, **sig, **layout)
        arming = 1 if producer_side and self.signaling & Sig.TaskWarpLeader else self.producer_warps
        if self.mcast:
            layout = dict(cta_layout_vmnk=(1, 2, 2, 1), mcast_mode_mn=(1, 1))
        # a leader-only waiting consumer in a cluster gets every CTA's bytes on the leader's barrier (P2)
        waits = self.wait_signaling if self.wait_signaling is not None else \
            (Sig.All if producer_side else self.signaling)
        ctas = self.cluster if waits & Sig.CtaLeader else 1
        per_warp = 1024 if arming == 1 or ctas > 1 else None
        consumers = self.consumer_warps * (3 if self.mcast else 1) * (32 if ctas > 1 else 1)
        return ts.PipelineConfig.create_tma_async_pipeline_cfg(
            STAGES, 1024 * (self.producer_warps if arming == 1 else 1) * ctas,
            ts.CooperativeGroup(ts.Agent.Thread, arming),
            ts.CooperativeGroup(ts.Agent.Thread, consumers),
            num_bytes_per_warp_per_cta=per_warp,
            advance_on_wait=self.advance and not producer_side, **sig, **layout)


_CASE: list = []
_MANAGERS: list = []


def _keep(manager):
    _MANAGERS.append(manager)


def _program(dst):
    case = _CASE[0]
    ring = Ring(name="ring", pipeline_config=case.config())
    out = Out(name="out")
    probe_producer = case.op is S.ProducerTryAcquire
    probe_consumer = case.op is S.ConsumerTryWait

    @ts.schedule
    def produce(r: Ring):
        if probe_producer:
            r.try_acquire()
        r.acquire()
        r.fill()
        r.commit()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def consume(r: Ring, o: Out):
        if probe_consumer:
            r.try_wait()
        r.wait()
        r.read()
        o.store()
        r.release()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def wait_only(r: Ring, o: Out, d: Done):
        if probe_consumer:
            r.try_wait()
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

    # a leader-only side's task runs on the leader only (its work would be unordered elsewhere)
    leader_side = case.cluster > 1 and case.signaling & Sig.CtaLeader
    producer = ts.Task("producer", [], [ring], warp_idx=0, num_warps=case.producer_warps, schedule=produce(ring),
                       run_only_on_cta_id=0 if leader_side and case.op.is_producer else None)
    graph = {out: [ring]}
    if case.wait_signaling is None:
        consumer = ts.Task("consumer", [ring], [out], warp_idx=case.producer_warps, num_warps=case.consumer_warps,
                           schedule=consume(ring, out),
                           run_only_on_cta_id=0 if leader_side and not case.op.is_producer else None)
        tasks = [producer, consumer]
    else:
        # the split consumer (consumer_wait_signaling_threads): one task waits, another releases once the
        # waiter's commit of `done` says it has read the stage; the leader-only side's task on the leader only
        done = Done(name="done", pipeline_config=done_config(ring.pipeline_config, case.consumer_warps,
                                                             case.consumer_warps))
        wait_leader = protocol.leader_only(ring.pipeline_config, "wait")
        waiter = ts.Task("waiter", [ring], [out, done], warp_idx=case.producer_warps, num_warps=case.consumer_warps,
                         schedule=wait_only(ring, out, done), run_only_on_cta_id=0 if wait_leader else None)
        releaser = ts.Task("releaser", [ring, done], [], warp_idx=case.producer_warps + case.consumer_warps,
                           num_warps=case.consumer_warps, schedule=release_only(ring, done),
                           run_only_on_cta_id=None if wait_leader else 0)
        tasks = [producer, waiter, releaser]
        graph[done] = [ring]
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()
    _keep(manager)


def _kernel_source(dst):
    _program(dst)


def _compile(case: Case, monkeypatch):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _CASE[:] = [case]
    _MANAGERS.clear()
    compiled = tsjit.compile(tsjit.kernel(_kernel_source), np.zeros(4, np.int32))
    assert len(_MANAGERS) == 1
    return compiled.llir, _MANAGERS[0]


def _model(manager, collapse_probes=False):
    """The model's program; by default the exact protocol (every probe its own op)."""
    tasks = tuple(manager.tasks)
    notes: list = []
    counts = trip_counts(tasks, 2, notes)
    (variant,) = program_variants(tasks)
    return compile_program(tasks, manager.resource_dependency_graph, variant, counts, RegionTable(None), notes,
                           collapse_probes=collapse_probes)


def _lowered(process, events, peers, names, first):
    """The read-back sequence a model process stands for: with every CTA modelled, the run of its own CTA
    (its waits, and its arrivals named with the CTA each lands on: ``model_events(with_cta=True)``); in the
    symmetric reduction of a cluster, the leader CTA's view."""
    threads = range(first, first + 32 * process.task.num_warps)
    cta = getattr(process, "cta", None)
    if cta is not None:
        return canonical(events if cta == 0 else peers[cta], threads, names, own_rank=cta)
    return canonical(events, threads, names, peers)


def _modelled(process, barriers, prefixes, probe_result=False):
    return model_events(process, barriers, probe_result, prefixes=prefixes,
                        with_cta=getattr(process, "cta", None) is not None)


def _hopper_cases():
    cases = []
    for ptype in (T.AsyncAsync, T.TmaAsync):
        for op in protocol.OPERATIONS:
            sides = (Sig.All, Sig.CtaLeader, Sig.TaskWarpLeader, Sig.CtaLeader | Sig.TaskWarpLeader) \
                if op.is_producer else (Sig.All, Sig.CtaLeader)
            for signaling in sides:
                cases.append(Case(ptype, op, signaling))
    cases += [Case(T.AsyncAsync, S.ProducerCommit, Sig.All, async_load=True),
              Case(T.AsyncAsync, S.ProducerAcquire, Sig.All, advance=True),
              Case(T.AsyncAsync, S.ConsumerWait, Sig.All, advance=True),
              Case(T.TmaAsync, S.ConsumerRelease, Sig.All, cluster=2),
              Case(T.TmaAsync, S.ConsumerWait, Sig.All, advance=True),
              Case(T.AsyncAsync, S.ConsumerRelease, Sig.All, producer_warps=1, consumer_warps=4)]
    # issue 12 §2: CtaLeader in a 2-CTA cluster, every operation of the leader-only side
    for ptype in (T.AsyncAsync, T.TmaAsync):
        for op in protocol.OPERATIONS:
            sides = (Sig.CtaLeader, Sig.CtaLeader | Sig.TaskWarpLeader) if op.is_producer and ptype is T.TmaAsync \
                else (Sig.CtaLeader,)
            cases += [Case(ptype, op, signaling, cluster=2) for signaling in sides]
        # the split consumer: waits on every CTA, releases on the leader only; and the reverse
        cases += [Case(ptype, S.ConsumerWait, Sig.CtaLeader, cluster=2, wait_signaling=Sig.All),
                  Case(ptype, S.ConsumerRelease, Sig.CtaLeader, cluster=2, wait_signaling=Sig.All),
                  Case(ptype, S.ConsumerTryWait, Sig.All, cluster=2, wait_signaling=Sig.CtaLeader),
                  Case(ptype, S.ConsumerRelease, Sig.All, cluster=2, wait_signaling=Sig.CtaLeader)]
    return cases


def _legal(case: Case) -> bool:
    """TaskWarpLeader is a TMA-producer-only flag (P3)."""
    return not (case.signaling & Sig.TaskWarpLeader and not case.ptype.row.allows_task_warp_leader)


@pytest.mark.parametrize("case", _hopper_cases(), ids=lambda c: c.id)
def test_lowered_barrier_sequence_equals_the_model(case, monkeypatch):
    if not _legal(case):
        with pytest.raises(tsjit.VerificationError) as err:
            case.config()
        assert err.value.check == "P3" and "TaskWarpLeader" in str(err.value)
        return
    llir, manager = _compile(case, monkeypatch)
    program = _model(manager)
    threads = 32 * sum(t.num_warps for t in manager.tasks)
    for probe_result in (False, True):
        events = ir_barrier_events(llir, threads, probe_result)
        # in a cluster: the leader CTA's view (its waits, the arrivals landing on its barriers)
        peers = {rank: ir_barrier_events(llir, threads, probe_result, cta_rank=rank)
                 for rank in range(1, case.cluster)} if case.cluster > 1 else None
        order, prefixes = ring_prefixes(manager)
        names = barrier_names(events, STAGES, order)
        counts = init_counts(events, names)
        for barrier in program.barriers:
            assert counts[f"{prefixes[barrier.resource.name]}{barrier.kind}[{barrier.slot}]"] == barrier.count, \
                barrier.name
        for process in program.processes:
            first = 32 * process.task.warp_start
            lowered = _lowered(process, events, peers, names, first)
            modelled = _modelled(process, program.barriers, prefixes, probe_result)
            assert lowered == modelled, (process.name, probe_result)
        if not probe_result:
            # the checker's own model folds each probe into its wait: the lowered sequence without
            # the (failed) probes
            folded = _model(manager, collapse_probes=True)
            for process in folded.processes:
                first = 32 * process.task.warp_start
                lowered = _lowered(process, events, peers, names, first)
                assert [e for e in lowered if e[0] != "probe"] == _modelled(process, folded.barriers, prefixes)
        # the operation under test is present in the sequence it belongs to
        producer, consumer = program.processes[:2]
        mine = _modelled(producer if case.op.is_producer else consumer, program.barriers, prefixes, probe_result)
        if case.op in (S.ProducerTryAcquire, S.ConsumerTryWait):
            assert mine[0][0] == "probe"
        elif case.op in (S.ProducerAcquire, S.ConsumerWait) and not probe_result:
            assert mine[0][0] == "wait"


def test_the_readback_sees_a_wrong_lowering(monkeypatch):
    """The comparison can fail: with the release's arrivals doubled in the lowering only, the
    consumer's read-back sequence differs from the model's."""
    from tsjit.ts import lower_pipeline
    original = lower_pipeline._arrive_everywhere

    def twice(bar, cluster, *args, **kwargs):
        original(bar, cluster, *args, **kwargs)
        original(bar, cluster, *args, **kwargs)
    monkeypatch.setattr(lower_pipeline, "_arrive_everywhere", twice)
    case = Case(T.TmaAsync, S.ConsumerRelease, Sig.All)
    llir, manager = _compile(case, monkeypatch)
    program = _model(manager)
    events = ir_barrier_events(llir, 128)
    names = barrier_names(events, STAGES)
    consumer = program.processes[1]
    assert canonical(events, range(64, 128), names) != model_events(consumer, program.barriers)


def test_multicast_release_is_lowered_as_the_model_counts_it(monkeypatch):
    """Issue 12 §4: a multicast consumer count that P1 accepts (one arrival per multicast peer: a 2 x 2
    cluster, mcast (1, 1), 3 lanes per warp) is lowered, not refused: the read-back release sequence
    equals the model's, and on every CTA lane j of each consumer warp arrives on the empty barrier of
    CTA ``protocol.multicast_peers(config, rank)[j]`` (its multicast row and column)."""
    case = Case(T.TmaAsync, S.ConsumerRelease, Sig.All, mcast=True)
    llir, manager = _compile(case, monkeypatch)
    program = _model(manager)
    threads = 32 * (case.producer_warps + case.consumer_warps)
    config = manager.resources[0].pipeline_config if manager.resources[0].name == "ring" else \
        manager.resources[1].pipeline_config
    for rank in range(4):
        events = ir_barrier_events(llir, threads, cta_rank=rank)
        names = barrier_names(events, STAGES)
        consumer = program.processes[1]
        assert canonical(events, range(64, 128), names) == model_events(consumer, program.barriers)
        peers = protocol.multicast_peers(config, rank)
        assert len(set(peers)) == 3 and rank in peers
        for tid in range(64, 128):
            targets = [e[5] for e in events[tid] if e[0] == "arrive" and len(e) > 5]
            lane = tid % 32
            assert targets == ([peers[lane]] if lane < 3 else []), (rank, tid, targets)


@pytest.mark.parametrize("mode,expected", [((1, 0), {0: (0, 1), 3: (2, 3)}), ((0, 1), {0: (0, 2), 3: (1, 3)}),
                                           ((1, 1), {0: (0, 1, 2), 3: (2, 3, 1)})])
def test_multicast_peers_are_the_row_and_column(mode, expected):
    cfg = ts.PipelineConfig.create_tma_async_pipeline_cfg(
        2, 1024, ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, 3),
        cta_layout_vmnk=(1, 2, 2, 1), mcast_mode_mn=mode)
    for rank, peers in expected.items():
        assert protocol.multicast_peers(cfg, rank) == peers
