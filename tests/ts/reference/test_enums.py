"""The feature inventory's enums (§1.10) that the reference's PipelineConfig takes: ``SignalingThreads``
(an IntFlag: All=1, CtaLeader=2, TaskWarpLeader=4, with ``is_valid_combination``, ``has_cta_leader``
and ``has_task_warp_leader``) and CUTLASS's ``CooperativeGroup(Agent.{Thread, Warp, ThreadBlock,
ThreadBlockCluster}, size)``.  As in ``cutlass.pipeline`` ("CooperativeGroup contains size
restrictions for an Agent"; ``MbarrierArray`` initialises each barrier with the group's size), the
agent names who arrives and ``size`` is the arrival count: the PTX is the same for every agent, and
the checker compares ``size`` with the arrivals the tasks make."""
import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import VerificationError
from tsjit.ts import Agent, CooperativeGroup, SignalingThreads
from test_pipeline_config import ring_kernel

conformance = pytest.mark.conformance
All, CtaLeader, TaskWarpLeader = SignalingThreads.All, SignalingThreads.CtaLeader, SignalingThreads.TaskWarpLeader


@conformance("§1.10", "SignalingThreads (IntFlag)")
def test_signaling_threads_members_and_helpers():
    assert {m.name: int(m) for m in SignalingThreads} == {"All": 1, "CtaLeader": 2, "TaskWarpLeader": 4}
    legal = {All, CtaLeader, TaskWarpLeader, CtaLeader | TaskWarpLeader}
    for value in range(1, 8):
        flag = SignalingThreads(value)
        assert SignalingThreads.is_valid_combination(flag) == flag.is_valid_combination() == (flag in legal)
        assert flag.has_cta_leader() == bool(value & 2) and flag.has_task_warp_leader() == bool(value & 4)
    assert SignalingThreads.has_cta_leader(CtaLeader | TaskWarpLeader)


def test_an_illegal_combination_is_refused_by_the_config():
    with pytest.raises(VerificationError, match="All|CtaLeader") as err:
        ts.PipelineConfig.create_async_async_pipeline_cfg(
            2, CooperativeGroup(Agent.Thread, 32), CooperativeGroup(Agent.Thread, 32), (1, 1, 1, 1), All | CtaLeader)
    assert err.value.check == "P3"


def _kernel(agent, size):
    return ring_kernel(lambda: ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, CooperativeGroup(agent, size), CooperativeGroup(agent, size)))


def _ptx(kernel):
    x = np.zeros(256, np.float32)
    return tsjit.compile(kernel, x, x, 8, target="sm_90a").ptx


@conformance("§1.10", "CooperativeGroup(Agent.{Thread, Warp, ThreadBlock, ThreadBlockCluster}, size)")
def test_the_arrival_count_is_the_size_whatever_the_agent():
    """A one-warp producer and a one-warp consumer arrive with every thread: 32 arrivals per stage."""
    ptx = {agent: _ptx(_kernel(agent, 32)) for agent in Agent}
    assert set(Agent) == {Agent.Thread, Agent.Warp, Agent.ThreadBlock, Agent.ThreadBlockCluster}
    assert len(set(ptx.values())) == 1
    assert ptx[Agent.Thread].count("mbarrier.init.shared.b64") == 4
    assert CooperativeGroup(Agent.Warp, 4).arrivals == 4


@conformance("§1.10", "CooperativeGroup(Agent.{Thread, Warp, ThreadBlock, ThreadBlockCluster}, size)")
def test_a_size_that_is_not_the_arrivals_is_p1_naming_both():
    """``CooperativeGroup(Agent.Warp, 2)`` for a one-warp side: its barrier receives 32 arrivals per stage
    (every thread) or 1 (one lane per warp), never 2."""
    with pytest.raises(VerificationError, match=r"producer_group\.size is 2, but the full barrier receives 32 "
                                                r"\(every thread: warps x 32\) or 1") as err:
        _ptx(_kernel(Agent.Warp, 2))
    assert err.value.check == "P1"
