"""Pipeline groups: the barrier sequence each task executes in the emitted IR equals the one the
interleaving model executes, for Merge (thread + TMA members, and cp.async AsyncLoad with lagging
releases), Fork (two TMA members) and FusedMerge programs (read back with the IR interpreter of
``tests/ts/lowering/protocol_readback.py``; barriers named ``<owner>.<kind>[<stage>]``, the owner
being the group for a shared array)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable

from lowering.protocol_readback import Out, Ring, canonical, ir_barrier_events, model_events

STAGES = 2
M = ts.PipelineGroupMode
_PROGRAM: list = []
_MANAGERS: list = []


def _threads(n):
    return ts.CooperativeGroup(ts.Agent.Thread, n)


def _config(kind, *, advance=False, consumers=128):
    if kind == "tma":
        return ts.PipelineConfig.create_tma_async_pipeline_cfg(STAGES, 1024, _threads(1), _threads(consumers),
                                                               advance_on_wait=advance)
    op = ts.PipelineOp.AsyncLoad if kind == "asyncload" else ts.PipelineOp.AsyncThread
    return ts.PipelineConfig.create_async_async_pipeline_cfg(STAGES, _threads(32), _threads(consumers), producer_op=op,
                                                             advance_on_wait=advance)


def _merge_program(mode, kinds, advance):
    a, b = (Ring(name=f"m{i}", pipeline_config=_config(k, advance=advance)) for i, k in enumerate(kinds))
    group = ts.PipelineGroup("g", [a, b], mode)
    out = Out(name="out")

    trips = 2 if advance else 0

    @ts.schedule
    def load(s: Ring):
        if not advance:
            s.acquire()
            s.fill()
            s.commit()
        with ts.domain_loop(0, trips, 1):
            if advance:
                s.acquire()
                s.fill()
                s.commit()

    @ts.schedule
    def consume(g, sa: Ring, sb: Ring, o: Out):
        def wait_and_read():
            if mode is M.FusedMerge:
                g.wait()
            else:
                sa.wait()
                sb.wait()
            sa.read()
            o.store()
        if not advance:
            wait_and_read()
            g.release()
        with ts.domain_loop(0, trips, 1) as d:
            if advance:          # the merge GEMM's lagging release: the previous stage, then the last one
                wait_and_read()
                with d.every(1, start=1):
                    g.release()
        if advance:
            g.release()

    return [ts.Task("la", [], [a], warp_idx=0, num_warps=1, schedule=load(group.m0)),
            ts.Task("lb", [], [b], warp_idx=1, num_warps=1, schedule=load(group.m1)),
            ts.Task("st", [a, b], [out], warp_idx=2, num_warps=4,
                    schedule=consume(group, group.m0, group.m1, out))], {out: [a, b]}


def _fork_program():
    a, b = (Ring(name=f"m{i}", pipeline_config=_config("tma")) for i in range(2))
    group = ts.PipelineGroup("g", [a, b], M.Fork)
    out = Out(name="out")

    @ts.schedule
    def produce(g, sa: Ring, sb: Ring):
        sa.acquire()
        sb.acquire()
        sa.fill()
        g.commit()
        with ts.domain_loop(0, 0, 1):
            pass

    @ts.schedule
    def consume(s: Ring, o: Out):
        s.wait()
        s.read()
        o.store()
        s.release()
        with ts.domain_loop(0, 0, 1):
            pass

    return [ts.Task("p", [], [a, b], warp_idx=0, num_warps=1, schedule=produce(group, group.m0, group.m1)),
            ts.Task("ca", [a], [out], warp_idx=1, num_warps=4, schedule=consume(group.m0, out)),
            ts.Task("cb", [b], [out], warp_idx=5, num_warps=4, schedule=consume(group.m1, out))], {out: [a, b]}


PROGRAMS = {
    "merge_threads_tma": lambda: _merge_program(M.Merge, ("async", "tma"), False),
    "merge_asyncload_tma_lagging": lambda: _merge_program(M.Merge, ("asyncload", "tma"), True),
    "fused_merge_threads_tma": lambda: _merge_program(M.FusedMerge, ("async", "tma"), False),
    "fork_two_tma": _fork_program,
}


def _kernel_source(dst):
    tasks, graph = _PROGRAM[0]()
    manager = ts.TaskManager(tasks, graph, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()
    _MANAGERS.append(manager)


def _names(events, group) -> dict:
    """``{smem address: "<owner>.<kind>[<stage>]"}``: the group's arrays in barrier_arrays() order."""
    inits = sorted({e[1] for e in events[0] if e[0] == "init"})
    arrays = group.barrier_arrays()
    assert len(inits) == len(arrays) * STAGES == group.num_barriers
    return {addr: f"{arrays[i // STAGES].owner.name}.{arrays[i // STAGES].kind.value}[{i % STAGES}]"
            for i, addr in enumerate(inits)}


@pytest.mark.parametrize("name", PROGRAMS)
def test_lowered_group_barrier_sequence_equals_the_model(name, monkeypatch):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _PROGRAM[:] = [PROGRAMS[name]]
    _MANAGERS.clear()
    llir = tsjit.compile(tsjit.kernel(_kernel_source), np.zeros(4, np.int32)).llir
    manager = _MANAGERS[0]
    tasks = tuple(manager.tasks)
    notes: list = []
    (variant,) = program_variants(tasks)
    program = compile_program(tasks, manager.resource_dependency_graph, variant, trip_counts(tasks, 2, notes),
                              RegionTable(None), notes)
    group = tasks[0].schedule.steps[0].resource.pipeline_group
    threads = 32 * max(t.warp_end for t in tasks)
    events = ir_barrier_events(llir, threads)
    names = _names(events, group)
    counts = {names[e[1]]: e[2] for e in events[0] if e[0] == "init"}
    # every barrier the model touches is initialised with the model's count (the group's, for a shared array)
    assert {b.name: counts.get(b.name) for b in program.barriers} == {b.name: b.count for b in program.barriers}
    shim = [SimpleNamespace(kind=f"{b.resource.name}.{b.kind}", slot=b.slot) for b in program.barriers]
    for process in program.processes:
        first = 32 * process.task.warp_start
        lowered = canonical(events, range(first, first + 32 * process.task.num_warps), names)
        assert lowered == model_events(process, shim), process.name
        assert lowered, process.name


#: what two of the programs must execute, independently of the model: the Merge consumer waits on each
#: member's full barrier and arrives once (128 threads) on the shared empty one; the Fork producer waits
#: each member's empty barrier and arms the shared full barrier once, for the primary member (then drains).
EXPECTED = {
    ("merge_threads_tma", "st"): [("wait", "m0.full[0]", 0), ("wait", "m1.full[0]", 0),
                                  ("arrivals", ((("g.empty[0]", "arrivals"), 128),))],
    ("fork_two_tma", "p"): [("wait", "m0.empty[0]", 1), ("arrivals", ((("g.full[0]", "arrivals"), 1),
                                                                     (("g.full[0]", "bytes"), 1024))),
                            ("wait", "m1.empty[0]", 1)],
    ("fork_two_tma", "cb"): [("wait", "g.full[0]", 0), ("arrivals", ((("m1.empty[0]", "arrivals"), 128),))],
}


@pytest.mark.parametrize("name,task", EXPECTED)
def test_group_barrier_sequence_is_the_documented_one(name, task, monkeypatch):
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    _PROGRAM[:] = [PROGRAMS[name]]
    _MANAGERS.clear()
    llir = tsjit.compile(tsjit.kernel(_kernel_source), np.zeros(4, np.int32)).llir
    manager = _MANAGERS[0]
    group = manager.tasks[0].schedule.steps[0].resource.pipeline_group
    events = ir_barrier_events(llir, 32 * max(t.warp_end for t in manager.tasks))
    t = next(t for t in manager.tasks if t.name == task)
    first = 32 * t.warp_start
    sequence = canonical(events, range(first, first + 32 * t.num_warps), _names(events, group))
    expected = EXPECTED[(name, task)]
    assert sequence[:len(expected)] == expected      # (a producer's tail drain follows)
    assert all(e[0] == "wait" and ".empty[" in e[1] for e in sequence[len(expected):])
