"""Partial-order reduction never changes what the exhaustive checker finds: every program of
the broken corpus (tests/ts/verify/broken), broken and corrected, gets the same verdict and the
same kinds of findings from the reduced search (``reduce=True``, the default) and from the full
one (``reduce=False``, every interleaving).

The programs are checked as TaskManager checks them: its derived pipeline metadata (split
consumers advance on wait) is applied first, by a TaskManager whose own checks are off.
A transition that over-delivers arrivals or TMA bytes ends its path in both searches (every
later finding on it would follow from the miscounted phase), so the findings do not depend
on how far behind its shortest position the reduced search meets the miscount."""
import warnings

import pytest

from broken import CASES
from tsjit.ts import TaskManager
from tsjit.ts.verify.exhaustive import check_all_interleavings

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

#: the full search stops at this many states.  Two programs need more (the leader-only consumer
#: run on both CTAs, 216k states, and the ordered split consumer, over 300k): there the full search's
#: findings so far must be among the reduced search's, which must finish.
FULL_STATES = 60_000
#: seconds each on 2 cores: marked slow (they still run by default).
SLOW = {("leader_only_consumer_on_every_cta", False), ("split_consumer_release_unordered", True),
        ("leader_only_consumer_on_every_cta", True)}


def _params():
    for case in CASES:
        for fixed in (False, True):
            marks = [pytest.mark.slow] if (case.name, fixed) in SLOW else []
            yield pytest.param(case, fixed, id=f"{case.name}-{'fixed' if fixed else 'broken'}", marks=marks)


def _checked(case, fixed):
    tasks, graph, options = case.build(fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = TaskManager(tasks, graph, verbose=False, skip_validation=True,
                        exhaustive_deadlock_race_check=False, **options)
    return m.tasks, m.resource_dependency_graph, m.smem_allocator or options.get("smem_allocator")


def _kinds(result):
    return sorted({r.kind for r in result.reports})


@pytest.mark.parametrize("case,fixed", list(_params()))
def test_reduced_and_full_search_agree(case, fixed):
    tasks, graph, allocator = _checked(case, fixed)
    full = check_all_interleavings(tasks, graph, smem_allocator=allocator, reduce=False,
                                   max_states=FULL_STATES)
    reduced = check_all_interleavings(tasks, graph, smem_allocator=allocator)
    assert not reduced.capped, reduced.format()
    if full.capped:
        assert set(_kinds(full)) <= set(_kinds(reduced)), (reduced.format(), full.format())
        return
    assert reduced.verdict == full.verdict, (reduced.format(), full.format())
    assert _kinds(reduced) == _kinds(full), (reduced.format(), full.format())
    if fixed:
        assert full.verdict == "SAFE", full.format()


def test_consequences_of_a_miscounted_phase_are_not_reported():
    """accumulator_consumer_group_of_one: the epilogue's 4 warps complete 4 phases of a barrier
    counting 1, so the parity is back where the MMA warp's drain waits: a real hang, but one
    that only follows the arrival-count mismatch.  Both searches report the mismatch alone."""
    case = next(c for c in CASES if c.name == "accumulator_consumer_group_of_one")
    tasks, graph, allocator = _checked(case, False)
    for reduce in (True, False):
        result = check_all_interleavings(tasks, graph, smem_allocator=allocator, reduce=reduce)
        assert _kinds(result) == ["arrivals"], result.format()
        assert "acc.empty[0]" in result.reports[0].message
