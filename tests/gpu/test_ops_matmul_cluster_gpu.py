"""tsjit.ops.matmul / bmm with 2-CTA clusters (issue 15, :mod:`tsjit.ops.gemm_cluster`), on the GPU and under the
CPU interpreter (``gpu_or_interpret``): the cluster configurations forced (``cluster_m2``: two vertically adjacent
tiles multicast halves of the shared Y tile; ``cluster_n2``: two horizontally adjacent tiles share X), against
float64 numpy references of the rounded inputs, fresh random inputs, outputs poisoned (NaN) before each call.

Covered for both clusters: both B layouts (K-major Y and MN-major Y), both X layouts, an odd tile count along the
clustered dimension (the cluster's second tile lies past the matrix), the TMA epilogue with fused bias /
activation / residual / alpha / beta, the direct epilogue (fp32 output), and bmm; the GPU twin at larger sizes
(several work tiles per CTA of the persistent grid)."""
import sys

import numpy as np
import pytest

import tsjit
import tsjit.ops
from tsjit import env
from tsjit.interpret.numerics import decode, encode
from tsjit.ops import configs, realign
from tsjit.runtime.arrays import DeviceArray

pytestmark = pytest.mark.gpu_or_interpret

BF16, F32 = tsjit.BFloat16, tsjit.Float32
CLUSTERS = ["cluster_m2", "cluster_n2"]


def _rand(*shape, dtype=BF16, rng=None):
    rng = rng or np.random.default_rng()
    values = rng.standard_normal(shape)
    if dtype is F32:
        host = values.astype(np.float32)
        return tsjit.to_device(host, dtype=dtype), host.astype(np.float64)
    bits = encode(values, dtype)
    return tsjit.to_device(bits, dtype=dtype), decode(bits, dtype).astype(np.float64)


def _transposed(array):
    return DeviceArray(array.shape[::-1], array.dtype, strides=array.strides[::-1], data_ptr=array.data_ptr,
                       owner=array)


def _poisoned(*shape, dtype=BF16):
    return tsjit.empty(shape, dtype).fill_bytes(0xFF)        # NaN in every float format


def _rel(out, ref) -> float:
    host = out.numpy()
    got = host.astype(np.float64) if out.dtype is F32 else decode(host, out.dtype).astype(np.float64)
    assert np.isfinite(got).all(), f"{(~np.isfinite(got)).sum()} outputs unwritten (NaN) or not finite"
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


@pytest.fixture
def force(monkeypatch):
    """``force(BM, BN, schedule)``: every plan from now on uses that cluster configuration; returns the plans."""
    mm = sys.modules["tsjit.ops.matmul"]
    plans = {}
    monkeypatch.setattr(mm, "_PLANS", plans)
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})

    def apply(block_m, block_n, schedule):
        choice = (block_m, block_n, 1, schedule)
        monkeypatch.setattr(configs, "choose", lambda problem: (configs.make_config(problem, *choice),
                                                                [(0.0, *choice)]))
        return plans
    return apply


def _sizes(small, large):
    return small if env.interpret() else large


def _operand_b(K, N, layout):
    if layout == "NK":                         # B as the transpose of a (N, K) weight: K-major Y
        bt, bt64 = _rand(N, K)
        return _transposed(bt), bt64.T
    return _rand(K, N)                         # B (K, N) row-major: MN-major Y


def _plan_config(plans):
    (plan,) = plans.values()
    return plan.config, plan.grid


@pytest.mark.parametrize("layout", ["NK", "KN"])
@pytest.mark.parametrize("schedule", CLUSTERS)
def test_cluster_matches_float64(force, schedule, layout):
    """Three row tiles and three column tiles (odd along either clustered dimension), a ragged last tile each way."""
    plans = force(128, 128, schedule)
    M, N, K = _sizes((300, 330, 136), (1000, 1500, 520))
    a, a64 = _rand(M, K)
    b, b64 = _operand_b(K, N, layout)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=out)
    config, grid = _plan_config(plans)
    assert (config.cluster_m, config.cluster_n) == configs.CLUSTER_SCHEDULES[schedule] and grid[0] % 2 == 0
    assert _rel(out, a64 @ b64) < 1e-2


@pytest.mark.parametrize("schedule", CLUSTERS)
def test_cluster_with_mn_major_a_and_wide_tiles(force, schedule):
    """A transposed (MN-major X: 64-row groups of 64-wide boxes) with 128 x 256 tiles."""
    force(128, 256, schedule)
    M, N, K = _sizes((260, 520, 64), (1100, 2100, 256))
    at, at64 = _rand(K, M)
    b, b64 = _rand(K, N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(_transposed(at), b, out=out)
    assert _rel(out, at64.T @ b64) < 1e-2


@pytest.mark.parametrize("schedule", CLUSTERS)
def test_cluster_fused_epilogue(force, schedule):
    """Row bias, ReLU, residual, alpha and beta through the TMA epilogue; a column bias with gelu_tanh."""
    force(128, 128, schedule)
    M, N, K = _sizes((260, 300, 64), (700, 900, 320))
    (a, a64), (b, b64) = _rand(M, K), _rand(K, N)
    (bias, bias64), (residual, residual64) = _rand(M, 1, dtype=F32), _rand(M, N)
    out, old = _rand(M, N)
    tsjit.ops.matmul(a, b, bias=bias, residual=residual, alpha=0.5, beta=-2.0, activation="relu", out=out)
    assert _rel(out, np.maximum(0.5 * (a64 @ b64) - 2.0 * old + bias64, 0.0) + residual64) < 1e-2
    (col, col64) = _rand(N)
    out = _poisoned(M, N)
    tsjit.ops.matmul(a, b, bias=col, activation="gelu_tanh", out=out)
    y = a64 @ b64 + col64
    assert _rel(out, 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))) < 1e-2


@pytest.mark.parametrize("schedule", CLUSTERS)
def test_cluster_direct_epilogue_fp32_output(force, schedule):
    plans = force(128, 128, schedule)
    M, N, K = _sizes((200, 260, 72), (900, 700, 200))
    (a, a64), (b, b64) = _rand(M, K), _rand(K, N)
    out = _poisoned(M, N, dtype=F32)
    tsjit.ops.matmul(a, b, out=out)
    assert _plan_config(plans)[0].epilogue == "direct"
    assert _rel(out, a64 @ b64) < 1e-4


@pytest.mark.parametrize("schedule", CLUSTERS)
def test_cluster_bmm(force, schedule):
    force(128, 128, schedule)
    L, M, N, K = _sizes((2, 130, 260, 64), (3, 500, 600, 192))
    (a, a64), (b, b64) = _rand(L, M, K), _rand(L, K, N)
    out = _poisoned(L, M, N)
    tsjit.ops.bmm(a, b, out=out)
    assert _rel(out, a64 @ b64) < 1e-2


def test_misaligned_rows_take_the_cluster_without_a_copy(monkeypatch):
    """X's and Y's rows 16- but not 128-byte aligned (B the transpose of a (N, K) weight): the heuristic's single-CTA
    128 x 256 tile becomes its cluster_m2 twin with the 4-stage ring and no realigning copy
    (:func:`tsjit.ops.realign.misaligned_choice`), with the right numbers into a poisoned output (interpreter:
    twice, fresh arrays through the same plan).  GPU: the measured 3000 x 5000 x 1000 (2000-byte rows) as the heuristic
    decides it; interpreter: 300 x 520 x 136 (272-byte rows, an odd row-tile count), the 128 x 256 tile and the
    cluster's gain forced (the estimate of so small a product favours neither)."""
    mm = sys.modules["tsjit.ops.matmul"]
    plans = {}
    monkeypatch.setattr(mm, "_PLANS", plans)
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})
    M, N, K = _sizes((300, 520, 136), (3000, 5000, 1000))
    if env.interpret():
        monkeypatch.setattr(realign, "MISALIGNED_CLUSTER_GAIN", 100.0)
        monkeypatch.setattr(configs, "choose", lambda p: (configs.make_config(
            p, 128, 256, 1, estimate_us=configs.estimate(p, 128, 256, 1) * 1e6), [(0.0, 128, 256, 1)]))
    rng = np.random.default_rng()
    for _ in range(2 if env.interpret() else 1):
        a, a64 = _rand(M, K, rng=rng)
        b, b64 = _operand_b(K, N, "NK")
        out = _poisoned(M, N)
        tsjit.ops.matmul(a, b, out=out)
        assert _rel(out, a64 @ b64) < 1e-2
        (plan,) = plans.values()
        assert (plan.config.cluster_m, plan.config.stages, plan.config.staged_columns, plan.realign) == (2, 4, 128, "")
        assert "misaligned rows: X and Y" in tsjit.ops.matmul.explain(a, b, out=out)
