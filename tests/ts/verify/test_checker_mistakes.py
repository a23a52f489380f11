"""tsjit.examples.checker_mistakes (tutorial 8): each broken program is refused by the check that names
its mistake, and its corrected twin verifies SAFE."""
import pytest

from tsjit.errors import VerificationError
from tsjit.examples.checker_mistakes import MISTAKES
from tsjit.ts import TaskManager

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

REFUSED_BY = {"wait_with_no_commit": ("C0", "Call ring.commit()"),
              "tma_bytes_short_by_one_tile": ("P2", "Set num_bytes=16384"),
              "producer_releases_its_own_ring": ("R0", "release() is a consumer operation"),
              "acquire_twice_one_stage": ("C0", "Give 'ring' at least 2 stages"),
              "two_tasks_write_aliased_buffers": ("X", "smem[0:4096]")}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_the_broken_program_is_refused_and_its_twin_is_safe(name):
    _, build = MISTAKES[name]
    check, text = REFUSED_BY[name]
    tasks, graph, options = build(False)
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=False, **options)
    assert err.value.check == check and text in str(err.value)
    tasks, graph, options = build(True)
    assert TaskManager(tasks, graph, verbose=False, **options).exhaustive_result.verdict == "SAFE"


def test_a_race_at_kernel_start_says_why_it_has_no_interleaving():
    """Two tasks whose first writes overlap race before either takes a barrier step: the message says so
    and what to add, instead of calling the tasks stuck."""
    _, build = MISTAKES["two_tasks_write_aliased_buffers"]
    tasks, graph, options = build(False)
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=False, **options)
    line = next(text for text in str(err.value).splitlines() if "shortest interleaving" in text)
    assert "stuck" not in line and "kernel start" in line
    assert "wait()" in line and "acquire()" in line     # what to add
