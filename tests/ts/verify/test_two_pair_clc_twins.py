"""Broken twins of tutorial 6's two pairs with CLC (tsjit/examples/bw_persistent_gemm.py, cluster (2, 2, 1, 1),
20 processes), whose proof rests on the reductions of test_arrival_commutation.py: each twin changes ONE
operation of ONE CTA's compiled model (a source change would change every CTA alike) and the reduced search
must still find the mistake -- a CLC response read before the try_cancel bytes land (by CTA 0's scheduler,
which issued it, and by a peer CTA), a CLC ring release, an expect_tx arm or a tcgen05.commit arrival missing
in one CTA, a release of the wrong size.  The corrected twin is the unchanged program, SAFE
(tests/blackwell/test_tutorial6.py proves the same build through its compile)."""
import dataclasses

import pytest

from test_pair_clc_proof import _checked_program
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable
from tsjit.ts.verify.exhaustive_report import build_reports
from tsjit.ts.verify.exhaustive_search import search

pytestmark = [pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning"), pytest.mark.slow]


@pytest.fixture(scope="module")
def fresh():
    """A function returning a freshly compiled model of the two pairs with CLC (the twins mutate it)."""
    tasks, graph, allocator = _checked_program((2, 2, 1, 1), True)

    def make():
        notes: list = []
        variant = next(iter(program_variants(tasks)))
        return compile_program(tasks, graph, variant, trip_counts(tasks, 3, notes), RegionTable(allocator), notes)
    return make


def _process(program, name):
    return next(p for p in program.processes if p.name == name)


def _op(program, process, kind, resource, nth=0):
    ops = [op for op in _process(program, process).ops if op.kind == kind and op.resource.name == resource]
    return ops[nth]


def _barrier(program, name):
    return next(b.id for b in program.barriers if b.name == name)


def _check(program):
    model, result = search(program, 50_000)
    assert not result.capped, "the twin's search stopped at its cap"
    return build_reports(model, result, "twin")


def test_the_corrected_twin_is_safe(fresh):
    program = fresh()
    assert len(program.processes) == 20
    assert _check(program) == []


@pytest.mark.parametrize("process", ["scheduler@CTA0", "epilogue@CTA3"])
def test_a_clc_response_read_before_its_bytes_land_is_a_race(fresh, process):
    """The response wait skipped: the read meets the try_cancel response still being written -- for CTA 0's
    scheduler a copy of its own (it issued the try_cancel), for CTA 3 CTA 0's multicast."""
    program = fresh()
    _op(program, process, "wait", "tiles").guard = -1
    reports = _check(program)
    assert {r.kind for r in reports} == {"race"}
    cta = process[-1]
    race = next(r for r in reports if f"'tiles' stage 0 of CTA {cta}" in r.message)
    assert "CLC try_cancel response in flight" in race.message and "scheduler" in race.tasks


def test_a_clc_ring_release_missing_in_one_cta_deadlocks_the_scheduler(fresh):
    program = fresh()
    _op(program, "mma@CTA1", "release", "tiles").arrivals = ()
    [report] = [r for r in _check(program) if r.kind == "deadlock"][:1]
    assert "tiles.empty[0] of CTA 0" in report.message and "scheduler" in report.message


def test_a_clc_release_of_the_wrong_size_in_one_cta_deadlocks(fresh):
    """CTA 1's epilogue releases with 96 threads instead of 128: the 1024-thread phase never completes (the
    releases of different sizes commute only while they cannot complete it)."""
    program = fresh()
    op = _op(program, "epilogue@CTA1", "release", "tiles")
    op.arrivals = tuple((b, n - 32, tx) for b, n, tx in op.arrivals)
    reports = _check(program)
    assert reports and {r.kind for r in reports} == {"deadlock"}
    assert "tiles.empty[0] of CTA 0" in reports[0].message


def test_an_expect_tx_arm_missing_for_one_cta_deadlocks_its_tasks(fresh):
    """CTA 0's scheduler arms every CTA's response barrier but CTA 2's: the multicast response lands 16 bytes
    nobody expects there and CTA 2's waits never pass."""
    program = fresh()
    op = _op(program, "scheduler@CTA0", "acquire", "tiles")
    missing = _barrier(program, "tiles.full[0] of CTA 2")
    op.arrivals = tuple(a for a in op.arrivals if a[0] != missing)
    reports = _check(program)
    assert reports and {r.kind for r in reports} <= {"deadlock", "bytes"}
    assert any("tiles.full[0] of CTA 2" in r.message for r in reports)


def test_a_commit_arrival_missing_on_the_other_pair_deadlocks_its_loads(fresh):
    """Pair 0's tcgen05.commit releases the first stage of all four CTAs (their copies filled it); drop its
    arrival on CTA 2's empty barrier: CTA 2's loads never refill the stage."""
    program = fresh()
    op = _op(program, "mma@CTA0", "release", "ab")
    target = _barrier(program, "ab.empty[0] of CTA 2")
    spawns = []
    for copy in op.spawns:
        if copy.barrier == target and copy.arrivals:
            copy = dataclasses.replace(copy, arrivals=0)
            program.copies[copy.id] = copy
        spawns.append(copy)
    op.spawns = tuple(spawns)
    reports = _check(program)
    assert reports and {r.kind for r in reports} == {"deadlock"}
    assert "ab.empty[0] of CTA 2" in reports[0].message
