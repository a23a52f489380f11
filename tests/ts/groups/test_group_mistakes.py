"""tsjit.examples.group_mistakes (tutorials 9 and 12): each broken group program is refused by the rule that
names its mistake (when the group or schedule is built, or by the TaskManager), and its twin verifies SAFE."""
import pytest

from tsjit.errors import ScheduleError, VerificationError
from tsjit.examples.group_mistakes import MISTAKES
from tsjit.ts import TaskManager

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

REFUSED_BY = {"merge_member_release": ("T5", ["smem_a.release()", "'ab'", "ab.release()"]),
              "merge_release_without_wait": ("T5", ["ab.release()", "ab.smem_b.wait()"]),
              "fork_member_commit": ("T5", ["a_mma.commit()", "'ab'", "ab.commit()"]),
              "fork_bytes_mismatch": ("PG", ["'ab'", "'a_mma': 16384", "'a_act': 8192"])}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_the_broken_group_program_is_refused_and_its_twin_is_safe(name):
    _, build = MISTAKES[name]
    rule, names = REFUSED_BY[name]
    with pytest.raises((ScheduleError, VerificationError)) as err:
        tasks, graph, options = build(False)
        TaskManager(tasks, graph, verbose=False, **options)
    assert (getattr(err.value, "check", None) or getattr(err.value, "rule", None)) == rule, str(err.value)
    for text in names:
        assert text in str(err.value), (text, str(err.value))
    tasks, graph, options = build(True)
    assert TaskManager(tasks, graph, verbose=False, **options).exhaustive_result.verdict == "SAFE"
