"""The group sizes ``create_async_async_pipeline_cfg``'s docstring prescribes verify (issue 10 §3):
``32 * warps`` when every thread arrives, ``warps`` when one lane per warp does, for producer and
consumer tasks of several warps; a size between them is refused by P1."""
import pytest

from broken.counts import async_counts
from tsjit.errors import VerificationError
from tsjit.ts import PipelineConfig, TaskManager

DOC = PipelineConfig.create_async_async_pipeline_cfg.__doc__


@pytest.mark.parametrize("prod_warps, cons_warps", [(1, 1), (2, 3)])
@pytest.mark.parametrize("per_thread", [True, False], ids=["every_thread", "lane_per_warp"])
def test_documented_group_sizes_verify(prod_warps, cons_warps, per_thread):
    scale = 32 if per_thread else 1
    program = async_counts(producers=scale * prod_warps, consumers=scale * cons_warps,
                           prod_warps=prod_warps, cons_warps=cons_warps)()
    tasks, graph, options = program.build()
    manager = TaskManager(tasks, graph, verbose=False, **options)
    assert [f for f in manager.findings if not f.is_warning] == []
    assert manager.exhaustive_result.verdict == "SAFE"


def test_a_size_between_the_documented_ones_is_refused_naming_the_group():
    tasks, graph, options = async_counts(producers=32, consumers=64, cons_warps=3)().build()
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=False, **options)
    assert err.value.check == "P1" and "consumer_group" in str(err.value)


def test_docstring_gives_both_sizes_for_producer_and_consumer():
    for text in ("CooperativeGroup(Agent.Thread, 32 * P)", "CooperativeGroup(Agent.Thread, 32 * C)",
                 "CooperativeGroup(Agent.Warp, P)", "AsyncLoad"):
        assert text in DOC


def test_the_guide_states_the_sizes_p1_accepts_for_a_one_warp_consumer():
    """docs/task_scheduling.md agrees with the checker: ``(Thread, 32 * W)`` (the reference's count)
    and ``(Thread, W)`` (one elected lane per warp) both verify; another size is P1 naming the task,
    the resource and both counts."""
    import pathlib
    guide = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "task_scheduling.md").read_text()
    assert "`(Thread, 32 * W)`" in guide and "`(Thread, W)`" in guide
    assert "counts every thread that calls `release()`" not in guide   # the old, contradicted sentence
    for size in (32, 1):
        tasks, graph, options = async_counts(producers=32, consumers=size, cons_warps=1)().build()
        manager = TaskManager(tasks, graph, verbose=False, **options)
        assert [f for f in manager.findings if not f.is_warning] == []
    tasks, graph, options = async_counts(producers=32, consumers=16, cons_warps=1)().build()
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=False, **options)
    text = str(err.value)
    assert err.value.check == "P1" and "consumer_group.size is 16" in text
    assert "32 (every thread" in text and "1 (one lane per warp" in text and "task '" in text
