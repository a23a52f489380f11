"""Asynchronous UMMA reads in the exhaustive checker (issue 12 §2, "unmodelled asynchronous
shared-memory reads"): the MMAs a UMMA consumer issues read their ring stage until the
``tcgen05.commit`` that follows them lands, not until the release instruction.  An epilogue
staging buffer aliased with the A/B ring, written after a flag the MMA warp signals with a plain
thread arrival right after its last release, races with the MMAs still reading; signalling the
flag with a tcgen05.commit (UmmaAsync) orders it after them."""
import pytest

from tsjit.ts.memory import SmemAllocation
from tsjit.ts.pipeline import PipelineConfig
from verify_schedules import (Program, Ring, SmemBuffer, TaskSpec, async_config, staging_allocator,
                              threads)

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def _program(flag_by_commit: bool, aliased: bool = True):
    def resources():
        ab = Ring(name="ab", pipeline_config=PipelineConfig.create_tma_umma_pipeline_cfg(
            2, 8192, threads(1), threads(1)), allocation=SmemAllocation("ab_tiles", 2 * 8192))
        flag_config = (PipelineConfig.create_umma_async_pipeline_cfg(1, threads(1), threads(128))
                       if flag_by_commit else async_config(1, producers=32, consumers=128))
        return {"ab": ab, "flag": Ring(name="flag", pipeline_config=flag_config),
                "c_smem": SmemBuffer(name="c_smem", allocation=SmemAllocation("c_tile", 8192))}

    specs = [
        TaskSpec("load", 0, 1, (), ("ab",), {"loop": [("ab", "acquire"), ("ab", "tma_load"), ("ab", "commit")]},
                 domain=(0, 4, 1)),
        TaskSpec("mma", 1, 1, ("ab",), ("flag",), {
            "loop": [("ab", "wait"), ("ab", "mma"), ("ab", "release")],
            "tail": [("flag", "acquire"), ("flag", "fill"), ("flag", "commit")]}, domain=(0, 4, 1)),
        TaskSpec("epilogue", 2, 4, ("flag",), ("c_smem",), {
            "tail": [("flag", "wait"), ("c_smem", "write"), ("flag", "release")]}, domain=(0, 0, 1))]
    return Program("umma reads", resources, specs,
                   lambda r: {r["flag"]: [r["ab"]], r["c_smem"]: [r["flag"]]},
                   allocator=staging_allocator("ab", "c_smem", aliased))


def test_staging_written_after_a_thread_flag_races_with_the_mmas():
    result = _program(flag_by_commit=False).check()
    assert result.verdict == "UNSAFE", result.format()
    races = [r for r in result.reports if r.kind == "race"]
    assert races and all("mma" in r.tasks and "epilogue" in r.tasks for r in races)
    assert "tcgen05.commit" in races[0].message


def test_a_flag_signalled_by_tcgen05_commit_orders_the_staging_write():
    result = _program(flag_by_commit=True).check()
    assert result.verdict == "SAFE", result.format()


def test_without_aliasing_the_thread_flag_is_safe():
    result = _program(flag_by_commit=False, aliased=False).check()
    assert result.verdict == "SAFE", result.format()
