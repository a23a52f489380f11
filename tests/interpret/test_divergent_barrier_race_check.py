"""Newcomer 8 item 7: with ``TSJIT_INTERPRET_CHECK=race``, a ``syncthreads()`` inside a divergent
``if t >= off:`` (the newcomer's Hillis-Steele scan) was reported as a shared-memory race — thread 0,
which skips the barrier, runs ahead and writes what thread 1 still reads — instead of the
divergent-barrier error that the run without the check gives.  The race checker now holds the race
it finds and lets the launch run on; the divergent-barrier error, when it comes, is the report (its
caret on the syncthreads line, the held race appended as a consequence).  A real race (the in-place
scan, a barrier everywhere) is still reported as a race, and the correct double-buffered scan is
exact against a float64 cumulative sum with the check on."""
import inspect

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError

B = 64


@tsjit.kernel
def scan(x, out, n, MODE: tsjit.Constexpr[str]):
    buf = tsjit.shared_array(tsjit.Float32, (2, B))
    t = tsjit.thread_idx().x
    g = tsjit.block_idx().x * B + t
    buf[0, t] = x[g] if g < n else 0.0
    tsjit.syncthreads()
    src = 0
    off = 1
    while off < B:
        if tsjit.const_expr(MODE == "inplace"):
            v = buf[0, t]
            if t >= off:
                v += buf[0, t - off]     # in place: other threads overwrite what this reads
            buf[0, t] = v
        else:
            v = buf[src, t]
            if t >= off:
                v += buf[src, t - off]
            buf[1 - src, t] = v
            src = 1 - src
        if tsjit.const_expr(MODE == "divsync"):
            if t >= off:
                tsjit.syncthreads()      # divergent: thread 0 never arrives
        else:
            tsjit.syncthreads()
        off *= 2
    if g < n:
        out[g] = buf[src, t]


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(scan.fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _run(mode):
    n = 200
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    scan.interpret[(-(-n // B),), (B,)](x, out, n, mode)
    return x, out


@pytest.mark.parametrize("check", ["", "race", "race,uninit"])
def test_divergent_syncthreads_is_reported_first(monkeypatch, check):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", check)
    with pytest.raises(InterpretError) as info:
        _run("divsync")
    text = str(info.value)
    head, excerpt = text.split("\n    ", 1)[0], text.split("\n    ", 1)[1]
    sync_line = _line("# divergent: thread 0")
    assert head.startswith("syncthreads (bar.sync 0") and f"test_divergent_barrier_race_check.py:{sync_line}" in head
    assert "only 63 of the 64 threads" in head and "Move the syncthreads() out of the `if`" in text
    assert excerpt.startswith("tsjit.syncthreads()")
    if check:
        assert "TSJIT_INTERPRET_CHECK=race also saw a race" in text and "follows from the divergent barrier" in text
    else:
        assert "also saw a race" not in text


def test_a_real_race_is_still_a_race(monkeypatch):
    monkeypatch.delenv("TSJIT_INTERPRET_CHECK", raising=False)
    _run("inplace")   # unchecked first: its translation (fast load paths) must not serve the checked run
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    with pytest.raises(InterpretError) as info:
        _run("inplace")
    text = str(info.value)
    assert text.startswith("shared-memory race") and "follows from the divergent barrier" not in text
    assert f":{_line('# in place')}" in text


@pytest.mark.parametrize("check", ["", "race"])
def test_double_buffered_scan_is_exact(monkeypatch, check):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", check)
    x, out = _run("ok")
    pad = np.zeros(-(-len(x) // B) * B)
    pad[:len(x)] = x
    ref = np.cumsum(pad.reshape(-1, B), axis=1).reshape(-1)[:len(x)]
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-4)
