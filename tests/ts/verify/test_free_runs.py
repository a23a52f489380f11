"""The reductions that let the exhaustive checker prove tutorial 6's two-pair cluster (issue 14;
tsjit/ts/verify/exhaustive_free_runs.py, exhaustive_search.py), on programs small enough to read:

* a free run passes a ring's next wait only when the outside can complete as many phases of its
  barrier as the wait's parity needs (it passed every second wait for free: a parity-1 wait
  passes against the initial parity 0), counted from the phases the process's previous wait on
  that barrier needed;
* an enabled wait commutes with the outside's arrivals on its barrier when they cannot complete
  its phase;
* PDL ops are invisible once a PDL wait has run.

Each is checked against the full search (``reduce=False``) on the same programs: same deadlocks,
same verdicts.  The two-pair cluster itself is tests/blackwell/test_tutorial6.py
(``test_the_two_pair_cluster_is_proven_over_every_task_of_its_four_ctas``, about 44 000 states;
before these reductions it stopped unfinished at 200 000)."""
from types import SimpleNamespace

from tsjit.ts.verify.exhaustive_free_runs import free_runs
from tsjit.ts.verify.exhaustive_program import Barrier, Op, Process, Program
from tsjit.ts.verify.exhaustive_footprints import Model
from tsjit.ts.verify.exhaustive_search import _Searcher, search

RES = SimpleNamespace(name="ring")


def _op(kind, guard=-1, parity=0, arrivals=(), pdl=0):
    return Op(kind, None, RES, None, None, None, guard=guard, parity=parity, arrivals=tuple(arrivals), pdl=pdl)


def _program(counts, processes):
    barriers = [Barrier(b, RES, "full", b, count) for b, count in enumerate(counts)]
    procs = [Process(i, SimpleNamespace(name=f"p{i}", describe=lambda: "task"), None, 1, list(ops))
             for i, ops in enumerate(processes)]
    return Program(None, procs, barriers, SimpleNamespace(masks=[]))


def _two_phase_consumer(producer_arrivals: int):
    """Barrier 0 (count 1): process 0 waits for its phases 0 and 1 (parity 0, then 1), then arrives on
    barrier 1; process 1 arrives ``producer_arrivals`` times on barrier 0."""
    consumer = [_op("wait", guard=0, parity=0), _op("wait", guard=0, parity=1), _op("release", arrivals=[(1, 1, 0)])]
    producer = [_op("arrive", arrivals=[(0, 1, 0)]) for _ in range(producer_arrivals)]
    return _program([1, 1], [consumer, producer])


def test_a_free_run_passes_a_second_phase_only_when_the_outside_completes_two():
    for arrivals, passes_both in [(1, False), (2, True)]:
        model = Model(_two_phase_consumer(arrivals))
        fps, _, avail = free_runs(model, model.initial_state(), [0, 1], [])
        reaches_release = bool(fps[("p", 0)] & 1 << 1)       # its arrival on barrier 1
        assert reaches_release == passes_both, arrivals
        assert avail.arrivals[0] == arrivals


def test_the_two_phase_consumer_gets_the_same_findings_from_both_searches():
    """One arrival: the second phase never completes (a deadlock in every run).  Two: the runs where the
    consumer keeps up complete, but the one where both arrivals land before its first wait hangs it (the
    parity is back to 0: two phases behind) -- both searches find the hang in both programs."""
    for arrivals in (1, 2):
        reduced = search(_two_phase_consumer(arrivals))[1]
        full = search(_two_phase_consumer(arrivals), reduce=False)[1]
        assert {e.kind for e in reduced.events} == {e.kind for e in full.events} == {"deadlock"}, arrivals


def _stable_wait(arrivers: int):
    """Barrier 0 counts 2: process 0's wait on it passes now (parity 1 against 0) and then arrives on
    barrier 1; ``arrivers`` processes arrive once each on barrier 0, then wait on barrier 1."""
    waiter = [_op("acquire", guard=0, parity=1, arrivals=[(1, 1, 0)])]
    others = [[_op("arrive", arrivals=[(0, 1, 0)]), _op("wait", guard=1, parity=0)] for _ in range(arrivers)]
    return _program([2, 1], [waiter] + others)


def test_an_enabled_wait_is_alone_when_the_outside_cannot_complete_its_phase():
    """One arrival cannot complete a phase of a barrier counting 2: the wait's parity stays, so it commutes
    with that arrival and is a persistent set on its own; two arrivals can: the arrivers join it."""
    for arrivers, alone in [(1, True), (2, False)]:
        model = Model(_stable_wait(arrivers))
        searcher = _Searcher(model, 1000)
        state = model.initial_state()
        live = [("p", i) for i in range(model.P)]
        enabled = [k for k in live if model.enabled(state, k[1])]
        chosen = searcher.ample(state, enabled, live)
        assert (chosen == [("p", 0)]) == alone, chosen
        full = search(_stable_wait(arrivers), reduce=False)[1]
        reduced = search(_stable_wait(arrivers))[1]
        assert (full.deadlock_states > 0) == (reduced.deadlock_states > 0)
        assert reduced.complete == full.complete > 0 or reduced.deadlock_states > 0


def test_pdl_waits_are_taken_one_at_a_time_once_one_has_run():
    """Eight processes each wait on the PDL flag, one launches after its wait: every order of the waits was
    a distinct state (2^8 subsets); once the flag is set they are invisible, and the launch before any wait
    is still impossible (no PDL violation in either search)."""
    procs = [[_op("pdl_wait", pdl=1)] + ([_op("pdl_launch", pdl=2)] if i == 0 else []) for i in range(8)]
    _, reduced = search(_program([1], procs))
    _, full = search(_program([1], procs), reduce=False)
    assert reduced.complete == full.complete == 1 and not reduced.events and not full.events
    assert full.states > 256 and reduced.states < 40, (reduced.states, full.states)
