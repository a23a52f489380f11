"""Newcomer 8 item 5: shared memory read after ``syncthreads()`` while the ``cp.async`` that fills it
was never retired (no ``tsjit.cp_async_wait_group(0)`` after the commit).  On the GPU the read sees
stale or partial data.  The interpreter keeps every cp.async's destination words in flight until the
issuing thread's wait group retires them; a load of them is an InterpretError naming the cp.async's
line and the read's, and saying that the syncthreads() already there does not wait for the copies —
without any TSJIT_INTERPRET_CHECK, and the same report with ``race`` (not a generic race that
suggests adding a syncthreads).  The twin with the wait is exact against a float64 reference."""
import inspect

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError

N = 256


@tsjit.kernel
def stage_copy(src, out, n, WAIT: tsjit.Constexpr[bool]):
    buf = tsjit.shared_array(tsjit.Float32, (2, 128), align=16)
    t = tsjit.thread_idx().x
    base = tsjit.block_idx().x * 128
    e = t * 4
    tsjit.cp_async(tsjit.address_of(buf, 1, e), tsjit.assume_aligned(tsjit.address_of(src, base + e), 16), 16)
    tsjit.cp_async_commit_group()
    if tsjit.const_expr(WAIT):
        tsjit.cp_async_wait_group(0)
    tsjit.syncthreads()
    for j in tsjit.range_constexpr(4):
        out[base + e + j] = buf[1, (e + j + 4) % 128] * 2.0


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(stage_copy.fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _inputs():
    x = np.random.default_rng().standard_normal(N + 8).astype(np.float32)
    return x, np.full(N + 8, np.nan, np.float32)


@pytest.mark.parametrize("check", ["", "race"])
def test_wait_group_retires_the_copies(monkeypatch, check):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", check)
    x, out = _inputs()
    stage_copy.interpret[(2,), (32,)](x, out, N, True)
    ref = np.concatenate([np.roll(x[b * 128:(b + 1) * 128].astype(np.float64), -4) * 2 for b in range(2)])
    np.testing.assert_array_equal(out[:N], ref.astype(np.float32))


@pytest.mark.parametrize("check", ["", "race"])
def test_read_of_unretired_cp_async_names_both_lines(monkeypatch, check):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", check)
    x, out = _inputs()
    with pytest.raises(InterpretError) as info:
        stage_copy.interpret[(2,), (32,)](x, out, N, False)
    text = str(info.value)
    copy_line, read_line = _line("tsjit.cp_async("), _line("out[base + e + j]")
    assert f"cp.async at {stage_copy.fn.__code__.co_filename}:{copy_line}" in text
    assert f"at {stage_copy.fn.__code__.co_filename}:{read_line};" in text
    assert "not retired" in text and "cp_async_wait_group(0)" in text
    assert "does not wait for cp.async" in text and "add tsjit.syncthreads()" not in text
    assert "race" not in text.split("\n")[0]
    assert "out[base + e + j]" in text   # the excerpt shows the read
