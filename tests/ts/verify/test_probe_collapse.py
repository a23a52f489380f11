"""try_acquire / try_wait probes in the exhaustive checker (issue 12 §2, "probe blow-up"): a probe
whose result only decides its blocking wait is folded into that wait, so probes cost no states;
races and deadlocks behind probes are still found; a probe the process could outrun is kept."""
import time

import pytest

from tsjit.ts.verify.exhaustive import check_all_interleavings
from tsjit.ts.verify.exhaustive_expand import program_variants, trip_counts
from tsjit.ts.verify.exhaustive_model import compile_program
from tsjit.ts.verify.exhaustive_regions import RegionTable
from verify_schedules import FakeValue, GmemDest, Program, Ring, TaskSpec, async_config

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.ScheduleWarning")


def chain(tasks=8, stages=8, trips=8, probes=True, release_before_read_at=None):
    """Task i waits on ring i-1 and fills ring i; the last task stores to ``out``."""
    def resources():
        out = {f"r{i}": Ring(name=f"r{i}", pipeline_config=async_config(stages, producers=32, consumers=32))
               for i in range(tasks - 1)}
        out["out"] = GmemDest(name="out", dst=FakeValue("o"))
        return out
    specs = []
    for i in range(tasks):
        up, down = f"r{i - 1}", f"r{i}"
        entries = []
        if i > 0:
            entries += ([(up, "try_wait")] if probes else []) + [(up, "wait")]
            if release_before_read_at == i:
                entries += [(up, "release"), (up, "read")]
            else:
                entries += [(up, "read")]
        if i < tasks - 1:
            entries += ([(down, "try_acquire")] if probes else []) + [(down, "acquire"), (down, "fill"),
                                                                      (down, "commit")]
        else:
            entries += [("out", "store")]
        if i > 0 and release_before_read_at != i:
            entries += [(up, "release")]
        specs.append(TaskSpec(f"t{i}", i, 1, (up,) if i > 0 else (), (down,) if i < tasks - 1 else ("out",),
                              {"loop": entries}, domain=(0, trips, 1)))

    def graph(r):
        g = {r[f"r{i}"]: [r[f"r{i - 1}"]] for i in range(1, tasks - 1)}
        g[r["out"]] = [r[f"r{tasks - 2}"]]
        return g
    return Program("chain", resources, specs, graph)


def _check(program, **kw):
    tasks, graph, _ = program.build()
    return check_all_interleavings(tasks, graph, **kw)


def test_eight_task_eight_stage_chain_with_probes_proves_in_under_a_second():
    start = time.process_time()            # CPU time: the bound holds on a loaded machine too
    result = _check(chain(trips=8))
    elapsed = time.process_time() - start
    assert result.verdict == "SAFE", result.format()
    assert elapsed < 1.0, elapsed


def test_probes_add_no_states():
    with_probes, without = _check(chain(trips=16)), _check(chain(trips=16, probes=False))
    assert with_probes.verdict == without.verdict == "SAFE"
    assert with_probes.states == without.states


def test_a_race_behind_probes_is_still_found():
    result = _check(chain(tasks=4, stages=2, trips=4, release_before_read_at=2))
    assert result.verdict == "UNSAFE" and result.races > 0, result.format()
    assert any("r1" in r.message for r in result.reports)


def _ops(program):
    tasks, graph, _ = program.build()
    notes: list = []
    (variant,) = program_variants(tasks)
    compiled = compile_program(tasks, graph, variant, trip_counts(tasks, 2, notes), RegionTable(None), notes)
    return {p.name: [op.kind for op in p.ops] for p in compiled.processes}


def test_the_probe_is_folded_into_its_wait():
    ops = _ops(chain(tasks=2, stages=2, trips=1))
    assert ops["t0"][:1] == ["acquire"] and "try_acquire" not in ops["t0"]
    assert ops["t1"] == ["wait", "release"]


def test_a_probe_the_process_could_outrun_is_kept():
    """Between try_acquire and acquire the task waits on and releases the same ring (ping-pong):
    the ring can move on in between, so the probe keeps its own transition."""
    def resources():
        ring = Ring(name="ring", pipeline_config=async_config(2, producers=32, consumers=32))
        return {"ring": ring, "out": GmemDest(name="out", dst=FakeValue("o"), smem=ring)}
    loop = [("ring", "try_acquire"), ("ring", "wait"), ("ring", "read"), ("out", "store"), ("ring", "release"),
            ("ring", "acquire"), ("ring", "fill"), ("ring", "commit")]
    program = Program("outrun", resources, [TaskSpec("pingpong", 0, 1, ("ring",), ("ring", "out"),
                                                     {"loop": loop}, domain=(0, 1, 1))],
                      lambda r: {r["out"]: [r["ring"]]})
    assert "try_acquire" in _ops(program)["pingpong"]
