"""Tutorial 9 (tsjit/examples/bw_splitk.py, split-K with a DSMEM reduce-scatter) built for sm_90a from the same
source as its sm_100a build: the wgmma path on the H200 against numpy float64, on fresh random bf16 inputs with C
poisoned (0xFFFF, a bf16 NaN), clusters of 2 and 4 CTAs, square and ragged shapes (TMA zero-fills the A/B edges,
the reduce masks C), a K too short for every rank to get a K tile, and bit-identical reruns (the reduction sums
the slots in rank order).

Also under the CPU interpreter (``gpu_or_interpret``, sm_90a: the wgmma path, DSMEM stores through ``mapa`` and
the cluster mbarrier handshakes run there too) at the reduced shapes of :data:`INTERPRETED`: each keeps what its
GPU shape tests (one tile, several tiles, ragged edges in every dimension, several K tiles per rank, a K too short
for every rank) at fewer tiles."""
import numpy as np
import pytest

from tsjit import env
from tsjit.examples import bw_splitk

pytestmark = pytest.mark.gpu_or_interpret

#: the GPU shapes (M, N, K) -> the interpreter's
INTERPRETED = {(128, 128, 512): (128, 128, 256), (256, 384, 1024): (256, 128, 256), (1000, 1000, 1000): (100, 200, 200),
               (257, 300, 136): (130, 140, 136), (64, 100, 8): (64, 100, 8), (2048, 2048, 8192): (128, 128, 512)}
#: the rerun test's shape on the GPU and under the interpreter, and its reruns
RERUN = {"gpu": ((512, 512, 4096), 3), "interpret": ((128, 128, 256), 1)}


def _check(got, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    bound = 2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(a.shape[1])   # half a bf16 ulp + fp32 accumulation
    worst = np.max(np.abs(got - ref) - bound)
    assert worst <= 0, f"max excess over the bf16 error bound: {worst}"
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2


@pytest.fixture
def sm90a(monkeypatch):
    """Under the interpreter, build for sm_90a (the wgmma path this file tests), whatever TSJIT_TARGET says."""
    if env.interpret():
        monkeypatch.setenv("TSJIT_TARGET", "sm_90a")


@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("M,N,K", list(INTERPRETED))
def test_splitk_sm90a_matches_float64(M, N, K, split, sm90a):
    if env.interpret():
        M, N, K = INTERPRETED[(M, N, K)]
    a, b = bw_splitk.random_operands(M, N, K)
    _check(bw_splitk.run_splitk(a, b, split), a, b)


@pytest.mark.parametrize("split", [2, 4])
def test_splitk_sm90a_reruns_are_bit_identical(split, sm90a):
    (M, N, K), reruns = RERUN["interpret" if env.interpret() else "gpu"]
    a, b = bw_splitk.random_operands(M, N, K)
    first = bw_splitk.run_splitk(a, b, split)
    _check(first, a, b)
    for _ in range(reruns):
        again = bw_splitk.run_splitk(a, b, split)
        assert np.array_equal(first.view(np.uint64), again.view(np.uint64)), "a rerun changed C's bits"
