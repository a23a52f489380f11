"""Tutorial 1 on the GPU: the TS grid-stride copy is exact for several grids and warp counts,
for num_entries of 0 and not a multiple of the thread count.  Also under the CPU interpreter at
reduced sizes (``gpu_or_interpret``)."""
import numpy as np
import pytest

from tsjit import env
from tsjit.examples import ts_copy

pytestmark = pytest.mark.gpu_or_interpret


def small(n, blocks):
    """(n, blocks) on the GPU; at most 4099 elements and 3 CTAs under the interpreter."""
    return (min(n, 4099), min(blocks, 3)) if env.interpret() else (n, blocks)


@pytest.mark.parametrize("n,blocks,warps", [(1 << 24, 1056, 4), (1 << 24, 132, 8), (1 << 24, 7, 1),
                                            (1_000_003, 77, 3), (0, 16, 4), (31, 1, 2)])
def test_ts_copy_is_exact(n, blocks, warps):
    got, expected = ts_copy.run_copy_ts(*small(n, blocks), warps)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n,blocks,warps", [(1 << 24, 1056, 4), ((1 << 24) + 5, 132, 8), (7, 1, 1), (0, 4, 2),
                                            (1_000_003, 77, 3)])
def test_ts_vectorized_copy_is_exact(n, blocks, warps):
    got, expected = ts_copy.run_copy_ts_vectorized(*small(n, blocks), warps)
    np.testing.assert_array_equal(got, expected)
