"""The Task Scheduling GEMM on the GPU (issue 5): relative Frobenius error < 1e-2 against numpy float64
on fresh random bf16 inputs with a poisoned output, square and ragged shapes.

Also under the CPU interpreter (``gpu_or_interpret``): one GEMM costs seconds there, so each GPU shape
runs at its own reduced shape of :data:`INTERPRETED` (the same tile config, stages, cluster, B layout and
epilogue: two whole tiles, ragged 2 x 2 grids of partial tiles, many K tiles so the ring wraps)."""
import importlib.util

import numpy as np
import pytest

from tsjit import env
from tsjit.examples import gemm

pytestmark = pytest.mark.gpu_or_interpret

#: the GPU shapes (M, N, K) -> the interpreter's
INTERPRETED = {(128, 128, 128): (256, 256, 128), (1000, 1000, 1000): (200, 264, 264),
               (257, 511, 136): (130, 300, 136), (257, 512, 136): (130, 512, 136), (4096, 4096, 4096): (256, 256, 512),
               (8192, 8192, 1024): (256, 512, 256), (64, 300, 64): (64, 300, 64), (640, 520, 200): (130, 264, 200)}


def interpreted_shape(case, *shape):
    """The GEMM's (M, N, K): on the GPU as given; under the interpreter its reduced shape in :data:`INTERPRETED`."""
    if not env.interpret():
        return shape[:3]
    if importlib.util.find_spec("tsjit.interpret.wgmma") is None:
        pytest.skip("the interpreter's wgmma module (tsjit/interpret/wgmma.py, issue 13 tensor side) is not present")
    return INTERPRETED[shape[:3]]


@pytest.mark.parametrize("cluster_m", [1, 2])
@pytest.mark.parametrize("M,N,K", [(128, 128, 128), (1000, 1000, 1000), (257, 511, 136), (4096, 4096, 4096),
                                   (8192, 8192, 1024), (64, 300, 64)])
def test_ts_gemm_matches_numpy(M, N, K, cluster_m):
    M, N, K = interpreted_shape("matches", M, N, K, cluster_m)
    got, ref = gemm.run_gemm(M, N, K, cluster_m=cluster_m)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err


@pytest.mark.parametrize("epilogue", ["tma", "direct"])
@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (640, 520, 200)])
def test_ts_gemm_epilogues_agree_with_numpy(M, N, K, epilogue):
    M, N, K = interpreted_shape("epilogue", M, N, K, epilogue)
    got, ref = gemm.run_gemm(M, N, K, epilogue=epilogue)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err


@pytest.mark.parametrize("cluster_m", [1, 2])
@pytest.mark.parametrize("M,N,K", [(128, 128, 128), (1000, 1000, 1000), (257, 512, 136), (4096, 4096, 4096)])
def test_ts_gemm_with_b_as_k_by_n(M, N, K, cluster_m):
    M, N, K = interpreted_shape("kn", M, N, K, cluster_m)
    got, ref = gemm.run_gemm(M, N, K, b_layout="KN", cluster_m=cluster_m)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err


@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (4096, 4096, 4096)])
def test_ts_gemm_three_stages_whole_tile_staging(M, N, K):
    M, N, K = interpreted_shape("stages", M, N, K)
    got, ref = gemm.run_gemm(M, N, K, stages=3)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err
