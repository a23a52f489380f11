"""The split-K reducer of the library GEMM (:func:`tsjit.ops.gemm_program.reduce_split_k`), on the GPU and under
the CPU interpreter (``gpu_or_interpret``): forced split-K configurations of every tile width the reducer groups
differently (64 columns: one group of columns; 128: two; 16: a narrow group), ragged M / N / K, a fused epilogue
(column bias, ReLU, residual with alpha / beta), against float64 numpy references of the rounded inputs on fresh
random inputs, outputs poisoned (NaN) before each call, and bit-identical outputs run to run (the partials are
summed in split order whichever CTA arrives last)."""
import sys

import numpy as np
import pytest

import tsjit
import tsjit.ops
from tsjit.ops import configs

from tests.gpu.test_ops_matmul_arrays_gpu import _poisoned, _rand, _rel

pytestmark = pytest.mark.gpu_or_interpret

mm = sys.modules["tsjit.ops.matmul"]


def _force(monkeypatch, block_m, block_n, splits):
    monkeypatch.setattr(configs, "choose", lambda problem: (configs.make_config(problem, block_m, block_n, splits),
                                                            [(0.0, block_m, block_n, splits)]))
    for cache in ("_PLANS", "_PLAIN_ARRAYS", "_FAST", "_PLAIN", "_ALLOCATING"):
        monkeypatch.setattr(mm, cache, {})


# (BM, BN, split-K, M, N, K): K tiles of 64 not a multiple of the split count, ragged last tiles
CASES = [(64, 64, 8, 100, 70, 2048 + 40), (128, 64, 7, 130, 64, 1792), (64, 128, 4, 72, 200, 1024 + 8),
         (128, 128, 3, 200, 130, 776), (64, 16, 2, 16, 20, 520)]


@pytest.mark.parametrize("block_m,block_n,splits,M,N,K", CASES)
def test_split_k_matches_float64_and_is_bit_identical(monkeypatch, block_m, block_n, splits, M, N, K):
    _force(monkeypatch, block_m, block_n, splits)
    a, a64 = _rand(M, K)
    b, b64 = _rand(K, N)
    first = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=first)
    config = next(iter(mm._PLANS.values())).config
    assert (config.block_m, config.block_n, config.splits) == (block_m, block_n, splits), config.describe()
    assert _rel(first, a64 @ b64) < 1e-2
    again = _poisoned(M, N)
    tsjit.ops.matmul(a, b, out=again)
    np.testing.assert_array_equal(again.numpy(), first.numpy())


def test_split_k_fused_epilogue_matches_float64(monkeypatch):
    """Column bias, ReLU, residual, alpha and beta (the output's previous values) applied by the reducer."""
    _force(monkeypatch, 64, 128, 4)
    M, N, K = 96, 136, 1024
    (a, a64), (b, b64), (bias, bias64), (residual, residual64) = _rand(M, K), _rand(K, N), _rand(N), _rand(M, N)
    out, old = _rand(M, N)
    tsjit.ops.matmul(a, b, bias=bias, activation="relu", residual=residual, alpha=0.5, beta=-2.0, out=out)
    assert next(iter(mm._PLANS.values())).config.splits == 4
    ref = np.maximum(0.5 * (a64 @ b64) - 2.0 * old + bias64, 0.0) + residual64
    assert _rel(out, ref) < 1e-2
