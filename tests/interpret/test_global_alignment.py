"""Newcomer 8 item 2: a misaligned global array, or a wrong ``tsjit.assume_aligned`` promise on a global
pointer, is reported on the CPU interpreter instead of running exactly (a GPU faults with "misaligned
address").  The kernel is the newcomer's: each of 32 threads copies 16 bytes of its CTA's 128-float
block into row 1 of a shared array with ``cp.async``, waits, and writes the row rotated by 4, doubled.

* a host array stands for a 16-byte aligned device allocation (the kernel is compiled so): a view
  ``x[1:]`` (address 4 mod 16) is a LaunchError naming the argument, its address mod 16 and the fix;
* ``assume_aligned(address_of(src, base + e + 1), 16)`` (a wrong promise) fails at the ``cp.async``
  with the line and the address mod 16;
* a 16-byte vector load through a wrong promise fails the same way (the whole vector's alignment);
* the aligned twin is exact against a float64 reference."""
import inspect

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError, LaunchError

N = 256


@tsjit.kernel
def stage_copy(src, out, n, MODE: tsjit.Constexpr[str]):
    buf = tsjit.shared_array(tsjit.Float32, (2, 128), align=16)
    t = tsjit.thread_idx().x
    base = tsjit.block_idx().x * 128
    e = t * 4
    if tsjit.const_expr(MODE == "noassume"):
        tsjit.cp_async(tsjit.address_of(buf, 1, e), tsjit.address_of(src, base + e), 16)
    elif tsjit.const_expr(MODE == "wrongpromise"):
        tsjit.cp_async(tsjit.address_of(buf, 1, e), tsjit.assume_aligned(tsjit.address_of(src, base + e + 1), 16), 16)
    else:
        tsjit.cp_async(tsjit.address_of(buf, 1, e), tsjit.assume_aligned(tsjit.address_of(src, base + e), 16), 16)
    tsjit.cp_async_commit_group()
    tsjit.cp_async_wait_group(0)
    tsjit.syncthreads()
    for j in tsjit.range_constexpr(4):
        out[base + e + j] = buf[1, (e + j + 4) % 128] * 2.0


@tsjit.kernel
def vector_copy(src, out, SHIFT: tsjit.Constexpr[int]):
    t = tsjit.thread_idx().x
    p = tsjit.assume_aligned(tsjit.address_of(src, t * 4 + SHIFT), 16)
    v = p.load_vector(4)
    for j in tsjit.range_constexpr(4):
        out[t * 4 + j] = v[j]


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _reference(x):
    ref = np.zeros(N + 8)
    for b in range(2):
        ref[b * 128:(b + 1) * 128] = np.roll(x[b * 128:(b + 1) * 128].astype(np.float64), -4) * 2
    return ref


@pytest.mark.parametrize("mode", ["ok", "noassume"])
def test_aligned_array_is_exact(mode):
    x = np.random.default_rng().standard_normal(N + 8).astype(np.float32)
    out = np.full(N + 8, np.nan, np.float32)
    stage_copy.interpret[(2,), (32,)](x, out, N, mode)
    np.testing.assert_array_equal(out[:N], _reference(x)[:N].astype(np.float32))


@pytest.mark.parametrize("mode", ["ok", "noassume"])
def test_misaligned_view_is_a_launch_error(mode):
    x = np.random.default_rng().standard_normal(N + 9).astype(np.float32)[1:]
    assert x.ctypes.data % 16 == 4
    out = np.full(N + 8, np.nan, np.float32)
    with pytest.raises(LaunchError) as info:
        stage_copy.interpret[(2,), (32,)](x, out, N, mode)
    text = str(info.value)
    assert "argument 'src'" in text and "4 mod 16" in text and "16-byte aligned" in text and "copy" in text
    assert np.isnan(out).all()   # nothing ran


def test_wrong_promise_on_cp_async_source():
    x = np.random.default_rng().standard_normal(N + 8).astype(np.float32)
    out = np.zeros(N + 8, np.float32)
    with pytest.raises(InterpretError) as info:
        stage_copy.interpret[(2,), (32,)](x, out, N, "wrongpromise")
    text = str(info.value)
    assert f":{_line(stage_copy, 'base + e + 1')}" in text
    assert "global source address" in text and "4 mod 16" in text and "assume_aligned" in text


def test_wrong_promise_on_vector_load():
    x = np.random.default_rng().standard_normal(N).astype(np.float32)
    out = np.full(128, np.nan, np.float32)
    vector_copy.interpret[(1,), (32,)](x, out, 0)
    np.testing.assert_array_equal(out, x[:128])
    with pytest.raises(InterpretError) as info:
        vector_copy.interpret[(1,), (32,)](x, out, 2)
    text = str(info.value)
    assert "misaligned vector load" in text and "assume_aligned" in text
    assert f":{_line(vector_copy, 'load_vector')}" in text


@tsjit.kernel
def promised_scalar(src, out, SHIFT: tsjit.Constexpr[int]):
    t = tsjit.thread_idx().x
    p = tsjit.assume_aligned(tsjit.address_of(src, t * 4 + SHIFT), 16)
    out[t] = p[0] + 1.0


def test_wrong_promise_on_a_scalar_load_is_reported():
    """The promise is checked at any access compiled with it (its IR ``align``), not only at the wide ones:
    the compiler may widen accesses on it."""
    x = np.random.default_rng().standard_normal(N).astype(np.float32)
    out = np.full(32, np.nan, np.float32)
    promised_scalar.interpret[(1,), (32,)](x, out, 0)
    np.testing.assert_array_equal(out, (x[0:128:4].astype(np.float64) + 1.0).astype(np.float32))
    with pytest.raises(InterpretError) as info:
        promised_scalar.interpret[(1,), (32,)](x, out, 1)
    text = str(info.value)
    assert "broken alignment promise" in text and "4 mod 16" in text and "assume_aligned" in text
    assert f":{_line(promised_scalar, 'p[0] + 1.0')}" in text
