"""The split-K reducer of the library GEMM (:func:`tsjit.ops.gemm_splitk.reduce_split_k`), on the GPU and under
the CPU interpreter (``gpu_or_interpret``): forced split-K configurations of every tile width the reducer groups
differently (64 columns: one group of columns; 128: two; 16: a narrow group), ragged M / N / K, a fused epilogue
(column bias, ReLU, residual with alpha / beta), against float64 numpy references of the rounded inputs on fresh
random inputs, outputs poisoned (NaN) before each call, and bit-identical outputs run to run (the partials are
summed in split order whichever CTA sums them).  Both ways a tile's sums are shared out: every split sums its
slice (a one-wave launch, the splits wait for each other) and the last split sums the slices of splits that did not
wait (``SPLIT_WAIT_CYCLES = 0``, and a launch of several waves)."""
import sys

import numpy as np
import pytest

import tsjit
import tsjit.ops
from tsjit.ops import configs, gemm_program, gemm_splitk

from tests.gpu.test_ops_matmul_arrays_gpu import _poisoned, _rand, _rel

pytestmark = pytest.mark.gpu_or_interpret

mm = sys.modules["tsjit.ops.matmul"]


def _force(monkeypatch, block_m, block_n, splits):
    monkeypatch.setattr(configs, "choose", lambda problem: (configs.make_config(problem, block_m, block_n, splits),
                                                            [(0.0, block_m, block_n, splits)]))
    for cache in ("_PLANS", "_PLAIN_ARRAYS", "_FAST", "_PLAIN", "_ALLOCATING"):
        monkeypatch.setattr(mm, cache, {})


# (BM, BN, split-K, M, N, K): K tiles of 64 not a multiple of the split count, ragged last tiles; 64 x 16 split 4:
# two 8-column chunks for four splits (two slices are empty)
CASES = [(64, 64, 8, 100, 70, 2048 + 40), (128, 64, 7, 130, 64, 1792), (64, 128, 4, 72, 200, 1024 + 8),
         (128, 128, 3, 200, 130, 776), (64, 16, 2, 16, 20, 520), (64, 16, 4, 16, 20, 1040)]


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


def _fresh_kernels(monkeypatch):
    """Compile gemm_program anew in this test (a patched module constant changes what it compiles to)."""
    monkeypatch.setenv("TSJIT_DISABLE_CACHE", "1")
    for memo in ("_loaded", "_plans", "_interpret_programs"):
        monkeypatch.setattr(gemm_program.gemm_program, memo, {}, raising=False)


def test_split_k_without_waiting_matches_float64_and_is_bit_identical(monkeypatch):
    """No split waits for the others: each leaves its slice to the last one, which sums all slices in turn."""
    _fresh_kernels(monkeypatch)
    monkeypatch.setattr(gemm_splitk, "SPLIT_WAIT_CYCLES", 0)
    test_split_k_matches_float64_and_is_bit_identical(monkeypatch, 128, 64, 7, 130, 64, 1792)


@pytest.mark.parametrize("fence,early", [("acq_rel", False), ("sc", True), ("acq_rel", True)])
def test_split_k_protocol_orderings_match_float64_and_are_bit_identical(monkeypatch, fence, early):
    """The reducer's other orderings (gemm_splitk.FENCE, FINISH_EARLY): release / acquire fences, the FINISHED count
    added before the sums; two launches in a row (the counter words must be reset for the second)."""
    _fresh_kernels(monkeypatch)
    monkeypatch.setattr(gemm_splitk, "FENCE", fence)
    monkeypatch.setattr(gemm_splitk, "FINISH_EARLY", early)
    test_split_k_matches_float64_and_is_bit_identical(monkeypatch, 128, 64, 7, 130, 64, 1792)


@pytest.mark.gpu(reason="a 600 x 520 x 1088 product with split-K 4 is too slow for the interpreter")
def test_split_k_over_several_waves_matches_float64_and_is_bit_identical(monkeypatch):
    """90 tiles x 4 splits: more work units than SMs, so no split waits (the last sums every slice)."""
    test_split_k_matches_float64_and_is_bit_identical(monkeypatch, 64, 64, 4, 600, 520, 1088)


def test_split_k_beyond_the_counter_bits_is_refused():
    """Split-K 17 does not fit the reducer's counter word: a compile error says so and what to do."""
    config = configs.GemmConfig(64, 64, 8, "direct", 64, 17)
    with pytest.raises(tsjit.CompilationError, match="split-K 17 is more than 16"):
        gemm_program.compile_program(config)
