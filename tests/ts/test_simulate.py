"""Expansion of a schedule into the executed step sequence (what the table and C0 walk)."""
import pytest

from tsjit.ts import domain_loop, schedule, when_true
from tsjit.ts.simulate import expand_schedule, simulated_trip_count
from ts_fakes import FakeValue, MultiDest, MultiSource

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning")


@schedule
def guarded(src, dst):
    flag = src.probe()
    with domain_loop(0, 10, 2) as d:
        with d.first_iter():
            dst.fence()
        with d.every(2, start=1):
            dst.store_one(src.tma_load())
        with d.last_iter():
            dst.fence()
        with when_true(flag):
            dst.fence()
    dst.fence()


def sequence(trips):
    sched = guarded(MultiSource(name="ms"), MultiDest(name="md"))
    return [(e.step.id, e.iteration, e.phase) for e in expand_schedule(sched, trips)]


def test_guards_select_iterations():
    assert sequence(4) == [
        (0, None, "H"),
        (1, 0, "F"), (5, 0, "W"),
        (2, 1, "E"), (3, 1, "E"), (5, 1, "W"),
        (5, 2, "W"),
        (2, 3, "E"), (3, 3, "E"), (4, 3, "L"), (5, 3, "W"),
        (6, None, "T"),
    ]


def test_single_iteration_runs_first_and_last_blocks():
    assert [s for s in sequence(1) if s[1] == 0] == [(1, 0, "F"), (4, 0, "L"), (5, 0, "W")]


def test_zero_trip_domain_runs_head_and_tail_only():
    assert sequence(0) == [(0, None, "H"), (6, None, "T")]


def test_trip_count_static_capped_and_dynamic_default():
    sched = guarded(MultiSource(name="ms"), MultiDest(name="md"))
    assert simulated_trip_count(sched) == 4           # 5 trips, capped at 4
    assert simulated_trip_count(sched, max_iterations=None) == 5

    @schedule
    def dynamic(src):
        with domain_loop(FakeValue("n")):
            src.init()
    with pytest.warns(Warning):
        assert simulated_trip_count(dynamic(MultiSource(name="ms")), dynamic_trip_count=3) == 3
