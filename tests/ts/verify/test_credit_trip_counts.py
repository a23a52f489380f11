"""C0 credit simulation with different trip counts (issue 12 §2): capping static domains at
``max_simulated_iterations`` must not turn a correct program into a deadlock, and a real
deadlock or imbalance behind the cap is still found with the exact counts."""
import pytest

from tsjit.errors import VerificationError
from tsjit.ts import TaskManager
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, async_config

PROD = [("ring", "acquire"), ("ring", "fill"), ("ring", "commit")]
CONS = [("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release")]


def _program(prod_trips, cons_trips, waits_per_trip):
    def resources():
        ring = Ring(name="ring", pipeline_config=async_config(2, producers=32, consumers=128))
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("o"), smem=ring)}
    return Program("trip counts", resources, [
        TaskSpec("producer", 0, 1, (), ("ring",), {"loop": PROD}, domain=(0, prod_trips, 1)),
        TaskSpec("consumer", 1, 4, ("ring",), ("out",), {"loop": CONS * waits_per_trip},
                 domain=(0, cons_trips, 1))], lambda r: {r["out"]: [r["ring"]]})


def _manager(program, **kw):
    tasks, graph, _ = program.build()
    return TaskManager(tasks, graph, verbose=False, **kw)


@pytest.mark.parametrize("prod_trips, cons_trips, waits", [(8, 4, 2), (12, 4, 3), (6, 2, 3)])
def test_different_trip_counts_behind_the_cap_verify(prod_trips, cons_trips, waits):
    manager = _manager(_program(prod_trips, cons_trips, waits))
    assert manager.simulation.blocked == []


def test_a_real_deadlock_behind_the_cap_is_still_reported():
    """8 commits against 4 x 3 = 12 waits: the consumer starves for good."""
    with pytest.raises(VerificationError) as err:
        _manager(_program(8, 4, 3), exhaustive_deadlock_race_check=False)
    assert err.value.check == "C0" and "ConsumerWait" in str(err.value) and "iteration 2" in str(err.value)


def test_an_imbalance_behind_the_cap_is_still_reported():
    """10 commits against 4 x 2 = 8 waits: balanced within the cap, not with the exact counts."""
    with pytest.raises(VerificationError) as err:
        _manager(_program(10, 4, 2), exhaustive_deadlock_race_check=False)
    assert err.value.check == "C0" and "2x ProducerCommit" in str(err.value)
