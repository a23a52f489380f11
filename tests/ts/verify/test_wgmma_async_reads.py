"""Asynchronous wgmma reads in the exhaustive checker (issue 12 §2, "unmodelled asynchronous
shared-memory reads"): ``wgmma.mma_async`` reads its shared-memory operands until a
``wgmma.wait_group`` retires its group, not until the work step ends.  The checker reads the
wgmma calls of each work body (``tsjit.ts.verify.async_reads``)."""
import pytest

from tsjit.ts import TaskManager
from tsjit.ts.memory import SmemAllocation
from tsjit.ts.verify.async_reads import work_events
from verify_schedules import (Program, Ring, SmemBuffer, TaskSpec, WgmmaRing, async_config,
                              staging_allocator, tma_config)

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

RELEASE_PREVIOUS = [("every", (1, 1), [("ab", "release")])]


def _program(mma="mma_keep_one", release_previous=True, signal_after_retire=True, aliased=True,
             retire=True):
    """A TMA ring feeding a wgmma warpgroup (2 stages, 4 K tiles); after the mainloop the MMA
    task signals an epilogue task through ``flag``, which writes ``c_smem`` (aliased with the
    A/B ring's tiles, both stages, when ``aliased``)."""
    def resources():
        return {"ab": WgmmaRing(name="ab", pipeline_config=tma_config(2, 8192, 1, 128,
                                                                      advance_on_wait=release_previous),
                                allocation=SmemAllocation("ab_tiles", 2 * 8192)),
                "flag": Ring(name="flag", pipeline_config=async_config(1, producers=128,
                                                                       consumers=128)),
                "c_smem": SmemBuffer(name="c_smem", allocation=SmemAllocation("c_tile", 2 * 8192))}

    loop = [("ab", "wait"), ("ab", mma)] + (RELEASE_PREVIOUS if release_previous
                                            else [("ab", "release")])
    drain = ([("ab", "retire")] if retire else []) + ([("ab", "release")] if release_previous else [])
    signal = [("flag", "acquire"), ("flag", "fill"), ("flag", "commit")]
    specs = [
        TaskSpec("load", 0, 1, (), ("ab",), {"loop": [("ab", "acquire"), ("ab", "tma_load"),
                                                      ("ab", "commit")]}, domain=(0, 4, 1)),
        TaskSpec("mma", 4, 4, ("ab",), ("flag",), {
            "loop": loop, "tail": drain + signal if signal_after_retire else signal + drain},
            domain=(0, 4, 1)),
        TaskSpec("epilogue", 8, 4, ("flag",), ("c_smem",), {
            "tail": [("flag", "wait"), ("c_smem", "write"), ("flag", "release")]},
            domain=(0, 0, 1))]
    return Program("wgmma reads", resources, specs,
                   lambda r: {r["flag"]: [r["ab"]], r["c_smem"]: [r["flag"]]},
                   allocator=staging_allocator("ab", "c_smem", aliased))


def _races(result):
    return [r for r in result.reports if r.kind == "race"]


def test_the_checker_reads_the_wgmma_calls_of_a_work_body():
    tasks, _, _ = _program().build()
    mma = next(s for s in tasks[1].schedule.steps if s.label == "mma_keep_one")
    events = [(e.family.name, e.kind, e.pending) for e in work_events(mma)]
    assert events == [("wgmma", "issue", None), ("wgmma", "commit", None), ("wgmma", "wait", 1)]
    assert "verify_schedules.py:" in work_events(mma)[0].where


@pytest.mark.parametrize("kwargs, pending", [({}, 0), ({"keep": True}, 1), ({"keep": False}, 0)])
def test_a_wait_group_count_from_a_constexpr_parameter_is_read(kwargs, pending):
    program = _program()
    program.specs[1].entries["tail"][0] = ("ab", "retire_but", kwargs)
    tasks, _, _ = program.build()
    step = next(s for s in tasks[1].schedule.steps if s.label == "retire_but")
    assert [(e.kind, e.pending) for e in work_events(step)] == [("wait", pending)]


def test_staging_written_before_the_last_group_retires_races_with_the_mmas():
    """The MMA task signals the epilogue before its wgmma.wait_group(0): the wgmma of the last
    K tile may still read the A/B stage the staging buffer aliases."""
    result = _program(signal_after_retire=False).check()
    assert result.verdict == "UNSAFE", result.format()
    races = _races(result)
    assert races and all({"mma", "epilogue"} <= set(r.tasks) for r in races)
    assert "wgmma.mma_async" in races[0].message and "wgmma.wait_group" in races[0].message
    assert "'c_smem' ProducerWork 'write'" in races[0].message


def test_staging_written_after_the_last_group_retires_is_safe():
    result = _program().check()
    assert result.verdict == "SAFE", result.format()
    tasks, graph, options = _program().build()
    TaskManager(tasks, graph, verbose=False, **options)        # every check passes


def test_without_a_retiring_wait_the_staging_write_races():
    result = _program(retire=False).check()
    assert result.verdict == "UNSAFE", result.format()
    assert _races(result)


def test_without_aliasing_the_early_signal_is_safe():
    result = _program(signal_after_retire=False, aliased=False).check()
    assert result.verdict == "SAFE", result.format()


def test_releasing_the_stage_its_mmas_still_read_races_with_the_next_tma_load():
    """wait_group(1) keeps this stage's MMAs running: releasing this stage (not the previous one)
    lets the producer's next TMA copy overwrite operands still being read."""
    result = _program(release_previous=False, aliased=False).check()
    assert result.verdict == "UNSAFE", result.format()
    races = _races(result)
    assert races and {"load", "mma"} <= set(races[0].tasks)
    assert "'ab' stage" in races[0].message and "TMA copy in flight" in races[0].message
    assert "wait_group" in races[0].message


def test_releasing_this_stage_after_wait_group_zero_is_safe():
    result = _program(mma="mma_sync", release_previous=False, aliased=False).check()
    assert result.verdict == "SAFE", result.format()


def test_the_events_of_one_work_are_read_once_per_resource_and_constexpr_values():
    """The steps of one work (a GEMM's prologue, main loop and tail) share its events: the walk over the
    body runs once per (work, resource, Constexpr values); another resource gets its own."""
    tasks, _, _ = _program().build()
    mma = next(s for s in tasks[1].schedule.steps if s.label == "mma_keep_one")
    first = work_events(mma)
    assert work_events(mma) is first
    program = _program()
    program.specs[1].entries["tail"][0] = ("ab", "retire_but", {"keep": True})
    tasks, _, _ = program.build()
    again = next(s for s in tasks[1].schedule.steps if s.label == "mma_keep_one")
    assert work_events(again) == first and work_events(again) is not first     # a new resource: walked again
    keep = next(s for s in tasks[1].schedule.steps if s.label == "retire_but")
    assert [(e.kind, e.pending) for e in work_events(keep)] == [("wait", 1)]
