"""A tsjit error prints with the user's frames only, in plain python, IPython and pytest (issue 10 §3):
the traceback shows the user's call line and the message, and no file inside the tsjit package."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tsjit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TSJIT_DIR = os.path.dirname(os.path.abspath(tsjit.__file__))

USER_PROGRAM = """
import numpy as np, tsjit

@tsjit.kernel
def broken(x):
    i = tsjit.thread_idx().x
    x[i] = x[i] + undefined_name

def test_compile_error():
    tsjit.compile(broken, np.zeros(32, np.float32))

def test_usage_error():
    tsjit.compile(len)

if __name__ == "__main__":
    import sys
    test_usage_error() if sys.argv[-1] == "usage" else test_compile_error()
"""


def _run(args, tmp_path, **kw):
    script = tmp_path / "test_user_program.py"
    script.write_text(textwrap.dedent(USER_PROGRAM))
    env = dict(os.environ, PYTHONPATH=ROOT, TSJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, *args(str(script))], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180, **kw)
    return done.returncode, done.stdout + done.stderr


def _assert_user_frames_only(output, script_line):
    assert "undefined_name` is not defined" in output or "needs a @tsjit.kernel" in output, output
    assert script_line in output, output
    assert TSJIT_DIR not in output, output


@pytest.mark.parametrize("which, line", [("compile", "tsjit.compile(broken, np.zeros(32, np.float32))"),
                                         ("usage", "tsjit.compile(len)")])
def test_plain_python_traceback_has_no_tsjit_frames(tmp_path, which, line):
    code, output = _run(lambda script: [script, which], tmp_path)
    assert code == 1 and "Traceback (most recent call last)" in output
    _assert_user_frames_only(output, line)


def test_ipython_traceback_has_no_tsjit_frames(tmp_path):
    pytest.importorskip("IPython")
    code, output = _run(lambda script: ["-m", "IPython", "--colors=nocolor", "--no-banner", "-c",
                                        f"%run {script} compile"], tmp_path)
    _assert_user_frames_only(output, "tsjit.compile(broken, np.zeros(32, np.float32))")
    assert "IPython/core" not in output, output


def test_pytest_failure_shows_no_tsjit_frames(tmp_path):
    code, output = _run(lambda script: ["-m", "pytest", "-q", "-p", "no:cacheprovider", script], tmp_path)
    assert code == 1 and "2 failed" in output, output
    _assert_user_frames_only(output, "tsjit.compile(broken, np.zeros(32, np.float32))")


LAUNCH_PROGRAM = """
import numpy as np, tsjit

@tsjit.kernel
def add(x, n):
    i = tsjit.thread_idx().x
    x[i] = x[i] + n

def test_launch_error():
    x = tsjit.to_device(np.zeros(32, np.float32))
    add[(1,), (32,)](x, 1.0)              # compiles; later launches take the generated warm path
    add[(1,), (32,)](x, [1, 2])

if __name__ == "__main__":
    test_launch_error()
"""


@pytest.mark.parametrize("runner", ["python", "pytest"])
def test_launch_error_traceback_has_no_generated_warm_launch_frame(tmp_path, runner, monkeypatch):
    """A launch error raised through the warm launch (code tsjit generates per kernel) shows the user's
    launch line only: no ``<tsjit warm launch ...>`` frame, no tsjit file (run on the CPU interpreter)."""
    script = tmp_path / "test_user_launch.py"
    script.write_text(textwrap.dedent(LAUNCH_PROGRAM))
    env = dict(os.environ, PYTHONPATH=ROOT, TSJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1",
               TSJIT_INTERPRET="1")
    args = [str(script)] if runner == "python" else ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    done = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "argument 'n'" in output, output
    assert "add[(1,), (32,)](x, [1, 2])" in output, output
    assert "<tsjit" not in output and TSJIT_DIR not in output, output


def test_traceback_object_stays_whole_for_debuggers():
    import numpy as np
    namespace = {}
    exec(compile(textwrap.dedent(USER_PROGRAM), os.path.join(ROOT, "tests", "_inline_user_program.py"), "exec"),
         namespace)
    with pytest.raises(tsjit.TsjitError) as info:
        namespace["test_usage_error"]()
    assert any(entry.path and str(entry.path).startswith(TSJIT_DIR) for entry in info.traceback)
    del np


def _refuse(value):
    raise tsjit.errors.ScheduleError(f"refused {value}")


@tsjit.kernel
def _refuses_in_a_list_display(x):
    values = [_refuse(1)]
    x[0] = 1.0


def test_traceback_frame_of_a_kernel_line_is_named_after_the_kernel():
    """A kernel line evaluated as Python (a list display) shows `in <kernel name>`, not `in <module>`
    (newcomer report 6, item 12; a launch keeps the frames, tsjit.compile drops them)."""
    import traceback
    with pytest.raises(tsjit.errors.ScheduleError) as info:
        _refuses_in_a_list_display.interpret[(1,), (32,)](np.zeros(4, np.float32))
    kernel_file = os.path.abspath(__file__)
    names = [frame.f_code.co_name for frame, _ in traceback.walk_tb(info.value.__traceback__)
             if frame.f_code.co_filename == kernel_file]
    assert "_refuses_in_a_list_display" in names and "<module>" not in names
