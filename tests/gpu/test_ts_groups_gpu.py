"""Pipeline groups on the GPU (issue 12 §4): the four tutorial programs against numpy float64 on fresh
random inputs with poisoned outputs, grouped and with separate rings.

Also under the CPU interpreter (``gpu_or_interpret``) at reduced sizes: the copies at most a few tiles
and CTAs; each GEMM tutorial's shapes mapped to their own reduced shapes (the same tile config, ring depth and
grouping: a whole tile, ragged 2 x 2 grids of partial M, N and K tiles, and a K of many tiles, the ring wrapping)."""
import numpy as np
import pytest

from tsjit import env

pytestmark = pytest.mark.gpu_or_interpret


def reduced_gemm(M, N, K, interpreted):
    """(M, N, K) on the GPU; under the interpreter ``interpreted[(M, N, K)]``."""
    return interpreted[(M, N, K)] if env.interpret() else (M, N, K)


def _relative_error(got, ref):
    return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("grouped,fused", [(True, False), (True, True), (False, False)])
@pytest.mark.parametrize("shape,box,stages,blocks", [((1000, 780), (32, 64), 4, 132), ((64, 64), (32, 64), 1, 1),
                                                     ((257, 132), (16, 32), 3, 7), ((4096, 4096), (32, 64), 6, 132)])
def test_merge_copy_is_exact(shape, box, stages, blocks, grouped, fused):
    from tsjit.examples import ts_merge_copy
    if env.interpret():
        shape, blocks = (min(shape[0], 2 * box[0] + 3), min(shape[1], 2 * box[1] + 4)), min(blocks, 3)
    got, ref = ts_merge_copy.run_merge_copy(*shape, box=box, stages=stages, blocks=blocks, grouped=grouped,
                                            fused=fused)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K,stages", [(128, 256, 64, 4), (1000, 1000, 1000, 4), (257, 512, 136, 3),
                                          (4096, 4096, 4096, 4), (64, 304, 72, 3)])
def test_merge_gemm_relu_matches_numpy(M, N, K, stages, grouped):
    from tsjit.examples import ts_merge_gemm
    M, N, K = reduced_gemm(M, N, K, {(128, 256, 64): (128, 256, 64), (64, 304, 72): (64, 304, 72),
                                         (1000, 1000, 1000): (130, 264, 264), (257, 512, 136): (129, 512, 136),
                                         (4096, 4096, 4096): (128, 256, 576)})
    got, ref = ts_merge_gemm.run_merge_gemm(M, N, K, stages=stages, grouped=grouped)
    assert np.isfinite(got).all() and _relative_error(got, ref) < 1e-2, _relative_error(got, ref)
    assert (got >= 0).all()


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (1000, 1000, 1000), (257, 520, 136), (2048, 2048, 2048)])
def test_merge_gemm_residual_add_matches_numpy(M, N, K, grouped):
    from tsjit.examples import ts_merge_resadd
    M, N, K = reduced_gemm(M, N, K, {(128, 128, 64): (128, 128, 64), (257, 520, 136): (65, 136, 72),
                                         (1000, 1000, 1000): (200, 136, 264), (2048, 2048, 2048): (128, 256, 512)})
    got, ref = ts_merge_resadd.run_resadd(M, N, K, grouped=grouped)
    assert np.isfinite(got).all() and _relative_error(got, ref) < 1e-2, _relative_error(got, ref)


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K", [(128, 256, 64), (1000, 1000, 1000), (257, 512, 136), (4096, 4096, 1024)])
def test_fork_feeds_the_mma_and_the_relu_task(M, N, K, grouped):
    from tsjit.examples import ts_fork
    M, N, K = reduced_gemm(M, N, K, {(128, 256, 64): (128, 256, 64), (257, 512, 136): (65, 264, 72),
                                         (1000, 1000, 1000): (130, 264, 200), (4096, 4096, 1024): (128, 512, 512)})
    c, c_ref, r, r_ref = ts_fork.run_fork(M, N, K, grouped=grouped)
    assert np.isfinite(c).all() and _relative_error(c, c_ref) < 1e-2, _relative_error(c, c_ref)
    np.testing.assert_array_equal(r, r_ref)
