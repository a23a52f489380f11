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


@pytest.mark.parametrize("shape,box,stages", [((1000, 1024), (32, 256), 4), ((4096, 4096), (16, 256), 2),
                                              ((77, 260), (8, 64), 3)])
def test_ts_tma_bandwidth_copy_is_exact(shape, box, stages):
    import tsjit
    a = np.random.default_rng().standard_normal(shape).astype(np.float32)
    src = tsjit.to_device(a)
    dst = tsjit.empty(shape, tsjit.Float32).fill_bytes(0xFF)
    ts_tma_copy.launch_tma_copy_bw(src, dst, box=box, stages=stages, blocks=264)
    np.testing.assert_array_equal(dst.numpy(), a)


@pytest.mark.parametrize("kind", ["pingpong", "interleaved"])
@pytest.mark.parametrize("n,blocks", [(1 << 22, 132), (1_000_001, 7), (5, 1), (0, 3)])
def test_ts_async_async_pipelines_are_exact(kind, n, blocks):
    from tsjit.examples import ts_async
    got, ref = ts_async.run_async(kind, n, blocks)
    np.testing.assert_array_equal(got, ref.astype(np.float32))
