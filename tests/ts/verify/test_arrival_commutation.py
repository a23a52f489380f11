"""The reductions that let the exhaustive checker prove tutorial 6's two pairs with CLC (issue 14;
tsjit/ts/verify/exhaustive_search.py ``_stable_arrivals``, exhaustive_free_runs.py ``Bounds``), and the race
they must keep finding:

* arrivals of different sizes on one barrier (the 32-thread warps' and the 128-thread epilogue's releases of
  the CLC ring, a leader's expect_tx arm and the TMA copies landing on its barrier) commute while, with what
  the outside can still deliver, no arrival can exceed its phase and no phase can complete between them;
* a copy that neither arrives nor lands bytes (the end of an MMA's reads) touches no barrier;
* a task's own read of bytes its own asynchronous operation is still writing is a race (a CLC response read
  before the wait its try_cancel completes on): own copies are independent only of each other.

Each is checked against the full search (``reduce=False``) on small programs and on seeded random ones: same
findings, same terminal states.  The tutorial-level twins are tests/ts/verify/test_two_pair_clc_twins.py."""
import random
from types import SimpleNamespace

import pytest

from tsjit.ts.verify.exhaustive_program import Access, Barrier, Copy, Op, Process, Program
from tsjit.ts.verify.exhaustive_footprints import Model
from tsjit.ts.verify.exhaustive_search import _Searcher

RES = SimpleNamespace(name="ring")
MISCOUNTS = {"arrivals", "bytes"}


def _op(guard=-1, parity=0, arrivals=(), spawns=(), segment=()):
    return Op("op", None, RES, None, None, None, guard=guard, parity=parity, arrivals=tuple(arrivals),
              spawns=tuple(spawns), segment=tuple(segment))


def _program(counts, processes, copies=(), regions=0):
    barriers = [Barrier(b, RES, "full", b, count) for b, count in enumerate(counts)]
    procs = [Process(i, SimpleNamespace(name=f"p{i}", describe=lambda: "task"), None, 1, list(ops))
             for i, ops in enumerate(processes)]
    return Program(None, procs, barriers, SimpleNamespace(masks=[1 << r for r in range(regions)]), list(copies))


def _explore(program, reduce):
    """(result, terminal states, finding kinds) of an exhaustive run that does not stop at the first finding."""
    model = Model(program)
    searcher = _Searcher(model, 200_000)
    result = searcher.run(reduce, levels_after_finding=10 ** 9)
    terminal = set()
    for state in result.parents:
        procs, copies = searcher.live(state)
        if not [c for c in copies if model.copies[c].after not in copies] + \
                [i for i in procs if model.enabled(state, i)]:
            terminal.add(state)
    return result, terminal, {e.kind for e in result.events}


def _agree(make):
    """Reduced and full search agree on ``make()``: a miscount found by one is found by the other (which
    miscount a path meets first may differ: it ends the path); without one, same findings and terminal states."""
    full, full_terminal, full_kinds = _explore(make(), False)
    reduced, reduced_terminal, reduced_kinds = _explore(make(), True)
    if full_kinds & MISCOUNTS:
        assert reduced_kinds & MISCOUNTS, (full_kinds, reduced_kinds)
    else:
        assert (reduced_kinds, reduced_terminal) == (full_kinds, full_terminal), (full_kinds, reduced_kinds)
    return full, reduced


def _release_ring(sizes, count):
    """One count-only barrier (``count``) that each process arrives on once with ``sizes[i]`` threads, then
    waits for the phase (parity 0): the CLC ring's releases of 32-thread warps and a 128-thread warpgroup."""
    return _program([count], [[_op(arrivals=[(0, n, 0)]), _op(guard=0, parity=0)] for n in sizes])


def test_releases_of_different_sizes_commute_while_they_cannot_overflow_the_phase():
    """Six releases of 32 and two of 128 filling a 448-thread phase: every order reaches one state, so the
    reduced search takes them in one order (the full one explores every subset); a release short or over is
    still a hang or a miscount in both searches."""
    sizes = [32, 32, 128, 32, 32, 128, 32, 32]
    full, reduced = _agree(lambda: _release_ring(sizes, sum(sizes)))
    assert not reduced.events and reduced.complete == 1
    assert full.states > 200 and reduced.states < 40, (reduced.states, full.states)
    _, _, short = _explore(_release_ring(sizes, sum(sizes) + 32), True)
    assert short == {"deadlock"}
    _, _, over = _explore(_release_ring(sizes, sum(sizes) - 64), True)
    assert over & MISCOUNTS
    for count in (sum(sizes) - 64, sum(sizes) + 32):
        _agree(lambda: _release_ring(sizes, count))


def _leader_routed_stage(copy_bytes):
    """A 2-CTA pair's full barrier (count 2): two arming warps each arm 2 x 16 B and issue one copy, two peer
    warps only issue copies landing there (``copy_bytes`` each); a consumer waits for the phase and reads."""
    copies, procs = [], []
    for i, arm in enumerate((True, True, False, False)):
        copy = Copy(len(copies), i, 0, copy_bytes[i], Access("write", i, None, None, None))
        copies.append(copy)
        procs.append([_op(arrivals=[(0, 1, 32)] if arm else [], spawns=[copy])])
    procs.append([_op(guard=0, parity=0, segment=[Access("read", r, None, None, None) for r in range(4)])])
    return _program([2], procs, copies, regions=4)


def test_the_last_arm_commutes_with_copies_that_cannot_outrun_the_armed_bytes():
    """Bytes matching the arms: SAFE with fewer states; one copy of 32 B instead of 16: a miscount or race in
    both searches (its bytes may complete the phase while another copy still writes the stage)."""
    full, reduced = _agree(lambda: _leader_routed_stage([16, 16, 16, 16]))
    assert not full.events and reduced.states < full.states
    full, reduced = _agree(lambda: _leader_routed_stage([16, 16, 16, 32]))
    assert full.events and reduced.events


def test_a_read_of_a_response_its_own_operation_still_writes_is_a_race():
    """The CLC scheduler of CTA 0: arms 16 B, issues try_cancel (a copy writing the response) and reads the
    response; with its wait the read is ordered after the bytes land, without it the read races the copy
    although both are the same task's (the copy is asynchronous)."""
    def scheduler(wait: bool):
        copy = Copy(0, 0, 0, 16, Access("write", 0, None, None, None))
        read = _op(guard=0 if wait else -1, parity=0, segment=[Access("read", 0, None, None, None)])
        return _program([1], [[_op(arrivals=[(0, 1, 16)], spawns=[copy]), read, _op()],
                              [_op(guard=0, parity=0)]], [copy], regions=1)
    for wait in (True, False):
        full, reduced = _agree(lambda: scheduler(wait))
        assert {e.kind for e in reduced.events} == (set() if wait else {"race"}), wait


def test_copies_of_one_process_never_race_each_other():
    """Two shares of one stage filled by one producer's two copies (one region: the model does not split it):
    no race between them, the consumer's read after the phase is ordered."""
    copies = [Copy(i, 0, 0, 8, Access("write", 0, None, None, None)) for i in range(2)]
    program = _program([1], [[_op(arrivals=[(0, 1, 16)], spawns=copies)],
                             [_op(guard=0, parity=0, segment=[Access("read", 0, None, None, None)])]],
                       copies, regions=1)
    assert not _explore(program, True)[0].events


def _random_program(rng):
    """Barriers of count 1-3 with or without bytes; 2-4 processes of 1-5 ops with random waits, arrivals
    (1-2 threads, 0 / 8 / 16 bytes), TMA copies, tcgen05.commit completions and accesses."""
    B, P, G = rng.randint(1, 3), rng.randint(2, 4), rng.randint(0, 2)
    counts = [rng.choice([1, 2, 2, 3]) for _ in range(B)]
    with_bytes = [rng.random() < 0.6 for _ in range(B)]
    copies, procs = [], []

    def access(mode):
        return Access(mode, rng.randrange(G), None, None, None) if G and rng.random() < 0.5 else None
    for i in range(P):
        ops, last_commit = [], -1
        for _ in range(rng.randint(1, 5)):
            guard = (rng.randrange(B), rng.randint(0, 1)) if rng.random() < 0.5 else (-1, 0)
            arrivals = []
            for _ in range(rng.choice([0, 1, 1, 2])):
                b = rng.randrange(B)
                arrivals.append((b, rng.choice([1, 1, 2]), rng.choice([0, 8, 16]) if with_bytes[b] else 0))
            spawns = []
            if rng.random() < 0.4:
                b = rng.randrange(B)
                if with_bytes[b] and rng.random() < 0.6:
                    copy = Copy(len(copies), i, b, rng.choice([8, 16]), access("write"))
                else:
                    copy = Copy(len(copies), i, b, 0, access("read"), rng.choice([0, 1]), last_commit, umma=True)
                    last_commit = copy.id
                copies.append(copy)
                spawns.append(copy)
            segment = [Access(rng.choice(["read", "write"]), rng.randrange(G), None, None, None)] \
                if G and rng.random() < 0.3 else []
            ops.append(_op(guard[0], guard[1], arrivals, spawns, segment))
        procs.append(ops)
    return _program(counts, procs, copies, G)


@pytest.mark.parametrize("block", range(4))
def test_reduced_and_full_search_agree_on_random_programs(block):
    """150 seeded random programs per block (an unsound variant of any of the three reductions above -- the
    strict / byte conditions dropped, own copies independent of their process -- fails at least one block)."""
    for seed in range(block * 150, block * 150 + 150):
        _agree(lambda: _random_program(random.Random(seed)))
