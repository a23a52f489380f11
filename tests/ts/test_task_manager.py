"""TaskManager: structural checks (W0-W2, R0, G0-G4, N1, H1), routing (R1-R4), demotion,
printouts and the lowering hand-off."""
import sys
import types
from dataclasses import dataclass, replace

import pytest

import tsjit.ts
from tsjit.errors import VerificationError
from tsjit.lang.dtypes import Int32
from tsjit.ts import (MemoryResource, Route, ScheduleStage, ScheduleStageType, Task,
                      TaskLocalVariable, TaskManager, VerificationWarning, WorkAttr,
                      consumer_work, domain_loop, producer_work, schedule,
                      schedule_from_entries)
from tsjit.ts.simulate import ScheduleSimulator
from ts_fakes import (Barrier, FakePipelineConfig, GmemDest, GmemSource, MultiDest, MultiSource,
                      copy_resources)

pytestmark = pytest.mark.filterwarnings("error::tsjit.ts.ScheduleWarning")


@schedule
def copy_schedule(src, dst):
    with domain_loop(0, 64, 16):
        dst.store(src.load())


def copy_task(name="copy", warp_idx=0, num_warps=4, resources=None, **kw):
    src, dst = resources or copy_resources()
    return Task(name, [src], [dst], warp_idx, num_warps, copy_schedule(src, dst), **kw), src, dst


def manager(tasks, graph, **kw):
    kw.setdefault("verbose", False)
    return TaskManager(tasks, graph, **kw)


def test_valid_copy_has_no_findings():
    task, src, dst = copy_task()
    m = manager([task], {dst: [src]})
    assert m.findings == [] and m.resources == (dst, src)


# -- G0 / W0 -----------------------------------------------------------------------------------
def test_g0_empty_graph():
    task, src, dst = copy_task()
    with pytest.raises(VerificationError) as err:
        manager([task], {})
    assert err.value.check == "G0"


def test_g0_duplicate_task_names():
    a, src, dst = copy_task(warp_idx=0, num_warps=1)
    b, src2, dst2 = copy_task(warp_idx=1, num_warps=1)
    with pytest.raises(VerificationError) as err:
        manager([a, b], {dst: [src], dst2: [src2]})
    assert err.value.check == "G0" and "'copy'" in str(err.value)


def test_w0_overlapping_warps():
    a, src, dst = copy_task("a", 0, 4)
    b, src2, dst2 = copy_task("b", 2, 4, resources=(GmemSource(name="s2", src=None),
                                                    GmemDest(name="d2", dst=None)))
    with pytest.raises(VerificationError) as err:
        manager([a, b], {dst: [src], dst2: [src2]})
    assert err.value.check == "W0" and "[2, 4)" in str(err.value)
    assert "warp_idx=4" in str(err.value)


def test_w0_duplicate_resource_names():
    a, src, dst = copy_task("a", 0, 1)
    b, src2, dst2 = copy_task("b", 1, 1)   # same names 'src'/'dst', different objects
    with pytest.raises(VerificationError) as err:
        manager([a, b], {dst: [src], dst2: [src2]})
    assert err.value.check == "W0" and "'dst'" in str(err.value)


# -- R0 ----------------------------------------------------------------------------------------
def test_r0_consuming_a_dst_only_resource():
    src, out = GmemSource(name="src", src=None), MultiSource(name="ms")

    @schedule
    def wrong(s, m):
        with domain_loop(4):
            m.probe()
            s.load()
    with pytest.warns(Warning):
        sched = wrong(src, out)
    task = Task("t", [src], [out], 0, 1, sched)
    with pytest.raises(VerificationError) as err:
        manager([task], {out: [src]})
    text = str(err.value)
    assert err.value.check == "R0"
    assert "task 't'" in text and "'ms'" in text and "ConsumerWork 'probe'" in text
    assert "step #0" in text and "Add ms to src_resources" in text


def test_r0_undeclared_resource():
    src, dst = copy_resources()
    extra = GmemDest(name="extra", dst=None)

    @schedule
    def sched(s, d, e):
        with domain_loop(4):
            item = s.load()
            d.store(item)
            e.store(item)
    task = Task("t", [src], [dst], 0, 1, sched(src, dst, extra))
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src]})
    assert err.value.check == "R0" and "'extra'" in str(err.value)
    assert "step #2" in str(err.value) and "dst_resources" in str(err.value)


# -- G1 - G4 --------------------------------------------------------------------------------------
def test_g1_graph_resource_unused():
    task, src, dst = copy_task()
    stale = GmemDest(name="stale", dst=None)
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src], stale: [src]})
    assert err.value.check == "G1" and "'stale'" in str(err.value)
    assert "downstream of src" in str(err.value)


def test_g2_edge_not_backed_by_a_task():
    a, src, dst = copy_task("a", 0, 1)
    b, src2, dst2 = copy_task("b", 1, 1, resources=(GmemSource(name="s2", src=None),
                                                    GmemDest(name="d2", dst=None)))
    with pytest.raises(VerificationError) as err:
        manager([a, b], {dst: [src], dst2: [src2, src]})
    text = str(err.value)
    assert err.value.check == "G2" and "{d2: [src]}" in text
    assert "task 'a'" in text and "task 'b'" in text


def test_g2_reversed_edge_lists_each_tasks_resources_and_names_the_edge_to_write():
    task, src, dst = copy_task()
    with pytest.raises(VerificationError) as err:
        manager([task], {src: [dst]})
    text = str(err.value)
    assert err.value.check == "G2" and "src_resources [src], dst_resources [dst]" in text, text
    assert "probably reversed; write {dst: [src]}" in text, text


def test_g2_barrier_edge_needs_a_task_listing_both():
    src, dst = copy_resources()
    pdl = Barrier(name="pdl")

    @schedule
    def with_wait(p, s, d):
        p.wait_griddep()
        with domain_loop(4):
            d.store(s.load())
    task = Task("t", [pdl, src], [dst], 0, 1, with_wait(pdl, src, dst))
    assert manager([task], {dst: [src], src: [pdl]}).findings == []
    other_pdl = Barrier(name="pdl2")
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src], src: [pdl], other_pdl: [src]})
    assert err.value.check in ("G1", "G2")


def test_g2_self_edge_needs_consumer_and_producer():
    task, src, dst = copy_task()
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src, dst]})
    assert err.value.check == "G2" and "self-edge {dst: [dst]}" in str(err.value)
    assert "consumes" in str(err.value)


def test_g3_task_resource_missing_from_graph():
    src, dst = copy_resources()
    extra = MultiSource(name="ms")

    @schedule
    def uses_both(s, m, d):
        with domain_loop(4):
            m.probe()
            d.store(s.load())
    with pytest.warns(Warning):
        sched = uses_both(src, extra, dst)
    task = Task("t", [src, extra], [dst], 0, 1, sched)
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src]})
    assert err.value.check == "G3" and "'ms'" in str(err.value) and "task 't'" in str(err.value)


def test_g4_declared_resource_never_scheduled():
    src, dst = copy_resources()
    extra = MultiSource(name="ms")
    task = Task("t", [src, extra], [dst], 0, 1, copy_schedule(src, dst))
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src, extra]})
    assert err.value.check == "G4" and "'ms'" in str(err.value)
    assert "'copy_schedule'" in str(err.value) and "src_resources" in str(err.value)


# -- N1 ----------------------------------------------------------------------------------------------
def test_n1_raw_entry_label_typo_suggests_label():
    src, dst = MultiSource(name="ms"), MultiDest(name="md")
    sched = schedule_from_entries([
        (src, ScheduleStage.ConsumerWork, "tma_laod"),
        (dst, ScheduleStage.ProducerAuxWork),
    ], end=4)
    task = Task("t", [src], [dst], 0, 1, sched)
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src]})
    text = str(err.value)
    assert err.value.check == "N1" and "task 't'" in text and "step #0" in text
    assert "Did you mean 'tma_load'" in text


def test_n1_raw_entry_unlabelled_with_several_methods():
    src, dst = MultiSource(name="ms"), MultiDest(name="md")
    sched = schedule_from_entries([(src, ScheduleStage.ConsumerWork),
                                   (dst, ScheduleStage.ProducerAuxWork)], end=4)
    with pytest.raises(VerificationError) as err:
        manager([Task("t", [src], [dst], 0, 1, sched)], {dst: [src]})
    assert err.value.check == "N1" and "ms.tma_load(...)" in str(err.value)


# -- R1 - R4 -----------------------------------------------------------------------------------------
def routed_copy():
    task, src, dst = copy_task(num_warps=1)
    return task, src, dst, task.schedule


def test_r1_route_from_a_producer_step():
    task, src, dst, sched = routed_copy()
    load, store = sched.steps
    sched.routes = (Route(store, src.item, store, "item"),)
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src]})
    assert err.value.check == "R1" and "#1 dst.store [Loop call 0].item" in str(err.value)
    assert "ProducerWork" in str(err.value) and "task 'copy'" in str(err.value)


def test_r2_route_to_an_undeclared_input():
    task, src, dst, sched = routed_copy()
    load, store = sched.steps
    sched.routes = (Route(load, src.item, store, "itme"),)
    with pytest.raises(VerificationError) as err:
        manager([task], {dst: [src]})
    assert err.value.check == "R2" and "no routed input 'itme'" in str(err.value)


def test_r3_producer_input_without_writer():
    src, dst = MultiSource(name="ms"), MultiDest(name="md")
    sched = schedule_from_entries([(src, ScheduleStage.ConsumerWork, "probe"),
                                   (dst, ScheduleStage.ProducerWork, "store_one")], end=4)
    with pytest.raises(VerificationError) as err:
        manager([Task("t", [src], [dst], 0, 1, sched)], {dst: [src]})
    assert err.value.check == "R3"
    assert "missing edge <writer of 'a'> -> #1 md.store_one [Loop call 0].a" in str(err.value)


def test_r4_route_skipping_a_later_write():
    src, dst = MultiSource(name="ms"), MultiDest(name="md")

    @schedule
    def two_loads(s, d):
        with domain_loop(4):
            s.tma_load()
            a1 = s.tma_load(slot=1)
            d.store_one(a1)
    with pytest.warns(Warning):
        sched = two_loads(src, dst)
    first, _, store = sched.steps
    sched.routes = (Route(first, src.a, store, "a"),)
    with pytest.raises(VerificationError) as err:
        manager([Task("t", [src], [dst], 0, 1, sched)], {dst: [src]})
    text = str(err.value)
    assert err.value.check == "R4"
    assert "extra edge #0 ms.tma_load [Loop call 0].a -> #2 md.store_one [Loop call 0].a" in text
    assert "missing edge #1 ms.tma_load [Loop call 1].a -> #2" in text


# -- H1 / skip_validation / C0 --------------------------------------------------------------------------
def test_h1_head_and_loop_producer_warns(capsys):
    src, dst = MultiSource(name="ms"), MultiDest(name="md")

    @schedule
    def overlap(s, d):
        d.store_one(s.tma_load())
        with domain_loop(4):
            d.store_one(s.tma_load())
    task = Task("t", [src], [dst], 0, 1, overlap(src, dst))
    with pytest.warns(VerificationWarning, match="H1") as record:
        manager([task], {dst: [src]}, verbose=True)
    text = str(record[0].message)
    assert "task 't'" in text and "'md'" in text and "#1" in text and "#3" in text
    assert "[head-loop-overlap] WARNING" in capsys.readouterr().out


def test_skip_validation_demotes_every_error_to_a_warning():
    src, out = MultiSource(name="ms"), MultiDest(name="md")

    @schedule
    def wrong(s, d):
        with domain_loop(4):
            d.store_one(s.tma_load())
    task = Task("t", [], [src, out], 0, 1, wrong(src, out))   # ms should be in src_resources
    with pytest.warns(VerificationWarning) as record:
        m = manager([task], {out: [src]}, skip_validation=True)
    checks = {str(r.message).split("]")[0] + "]" for r in record
              if issubclass(r.category, VerificationWarning)}
    assert checks == {"[R0]", "[G2]", "[R1]"}
    assert {f.check for f in m.findings} == {"R0", "G2", "R1"}
    with pytest.raises(VerificationError) as err:
        manager([task], {out: [src]})
    assert err.value.check == "R0"


class BlockingSimulator(ScheduleSimulator):
    def blocked(self, task, entry):
        return entry.step.stage is ScheduleStage.ProducerWork


def test_c0_blocked_walk_names_task_resource_and_step():
    task, src, dst = copy_task()

    class M(TaskManager):
        simulator_class = BlockingSimulator
    with pytest.raises(VerificationError) as err:
        M([task], {dst: [src]}, verbose=False)
    assert err.value.check == "C0"
    assert "task 'copy'" in str(err.value) and "dst ProducerWork 0" in str(err.value)
    assert "is blocked!" in str(err.value)


# -- registers -------------------------------------------------------------------------------------------
def reg_tasks(regs_a, regs_b, b_warps=8):
    a, s1, d1 = copy_task("mma", 0, 4, num_registers=regs_a)
    b, s2, d2 = copy_task("epi", 4, b_warps, num_registers=regs_b,
                          resources=(GmemSource(name="s2", src=None),
                                     GmemDest(name="d2", dst=None)))
    return [a, b], {d1: [s1], d2: [s2]}


def test_register_report_for_12_warps():
    tasks, graph = reg_tasks(232, 136)
    m = manager(tasks, graph)
    assert m.default_registers_per_thread == 168
    assert m.register_request(tasks[0]) == ("inc", 232)
    assert m.register_request(tasks[1]) == ("dec", 136)
    assert m.register_report() == "\n".join([
        "[registers] default 168 per thread (12 warps, rounded to 12; 65536 per SM)",
        "  mma[0:4)   4 x (168 - 232) = -256  setmaxnreg.inc 232",
        "  epi[4:12)  8 x (168 - 136) = 256  setmaxnreg.dec 136",
        "  total 64512 / 65536 registers, 4 free 8-register blocks (8 x 32 threads)",
        "  net budget 0",
    ])


def test_w1_mixed_requests_in_one_warpgroup():
    a, s1, d1 = copy_task("a", 0, 2, num_registers=232)
    b, s2, d2 = copy_task("b", 2, 2, resources=(GmemSource(name="s2", src=None),
                                                GmemDest(name="d2", dst=None)))
    with pytest.raises(VerificationError) as err:
        manager([a, b], {d1: [s1], d2: [s2]})
    assert err.value.check == "W1" and "a[0:2) num_registers=232" in str(err.value)
    assert "b[2:4) num_registers=None" in str(err.value)


def test_w1_uncovered_warps_suggest_padding_task():
    a, s1, d1 = copy_task("a", 0, 2, num_registers=232)
    with pytest.raises(VerificationError) as err:
        manager([a], {d1: [s1]})
    assert err.value.check == "W1" and "warp_idx=2, num_warps=2" in str(err.value)


def test_w2_negative_budget():
    tasks, graph = reg_tasks(256, None)
    with pytest.raises(VerificationError) as err:
        manager(tasks, graph)
    assert err.value.check == "W2" and "-352" in str(err.value)


# -- schedule table ---------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class Ring(MemoryResource):
    value: TaskLocalVariable = TaskLocalVariable.uninitialized()

    def __post_init__(self):
        self.value = TaskLocalVariable(Int32)

    @producer_work
    def put(self, stage_info, item):
        pass

    @consumer_work(returns="value")
    def get(self, stage_info):
        return 0

    @consumer_work(work_attrs=WorkAttr.AUXILIARY)
    def peek(self, stage_info):
        pass


def producer_consumer():
    src, dst = copy_resources()
    ring = Ring(name="ring", pipeline_config=FakePipelineConfig())
    pdl = Barrier(name="pdl")

    @schedule
    def load(p, s, r):
        p.wait_griddep()
        with domain_loop(0, 3) as d:
            r.acquire()
            r.put(s.load())
            r.commit()

    @schedule
    def store(r, d):
        with domain_loop(0, 3) as dl:
            r.wait()
            d.store(r.get())
            with dl.last_iter():
                r.peek()
            r.release()

    tasks = [Task("load", [pdl, src], [ring], 0, 1, load(pdl, src, ring)),
             Task("store", [ring], [dst], 1, 4, store(ring, dst))]
    return tasks, {ring: [src], dst: [ring], src: [pdl]}


def test_schedule_table_snapshot_two_tasks():
    # the consumer waits (empty cells) until the producer's first commit (credit walk, C0)
    tasks, graph = producer_consumer()
    m = manager(tasks, graph)
    assert m.findings == []
    assert m.schedule_table() == "\n".join([
        "===================== Full (Head + Loop + Tail) ======================",
        "step | load[0:1)                      | store[1:5)",
        "----------------------------------------------------------------------",
        "   0 | pdl        ConsAux   H   0     |",
        "   1 | ring       ProdAcq<-     0     |",
        "   2 | src        ConsWrk       0     |",
        "   3 | ring       ProdWrk       0     |",
        "   4 | ring       ProdCmt->     0     | ring       ->ConsWai     0",
        "   5 | ring       ProdAcq<-     0     | ring       ConsWrk       0",
        "   6 | src        ConsWrk       0     | dst        ProdWrk       0",
        "   7 | ring       ProdWrk       0     | ring       <-ConsRel     0",
        "   8 | ring       ProdCmt->     0     | ring       ->ConsWai     0",
        "   9 | ring       ProdAcq<-     0     | ring       ConsWrk       0",
        "  10 | src        ConsWrk       0     | dst        ProdWrk       0",
        "  11 | ring       ProdWrk       0     | ring       <-ConsRel     0",
        "  12 | ring       ProdCmt->     0     | ring       ->ConsWai     0",
        "  13 |                                | ring       ConsWrk       0",
        "  14 |                                | dst        ProdWrk       0",
        "  15 |                                | ring       ConsAux   L   0",
        "  16 |                                | ring       <-ConsRel     0",
        "================== end of Full (Head + Loop + Tail) ==================",
        "phase: H head, F first iter, L last iter, E every(n), W when_true/when_false, "
        "T tail, blank loop; number: the call's index among the section's calls of that resource "
        "operation (0 first; C0's 'ConsumerWait 0'); empty cell: task blocked or done",
    ])


# -- lowering hand-off --------------------------------------------------------------------------------------
def test_setup_and_run_delegate_to_lowering(monkeypatch):
    calls = []
    fake = types.ModuleType("tsjit.ts.lowering")
    fake.setup = lambda m: calls.append(("setup", m)) or "smem"
    fake.run = lambda m, lowered: calls.append(("run", m, lowered))
    monkeypatch.setitem(sys.modules, "tsjit.ts.lowering", fake)
    monkeypatch.setattr(tsjit.ts, "lowering", fake, raising=False)
    task, src, dst = copy_task()
    m = manager([task], {dst: [src]})
    with pytest.raises(RuntimeError, match="setup_resources_and_tasks"):
        m.run()
    assert m.setup_resources_and_tasks() is None      # what setup placed goes to run(), not to the user
    m.run()
    assert calls == [("setup", m), ("run", m, "smem")]
    with pytest.raises(RuntimeError, match="already called"):
        m.setup_resources_and_tasks()
    with pytest.raises(RuntimeError, match=r"TaskManager.run\(\) was already called; call it once per kernel"):
        m.run()                                      # a second emission would restart the phases: a hang
    assert calls == [("setup", m), ("run", m, "smem")]


def test_importing_the_model_loads_no_check_module():
    """A TS program's module imports ``tsjit.ts`` in every process, also one whose kernels all come from
    the disk cache: the checks (tsjit.ts.verify, a third of the import) load with the first TaskManager."""
    import subprocess
    import sys
    code = ("import sys\nfrom tsjit import ts\nfrom tsjit.ts import task_manager\n"
            "print(sorted(m for m in sys.modules if m.startswith('tsjit.ts.verify.')))\n"
            "print(len(task_manager.CHECKS) > 20, 'tsjit.ts.verify.exhaustive' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    loaded, after = out.stdout.splitlines()
    assert eval(loaded) == ["tsjit.ts.verify.findings", "tsjit.ts.verify.pipelines", "tsjit.ts.verify.registers"]
    assert after == "True True"


VERBOSE_COMPILE = """
import sys
import numpy as np
import tsjit
from tsjit import ts
from tsjit.examples.ts_copy import GmemDest, GmemSource

@tsjit.kernel
def copy_verbose(src, dst, num_entries):
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 32):
            d.store(s.load())

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]})          # verbose=True: the reference's default
    manager.setup_resources_and_tasks()
    manager.run()

x = np.zeros(64, np.float32)
for count in (64, 32):            # two compiles: the second reports after stdout is already gone
    sys.stderr.write(f"compiled {tsjit.compile(copy_verbose, x, x, count).name}\\n")
"""


def test_verbose_report_into_a_closed_pipe_does_not_stop_the_compile(tmp_path):
    """``python script.py | head``: once the reader is gone, the verbose report's BrokenPipeError is harmless
    (newcomer 7 #18): both compiles finish, and the process exits cleanly (no error at its final flush)."""
    import os
    import subprocess
    script = tmp_path / "verbose_compile.py"
    script.write_text(VERBOSE_COMPILE)
    read, write = os.pipe()
    os.close(read)                        # the reader went away before the first line
    try:
        result = subprocess.run([sys.executable, str(script)], stdout=write, stderr=subprocess.PIPE, text=True,
                                timeout=120, env=dict(os.environ, TSJIT_CACHE_DIR=str(tmp_path / "cache")))
    finally:
        os.close(write)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("compiled copy_verbose") == 2 and "BrokenPipe" not in result.stderr


def test_verbose_report_is_printed(capsys):
    from tsjit.ts.verbose import report
    report("schedule table")
    assert capsys.readouterr().out == "schedule table\n"
