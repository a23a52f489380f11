"""R0 for a pipeline operation of the wrong role names the operation the task's own role calls
(issue 10 §3: ``acquire()`` in a consumer task means ``wait()``, not a new dst_resources entry)."""
import pytest

from broken.builders import ASYNC, CONS, PROD, ring_program
from tsjit.errors import VerificationError
from tsjit.ts import TaskManager

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def _r0(producer, consumer) -> str:
    tasks, graph, options = ring_program(ASYNC(), producer, consumer).build()
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=False, **options)
    assert err.value.check == "R0"
    return str(err.value)


@pytest.mark.parametrize("wrong, right", [("acquire", "wait"), ("try_acquire", "try_wait")])
def test_producer_operation_in_a_consumer_names_the_consumer_operation(wrong, right):
    consumer = [("ring", wrong)] + CONS[1:] if wrong == "acquire" else [("ring", wrong)] + CONS
    text = _r0(PROD, consumer)
    assert f"{wrong}() is a producer operation" in text and f"ring.{right}()" in text
    assert "task 'cons'" in text


def test_consumer_operation_in_a_producer_names_the_producer_operation():
    text = _r0(PROD + [("ring", "release")], CONS)
    assert "release() is a consumer operation" in text and "ring.commit()" in text and "task 'prod'" in text


def test_work_of_the_wrong_role_keeps_the_resource_list_advice():
    text = _r0(PROD, CONS[:1] + [("ring", "fill")] + CONS[2:])
    assert "Add ring to dst_resources of task 'cons'" in text


def test_run_before_setup_asks_only_for_setup():
    """Setup fences the barrier init and synchronises the CTA itself: the message asks for nothing more."""
    from tsjit.errors import UsageStateError

    tasks, graph, options = ring_program(ASYNC(), PROD, CONS).build()
    manager = TaskManager(tasks, graph, verbose=False, **options)
    with pytest.raises(UsageStateError) as err:
        manager.run()
    text = str(err.value)
    assert "setup_resources_and_tasks() first" in text and "itself" in text
