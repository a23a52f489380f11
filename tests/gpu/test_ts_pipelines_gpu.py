"""TS pipelines on the GPU (issue 4): the 2-D TMA copy through a TmaAsync ring, exact against numpy,
for several stage counts, tile sizes and shapes that are not multiples of the tile.  Also under the
CPU interpreter (``gpu_or_interpret``) at reduced sizes: at most a few tiles and CTAs."""
import importlib.util

import numpy as np
import pytest

from tsjit import env
from tsjit.examples import ts_tma_copy

pytestmark = pytest.mark.gpu_or_interpret


def small(gpu_value, interpret_value):
    """The GPU size, or the reduced one under the interpreter."""
    return interpret_value if env.interpret() else gpu_value


def needs_tensor_side():
    """Skip an interpreted TMA test until the tensor side of issue 13 (tsjit/interpret/tma.py) is present."""
    if env.interpret() and importlib.util.find_spec("tsjit.interpret.tma") is None:
        pytest.skip("the interpreter's TMA module (tsjit/interpret/tma.py, issue 13 tensor side) is not present")


@pytest.mark.parametrize("shape,box,stages,blocks", [
    ((1000, 780), (64, 64), 4, 132), ((512, 512), (64, 64), 2, 16), ((257, 132), (32, 32), 3, 7),
    ((4096, 4096), (128, 64), 6, 132), ((64, 64), (64, 64), 1, 1), ((100, 100), (16, 64), 8, 3)])
def test_ts_tma_copy_is_exact(shape, box, stages, blocks):
    needs_tensor_side()
    shape = small(shape, (min(shape[0], 2 * box[0] + 3), min(shape[1], 2 * box[1] + 4)))
    blocks = small(blocks, min(blocks, 3))
    got, expected = ts_tma_copy.run_tma_copy_ts(*shape, box=box, stages=stages, blocks=blocks)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("shape,box,stages,in_flight", [((1000, 1024), (32, 256), 4, 1), ((4096, 4096), (16, 256), 2, 1),
                                                        ((77, 260), (8, 64), 3, 2), ((4096, 4096), (16, 256), 8, 4)])
def test_ts_tma_bandwidth_copy_is_exact(shape, box, stages, in_flight):
    import tsjit
    needs_tensor_side()
    shape = small(shape, (min(shape[0], box[0] * (in_flight + 2) + 1), min(shape[1], box[1] + 4)))
    a = np.random.default_rng().standard_normal(shape).astype(np.float32)
    src = tsjit.to_device(a)
    dst = tsjit.empty(shape, tsjit.Float32).fill_bytes(0xFF)
    ts_tma_copy.launch_tma_copy_bw(src, dst, box=box, stages=stages, blocks=small(264, 2), in_flight=in_flight)
    np.testing.assert_array_equal(dst.numpy(), a)


@pytest.mark.parametrize("kind", ["pingpong", "interleaved", "asyncload"])
@pytest.mark.parametrize("n,blocks", [(1 << 22, 132), (1_000_001, 7), (5, 1), (0, 3)])
def test_ts_async_async_pipelines_are_exact(kind, n, blocks):
    from tsjit.examples import ts_async
    got, ref = ts_async.run_async(kind, small(n, min(n, 3000)), small(blocks, min(blocks, 2)),
                                  chunk=small(1024, 256))
    np.testing.assert_array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("n,extra,blocks", [(1 << 22, 37, 40), (1_000_001, 5, 132), (100, 64, 16), (0, 3, 2)])
def test_ts_static_persistent_copy_skips_overlaunched_tiles(n, extra, blocks):
    from tsjit.examples import ts_persistent
    got, src, padding = ts_persistent.run_persistent_copy(small(n, min(n, 3000)), tile=small(2048, 256),
                                                          extra_tiles=small(extra, min(extra, 3)),
                                                          blocks=small(blocks, min(blocks, 3)), warps=small(4, 2))
    np.testing.assert_array_equal(got, src)
    assert padding.size == 0 or (padding.view(np.uint32) == 0xFFFFFFFF).all()


@pytest.mark.parametrize("rows,max_len,blocks", [(300, 1000, 64), (1, 5, 1), (1000, 64, 132)])
def test_ts_varlen_rows_copy_with_dynamic_domain(rows, max_len, blocks):
    from tsjit.examples import ts_persistent
    got, expected = ts_persistent.run_varlen_copy(small(rows, min(rows, 12)), small(max_len, min(max_len, 70)),
                                                  small(blocks, min(blocks, 3)), warps=small(4, 2))
    filled = ~np.isnan(expected)
    np.testing.assert_array_equal(got[filled], expected[filled])
    assert (got[~filled].view(np.uint32) == 0xFFFFFFFF).all(), "padding was written"


def test_ts_pdl_chain_reads_fresh_data():
    from tsjit.examples import ts_pdl
    got, ref = ts_pdl.run_pdl_chain(*small((), (3000, 3, 2)))
    np.testing.assert_allclose(got, ref, rtol=1e-6)
