"""C0's deadlock message says what is certain: a ring shallower than what one task holds is named
as the cause with the stage count to set, and the note that simulated trip counts may make a false
deadlock is left out when the cause does not depend on them (a structural finding, a shallow ring)."""
import pytest

from broken import CASES
from broken.builders import ASYNC, CONS, PROD, ring_program
from tsjit.errors import VerificationError
from tsjit.ts import TaskManager

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")
BY_NAME = {case.name: case for case in CASES}
NOTE = "may be a false positive"


def c0_message(tasks, graph, options) -> str:
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=False, **options)
    assert err.value.check == "C0", str(err.value)
    return str(err.value)


def test_a_missing_commit_is_certain_no_false_positive_note():
    text = c0_message(*BY_NAME["wait_with_no_commit"].build(False))
    assert "Likely cause, found by check B1" in text and NOTE not in text


def test_a_ring_the_producer_holds_entirely_is_named_too_shallow():
    text = c0_message(*BY_NAME["acquire_twice_one_stage"].build(False))
    assert ("Cause: 'ring' is too shallow for this schedule: task 'prod' (warp 0) holds 1 stage(s) acquired "
            "and not yet committed, and 'ring' has 1") in text
    assert "Give 'ring' at least 2 stages, or commit() before the next acquire()." in text
    assert NOTE not in text


@pytest.mark.parametrize("stages", [1, 2])
def test_a_consumer_waiting_on_more_stages_than_the_ring_has_is_named_too_shallow(stages):
    wait, release = ("ring", "wait"), ("ring", "release")
    consumer = [wait] * (stages + 1) + CONS[1:3] + [release] * (stages + 1)
    program = ring_program(ASYNC(stages, advance_on_wait=True), PROD, consumer)
    text = c0_message(*program.build())
    assert f"holds {stages} stage(s) waited on and not yet released, and 'ring' has {stages}" in text
    assert f"Give 'ring' at least {stages + 1} stages, or release() before the next wait()." in text


def test_a_deadlock_only_the_walk_shows_keeps_the_note():
    text = c0_message(*BY_NAME["producer_and_consumer_in_one_task"].build(False))
    assert NOTE in text and "too shallow" not in text
