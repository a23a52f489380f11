"""Tutorial 9 (tsjit/examples/bw_splitk.py, split-K with a DSMEM reduce-scatter) built for sm_90a from the same
source as its sm_100a build: the wgmma path on the H200 against numpy float64, on fresh random bf16 inputs with C
poisoned (0xFFFF, a bf16 NaN), clusters of 2 and 4 CTAs, square and ragged shapes (TMA zero-fills the A/B edges,
the reduce masks C), a K too short for every rank to get a K tile, and bit-identical reruns (the reduction sums
the slots in rank order)."""
import numpy as np
import pytest

from tsjit.examples import bw_splitk

pytestmark = pytest.mark.gpu


def _check(got, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    bound = 2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(a.shape[1])   # half a bf16 ulp + fp32 accumulation
    worst = np.max(np.abs(got - ref) - bound)
    assert worst <= 0, f"max excess over the bf16 error bound: {worst}"
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2


@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("M,N,K", [(128, 128, 512), (256, 384, 1024), (1000, 1000, 1000), (257, 300, 136),
                                   (64, 100, 8), (2048, 2048, 8192)])
def test_splitk_sm90a_matches_float64(M, N, K, split):
    a, b = bw_splitk.random_operands(M, N, K)
    _check(bw_splitk.run_splitk(a, b, split), a, b)


@pytest.mark.parametrize("split", [2, 4])
def test_splitk_sm90a_reruns_are_bit_identical(split):
    a, b = bw_splitk.random_operands(512, 512, 4096)
    first = bw_splitk.run_splitk(a, b, split)
    _check(first, a, b)
    for _ in range(3):
        again = bw_splitk.run_splitk(a, b, split)
        assert np.array_equal(first.view(np.uint64), again.view(np.uint64)), "a rerun changed C's bits"
