"""The plain (non-warp-specialized) wgmma GEMM on the GPU against numpy float64: fresh random BFloat16
inputs, a NaN-poisoned output, square and ragged shapes (TMA zero-fill at the M/N/K edges, strided
16-byte-padded rows), both B layouts, both epilogues (stmatrix + TMA store, masked direct stores).
Also under the CPU interpreter (``gpu_or_interpret``) at reduced sizes."""
import numpy as np
import pytest

from tsjit import env
from tsjit.examples import gemm_plain

pytestmark = pytest.mark.gpu_or_interpret


def reduced(M, N, K):
    """The shape on the GPU; under the interpreter at most 130 x 136 x 72 (ragged still: TMA zero-fill at the
    edges), except the 1000^3 case: 200 x 264 x 200 (a ragged 2 x 2 grid of partial tiles, a partial last K tile)."""
    if not env.interpret():
        return M, N, K
    if (M, N, K) == (1000, 1000, 1000):
        return 200, 264, 200
    return min(M, 130), min(N, 136), min(K, 72)

SHAPES = [(128, 128, 128), (257, 511, 129), (1000, 1000, 1000)]


def relative_error(got, ref):
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("epilogue", ["tma", "direct"])
@pytest.mark.parametrize("b_layout", ["NK", "KN"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_plain_matches_numpy(shape, b_layout, epilogue):
    got, ref = gemm_plain.run_gemm_plain(*reduced(*shape), b_layout=b_layout, epilogue=epilogue)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} outputs never written"
    assert relative_error(got, ref) < 1e-2


@pytest.mark.parametrize("config", [dict(BM=64), dict(BM=64, BN=128, stages=2), dict(BM=128, BN=64, stages=4)],
                         ids=["bm64", "bm64-bn128-2stages", "bn64-4stages"])
def test_gemm_plain_tile_configurations(config):
    got, ref = gemm_plain.run_gemm_plain(*reduced(300, 200, 520), **config)
    assert not np.isnan(got).any()
    assert relative_error(got, ref) < 1e-2
