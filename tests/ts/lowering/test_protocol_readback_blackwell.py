"""The UMMA rows and ClcFetchAsync (one-CTA clusters) of the protocol table, lowered for sm_100a: the
barrier sequence read back from the
emitted LLVM IR equals the one the interleaving model executes (the Blackwell half of
``test_protocol_matches_model``), for every Blackwell PipelineType x operation x SignalingThreads of
``test_protocol_blackwell_model`` (whose expectations come from the inventory's table), with the probe
failing and succeeding; the barrier init counts equal the model's.  A ``tcgen05.commit`` reads back as
one arrival on its barrier (the hardware's, when the MMAs before it finish)."""
from __future__ import annotations

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts.enums import ScheduleStage as S
from tsjit.ts.protocol import PipelineType as T
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable

from .protocol_readback import barrier_names, canonical, init_counts, ir_barrier_events, model_events
from .test_protocol_blackwell_model import _cases, _config, _expected, _program

UMMA_ROWS = (T.TmaUmma, T.UmmaAsync, T.AsyncUmma, T.UmmaUmma)
LOWERED_ROWS = UMMA_ROWS + (T.ClcFetchAsync,)          # ClcFetchAsync: one CTA per cluster
_CURRENT: list = []


def _kernel(dst):
    ptype, op, signaling = _CURRENT[0]
    key = "producer_signaling_threads" if op.is_producer else "consumer_signaling_threads"
    tasks, graph = _program(_config(ptype, **{key: signaling}), op)
    manager = ts.TaskManager(list(tasks), graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()
    _CURRENT.append((tasks, graph))


@pytest.mark.parametrize("ptype, op, signaling", [c for c in _cases() if c.values[0] in LOWERED_ROWS])
def test_blackwell_row_lowering_equals_the_model(ptype, op, signaling, monkeypatch):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _CURRENT[:] = [(ptype, op, signaling)]
    compiled = tsjit.compile(tsjit.kernel(_kernel), np.zeros(4, np.int32), target="sm_100a")
    assert ("tcgen05.commit" in compiled.ptx) == (ptype in UMMA_ROWS)
    tasks, graph = _CURRENT[1]
    notes: list = []
    (variant,) = program_variants(tasks)
    program = compile_program(tasks, graph, variant, trip_counts(tasks, 2, notes), RegionTable(None), notes,
                              collapse_probes=False)
    threads = 32 * sum(task.num_warps for task in tasks)
    for probe_result in (False, True):
        events = ir_barrier_events(compiled.llir, threads, probe_result)
        names = barrier_names(events, 2)
        counts = init_counts(events, names)
        for barrier in program.barriers:
            assert counts[f"{barrier.kind}[{barrier.slot}]"] == barrier.count, barrier.name
        for process in program.processes:
            first = 32 * process.task.warp_start
            lowered = canonical(events, range(first, first + 32 * process.task.num_warps), names)
            assert lowered == model_events(process, program.barriers, probe_result), (process.name, probe_result)
    # and both equal the inventory's sequence (probe failing)
    producer, consumer = program.processes
    want_producer, want_consumer = _expected(ptype, op is S.ProducerTryAcquire, op is S.ConsumerTryWait)
    events = ir_barrier_events(compiled.llir, threads, False)
    names = barrier_names(events, 2)
    assert canonical(events, range(0, 32), names) == want_producer
    assert canonical(events, range(32, 32 * 5), names) == want_consumer


def test_umma_rows_on_sm90a_still_say_they_need_sm100a(monkeypatch):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _CURRENT[:] = [(T.UmmaAsync, S.ProducerCommit, ts.SignalingThreads.All)]
    with pytest.raises(tsjit.CompilationError) as err:
        tsjit.compile(tsjit.kernel(_kernel), np.zeros(4, np.int32), target="sm_90a")
    assert "UmmaAsync" in str(err.value) and "sm_100a" in str(err.value)
