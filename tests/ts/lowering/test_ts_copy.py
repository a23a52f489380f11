"""Tutorial 1 lowered through the JIT (CPU): the TS copy compiles, assembles, and its loop is the
hand-written loop's loop (same PTX instruction count, within a few instructions)."""
import inspect
import re

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.examples import ts_copy


def _loop_instruction_count(ptx: str) -> int:
    """Instructions between the first loop label and the backward branch to it."""
    body = ptx[ptx.index(".entry"):]
    labels = re.findall(r"^(\$L__BB\d+_\d+):", body, flags=re.M)
    for label in labels:
        start = body.index(label + ":")
        branch = body.find(f"bra \t{label};", start)
        if branch == -1:
            branch = body.find(f"bra {label};", start)
        if branch != -1:
            lines = body[start:branch].splitlines()[1:]
            return sum(1 for ln in lines if ln.strip() and not ln.strip().startswith(("$", "//", "{", "}")))
    raise AssertionError("no loop found in PTX")


@pytest.fixture(scope="module")
def compiled_pair():
    i16 = np.zeros(1024, np.int16)
    return (tsjit.compile(ts_copy.copy_ts, i16, i16, 1024, 4),
            tsjit.compile(ts_copy.copy_plain, i16, i16, 1024, 4))


def test_ts_copy_assembles_without_spills(compiled_pair):
    ts_kernel, _ = compiled_pair
    assert ts_kernel.cubin[:4] == b"\x7fELF"
    assert ts_kernel.metadata["spill_stores_bytes"] == 0


def test_ts_copy_loop_matches_plain_kernel_loop(compiled_pair):
    ts_kernel, plain = compiled_pair
    ts_count, plain_count = _loop_instruction_count(ts_kernel.ptx), _loop_instruction_count(plain.ptx)
    assert abs(ts_count - plain_count) <= 3, (ts_count, plain_count)


def test_ts_copy_has_one_warp_range_branch_and_no_alloca(compiled_pair):
    ts_kernel, _ = compiled_pair
    assert "alloca" not in ts_kernel.llir
    assert ts_kernel.llir.count("task.copy:") == 1


def test_token_carried_across_iterations_is_one_phi(compiled_pair):
    ts_kernel, _ = compiled_pair
    header = ts_kernel.llir[ts_kernel.llir.index("domain.header:"):]
    header = header[:header.index("\n\n") if "\n\n" in header else len(header)]
    phis = [ln for ln in header.splitlines() if "phi" in ln and "i16" in ln]
    assert len(phis) == 1


@pytest.mark.parametrize("warps", [1, 2, 4, 8])
def test_ts_copy_compiles_for_several_warp_counts(warps):
    i16 = np.zeros(64, np.int16)
    c = tsjit.compile(ts_copy.copy_ts, i16, i16, 64, warps)
    # the task's warp-range guard compares the warp index with warp_end = warps
    assert re.search(rf'icmp slt i32 %"[^"]+", {warps}\n', c.llir), c.llir


@tsjit.kernel
def _copy_with_runtime_if_in_schedule(src, dst, num_entries):
    source = ts_copy.GmemSource(name="source", src=src)
    dest = ts_copy.GmemDest(name="dest", dst=dst)
    cta = tsjit.block_idx().x

    @ts.schedule
    def copy_schedule(s: ts_copy.GmemSource, d: ts_copy.GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 32):
            item = s.load()
            if cta == 0:
                d.store(item)

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)
    manager.setup_resources_and_tasks()
    manager.run()


def test_runtime_if_in_a_schedule_points_at_the_if_and_names_when_true():
    """Newcomer report 6, item 5: the error used to point at the Task line and advise a kernel `if`."""
    i16 = np.zeros(64, np.int16)
    with pytest.raises(tsjit.CompilationError) as info:
        tsjit.compile(_copy_with_runtime_if_in_schedule, i16, i16, 64)
    error = info.value
    source_lines, first = inspect.getsourcelines(_copy_with_runtime_if_in_schedule.fn)
    if_line = first + next(i for i, text in enumerate(source_lines) if "if cta == 0:" in text)
    assert error.location.line == if_line and error.location.col == source_lines[if_line - first].index("cta")
    message = str(error)
    assert "@schedule copy_schedule" in message and "when_true(token)" in message and "const_expr" in message
    assert "kernel `if`" not in message
