"""tsjit.math.tanh / erf on the GPU (with ex2.approx) against float64 references: fresh random
inputs, poisoned outputs, the bounds of their docstrings (formula bound + 2.5e-7 for ex2.approx)."""
import math

import numpy as np
import pytest

import tsjit
from tsjit import Float32

pytestmark = pytest.mark.gpu


@tsjit.kernel
def tanh_erf(x, out_t, out_e, n):
    i = tsjit.thread_idx().x + tsjit.block_idx().x * tsjit.block_dim().x
    if i < n:
        out_t[i] = tsjit.math.tanh(x[i])
        out_e[i] = tsjit.math.erf(x[i])


def test_tanh_and_erf_match_float64_references():
    rng = np.random.default_rng()
    n = 1 << 20
    host = np.concatenate([rng.uniform(-8, 8, n - 4096), rng.uniform(-0.5, 0.5, 4096)]).astype(np.float32)
    x = tsjit.to_device(host)
    out_t, out_e = tsjit.to_device(np.full(n, np.nan, np.float32)), tsjit.to_device(np.full(n, np.nan, np.float32))
    tanh_erf[((n + 255) // 256,), (256,)](x, out_t, out_e, n)
    ref_t = np.tanh(host.astype(np.float64))
    ref_e = np.array([math.erf(float(v)) for v in host])
    got_t, got_e = out_t.numpy(), out_e.numpy()
    assert np.max(np.abs(got_t - ref_t) - 1e-6 * np.abs(ref_t)) <= 2.5e-7
    assert np.max(np.abs(got_e - ref_e)) <= 5e-7 + 2.5e-7
