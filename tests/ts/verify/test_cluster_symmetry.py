"""The exhaustive checker's symmetric reduction of a cluster (issue 12 §2): every CTA runs the same
tasks, so one CTA's barriers stand for all, receiving the arrivals every CTA sends them (the
protocol table's ``Ctas``).  Two programs the count check P1 accepts were false deadlocks before
("128 of 256 arrivals pending"): a 2-CTA UMMA pair, and TMA multicast consumer counts."""
import pytest

from tsjit.ts import TaskManager
from tsjit.ts.pipeline import PipelineConfig
from tsjit.ts.verify.exhaustive import check_all_interleavings
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, threads, tma_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

CONS = [("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release")]


def _program(config, producer_work="fill", consumer_warps=4):
    def resources():
        ring = Ring(name="ring", pipeline_config=config())
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("o"), smem=ring)}
    prod = [("ring", "acquire"), ("ring", producer_work), ("ring", "commit")]
    return Program("cluster", resources, [
        TaskSpec("producer", 0, 1, (), ("ring",), {"loop": prod}, domain=(0, 6, 1)),
        TaskSpec("consumer", 1, consumer_warps, ("ring",), ("out",), {"loop": CONS}, domain=(0, 6, 1))],
        lambda r: {r["out"]: [r["ring"]]})


def _verify(program):
    tasks, graph, _ = program.build()
    TaskManager(tasks, graph, verbose=False)          # every check, P1 and X included
    return check_all_interleavings(tasks, graph)


def test_two_cta_umma_pair_arrivals_reach_the_pair_leader():
    """UmmaAsync with V = 2: each of the 128 epilogue threads of both CTAs arrives on the leader's
    empty barrier (count 256)."""
    result = _verify(_program(lambda: PipelineConfig.create_umma_async_pipeline_cfg(
        2, threads(1), threads(256), cta_layout_vmnk=(2, 1, 1, 1))))
    assert result.verdict == "SAFE", result.format()


def test_multicast_consumer_count_is_per_multicast_peer():
    """TmaAsync over a 2 x 2 cluster with multicast (1, 1): each consumer warp arrives once per CTA
    of its row and column (M + N - 1 = 3), so 4 warps give 12 arrivals."""
    result = _verify(_program(lambda: tma_config(4, 8192, producers=1, consumers=12, cta_layout_vmnk=(1, 2, 2, 1),
                                                 mcast_mode_mn=(1, 1)), producer_work="tma_load"))
    assert result.verdict == "SAFE", result.format()


def test_a_short_multicast_count_is_still_an_error():
    with pytest.raises(Exception) as err:
        _verify(_program(lambda: tma_config(4, 8192, producers=1, consumers=8, cta_layout_vmnk=(1, 2, 2, 1),
                                            mcast_mode_mn=(1, 1)), producer_work="tma_load"))
    assert getattr(err.value, "check", None) == "P1" and "12" in str(err.value)
