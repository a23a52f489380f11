"""TS pipelines on the GPU (issue 4): the 2-D TMA copy through a TmaAsync ring, exact against numpy,
for several stage counts, tile sizes and shapes that are not multiples of the tile."""
import numpy as np
import pytest

from tsjit.examples import ts_tma_copy

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape,box,stages,blocks", [
    ((1000, 780), (64, 64), 4, 132), ((512, 512), (64, 64), 2, 16), ((257, 132), (32, 32), 3, 7),
    ((4096, 4096), (128, 64), 6, 132), ((64, 64), (64, 64), 1, 1), ((100, 100), (16, 64), 8, 3)])
def test_ts_tma_copy_is_exact(shape, box, stages, blocks):
    got, expected = ts_tma_copy.run_tma_copy_ts(*shape, box=box, stages=stages, blocks=blocks)
    np.testing.assert_array_equal(got, expected)
