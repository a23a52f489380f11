"""Deadlocks end as an InterpretError naming every blocked thread group (issue 13).

The GPU hang programs of issue 9 (tests/gpu/hang_programs.py) run under the interpreter: each must
end within seconds with a report that names the CTA, the warps, the task, the resource, the stage,
the barrier, the phase and the source line."""
import os
import sys
import time

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu"))
import hang_programs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")


def _deadlock(launch) -> str:
    start = time.perf_counter()
    with pytest.raises(InterpretError) as info:
        launch()
    assert time.perf_counter() - start < 30
    text = str(info.value)
    assert text.startswith("deadlock"), text
    return text


def test_missing_commit_reports_the_consumer_waiting_on_the_full_barrier(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    n = 4096
    x = tsjit.to_device(np.random.default_rng().standard_normal(n).astype(np.float32))
    y = tsjit.empty((n,), tsjit.Float32)
    text = _deadlock(lambda: hang_programs.missing_commit[(1,), (64,)](x, y, n, hang_programs.CHUNK))
    assert "mbarrier chunks.full[0]" in text
    assert "resource 'chunks'" in text and "stage 0" in text
    assert "task 'consume" in text or "task '" in text
    assert "parity 0" in text
    assert "interpret_bugs.py:" in text      # the schedule's c.wait() line (see the test below)


def test_named_barrier_missing_a_warp_reports_the_barrier_and_its_count(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    out = tsjit.empty((64,), tsjit.Float32)
    text = _deadlock(lambda: hang_programs.named_barrier_short[(2,), (64,)](out))
    assert "barrier 1 (bar.sync)" in text and "32 of 64 arrived" in text
    assert "warp 0" in text
    assert "hang_programs.py:" in text


def test_plain_missing_arrive_deadlock_lists_the_cta_and_line():
    @tsjit.kernel
    def waits_forever(out):
        bar = tsjit.shared_array(tsjit.Int64, 1)
        if tsjit.thread_idx().x == 0:
            tsjit.mbarrier_init(tsjit.address_of(bar, 0), 2)
        tsjit.syncthreads()
        if tsjit.thread_idx().x == 0:
            tsjit.mbarrier_arrive(tsjit.address_of(bar, 0))
        tsjit.mbarrier_wait(tsjit.address_of(bar, 0), 0)
        out[tsjit.thread_idx().x] = 1.0

    text = _deadlock(lambda: waits_forever.interpret[(1,), (32,)](np.zeros(32, np.float32)))
    assert "CTA (0, 0, 0)" in text and "warp 0" in text and "1 of 2 arrivals" in text
    assert "test_deadlock.py:" in text


def test_a_blocked_pipeline_wait_is_reported_at_the_schedule_line(monkeypatch):
    """The consumer blocked in ``c.wait()`` is reported at that schedule line (tutorial 14), not at
    the kernel's line that runs the TaskManager or at the last work body traced."""
    import inspect

    from tsjit.examples import interpret_bugs
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    source, first = inspect.getsourcelines(interpret_bugs.build_ring_scale)
    line = {text.strip(): first + i for i, text in enumerate(source)}
    n = 4096
    x = tsjit.to_device(np.random.default_rng().standard_normal(n).astype(np.float32))
    y = tsjit.empty((n,), tsjit.Float32)
    text = _deadlock(lambda: hang_programs.missing_commit[(1,), (64,)](x, y, n, hang_programs.CHUNK))
    assert f"at {interpret_bugs.__file__}:{line['c.wait()']}" in text, text


@tsjit.kernel
def loop_without_an_increment(x, n):
    i = tsjit.thread_idx().x
    while i < n:
        x[i] = 2.0


def test_ctrl_c_in_a_loop_that_never_ends_names_the_thread_and_the_loop_line():
    """An endless loop is no deadlock (a thread keeps running): the launch runs until interrupted, and the
    KeyboardInterrupt then says which thread was running which kernel line."""
    signal = pytest.importorskip("signal")
    if not hasattr(signal, "setitimer"):
        pytest.skip("needs signal.setitimer (POSIX)")
    x = np.zeros(64, np.float32)
    loop_without_an_increment.interpret[(1,), (32,)](x, 0)        # compiled and translated before the timer

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGVTALRM, interrupt)       # CPU time: leaves pytest-timeout's SIGALRM alone
    try:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0.5)
        with pytest.raises(KeyboardInterrupt) as info:
            loop_without_an_increment.interpret[(1,), (32,)](x, 64)
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
    message = str(info.value)
    first = loop_without_an_increment.fn.__code__.co_firstlineno
    lines = {first + 3: "while i < n:", first + 4: "x[i] = 2.0"}         # the interrupt lands in either block
    found = [n for n in lines if f"{os.path.abspath(__file__)}:{n}" in message]
    assert "CTA (0, 0, 0) thread" in message and len(found) == 1, message
    assert "a loop that never ends" in message and lines[found[0]] in message, message
