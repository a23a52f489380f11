"""P1 and P2 (a PipelineConfig's group sizes and bytes) point at the line that made the config, not at the
TaskManager line that checked it: on the host, and inside a kernel (where the TaskManager line stays as
secondary context)."""
import inspect
import os

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.errors import VerificationError
from tsjit.examples import checker_mistakes
from tsjit.examples.checker_mistakes import Chunks, ScaledOut

THIS_FILE = os.path.abspath(__file__)
pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def _line_of(function, snippet: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(n for n, line in enumerate(lines) if snippet in line)


def test_p2_points_at_the_config_line_on_the_host():
    tasks, graph, options = checker_mistakes.build_tma_bytes_short_by_one_tile(False)
    with pytest.raises(VerificationError) as err:
        ts.TaskManager(tasks, graph, verbose=False, **options)
    build = checker_mistakes.build_tma_bytes_short_by_one_tile
    where = f"{os.path.abspath(inspect.getsourcefile(build))}:{_line_of(build, 'create_tma_async_pipeline_cfg(')}:"
    text = str(err.value)
    assert err.value.check == "P2" and text.startswith(f"[P2] {where}"), text
    assert "ts.PipelineConfig.create_tma_async_pipeline_cfg(" in text and "^" in text   # the line, a caret
    assert "Set num_bytes=16384" in text


@tsjit.kernel
def ring_with_a_short_consumer_group(x, y, chunks):
    config = ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 16))
    ring = Chunks(name="ring", pipeline_config=config, x=x)
    out = ScaledOut(name="out", y=y, ring=ring)

    @ts.schedule
    def produce(r: Chunks):
        with ts.domain_loop(0, chunks, 1):
            r.acquire()
            r.fill()
            r.commit()

    @ts.schedule
    def consume(r: Chunks, o: ScaledOut):
        with ts.domain_loop(0, chunks, 1):
            r.wait()
            o.write(stage=r.take())
            r.release()

    producer = ts.Task("producer", [], [ring], 0, 1, schedule=produce(ring))
    consumer = ts.Task("consumer", [ring], [out], 1, 4, schedule=consume(ring, out))
    manager = ts.TaskManager([producer, consumer], {out: [ring]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_p1_in_a_kernel_points_at_the_config_line_and_names_the_taskmanager_line():
    x = np.zeros(8 * 128, np.float32)
    with pytest.raises(VerificationError) as err:
        tsjit.compile(ring_with_a_short_consumer_group, x, x, 8, target="sm_90a")
    text = str(err.value)
    config_line = _line_of(ring_with_a_short_consumer_group.fn, "create_async_async_pipeline_cfg(")
    manager_line = _line_of(ring_with_a_short_consumer_group.fn, "ts.TaskManager(")
    assert err.value.check == "P1" and text.startswith(f"[P1] {THIS_FILE}:{config_line}:"), text
    assert "consumer_group.size is 16" in text and "task 'consumer'" in text
    assert f"raised while compiling the kernel, at {THIS_FILE}:{manager_line}:" in text
    note = text.split("raised while compiling the kernel")[1].splitlines()     # the line and a caret
    assert note[1].strip().startswith("manager = ts.TaskManager([producer, consumer]") and note[2].strip() == "^"
    assert note[2].index("^") == note[1].index("ts.TaskManager")



@tsjit.kernel
def ring_of_run_time_stages(x, stages):
    config = ts.PipelineConfig.create_async_async_pipeline_cfg(
        stages, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, 128))
    Chunks(name="ring", pipeline_config=config, x=x)


@tsjit.kernel
def ring_of_a_run_time_group_size(x, consumers):
    config = ts.PipelineConfig.create_async_async_pipeline_cfg(
        2, ts.CooperativeGroup(ts.Agent.Thread, 32), ts.CooperativeGroup(ts.Agent.Thread, consumers))
    Chunks(name="ring", pipeline_config=config, x=x)


@pytest.mark.parametrize("kernel, field", [(ring_of_run_time_stages, "num_stages"),
                                           (ring_of_a_run_time_group_size, "CooperativeGroup size")])
def test_a_run_time_stage_count_or_group_size_says_to_make_it_constexpr(kernel, field):
    """A plain (not Constexpr) kernel parameter is a run-time Int32: the P3 message says so and names the fix."""
    with pytest.raises(VerificationError) as err:
        tsjit.compile(kernel, np.zeros(1024, np.float32), 2, target="sm_90a")
    text = str(err.value)
    assert err.value.check == "P3" and text.startswith(f"[P3] {field} must be a positive int, got Value(Int32)"), text
    assert "run-time value" in text and "tsjit.Constexpr[int]" in text, text
