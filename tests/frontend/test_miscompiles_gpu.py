"""Issue 9 §4 on the GPU: the run-time semantics the CPU tests pin in IR/PTX give the right
numbers (membership tests, division by a run-time zero, clamped shifts, saturating conversions).
Fresh random inputs, poisoned outputs, numpy references.  Also under the CPU interpreter
(``gpu_or_interpret``): the same kernels there pin the interpreter's integer and conversion semantics."""
import numpy as np
import pytest

import tsjit
from tsjit import Int32

pytestmark = pytest.mark.gpu_or_interpret
N = 256


@tsjit.kernel
def membership(x, out):
    i = tsjit.block_idx().x * 256 + tsjit.thread_idx().x
    v = x[i]
    out[i] = 0
    if v in {3, 5, 11}:
        out[i] = 1
    if v not in (3, 4):
        out[i] = out[i] + 2
    if v in range(1, 20, 4):
        out[i] = out[i] + 4


def test_membership_with_run_time_values_matches_python():
    rng = np.random.default_rng()
    x = rng.integers(-2, 24, N).astype(np.int32)
    out = tsjit.empty(N, Int32).fill_bytes(0xFF)
    membership[(1,), (N,)](tsjit.to_device(x), out)
    expected = [(v in {3, 5, 11}) + 2 * (v not in (3, 4)) + 4 * (v in range(1, 20, 4)) for v in x.tolist()]
    np.testing.assert_array_equal(out.numpy(), np.array(expected, dtype=np.int32))


@tsjit.kernel
def divide_and_flag(x, d, out, flag):
    i = tsjit.thread_idx().x
    out[i] = x[i] // d[i]
    flag[i] = 0
    if d[i] == 0:
        flag[i] = 1


def test_a_zero_check_after_a_run_time_division_still_runs():
    rng = np.random.default_rng()
    x = rng.integers(-1000, 1000, N).astype(np.int32)
    d = rng.integers(-3, 4, N).astype(np.int32)
    out = tsjit.empty(N, Int32).fill_bytes(0xFF)
    flag = tsjit.empty(N, Int32).fill_bytes(0xFF)
    divide_and_flag[(1,), (N,)](tsjit.to_device(x), tsjit.to_device(d), out, flag)
    np.testing.assert_array_equal(flag.numpy(), (d == 0).astype(np.int32))
    nonzero = d != 0
    expected = np.trunc(x[nonzero] / d[nonzero]).astype(np.int32)  # C semantics: toward zero
    np.testing.assert_array_equal(out.numpy()[nonzero], expected)


@tsjit.kernel
def shifts_and_conversions(x, s, f, out):
    i = tsjit.thread_idx().x
    out[3 * i] = x[i] << s[i]
    out[3 * i + 1] = x[i] >> s[i]
    out[3 * i + 2] = tsjit.Int32(f[i])


def test_run_time_shifts_clamp_and_conversions_saturate():
    rng = np.random.default_rng()
    x = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    s = rng.integers(0, 40, N).astype(np.int32)
    f = (rng.standard_normal(N) * 3e9).astype(np.float32)
    f[:4] = [np.nan, np.inf, -np.inf, 0.5]
    out = tsjit.empty(3 * N, Int32).fill_bytes(0xFF)
    shifts_and_conversions[(1,), (N,)](tsjit.to_device(x), tsjit.to_device(s), tsjit.to_device(f), out)
    got = out.numpy().reshape(N, 3)
    wide = x.astype(np.int64)
    left = np.where(s >= 32, 0, (wide << np.minimum(s, 31)) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    right = (wide >> np.minimum(s, 31)).astype(np.int32)
    converted = np.where(np.isnan(f), 0, np.clip(np.trunc(np.nan_to_num(f.astype(np.float64))),
                                                 -2 ** 31, 2 ** 31 - 1)).astype(np.int32)
    np.testing.assert_array_equal(got[:, 0], left)
    np.testing.assert_array_equal(got[:, 1], right)
    np.testing.assert_array_equal(got[:, 2], converted)
