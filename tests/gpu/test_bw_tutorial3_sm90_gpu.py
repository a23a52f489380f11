"""Tutorial 3 (tsjit/examples/bw_gemm.py) built for sm_90a from the same source as its sm_100a build: the
wgmma path on the H200 against numpy float64, on fresh random bf16 inputs with the output poisoned (0xFFFF,
a bf16 NaN), square and ragged shapes (TMA zero-fills the A/B edges, the epilogue masks C).

Also under the CPU interpreter (``gpu_or_interpret``, sm_90a: the wgmma path) at the shapes of
:data:`INTERPRETED`: each keeps what its GPU shape tests (one whole tile, two full tiles with the 3-stage ring
wrapping, ragged 2 x 2 grids of partial tiles, K = 8, many K tiles per CTA) at fewer tiles."""
import numpy as np
import pytest

from tsjit import env
from tsjit.examples import bw_gemm

pytestmark = pytest.mark.gpu_or_interpret

#: the GPU shapes (M, N, K) -> the interpreter's
INTERPRETED = {(128, 256, 64): (128, 256, 64), (256, 512, 256): (256, 256, 256), (1000, 1000, 1000): (100, 300, 200),
               (257, 300, 136): (130, 264, 72), (64, 100, 8): (64, 100, 8), (2048, 2048, 4096): (128, 256, 512)}


@pytest.mark.parametrize("M,N,K", list(INTERPRETED))
def test_tutorial3_sm90a_matches_float64(M, N, K, monkeypatch):
    if env.interpret():
        M, N, K = INTERPRETED[(M, N, K)]
        monkeypatch.setenv("TSJIT_TARGET", "sm_90a")
    got, ref = bw_gemm.run_tutorial3(M, N, K)
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    # bf16 output: half an ulp of 8 significant bits, plus the fp32 accumulation error
    bound = 2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(K)
    worst = np.max(np.abs(got - ref) - bound)
    assert worst <= 0, f"max excess over the bf16 error bound: {worst}"
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2
