"""Issue 14: MMAs issued after the ring's release (the release is a tcgen05.commit covering only the MMAs
issued before it) are a race the exhaustive checker (X) reports itself, not only rule D1 / B1 -- once the
checked program refills the stage.  The MMA's reads of the stage stay active until the next commit of
its warp lands, so the TMA refill the early release allows overlaps them.  The broken corpus's
``umma_stage_released_before_its_mma`` and ``pair_ab_released_before_the_mma`` run as many K tiles as
the ring has stages, so nothing is refilled and X alone cannot see it there; with the ring wrapping, it
reports the race naming the refilling load, the MMA task and the work that reads after the release."""
import pytest

from broken.blackwell import tutorial3
from broken.pairs import MMA_LOOP, _swap, pair_gemm
from tsjit.ts.verify.exhaustive import check_all_interleavings

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

EARLY_RELEASE = [("ab", "wait"), ("ab", "release"), ("ab", "mma"), ("acc", "fill")]


def _check(program):
    tasks, graph, _ = program().build()
    return check_all_interleavings(tasks, graph)


@pytest.mark.parametrize("program,reader", [
    (tutorial3(mma_loop=EARLY_RELEASE, trips=8), "'ab' ConsumerWork 'mma'"),
    (pair_gemm(mma_loop=_swap(MMA_LOOP, 3, 4), trips=4), "'acc' ProducerWork 'fill'")],
    ids=["tutorial3", "pair"])
def test_mmas_after_the_release_race_with_the_refill(program, reader):
    result = _check(program)
    assert result.verdict == "UNSAFE"
    race = next(r for r in result.reports if r.kind == "race")
    assert "race on 'ab' stage" in race.message
    assert "task 'load'" in race.message and "writes it (TMA copy in flight)" in race.message
    assert "task 'mma'" in race.message and reader in race.message
    assert "Task 'mma' reads 'ab' after releasing that stage in the same iteration" in race.message
    assert "Release after the work that reads the stage" in race.message


@pytest.mark.parametrize("program", [tutorial3(trips=8), pair_gemm(trips=4)], ids=["tutorial3", "pair"])
def test_the_release_after_the_mmas_is_safe_over_a_wrapping_ring(program):
    assert _check(program).verdict == "SAFE"

