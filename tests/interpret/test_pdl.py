"""griddepcontrol under the interpreter: a no-op with its ordering checked (issue 13, tsjit.interpret.pdl).

A pdl=True launch's primary grid is the previous interpreted launch; a thread of the dependent grid
that touches bytes the primary wrote before it is ordered after griddepcontrol.wait is an
InterpretError naming the array, the line and the primary kernel."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError
from tsjit.examples import tma_basic, ts_pdl

N = 512


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")


@tsjit.kernel
def reads_then_waits(x, mid, out, n, EARLY: tsjit.Constexpr[bool]):
    """out = 2 * mid + x; x (not the primary's) is read before the wait, mid before it when EARLY."""
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    acc = tsjit.Float32(0)
    if i < n:
        acc = x[i]
        if tsjit.const_expr(EARLY):
            acc = acc + mid[i] * 2.0
    tsjit.griddepcontrol_wait()
    if i < n:
        if tsjit.const_expr(not EARLY):
            acc = acc + mid[i] * 2.0
        out[i] = acc


@tsjit.kernel
def one_thread_waits(mid, out, n, SYNC: tsjit.Constexpr[bool]):
    """Thread 0 of each CTA waits; the others are ordered after it by syncthreads (SYNC) or not at all."""
    if tsjit.thread_idx().x == 0:
        tsjit.griddepcontrol_wait()
    if tsjit.const_expr(SYNC):
        tsjit.syncthreads()
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        out[i] = mid[i] * 2.0


@tsjit.kernel
def tma_reads_early(mid_map, out, WAIT_FIRST: tsjit.Constexpr[bool]):
    """Thread 0 TMA-loads a 32 x 32 box of mid (before or after griddepcontrol.wait); out = the box."""
    tile = tsjit.shared_array(tsjit.Float32, (32, 32), align=128)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tid = tsjit.thread_idx().x
    if tid == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
    tsjit.syncthreads()
    if tsjit.const_expr(WAIT_FIRST):
        tsjit.griddepcontrol_wait()
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bar.ptr, 32 * 32 * 4)
        tsjit.tma_load(mid_map, tile, bar.ptr, (0, 0))
    tsjit.mbarrier_wait(bar.ptr, 0)
    for i in range(tid, 1024, 128):
        out[i // 32, i % 32] = tile[i // 32, i % 32]


@tsjit.kernel
def tile_plus_one(x, mid):
    """mid = x + 1 on a 32 x 32 tile (128 threads), then lets the dependent grid launch."""
    for i in range(tsjit.thread_idx().x, 1024, 128):
        mid[i // 32, i % 32] = x[i // 32, i % 32] + 1.0
    tsjit.griddepcontrol_launch_dependents()


def _primary(x):
    """mid = x + 1 by a primary grid ending with griddepcontrol.launch_dependents (1-D: tma_basic's)."""
    mid = tsjit.empty(x.shape, tsjit.Float32).fill_bytes(0xFF)
    if x.ndim == 2:
        tile_plus_one[(1,), (128,)](tsjit.to_device(x), mid)
    else:
        tma_basic.pdl_producer[((x.size + 255) // 256,), (256,)](tsjit.to_device(x), mid, x.size)
    return mid


def test_the_pdl_chain_waiting_first_is_exact():
    got, ref = tma_basic.run_pdl_chain(N)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    got, ref = ts_pdl.run_pdl_chain(N, blocks=2, warps=2)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_reading_the_primarys_output_before_the_wait_is_reported():
    x = np.random.default_rng().standard_normal(N).astype(np.float32)
    mid = _primary(x)
    out = tsjit.empty((N,), tsjit.Float32).fill_bytes(0xFF)
    with pytest.raises(InterpretError, match="programmatic dependent launch") as info:
        reads_then_waits[(2,), (256,)](tsjit.to_device(x), mid, out, N, True, pdl=True)
    text = str(info.value)
    assert "argument 'mid'" in text and "'pdl_producer'" in text and "griddepcontrol.wait" in text
    assert "test_pdl.py:" in text and "load" in text


def test_reading_other_data_before_the_wait_is_the_point_of_pdl():
    x = np.random.default_rng().standard_normal(N).astype(np.float32)
    mid = _primary(x)
    out = tsjit.empty((N,), tsjit.Float32).fill_bytes(0xFF)
    reads_then_waits[(2,), (256,)](tsjit.to_device(x), mid, out, N, False, pdl=True)
    np.testing.assert_allclose(out.numpy(), x.astype(np.float64) + 2.0 * (x.astype(np.float64) + 1.0), rtol=1e-6)


def test_without_pdl_stream_order_makes_the_early_read_safe():
    x = np.random.default_rng().standard_normal(N).astype(np.float32)
    mid = _primary(x)
    out = tsjit.empty((N,), tsjit.Float32).fill_bytes(0xFF)
    reads_then_waits[(2,), (256,)](tsjit.to_device(x), mid, out, N, True)
    np.testing.assert_allclose(out.numpy(), x.astype(np.float64) + 2.0 * (x.astype(np.float64) + 1.0), rtol=1e-6)


def test_threads_ordered_after_the_waiting_thread_by_a_barrier_may_read():
    x = np.random.default_rng().standard_normal(N).astype(np.float32)
    mid = _primary(x)
    out = tsjit.empty((N,), tsjit.Float32).fill_bytes(0xFF)
    one_thread_waits[(2,), (256,)](mid, out, N, True, pdl=True)
    np.testing.assert_allclose(out.numpy(), 2.0 * (x.astype(np.float64) + 1.0), rtol=1e-6)
    mid = _primary(x)
    with pytest.raises(InterpretError, match="before the thread is ordered after griddepcontrol.wait") as info:
        one_thread_waits[(2,), (256,)](mid, out, N, False, pdl=True)
    assert "thread 0 " not in str(info.value).split(" at ")[0]   # the reader is another thread


def test_a_tma_load_of_the_primarys_output_needs_the_wait_first():
    x = np.random.default_rng().standard_normal((32, 32)).astype(np.float32)
    for wait_first in (True, False):
        mid = _primary(x)
        out = tsjit.empty((32, 32), tsjit.Float32).fill_bytes(0xFF)
        launch = lambda: tma_reads_early[(1,), (128,)](tsjit.TensorMap(mid, (32, 32)), out, wait_first, pdl=True)
        if wait_first:
            launch()
            np.testing.assert_allclose(out.numpy(), x.astype(np.float64) + 1.0, rtol=1e-6)
        else:
            with pytest.raises(InterpretError, match="TMA load") as info:
                launch()
            assert "'tile_plus_one'" in str(info.value) and "mid_map's array" in str(info.value)
