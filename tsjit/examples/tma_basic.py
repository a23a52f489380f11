"""A plain (non-TS) TMA round trip: each CTA loads one box with TMA into shared memory,
completing on an mbarrier, then stores it back out with a TMA store.  Checks the device
layer (descriptors, mbarrier expect_tx / parity wait, bulk groups) on its own."""
from __future__ import annotations

import numpy as np

import tsjit


@tsjit.kernel
def tma_roundtrip(src_map, dst_map, BOX_M: tsjit.Constexpr[int], BOX_N: tsjit.Constexpr[int]):
    tile = tsjit.shared_array(tsjit.Float32, (BOX_M, BOX_N), align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tid = tsjit.thread_idx().x
    row = tsjit.block_idx().y * BOX_M
    col = tsjit.block_idx().x * BOX_N
    if tid == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
    tsjit.syncthreads()
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bar.ptr, BOX_M * BOX_N * 4)
        tsjit.tma_load(src_map, tile, bar.ptr, (row, col))
    tsjit.mbarrier_wait(bar.ptr, 0)
    # every thread touches the tile through the generic proxy: scale by 2
    for i in range(tid, BOX_M * BOX_N, tsjit.block_dim().x):
        tile.ptr[i] = tile.ptr[i] * 2.0
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tid == 0:
        tsjit.tma_store(dst_map, tile, (row, col))
        tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0)


def run_tma_roundtrip(M: int = 300, N: int = 200, box=(32, 64), rng=None):
    rng = rng or np.random.default_rng()
    a = rng.standard_normal((M, N)).astype(np.float32)
    src = tsjit.to_device(a)
    dst = tsjit.empty((M, N), tsjit.Float32).fill_bytes(0xFF)
    src_map = tsjit.TensorMap(src, box)
    dst_map = tsjit.TensorMap(dst, box)
    grid = ((N + box[1] - 1) // box[1], (M + box[0] - 1) // box[0])
    tma_roundtrip[grid, (128,)](src_map, dst_map, box[0], box[1])
    return dst.numpy(), 2.0 * a.astype(np.float64)


@tsjit.kernel
def pdl_producer(x, mid, n):
    """mid = x + 1, then lets the dependent grid launch."""
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        mid[i] = x[i] + 1.0
    tsjit.griddepcontrol_launch_dependents()


@tsjit.kernel
def pdl_consumer(mid, out, n):
    """Waits for the primary grid, then out = 2 * mid (reads the producer's output)."""
    tsjit.griddepcontrol_wait()
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        out[i] = mid[i] * 2.0


def run_pdl_chain(n: int = 1 << 22, rng=None):
    rng = rng or np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    mid = tsjit.empty(n, tsjit.Float32).fill_bytes(0xFF)
    out = tsjit.empty(n, tsjit.Float32).fill_bytes(0xFF)
    dx = tsjit.to_device(x)
    grid = ((n + 255) // 256,)
    pdl_producer[grid, (256,)](dx, mid, n)
    pdl_consumer[grid, (256,)](mid, out, n, pdl=True)
    return out.numpy(), 2.0 * (x.astype(np.float64) + 1.0)


@tsjit.kernel
def cluster_exchange(out):
    """In a cluster of 2 CTAs, each CTA writes (its rank + 1) * 1000 + tid into the *other* CTA's
    shared memory through DSMEM, then reads its own buffer back after a cluster barrier."""
    buf = tsjit.shared_array(tsjit.Int32, 128)
    tid = tsjit.thread_idx().x
    rank = tsjit.cluster_ctarank()
    peer = tsjit.map_shared_rank(buf.ptr + tid, 1 - rank)
    tsjit.cluster_sync()
    peer.store((rank + 1) * 1000 + tid)
    tsjit.cluster_sync()
    out[tsjit.block_idx().x * 128 + tid] = buf[tid]


def run_cluster_exchange(blocks: int = 8):
    out = tsjit.empty(blocks * 128, tsjit.Int32).fill_bytes(0xFF)
    cluster_exchange[(blocks,), (128,)](out, cluster=(2, 1, 1))
    expected = np.empty(blocks * 128, np.int64)
    for b in range(blocks):
        peer_rank = 1 - (b % 2)
        expected[b * 128:(b + 1) * 128] = (peer_rank + 1) * 1000 + np.arange(128)
    return out.numpy(), expected
