"""Several producer tasks filling one ring stage (issue 12 §2; CUTLASS TS tutorial 04's split
A/B loads): each task arms the full barrier and brings its own ``num_bytes_per_warp_per_cta``,
so each writes its own part of the stage; the parts do not race with each other, but each
still races with a reader of the stage that no barrier orders."""
import pytest

from broken.counts import split_loads
from tsjit.ts import TaskManager

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def test_split_loads_with_per_warp_bytes_pass_every_check():
    tasks, graph, options = split_loads()().build()
    manager = TaskManager(tasks, graph, verbose=False, **options)
    assert manager.exhaustive_result.verdict == "SAFE"


def test_a_part_still_races_with_a_read_outside_the_consumer_bracket():
    program = split_loads()()
    consumer = program.specs[2]
    consumer.entries["loop"] = [("ring", "wait"), ("ring", "release"), ("ring", "read"),
                                ("out", "store")]
    result = program.check()
    races = [r for r in result.reports if r.kind == "race"]
    assert races and any("cons" in r.tasks and ({"load_a", "load_b"} & set(r.tasks)) for r in races)


@pytest.mark.parametrize("per_warp", [None, 8192])
def test_the_armed_bytes_add_up_only_with_per_warp_bytes(per_warp):
    """Without num_bytes_per_warp_per_cta the two tasks' writes are whole-stage writes: a race."""
    result = split_loads(per_warp=per_warp)().check()
    assert result.verdict == ("SAFE" if per_warp else "UNSAFE"), result.format()
