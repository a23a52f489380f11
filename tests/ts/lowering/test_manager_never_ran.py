"""A TaskManager built while a kernel compiles whose run() never comes: a VerificationWarning at
the line that built it (a warning, not an error: building one only to print/verify it is legal)."""
import inspect
import warnings

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.examples import ts_copy
from tsjit.examples.ts_copy import GmemDest, GmemSource

X = np.zeros(1024, np.float32)


def _manager(src, dst, num_entries, start):
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(start, num_entries, 32):
            d.store(s.load())

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    return task, source, dest


@tsjit.kernel
def forgets_run(src, dst, num_entries):
    task, source, dest = _manager(src, dst, num_entries, tsjit.thread_idx().x)
    manager = ts.TaskManager([task], {dest: [source]}, verbose=False)  # the line of the warning
    manager.setup_resources_and_tasks()


@tsjit.kernel
def forgets_setup_and_run(src, dst, num_entries):
    task, source, dest = _manager(src, dst, num_entries, tsjit.thread_idx().x)
    ts.TaskManager([task], {dest: [source]}, verbose=False)


def _line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("kernel, says", [
    (forgets_run, "Call manager.run() after building it"),
    (forgets_setup_and_run, "Call manager.setup_resources_and_tasks() (it fences the barrier init and syncs the CTA), "
                            "then manager.run()"),
])
def test_a_manager_that_never_ran_warns_at_its_construction(kernel, says):
    with pytest.warns(ts.VerificationWarning, match="manager.run\\(\\) was never called") as record:
        compiled = tsjit.compile(kernel, X, X, 1024)
    [warning] = [w for w in record if issubclass(w.category, ts.VerificationWarning)]
    assert warning.filename == __file__
    assert warning.lineno == _line_of(kernel, "ts.TaskManager(")
    assert says in str(warning.message) and "<TaskManager copy[0:1)>" in str(warning.message)
    assert compiled.cubin


def test_a_manager_that_ran_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ts.VerificationWarning)
        tsjit.compile(ts_copy.copy_ts, X, X, 1024, 4)


def test_a_manager_built_outside_a_compile_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ts.VerificationWarning)
        task, source, dest = _manager(tsjit.spec(16, tsjit.Float32), tsjit.spec(16, tsjit.Float32), 16, 0)
        ts.TaskManager([task], {dest: [source]}, verbose=False)
