"""The deferred-epilogue GEMM (tsjit.ops.gemm_deferred, issue 15) on the GPU and under the CPU
interpreter (``gpu_or_interpret``): relative Frobenius error < 1e-2 against float64 on fresh random
bf16 inputs, outputs poisoned (NaN) before the launch, B as (N, K) and as (K, N), TMA and direct
epilogues, 64- and 128-row tiles, square and ragged shapes, one K tile per tile (the deferred store
then runs in the first K step), and few CTAs, so every CTA defers through many tiles and stores its last
one after the loop (the runner of tests/gpu/test_gemm_pingpong_gpu.py).

The interpreter runs the small cases (:data:`INTERPRETED`) as they are and each GPU-sized case at its reduced
case (:data:`REDUCED`); one GEMM costs seconds there."""
import numpy as np
import pytest

from tsjit import env

from tests.gpu.test_gemm_pingpong_gpu import run_pingpong   # the runner of every schedule of the library GEMM

pytestmark = pytest.mark.gpu_or_interpret

# (M, N, K, BM, BN, layout, sms, epilogue)
INTERPRETED = {(256, 256, 128, 128, 128, "NK", 1, "tma"), (300, 200, 136, 128, 64, "KN", 2, "tma"),
               (200, 136, 64, 64, 128, "NK", 1, "direct")}
CASES = sorted(INTERPRETED, key=str) + [
    (2048, 2048, 2048, 128, 128, "NK", None, "tma"), (2048, 2048, 2048, 128, 128, "KN", 5, "tma"),
    (3000, 5000, 1000, 128, 128, "NK", None, "tma"), (3000, 5000, 1000, 128, 128, "KN", None, "direct"),
    (1000, 3000, 784, 128, 64, "NK", 7, "tma"), (257, 520, 4104, 64, 128, "NK", 3, "tma"),
    (640, 384, 64, 128, 128, "NK", 2, "tma"), (129, 4096, 4096, 64, 128, "KN", None, "direct")]


#: the GPU-sized cases -> the interpreter's: the same tile, B layout, epilogue and ragged edges (M, N or K not a
#: multiple of the tile), one K tile where the case has one, and at most 2 CTAs so each still defers through tiles
REDUCED = {(2048, 2048, 2048, 128, 128, "NK", None, "tma"): (256, 256, 256, 128, 128, "NK", 2, "tma"),
           (2048, 2048, 2048, 128, 128, "KN", 5, "tma"): (256, 256, 192, 128, 128, "KN", 2, "tma"),
           (3000, 5000, 1000, 128, 128, "NK", None, "tma"): (200, 264, 200, 128, 128, "NK", 2, "tma"),
           (3000, 5000, 1000, 128, 128, "KN", None, "direct"): (200, 264, 200, 128, 128, "KN", 2, "direct"),
           (1000, 3000, 784, 128, 64, "NK", 7, "tma"): (200, 200, 136, 128, 64, "NK", 2, "tma"),
           (257, 520, 4104, 64, 128, "NK", 3, "tma"): (257, 136, 520, 64, 128, "NK", 2, "tma"),
           (640, 384, 64, 128, 128, "NK", 2, "tma"): (384, 256, 64, 128, 128, "NK", 2, "tma"),
           (129, 4096, 4096, 64, 128, "KN", None, "direct"): (129, 256, 256, 64, 128, "KN", 2, "direct")}


@pytest.mark.parametrize("M,N,K,block_m,block_n,layout,sms,epilogue", CASES)
def test_deferred_gemm_matches_float64(M, N, K, block_m, block_n, layout, sms, epilogue):
    case = (M, N, K, block_m, block_n, layout, sms, epilogue)
    if env.interpret():
        M, N, K, block_m, block_n, layout, sms, epilogue = REDUCED.get(case, case)
    got, ref = run_pingpong(M, N, K, block_n, layout, sms, epilogue, schedule="deferred", block_m=block_m)
    assert np.isfinite(got).all(), "unwritten (NaN) outputs"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 1e-2, err
