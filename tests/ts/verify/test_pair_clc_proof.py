"""Issue 14: tutorial 6's 2-CTA pair with CLC scheduling (tsjit/examples/bw_persistent_gemm.py,
``cta_layout_vmnk = (2, 1, 1, 1)``, every task of both CTAs on the CLC ring) is proven SAFE by the
exhaustive checker within its default state cap.  The proof itself runs once, while
tests/blackwell/test_tutorial6.py compiles that build
(``test_the_pair_with_clc_is_proven_over_every_task_of_both_ctas_within_the_default_cap``, about 300
states since the arrival commutation of test_arrival_commutation.py, 55 000 before); this file checks the cheaper pair without CLC, whose state count shows the same reductions.

Before, the search stopped at 100 000 states without finishing.  What made it finish (all in
ts/verify/exhaustive_search.py, each sound for persistent sets):

* arrivals of one kind (count, bytes) on a barrier commute, even on a barrier that also gets
  other kinds (the four loads' copies completing on the pair leader's full barrier);
* a free run passes a wait on armed TMA bytes only if the copies still outside can land that
  many bytes (it passed whenever any copy was outside), so one copy's completion no longer pulls
  the MMA warp and every other copy into its persistent set;
* an op that touches nothing visible, or whose query meets nothing any other process has left,
  is a persistent set alone, found without free runs; free runs are memoised per outside set.
"""
import warnings

import pytest

from tsjit.errors import TsjitError
from tsjit.ts.verify import exhaustive

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


class _Captured(Exception):
    pass


def _checked_program(layout, clc):
    """The tasks and graph tutorial 6's TaskManager checks (the compile stops there)."""
    from tsjit.examples import bw_persistent_gemm as t6
    seen = {}
    original = exhaustive.check_all_interleavings

    def capture(tasks, graph=None, **kw):
        seen["program"] = (tuple(tasks), graph, kw.get("smem_allocator"))
        raise _Captured
    exhaustive.check_all_interleavings = capture
    try:
        # a compile served from the cache (another test built the same tutorial) runs no TaskManager
        with warnings.catch_warnings(), pytest.MonkeyPatch.context() as env:
            env.setenv("TSJIT_DISABLE_CACHE", "1")
            env.setattr(t6.persistent_gemm, "_loaded", {})     # and the kernel's in-process memo
            warnings.simplefilter("ignore")
            t6.compile_for("sm_100a", layout, clc=clc)
    except (_Captured, TsjitError):
        pass
    finally:
        exhaustive.check_all_interleavings = original
    assert "program" in seen, "the tutorial's TaskManager never ran its exhaustive check"
    return seen["program"]


def test_the_pair_without_clc_needs_a_few_thousand_states():
    """16 649 states before the byte-counted free runs and same-kind commutation; now about 2 100."""
    tasks, graph, allocator = _checked_program((2, 1, 1, 1), False)
    result = exhaustive.check_all_interleavings(tasks, graph, smem_allocator=allocator)
    assert result.verdict == "SAFE", result.summary()
    assert result.states < 4000, result.summary()
