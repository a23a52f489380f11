"""The reference's PipelineGroup (§1.6, A6 ``pipeline_group`` / ``state_src``, §1.10 PipelineGroupMode)
written as the reference writes it: ``PipelineGroup(name, members, mode)``, ``ab_sync.smem_a`` passed to
the schedule with the bare ``ab_sync`` for the collapsed operation."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "verify"))

from reference_names import conformance_rows  # noqa: E402
from verify_schedules import FakeValue, GmemDest, Ring, async_config, tma_config  # noqa: E402

from tsjit.errors import ScheduleError, VerificationError  # noqa: E402
from tsjit.ts import (PipelineGroup, PipelineGroupMode, SmemAllocator, Task, TaskManager,  # noqa: E402
                      domain_loop, schedule)


def _merge(mode=PipelineGroupMode.Merge):
    smem_a = Ring(name="smem_a", pipeline_config=async_config(4))
    smem_b = Ring(name="smem_b", pipeline_config=tma_config(4))
    return smem_a, smem_b, PipelineGroup("ab_sync", [smem_a, smem_b], mode)


@conformance_rows("§1.6", "PipelineGroup(name, members, mode)", "PipelineGroupMode.Merge", "group.member refs",
                  "collapsed-op placement", "Merge consumer state sharing (state_src)", "SmemAllocator.add_pipeline_group")
@conformance_rows("A6", "pipeline_group", "property state_src")
@conformance_rows("§1.10", "PipelineGroupMode")
def test_reference_merge_program_verifies_with_one_release():
    smem_a, smem_b, ab_sync = _merge()
    out = GmemDest(name="out", dst=FakeValue("out"), smem=smem_a)
    assert smem_a.pipeline_group is ab_sync and smem_a.state_src is ab_sync

    @schedule
    def load(s):
        with domain_loop(0, 4, 1):
            s.acquire()
            s.fill() if s.pipeline_config.num_bytes == 0 else s.tma_load()
            s.commit()

    @schedule
    def consume(group, a, b, o):
        with domain_loop(0, 4, 1):
            a.wait()
            b.wait()
            o.store(a.read())
            group.release()

    allocator = SmemAllocator()
    allocator.add_pipeline_group(ab_sync)
    allocator.compute_layout()
    tasks = [Task([], [smem_a], 0, 1, schedule=load(ab_sync.smem_a), name="la"),
             Task([], [smem_b], 1, 1, schedule=load(ab_sync.smem_b), name="lb"),
             Task([smem_a, smem_b], [out], 2, 4, schedule=consume(ab_sync, ab_sync.smem_a, ab_sync.smem_b, out),
                  name="st")]
    manager = TaskManager(tasks, {out: [smem_a, smem_b]}, verbose=False, smem_allocator=allocator)
    assert manager.exhaustive_result.verdict == "SAFE" and allocator.barrier_bytes == 8 * (2 + 1) * 4
    with pytest.raises(ScheduleError, match="ab_sync.smem_a"):
        consume(ab_sync, smem_a, ab_sync.smem_b, out)            # a bare grouped member


@conformance_rows("§1.6", "PipelineGroupMode.Fork", "FusedMerge")
def test_fork_and_fused_merge_share_their_documented_barriers():
    a = Ring(name="a", pipeline_config=tma_config(4))
    b = Ring(name="b", pipeline_config=tma_config(4))
    fork = PipelineGroup("fork", [a, b], PipelineGroupMode.Fork)
    assert fork.num_barriers == (2 + 1) * 4 and a.state_src is a
    _, _, fused = _merge(PipelineGroupMode.FusedMerge)
    assert fused.num_barriers == 2 * 4


@conformance_rows("§1.6", "kind homogeneity", "config merging")
def test_kind_and_config_rules():
    with pytest.raises(VerificationError, match="PipelineGroupMode.Merge"):
        PipelineGroup("g", [Ring(name="a", pipeline_config=async_config(4)),
                            Ring(name="b", pipeline_config=tma_config(4))], PipelineGroupMode.Fork)
    with pytest.raises(VerificationError, match="num_stages"):
        PipelineGroup("g", [Ring(name="a", pipeline_config=async_config(4)),
                            Ring(name="b", pipeline_config=async_config(2))], PipelineGroupMode.Merge)
