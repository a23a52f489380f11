"""The Task Scheduling GEMM on the GPU (issue 5): relative Frobenius error < 1e-2 against numpy float64
on fresh random bf16 inputs with a poisoned output, square and ragged shapes."""
import numpy as np
import pytest

from tsjit.examples import gemm

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("cluster_m", [1, 2])
@pytest.mark.parametrize("M,N,K", [(128, 128, 128), (1000, 1000, 1000), (257, 511, 136), (4096, 4096, 4096),
                                   (8192, 8192, 1024), (64, 300, 64)])
def test_ts_gemm_matches_numpy(M, N, K, cluster_m):
    got, ref = gemm.run_gemm(M, N, K, cluster_m=cluster_m)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err


@pytest.mark.parametrize("epilogue", ["tma", "direct"])
@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (640, 520, 200)])
def test_ts_gemm_epilogues_agree_with_numpy(M, N, K, epilogue):
    got, ref = gemm.run_gemm(M, N, K, epilogue=epilogue)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err


@pytest.mark.parametrize("cluster_m", [1, 2])
@pytest.mark.parametrize("M,N,K", [(128, 128, 128), (1000, 1000, 1000), (257, 512, 136), (4096, 4096, 4096)])
def test_ts_gemm_with_b_as_k_by_n(M, N, K, cluster_m):
    got, ref = gemm.run_gemm(M, N, K, b_layout="KN", cluster_m=cluster_m)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err


@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (4096, 4096, 4096)])
def test_ts_gemm_three_stages_whole_tile_staging(M, N, K):
    got, ref = gemm.run_gemm(M, N, K, stages=3)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < 1e-2, err
