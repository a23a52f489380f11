"""Blackwell rows of the protocol table, model side (issue 12 §1; the lowering side belongs to the
Blackwell issue, which must extend ``test_protocol_matches_model`` to these rows).

For each Blackwell PipelineType x operation x SignalingThreads, one producer task (1 warp) and one
consumer task (4 warps) run one acquire/commit and one wait/release over a 2-stage ring; the
barrier sequence the interleaving model executes must be the one the inventory (§3, "Lowering per
PipelineType") describes.  The expectations below are written from that table, not from
``tsjit.ts.protocol``.  Until the Blackwell issue lands, the sm_90a lowering refuses these rows.
"""
from __future__ import annotations


import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts.enums import ScheduleStage as S
from tsjit.ts.protocol import OPERATIONS
from tsjit.ts.protocol import PipelineType as T
from tsjit.ts.protocol import SignalingThreads as Sig
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable

from .protocol_readback import Out, Ring, model_events

CONSUMER_THREADS = 128


def _config(ptype: T, **kw):
    one, threads = ts.CooperativeGroup(ts.Agent.Thread, 1), ts.CooperativeGroup(ts.Agent.Thread, CONSUMER_THREADS)
    warp = ts.CooperativeGroup(ts.Agent.Thread, 32)
    P = ts.PipelineConfig
    return {
        T.TmaUmma: lambda: P.create_tma_umma_pipeline_cfg(2, 4096, one, one, **kw),
        T.UmmaAsync: lambda: P.create_umma_async_pipeline_cfg(2, one, threads, **kw),
        T.AsyncUmma: lambda: P.create_async_umma_pipeline_cfg(2, warp, one, **kw),
        T.UmmaUmma: lambda: P.create_umma_umma_pipeline_cfg(2, one, one, **kw),
        T.ClcFetchAsync: lambda: P.create_clc_fetch_async_pipeline_cfg(2, 16, one, threads, **kw),
    }[ptype]()


#: the inventory's table, for one producer warp and 4 consumer warps in one CTA:
#: (full barrier arrivals and bytes of one commit-or-arm, empty barrier arrivals of one release)
INVENTORY = {
    T.TmaUmma: ((1, 4096), 1),            # elected lane arms expect_tx; tcgen05.commit to empty
    T.UmmaAsync: ((1, 0), CONSUMER_THREADS),  # tcgen05.commit to full; every consumer thread arrives
    T.AsyncUmma: ((32, 0), 1),            # every producer thread arrives; tcgen05.commit to empty
    T.UmmaUmma: ((1, 0), 1),              # tcgen05.commit on both sides
    T.ClcFetchAsync: ((1, 16), CONSUMER_THREADS),  # CTA 0 arms 16 B; every consumer thread arrives
}


def _expected(ptype: T, probe_producer: bool, probe_consumer: bool):
    (full_n, full_tx), empty_n = INVENTORY[ptype]
    arm = ((("full[0]", "arrivals"), full_n),) + (((("full[0]", "bytes"), full_tx),) if full_tx else ())
    producer = ([("probe", "empty[0]", 1)] if probe_producer else []) + [
        ("wait", "empty[0]", 1), ("arrivals", tuple(sorted(arm))),
        ("wait", "empty[1]", 1), ("wait", "empty[0]", 0)]          # the producer tail drains both stages
    consumer = ([("probe", "full[0]", 0)] if probe_consumer else []) + [
        ("wait", "full[0]", 0), ("arrivals", ((("empty[0]", "arrivals"), empty_n),))]
    return producer, consumer


def _program(config, op: S):
    ring = Ring(name="ring", pipeline_config=config)
    out = Out(name="out")

    @ts.schedule
    def produce(r: Ring):
        if op is S.ProducerTryAcquire:
            r.try_acquire()
        r.acquire()
        r.fill()
        r.commit()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def consume(r: Ring, o: Out):
        if op is S.ConsumerTryWait:
            r.try_wait()
        r.wait()
        r.read()
        o.store()
        r.release()
        with ts.domain_loop(0, 0, 1):
            pass

    tasks = (ts.Task("producer", [], [ring], warp_idx=0, num_warps=1, schedule=produce(ring)),
             ts.Task("consumer", [ring], [out], warp_idx=1, num_warps=4, schedule=consume(ring, out)))
    return tasks, {out: [ring]}


def _cases():
    for ptype in INVENTORY:
        for op in OPERATIONS:
            sides = (Sig.All, Sig.CtaLeader) + ((Sig.TaskWarpLeader,) if op.is_producer and ptype is T.TmaUmma else ())
            for signaling in sides:
                yield pytest.param(ptype, op, signaling, id=f"{ptype.value}-{op.name}-{signaling.name}")


@pytest.mark.parametrize("ptype, op, signaling", list(_cases()))
def test_blackwell_row_model_follows_the_inventory(ptype, op, signaling):
    key = "producer_signaling_threads" if op.is_producer else "consumer_signaling_threads"
    tasks, graph = _program(_config(ptype, **{key: signaling}), op)
    notes: list = []
    (variant,) = program_variants(tasks)
    program = compile_program(tasks, graph, variant, trip_counts(tasks, 2, notes), RegionTable(None), notes,
                              collapse_probes=False)
    producer, consumer = program.processes
    for probe_result in (False, True):
        want_producer, want_consumer = _expected(ptype, op is S.ProducerTryAcquire, op is S.ConsumerTryWait)
        if probe_result:
            want_producer = [e for i, e in enumerate(want_producer)
                             if not (op is S.ProducerTryAcquire and i == 1)]
            want_consumer = [e for i, e in enumerate(want_consumer)
                             if not (op is S.ConsumerTryWait and i == 1)]
        assert model_events(producer, program.barriers, probe_result) == want_producer
        assert model_events(consumer, program.barriers, probe_result) == want_consumer
    counts = {b.name: b.count for b in program.barriers}
    assert counts["ring.full[0]"] == INVENTORY[ptype][0][0]
    assert counts["ring.empty[0]"] == INVENTORY[ptype][1]


def _blackwell_kernel(dst):
    tasks, graph = _program(_config(_PTYPE[0]), S.ProducerAcquire)
    manager = ts.TaskManager(list(tasks), graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


_PTYPE: list = []


@pytest.mark.parametrize("ptype", list(INVENTORY), ids=lambda t: t.value)
def test_blackwell_rows_are_not_lowered_for_sm90a_yet(ptype, monkeypatch):
    """The Blackwell issue replaces this with the lowering == model comparison for these rows."""
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _PTYPE[:] = [ptype]
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(tsjit.kernel(_blackwell_kernel), np.zeros(4, np.int32))
    assert ptype.value in str(err.value) and "sm_100a" in str(err.value)
