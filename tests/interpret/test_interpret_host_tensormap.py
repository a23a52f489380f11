"""``kernel.interpret[grid, block](...)`` with numpy arrays and TensorMaps of them, without
TSJIT_INTERPRET and without a GPU (README "CPU interpreter"; newcomer report, issue 10 §3)."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import LaunchError
from tsjit.runtime import driver

BM, BN = 16, 32


@tsjit.kernel
def _tma_double(src, dst, bm: tsjit.Constexpr, bn: tsjit.Constexpr):
    tile = tsjit.shared_array(tsjit.Float32, (bm, bn))
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    barp = tsjit.address_of(bar, 0)
    row = tsjit.block_idx().y * bm
    col = tsjit.block_idx().x * bn
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_init(barp, 1)
        tsjit.fence_mbarrier_init()
    tsjit.syncthreads()
    if tsjit.thread_idx().x == 0:
        tsjit.mbarrier_arrive_expect_tx(barp, src.box_bytes)
        tsjit.tma_load(src, tile, barp, (row, col))
    tsjit.mbarrier_wait(barp, 0)
    for k in range(tsjit.thread_idx().x, bm * bn, tsjit.block_dim().x):
        tile[k // bn, k % bn] = tile[k // bn, k % bn] * 2.0
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tsjit.thread_idx().x == 0:
        tsjit.tma_store(dst, tile, (row, col))
        tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0)


@pytest.fixture
def no_gpu_no_env(monkeypatch):
    if driver.gpu_available():
        pytest.skip("a GPU is present: host-array TensorMaps then need TSJIT_INTERPRET=1")
    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)


def test_interpret_launch_takes_tensormaps_of_numpy_arrays(no_gpu_no_env):
    m, n = 20, 40                                   # ragged: the last boxes are partly out of bounds
    a = np.random.default_rng().standard_normal((m, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    grid = (-(-n // BN), -(-m // BM))
    _tma_double.interpret[grid, (64,)](tsjit.TensorMap(a, (BM, BN)), tsjit.TensorMap(out, (BM, BN)), BM, BN)
    assert np.array_equal(out, 2 * a)


def test_a_non_array_still_names_what_to_pass(no_gpu_no_env):
    with pytest.raises(LaunchError, match="(?s)must be a device array; got list.*tsjit.to_device.*a numpy array.*TSJIT_INTERPRET=1"):
        tsjit.TensorMap([1.0, 2.0], (2,))
