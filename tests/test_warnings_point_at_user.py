"""Warnings from compiling a kernel name the user's source line, never a file inside tsjit
(issue 10 §3): schedule warnings point at the schedule step, TaskManager warnings at the kernel line
that builds the TaskManager."""
import os
import warnings

import numpy as np
import pytest

import tsjit
from tsjit import ts
from tsjit.examples.ts_copy import GmemDest, GmemSource

THIS_FILE = os.path.abspath(__file__)
TSJIT_DIR = os.path.dirname(os.path.abspath(tsjit.__file__))


def _line_of(text: str) -> int:
    with open(THIS_FILE) as handle:
        return next(number for number, line in enumerate(handle, 1) if text in line and "_line_of" not in line)


@tsjit.kernel
def unread_token(src, dst, num_entries, SKIP: tsjit.Constexpr[bool]):
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 32):
            item = s.load()
            d.store(item)
            s.load()  # its token is never read: S15

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    manager = ts.TaskManager([task], {source: [dest]} if SKIP else {dest: [source]}, verbose=False, skip_validation=SKIP)
    manager.setup_resources_and_tasks()
    manager.run()


def _compile_warnings(skip: bool):
    x = np.zeros(64, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tsjit.compile(unread_token, x, x, 64, skip)
    return caught


def test_schedule_warning_is_attributed_to_the_schedule_step():
    caught = [w for w in _compile_warnings(False) if issubclass(w.category, ts.ScheduleWarning)]
    assert caught, "the unread token warns (S15)"
    assert all(w.filename == THIS_FILE for w in caught)
    assert [w.lineno for w in caught] == [_line_of("s.load()  # its token")]


def test_demoted_verification_finding_is_attributed_to_the_task_manager_line():
    caught = [w for w in _compile_warnings(True) if issubclass(w.category, ts.VerificationWarning)]
    assert caught, "the reversed dependency edge is a warning under skip_validation"
    assert {(w.filename, w.lineno) for w in caught} == {(THIS_FILE, _line_of("manager = ts.TaskManager("))}
    assert not any(w.filename.startswith(TSJIT_DIR) for w in caught)


@tsjit.kernel
def arithmetic_on_a_token(src, dst, num_entries):
    source = GmemSource(name="source", src=src)
    dest = GmemDest(name="dest", dst=dst)

    @ts.schedule
    def copy_schedule(s: GmemSource, d: GmemDest):
        with ts.domain_loop(tsjit.thread_idx().x, num_entries, 32):
            item = s.load()
            d.store(item + 1.0)

    task = ts.Task("copy", [source], [dest], warp_idx=0, num_warps=1, schedule=copy_schedule(source, dest))
    ts.TaskManager([task], {dest: [source]}, verbose=False)


def test_arithmetic_on_a_schedule_token_says_to_compute_in_a_work_body():
    x = np.zeros(64, np.float32)
    with pytest.raises(tsjit.TsjitError) as err:
        tsjit.compile(arithmetic_on_a_token, x, x, 64)
    text = str(err.value)
    assert "'source.item'" in text and "work body" in text and "DataFlowToken" not in text
    assert f"{os.path.basename(THIS_FILE)}:{_line_of('d.store(item + 1.0)')}" in text


def test_a_warning_from_python_dash_c_code_is_shown_not_an_import_error():
    """``python -c``: __main__'s loader (BuiltinImporter) cannot give the source line a warning shows;
    tsjit.errors.warn shows the warning without it instead of failing with ImportError."""
    import subprocess
    import sys
    code = ("import warnings; from tsjit.errors import warn\n"
            "warn('demoted finding [Q1]', UserWarning)\nprint('done')")
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(TSJIT_DIR)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done" and "UserWarning: demoted finding [Q1]" in out.stderr


@tsjit.kernel
def doubles(x):
    x[tsjit.thread_idx().x] = 2.0


def test_an_unwritable_dump_dir_warns_at_the_users_compile_line(tmp_path, monkeypatch):
    from tsjit.runtime import dumps
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    monkeypatch.setenv("TSJIT_DUMP_DIR", str(blocker / "dumps"))
    monkeypatch.setattr(dumps, "_dump_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tsjit.compile(doubles, np.zeros(32, np.float32), target="sm_90a")   # the line the warning names
    found = [w for w in caught if "TSJIT_DUMP_DIR" in str(w.message)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert (found[0].filename, found[0].lineno) == (THIS_FILE, _line_of("tsjit.compile(doubles, np.zeros(32"))
