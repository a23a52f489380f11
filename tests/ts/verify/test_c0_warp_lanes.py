"""C0 walks a warp-lane task one process per warp (issue 12 §2, "false deadlocks: a warp-lane
interleaved ring against a non-interleaved partner").

The shape is the merge GEMM's with warp lanes (reverted 5708ec0 / ae2fab4): a ring of ``L``
stages with ``interleave_stride`` (L, L, 1, 1), filled by ``L`` producer warps (warp ``w``
fills the stages of K tiles ``w, w + L, ...``), and a consumer that releases each stage one
step late (``advance_on_wait``, release under ``every(1, start=1)`` plus one after the loop).
Walked in lock step, the producer's second trip needs all ``L`` stages free while the consumer
still holds one: a deadlock that only the walk had; the exhaustive checker (one process per
warp) proves the program.  The twins keep C0 finding the real mistakes of the same shape: a
consumer releasing ``L`` stages late (the ring too shallow for it) and a missing release."""
import time

import pytest

from tsjit.errors import VerificationError
from tsjit.ts import TaskManager
from tsjit.ts.verify.credits import PipelineSimulator
from tsjit.ts.verify.exhaustive import check_all_interleavings
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, async_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

PRODUCER = [("ring", "acquire"), ("ring", "fill"), ("ring", "commit")]


def _program(lanes: int, late: int = 1, final: int | None = None, trips=None, **fields) -> Program:
    """``lanes`` producer warps (one ring lane each) against a 4-warp consumer releasing ``late``
    stages late; ``final``: its releases after the loop (default ``late``).  ``trips``: the
    producer's static trips per warp (the consumer runs ``lanes`` times as many); None: both
    domains end at a run-time value, the producer's starting at the warp index.  ``fields``: more
    PipelineConfig fields."""
    final = late if final is None else final

    def resources():
        config = async_config(lanes, producers=32, consumers=128,
                              interleave_stride=(lanes, lanes, 1, 1), advance_on_wait=True, **fields)
        ring = Ring(name="ring", pipeline_config=config)
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("o"), smem=ring)}
    consumer = [("ring", "wait"), ("ring", "read"), ("out", "store"),
                ("every", (1, late), [("ring", "release")])]
    if trips is None:
        produce, consume = (FakeValue("warp_lane"), FakeValue("n"), lanes), (0, FakeValue("n"), 1)
    else:
        produce, consume = (0, trips, 1), (0, trips * lanes, 1)
    return Program("warp_lanes", resources, [
        TaskSpec("producer", 0, lanes, (), ("ring",), {"loop": PRODUCER}, domain=produce),
        TaskSpec("consumer", lanes, 4, ("ring",), ("out",),
                 {"loop": consumer, "tail": [("ring", "release")] * final}, domain=consume)],
        lambda r: {r["out"]: [r["ring"]]})


class C0Only(TaskManager):
    """A TaskManager running check C0 alone."""
    checks = ()


def _c0(program: Program):
    """C0 alone (no other check): the VerificationError it raises, or None."""
    tasks, graph, _ = program.build()
    try:
        C0Only(tasks, graph, verbose=False)
    except VerificationError as err:
        assert err.check == "C0", err
        return err
    return None


@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("trips", [None, 2])
def test_warp_lanes_as_many_as_stages_against_a_late_release_are_safe(lanes, trips):
    program = _program(lanes, trips=trips)
    tasks, graph, _ = program.build()
    result = check_all_interleavings(tasks, graph)
    assert result.verdict == "SAFE", result.format()
    assert _c0(program) is None
    TaskManager(*_program(lanes, trips=trips).build()[:2], verbose=False)      # every check


def test_the_walk_runs_each_warp_of_a_warp_lane_task_on_its_own():
    """The schedule table still has one column per task; each warp lane ran the whole loop."""
    tasks, graph, _ = _program(4, trips=2).build()
    manager = C0Only(tasks, graph, verbose=False)
    simulator = PipelineSimulator(manager, None)
    assert simulator.lanes(tasks[0]) == 4 and simulator.lanes(tasks[1]) == 1
    result = simulator.run()
    assert not result.blocked and simulator.imbalances() == []
    ring = next(iter(simulator.rings.values()))
    assert ring.completed("commit") == ring.completed("release") == 8      # 4 lanes x 2 trips
    assert all(set(row) <= {id(t) for t in tasks} for row in result.rows)


@pytest.mark.parametrize("lanes", [2, 4])
def test_twin_releasing_as_many_stages_late_as_the_ring_has_is_a_deadlock(lanes):
    program = _program(lanes, late=lanes)
    tasks, graph, _ = program.build()
    assert check_all_interleavings(tasks, graph).verdict == "UNSAFE"
    err = _c0(program)
    assert err is not None and "is blocked!" in str(err), err
    assert f"'ring' is too shallow for this schedule: task 'consumer'" in str(err)
    assert f"holds {lanes} stage(s) waited on" in str(err)


@pytest.mark.parametrize("lanes", [2, 4])
def test_twin_missing_the_last_release_is_an_imbalance(lanes):
    program = _program(lanes, final=0, trips=2)
    tasks, graph, _ = program.build()
    assert check_all_interleavings(tasks, graph).verdict == "UNSAFE"
    err = _c0(program)
    assert err is not None and "1x ProducerAcquire on ring not matched by a ConsumerRelease" in str(err), err


def test_twin_with_a_lane_short_of_stages_names_the_warp_lane():
    """Each producer warp acquiring two of its stages before it commits either (``advance_on_acquire``):
    with 2 lanes and 2 stages a lane has one stage, so its second acquire waits for its own commit."""
    program = _program(2, trips=2, advance_on_acquire=True)
    program.specs[0].entries = {"loop": [("ring", "acquire"), ("ring", "acquire"), ("ring", "fill"),
                                         ("ring", "commit"), ("ring", "commit")]}
    program.specs[1].domain = (0, 8, 1)
    tasks, graph, _ = program.build()
    assert check_all_interleavings(tasks, graph).verdict == "UNSAFE"
    err = _c0(program)
    assert err is not None and "ProducerAcquire 1 is blocked! (schedule step #1, warp lane 0" in str(err), err
    assert ("'ring' is too shallow for this schedule: task 'producer' (warps 0-1) (2 warp lanes) holds 2 "
            "stage(s) acquired and not yet committed, and 'ring' has 2; its next acquire() needs one of "
            "them back.  Give 'ring' at least 4 stages") in str(err), err


def test_c0_of_a_long_warp_lane_walk_stays_fast():
    program = _program(4, trips=64)
    tasks, graph, _ = program.build()
    start = time.perf_counter()
    C0Only(tasks, graph, verbose=False, max_simulated_iterations=None)
    assert time.perf_counter() - start < 2.0
