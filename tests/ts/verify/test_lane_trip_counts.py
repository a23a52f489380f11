"""Run-time trip counts of warp-lane tasks in the exhaustive checker (issue 12 §2): a warp-lane
interleaved task (one lane per warp) with a run-time domain is checked with the trip count that
opens as many ring positions as its static partner, so a non-interleaved partner is not a false
deadlock."""
import pytest

from tsjit.errors import VerificationError
from tsjit.ts import TaskManager
from tsjit.ts.verify.exhaustive import check_all_interleavings
from tsjit.ts.verify.exhaustive_expand import trip_counts
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, async_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

PROD = [("ring", "acquire"), ("ring", "fill"), ("ring", "commit")]
CONS = [("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release")]


def _program(strides, producer_warps, consumer_warps, consumer_trips):
    def resources():
        config = async_config(4, producers=32 * producer_warps // strides[0],
                              consumers=32 * consumer_warps // strides[2], interleave_stride=strides)
        ring = Ring(name="ring", pipeline_config=config)
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("o"), smem=ring)}
    runtime = (FakeValue("warp_lane"), FakeValue("n"), strides[0])
    return Program("lanes", resources, [
        TaskSpec("producer", 0, producer_warps, (), ("ring",), {"loop": PROD}, domain=runtime),
        TaskSpec("consumer", producer_warps, consumer_warps, ("ring",), ("out",), {"loop": CONS},
                 domain=(0, consumer_trips, 1))], lambda r: {r["out"]: [r["ring"]]})


def _checked(program):
    tasks, graph, _ = program.build()
    notes: list = []
    return tasks, trip_counts(tasks, 2, notes), check_all_interleavings(tasks, graph)


def test_warp_lane_producer_against_a_non_interleaved_consumer_is_safe():
    tasks, counts, result = _checked(_program((2, 2, 1, 1), 2, 1, 8))
    assert counts[id(tasks[0])] == 4                 # 2 warps x 4 trips = the consumer's 8 stages
    assert result.verdict == "SAFE", result.format()


def test_warp_lane_producer_against_warp_lane_consumer_keeps_equal_trips():
    tasks, counts, result = _checked(_program((2, 2, 2, 2), 2, 2, 6))
    assert counts[id(tasks[0])] == 6
    assert result.verdict == "SAFE", result.format()


def test_a_partner_count_no_whole_trip_count_matches_falls_back_to_the_longest_static_count():
    """7 consumer stages cannot be split over 2 warp lanes: the run-time task gets the longest
    static count (the mismatch with a run-time count cannot be judged)."""
    tasks, counts, _ = _checked(_program((2, 2, 1, 1), 2, 1, 7))
    assert counts[id(tasks[0])] == 7


def _both_run_time(lane_counts_both_warps=False):
    """A warp-lane consumer (2 warps, stride 2, run-time lane start and end) against a
    non-interleaved producer whose end is a run-time value too; the broken twin's
    consumer_group counts both warps for every stage (each stage is one warp's)."""
    program = _program((1, 1, 2, 2), 1, 2 * (2 if lane_counts_both_warps else 1), 0)
    program.specs[0].domain = (0, FakeValue("n"), 1)
    program.specs[1].warps = 2
    program.specs[1].domain = (FakeValue("warp_lane"), FakeValue("n"), 2)
    return program


def test_a_warp_lane_consumer_against_a_run_time_producer_splits_its_trips():
    """Both ends are run-time: the producer's stand-in count is a multiple of the 2 lanes and the
    consumer runs half of it per warp (C0 and X agree; it was a false deadlock)."""
    tasks, counts, result = _checked(_both_run_time())
    assert counts[id(tasks[0])] == 2 * counts[id(tasks[1])]
    assert result.verdict == "SAFE", result.format()
    TaskManager(*_both_run_time().build()[:2], verbose=False)


def test_its_twin_counting_both_warps_per_stage_is_a_deadlock():
    tasks, _, result = _checked(_both_run_time(lane_counts_both_warps=True))
    assert result.verdict == "UNSAFE", result.format()
    assert any("producer" in r.tasks and "'ring'" in r.message for r in result.reports)
    with pytest.raises(VerificationError) as err:
        TaskManager(*_both_run_time(lane_counts_both_warps=True).build()[:2], verbose=False)
    assert "'consumer'" in str(err.value) and "'ring'" in str(err.value)
