"""Clusters in the exhaustive checker (issue 12 §2; ``tsjit.ts.verify.exhaustive_cluster``).

When every CTA runs the same tasks and every arrival treats the CTAs alike, one CTA's barriers
stand for all (the symmetric reduction), receiving the arrivals every CTA sends them: TMA
multicast consumer counts, which P1 accepts, verify (they were a false deadlock, "128 of 256
arrivals pending").  When the CTAs differ -- a task with ``run_only_on_cta_id``, an arrival on
the pair leader only -- every CTA is modelled: the 2-CTA UMMA pair verifies with its MMA task on
the leader, and a broken cluster program the reduction would have passed is found."""
import pytest

from broken.counts import clc_ring, cluster_consumers, multicast, umma_pair
from tsjit.ts import TaskManager
from verify_schedules import tma_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def _verify(program):
    tasks, graph, _ = program.build()
    manager = TaskManager(tasks, graph, verbose=False)          # every check, P1 and X included
    return manager.exhaustive_result


def _modelled_ctas(result) -> bool:
    return any("every CTA of the" in note for note in result.notes)


def test_two_cta_umma_pair_with_the_mma_task_on_the_leader_verifies():
    """UmmaAsync with V = 2: the leader's tcgen05.commit reaches both CTAs' full barriers, each of
    the 128 epilogue threads of both CTAs arrives on the leader's empty barrier (count 256)."""
    result = _verify(umma_pair(256)())
    assert result.verdict == "SAFE", result.format()
    assert _modelled_ctas(result)
    assert any("@CTA1" in p for v in result.variants for p in v.processes)


def test_an_mma_task_on_both_ctas_of_a_pair_is_found():
    """Without run_only_on_cta_id the second CTA's MMA task waits on its own empty barrier, which
    no release reaches, and both CTAs' commits land on each full barrier."""
    result = umma_pair(256, producer_cta=None)().check()
    assert result.verdict == "UNSAFE", result.format()
    assert any("CTA 1" in r.message and "prod" in r.tasks for r in result.reports)


def test_multicast_consumer_count_is_per_multicast_peer():
    """TmaAsync over a 2 x 2 cluster with multicast (1, 1): each consumer warp arrives once per CTA
    of its row and column (M + N - 1 = 3), so 4 warps give 12 arrivals; symmetric."""
    result = _verify(multicast(12)())
    assert result.verdict == "SAFE", result.format()
    assert not _modelled_ctas(result)


def test_a_short_multicast_count_is_still_an_error():
    with pytest.raises(Exception) as err:
        _verify(multicast(8)())
    assert getattr(err.value, "check", None) == "P1" and "12" in str(err.value)


def _two_cta_ring(consumer_cta=None):
    program = cluster_consumers(lambda: tma_config(4, 8192, 1, 128, cta_layout_vmnk=(1, 2, 1, 1)),
                                "tma_load")()
    program.specs[1].only_cta = consumer_cta
    return program


def test_a_consumer_on_one_cta_of_the_cluster_leaves_every_release_short():
    """A release lands on every CTA's empty barrier (count 2 x 128); with the consumer on CTA 0
    only, each phase gets 128 of 256 arrivals: the producers hang.  The symmetric reduction,
    blind to run_only_on_cta_id, verified this program."""
    result = _two_cta_ring(consumer_cta=0).check()
    assert result.verdict == "UNSAFE", result.format()
    deadlocks = [r for r in result.reports if r.kind == "deadlock"]
    assert deadlocks and "prod" in deadlocks[0].tasks and "'ring'" in deadlocks[0].message
    assert "CTA 1" in deadlocks[0].message
    assert "runs only on CTA 0" in " ".join(result.notes)


def test_the_consumer_on_every_cta_verifies_by_symmetry():
    result = _verify(_two_cta_ring())
    assert result.verdict == "SAFE", result.format()
    assert not _modelled_ctas(result)


def test_a_two_cta_clc_ring_verifies_with_cta_0_fetching_for_both():
    """Only CTA 0 waits and arms (CtaLeader); its response copy lands in both CTAs; every
    consumer thread of both CTAs releases to CTA 0 (count 256).  It was a false deadlock."""
    result = _verify(clc_ring(256)())
    assert result.verdict == "SAFE", result.format()
    assert _modelled_ctas(result)
