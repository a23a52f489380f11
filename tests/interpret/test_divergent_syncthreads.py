"""A ``syncthreads()`` that not every thread of the CTA reaches is an InterpretError without any
``TSJIT_INTERPRET_CHECK`` (PTX ISA barrier{.cta}: an aligned barrier in conditionally executed code is
undefined unless every thread evaluates the condition identically): inside ``if i < 32:`` (warp 1 never
arrives and exits), or two different ``syncthreads()`` lines meeting in one phase.  The corrected twin,
the barrier after the ``if``, reverses the array."""
import inspect

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError

THREADS = 64


@tsjit.kernel
def reverse(x, out, MODE: tsjit.Constexpr[str]):
    s = tsjit.shared_array(tsjit.Float32, THREADS)
    i = tsjit.thread_idx().x
    s[i] = x[i] * 2.0
    if tsjit.const_expr(MODE == "in_if"):
        if i < 32:                      # warp 1 never reaches the barrier
            tsjit.syncthreads()
    elif tsjit.const_expr(MODE == "two_lines"):
        if i < 32:
            tsjit.syncthreads()
        else:
            tsjit.syncthreads()         # another barrier instruction in the same phase
    else:
        if i < 32:
            s[i] = s[i] + 0.0
        tsjit.syncthreads()             # after the `if`: every thread of the CTA
    out[i] = s[THREADS - 1 - i]


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(reverse.fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _run(mode):
    x = np.random.default_rng().standard_normal(THREADS).astype(np.float32)
    out = np.full(THREADS, np.nan, np.float32)
    reverse.interpret[(1,), (THREADS,)](x, out, mode)
    return x, out


def test_syncthreads_in_a_thread_divergent_if_is_reported_without_checks(monkeypatch):
    monkeypatch.delenv("TSJIT_INTERPRET_CHECK", raising=False)
    with pytest.raises(InterpretError) as info:
        _run("in_if")
    text = str(info.value)
    assert f"test_divergent_syncthreads.py:{_line('# warp 1 never reaches') + 1}" in text
    assert "only 32 of the 64 threads of CTA (0, 0, 0)" in text and "warp(s) 1 exited" in text
    assert "Move the syncthreads() out of the `if`" in text


def test_two_syncthreads_lines_in_one_phase_are_reported():
    with pytest.raises(InterpretError) as info:
        _run("two_lines")
    text = str(info.value)
    assert f"test_divergent_syncthreads.py:{_line('# another barrier instruction')}" in text
    assert f"test_divergent_syncthreads.py:{_line('# another barrier instruction') - 2}" in text
    assert "different syncthreads" in text and "named_barrier_sync" in text


def test_syncthreads_after_the_if_reverses_the_array():
    x, out = _run("after_if")
    np.testing.assert_array_equal(out.astype(np.float64), 2.0 * x[::-1].astype(np.float64))
