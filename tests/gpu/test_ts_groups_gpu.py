"""Pipeline groups on the GPU (issue 12 §4): the four tutorial programs against numpy float64 on fresh
random inputs with poisoned outputs, grouped and with separate rings."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _relative_error(got, ref):
    return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("grouped,fused", [(True, False), (True, True), (False, False)])
@pytest.mark.parametrize("shape,box,stages,blocks", [((1000, 780), (32, 64), 4, 132), ((64, 64), (32, 64), 1, 1),
                                                     ((257, 132), (16, 32), 3, 7), ((4096, 4096), (32, 64), 6, 132)])
def test_merge_copy_is_exact(shape, box, stages, blocks, grouped, fused):
    from tsjit.examples import ts_merge_copy
    got, ref = ts_merge_copy.run_merge_copy(*shape, box=box, stages=stages, blocks=blocks, grouped=grouped,
                                            fused=fused)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K,stages", [(128, 256, 64, 4), (1000, 1000, 1000, 4), (257, 512, 136, 3),
                                          (4096, 4096, 4096, 4), (64, 304, 72, 3)])
def test_merge_gemm_relu_matches_numpy(M, N, K, stages, grouped):
    from tsjit.examples import ts_merge_gemm
    got, ref = ts_merge_gemm.run_merge_gemm(M, N, K, stages=stages, grouped=grouped)
    assert np.isfinite(got).all() and _relative_error(got, ref) < 1e-2, _relative_error(got, ref)
    assert (got >= 0).all()


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (1000, 1000, 1000), (257, 520, 136), (2048, 2048, 2048)])
def test_merge_gemm_residual_add_matches_numpy(M, N, K, grouped):
    from tsjit.examples import ts_merge_resadd
    got, ref = ts_merge_resadd.run_resadd(M, N, K, grouped=grouped)
    assert np.isfinite(got).all() and _relative_error(got, ref) < 1e-2, _relative_error(got, ref)


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K", [(128, 256, 64), (1000, 1000, 1000), (257, 512, 136), (4096, 4096, 1024)])
def test_fork_feeds_the_mma_and_the_relu_task(M, N, K, grouped):
    from tsjit.examples import ts_fork
    c, c_ref, r, r_ref = ts_fork.run_fork(M, N, K, grouped=grouped)
    assert np.isfinite(c).all() and _relative_error(c, c_ref) < 1e-2, _relative_error(c, c_ref)
    np.testing.assert_array_equal(r, r_ref)
