"""The exhaustive interleaving checker (check X): verdicts on the tutorial programs, what
its reports contain, the state cap, the TaskManager integration, partial-order reduction
(soundness against the full search, and its size) and the measured speed."""
import time
import xml.etree.ElementTree as ET

import pytest

from broken import CASES
from tsjit.errors import VerificationError
from tsjit.ts import TaskManager, VerificationWarning
from tsjit.ts.verify.exhaustive import check_all_interleavings
from verify_schedules import (TUTORIALS, Program, Ring, TaskSpec, GmemDest, FakeValue,
                              async_config, gemm, tma_copy)

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")

BY_NAME = {c.name: c for c in CASES}


def check(program_or_case, fixed=False, **kw):
    if hasattr(program_or_case, "build") and hasattr(program_or_case, "expect"):
        tasks, graph, options = program_or_case.build(fixed)
    else:
        tasks, graph, options = program_or_case.build()
    kw.setdefault("smem_allocator", options.get("smem_allocator"))
    return check_all_interleavings(tasks, graph, **kw)


# -- verdicts --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(TUTORIALS))
def test_tutorial_programs_are_safe(name):
    result = check(TUTORIALS[name]())
    assert result.verdict == "SAFE", result.format()
    assert result.reports == [] and not result.capped


@pytest.mark.parametrize("stages", [4, 5, 6])
def test_gemm_with_deeper_rings_is_safe(stages):
    assert check(gemm(stages)).verdict == "SAFE"


def test_persistent_skip_if_adds_skipped_tile_variants():
    result = check(TUTORIALS["persistent copy"]())
    assert [v.name for v in result.variants] == ["all tiles run", "second tile skipped",
                                                 "both tiles skipped"]


def test_warp_lane_interleave_runs_one_process_per_warp():
    def resources():
        ring = Ring(name="ring", pipeline_config=async_config(4, producers=32, consumers=32,
                                                              interleave_stride=2))
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("o"), smem=ring)}
    prod = [("ring", "acquire"), ("ring", "fill"), ("ring", "commit")]
    cons = [("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release")]
    program = Program("lanes", resources, [
        TaskSpec("producer", 0, 2, (), ("ring",), {"loop": prod}, domain=(0, 4, 1)),
        TaskSpec("consumer", 2, 2, ("ring",), ("out",), {"loop": cons}, domain=(0, 4, 1))],
        lambda r: {r["out"]: [r["ring"]]})
    result = check(program)
    assert result.verdict == "SAFE", result.format()
    assert len(result.variants[0].processes) == 4
    assert any(p.startswith("producer/warp1") for p in result.variants[0].processes)


# -- reports ---------------------------------------------------------------------------------------
def test_deadlock_report_lists_every_blocked_task_credits_and_interleaving():
    result = check(BY_NAME["two_consumers_counted_as_one"])
    report = next(r for r in result.reports if r.kind == "deadlock")
    text = report.message
    for task in ("load", "mma0", "mma1"):
        assert f"blocked: task '{task}'" in text
    assert "ProducerAcquire" in text and "ConsumerWait" in text
    assert "ring.empty[" in text and "arrivals pending" in text      # the barrier state
    assert "credits of 'ring' (TmaAsync, 4 stages)" in text
    assert f"shortest interleaving ({len(report.path) - 1} transitions)" in text


def test_reported_interleaving_is_a_shortest_one():
    """BFS with persistent sets keeps a shortest path to every deadlock (a path and its
    reordering have the same length): the reduced and full searches agree on it."""
    for name in ("release_missing", "wait_with_no_commit", "producer_and_consumer_in_one_task"):
        reduced = check(BY_NAME[name])
        full = check(BY_NAME[name], reduce=False)
        first = lambda r: next(x for x in r.reports if x.kind == "deadlock").path
        assert len(first(reduced)) == len(first(full)), name


def test_race_report_names_both_accesses_and_the_bytes():
    result = check(BY_NAME["two_tasks_write_aliased_buffers"])
    report = next(r for r in result.reports if r.kind == "race")
    text = report.message
    assert "smem[0:4096]" in text
    assert "task 'writer_a' (warp 0) writes it: 'buf_a' ProducerWork 'write'" in text
    assert "task 'writer_b' (warp 1) writes it: 'buf_b' ProducerWork 'write'" in text
    assert set(report.tasks) == {"writer_a", "writer_b"}


def test_tma_copy_in_flight_is_named_in_a_race():
    text = "\n".join(r.message for r in check(BY_NAME["tma_bytes_short_by_one_tile"]).reports)
    assert "(TMA copy in flight)" in text and "'tma_load_b'" in text


def test_arrival_count_report_names_the_config_field():
    result = check(BY_NAME["consumer_group_one_warp_short"])
    report = next(r for r in result.reports if r.kind == "arrivals")
    assert "expects 96 arrivals per phase (ring.pipeline_config.consumer_group.size)" in \
        report.message
    assert "arrives 128 times" in report.message


def test_stale_probe_lets_a_wait_pass_and_is_a_race():
    """try_wait after wait probes the stage already waited; its success then skips the next
    iteration's wait (the lowering pops the probe at the next blocking wait)."""
    program = tma_copy()
    store = program.specs[3]
    loop = list(store.entries["loop"])
    loop[0], loop[1] = loop[1], loop[0]
    store.entries = dict(store.entries, loop=loop)
    result = check(program)
    assert any(r.kind == "race" and "'store'" in r.message for r in result.reports)


def test_pdl_is_not_checked_without_any_wait():
    case = BY_NAME["pdl_launch_before_any_wait"]
    tasks, graph, _ = case.build(False)
    tasks = [t for t in tasks if t.name == "early"]
    assert check_all_interleavings(tasks, graph).verdict == "SAFE"


# -- state cap -------------------------------------------------------------------------------------
def test_state_cap_makes_the_verdict_incomplete_and_warns():
    tasks, graph, options = gemm().build()
    with pytest.warns(VerificationWarning, match="NOT proven free of deadlocks"):
        m = TaskManager(tasks, graph, verbose=False, max_states=20, **options)
    assert m.exhaustive_result.verdict == "INCOMPLETE"
    assert m.exhaustive_result.states <= 20
    assert "NOT proven safe" in m.exhaustive_result.summary()


def test_max_states_is_honoured_by_the_direct_api():
    result = check(gemm(), max_states=50)
    assert result.capped and result.states <= 50


# -- TaskManager integration ---------------------------------------------------------------------------
def test_printout_ends_with_the_summary(capsys):
    tasks, graph, options = tma_copy().build()
    TaskManager(tasks, graph, verbose=True, **options)
    out = capsys.readouterr().out
    block = out[out.index("[exhaustive] deadlock / race / PDL check"):]
    summary = [line for line in block.splitlines() if line.startswith("[exhaustive] states")]
    assert len(summary) == 1
    line = summary[0]
    for word in ("states explored", "deadlocks 0", "races 0", "PDL violations 0", "SAFE"):
        assert word in line


def test_unsafe_printout_and_error(capsys):
    tasks, graph, options = BY_NAME["two_tasks_write_aliased_buffers"].build(False)
    with pytest.raises(VerificationError) as err:
        TaskManager(tasks, graph, verbose=True, **options)
    assert err.value.check == "X"
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert "races 1" in summary and summary.endswith("-> UNSAFE")


def test_skip_validation_demotes_checker_errors():
    tasks, graph, options = BY_NAME["two_tasks_write_aliased_buffers"].build(False)
    with pytest.warns(VerificationWarning, match=r"\[X\]"):
        m = TaskManager(tasks, graph, verbose=False, skip_validation=True, **options)
    assert m.exhaustive_result.verdict == "UNSAFE"


def test_checker_can_be_switched_off():
    tasks, graph, options = BY_NAME["two_tasks_write_aliased_buffers"].build(False)
    m = TaskManager(tasks, graph, verbose=False, exhaustive_deadlock_race_check=False,
                    **options)
    assert getattr(m, "exhaustive_result", None) is None


# -- partial-order reduction ------------------------------------------------------------------------
# (the reduced and full searches agree on the whole corpus: test_reduction_agreement.py)
def test_reduction_shrinks_the_gemm_state_space():
    reduced, full = check(gemm()), check(gemm(), reduce=False, max_states=1_000_000)
    assert full.verdict == reduced.verdict == "SAFE"
    assert reduced.states * 50 < full.states


def _best_ms(program, repeats=3) -> float:
    tasks, graph, options = program.build()
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()        # CPU time: the bound holds on a loaded machine too
        result = check_all_interleavings(tasks, graph)
        best = min(best, time.process_time() - start)
        assert result.verdict == "SAFE"
    return best * 1000


def test_gemm_is_proven_safe_within_one_second():
    assert _best_ms(gemm(6)) < 1000


def test_four_task_tma_copy_is_proven_safe_within_200_ms():
    assert len(tma_copy().specs) == 4
    assert _best_ms(tma_copy()) < 200


# -- render -------------------------------------------------------------------------------------------
def test_render_writes_a_self_contained_svg(tmp_path):
    tasks, graph, options = gemm().build()
    m = TaskManager(tasks, graph, verbose=False, **options)
    path = m.render(tmp_path / "gemm.svg", engine="svg")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    for name in ("load[0:1)", "mma0[4:8)", "mma1[8:12)", "TmaAsync, 4 stages", "WorkQueue",
                 "ab.acquire", "ab.wait", "SAFE"):
        assert name in text
    assert len([e for e in root.iter() if e.tag.endswith("path")]) >= 8   # the arrows


def test_render_with_dot_needs_graphviz(tmp_path, monkeypatch):
    import tsjit.ts.render as render_module
    monkeypatch.setattr(render_module.shutil, "which", lambda name: None)
    tasks, graph, options = tma_copy().build()
    m = TaskManager(tasks, graph, verbose=False, **options)
    with pytest.raises(RuntimeError, match="dot"):
        m.render(tmp_path / "x.svg", engine="dot")
    assert ET.parse(m.render(tmp_path / "auto.svg")).getroot().tag.endswith("svg")
