"""tcgen05 for a CTA pair (``cta_group::2``) under the interpreter (issue 13): alloc / dealloc by one warp of
each CTA (the same columns in both), one M = 256 MMA issued by the even CTA over both CTAs' shared memory
(PTX ISA 9.1 §9.7.16.10.9: CTA c holds A rows 128 c.. and B rows N/2 c.., and gets D rows 128 c..), its
commit multicast to both CTAs' barriers; checked against float64 numpy."""
import numpy as np
import pytest

import tsjit
from tsjit import tcgen05
from tsjit.errors import InterpretError
from tsjit.interpret import numerics

BF16 = tsjit.BFloat16


@pytest.fixture(autouse=True)
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


@tsjit.kernel
def pair_umma(a_map, b_map, out, N: tsjit.Constexpr[int], PEER_ALLOCS: tsjit.Constexpr[bool] = True):
    """out (256, N) Float32 = A (256, 64) @ B (N, 64)^T by one cta_group::2 MMA (4 k16 steps) on a
    2-CTA cluster: CTA c TMA-loads A rows 128 c.. and B rows N/2 c.., the pair meets at a cluster
    barrier, CTA 0's thread 0 issues, the commit arrives on both CTAs' barrier; each CTA stores its
    128 rows from its TMEM.  PEER_ALLOCS=False: CTA 1's warp skips the pair's alloc (a deadlock)."""
    a = tsjit.shared_array(BF16, (128, 64), align=1024)
    b = tsjit.shared_array(BF16, (N // 2, 64), align=1024)
    bars = tsjit.shared_array(tsjit.Int64, 2, align=8)
    slot = tsjit.shared_array(tsjit.Uint32, (1,), align=4)
    tid = tsjit.thread_idx().x
    warp = tsjit.warp_idx()
    rank = tsjit.cluster_ctarank()
    if tid == 0:
        tsjit.mbarrier_init(bars.ptr, 1)
        tsjit.mbarrier_init(bars.ptr + 1, 1)
        tsjit.fence_mbarrier_init()
    if warp == 0:
        if tsjit.const_expr(PEER_ALLOCS):
            tcgen05.alloc(slot, N, cta_group=2)
            tcgen05.relinquish_alloc_permit(cta_group=2)
        else:
            if rank == 0:
                tcgen05.alloc(slot, N, cta_group=2)
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    tcgen05.fence_after_thread_sync()
    tmem = slot[0]
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bars.ptr, a_map.box_bytes + b_map.box_bytes)
        tsjit.tma_load(a_map, a, bars.ptr, (128 * rank, 0))
        tsjit.tma_load(b_map, b, bars.ptr, ((N // 2) * rank, 0))
    tsjit.mbarrier_wait(bars.ptr, 0)
    tsjit.cluster_sync()
    if rank == 0:
        if tid == 0:
            a_desc = tcgen05.make_smem_descriptor(a)
            b_desc = tcgen05.make_smem_descriptor(b)
            for kk in tsjit.range_constexpr(4):
                tcgen05.mma(tmem, a_desc.k_step(kk), b_desc.k_step(kk), m=256, n=N, a_dtype=BF16,
                            accumulate=kk > 0, cta_group=2)
            tcgen05.commit(bars.ptr + 1, cta_group=2, multicast_mask=0b11)
    tsjit.mbarrier_wait(bars.ptr + 1, 0)
    tcgen05.fence_after_thread_sync()
    row = 128 * rank + 32 * (warp % 4) + tsjit.lane_idx()
    for c in tsjit.range_constexpr(N // 32):
        values = tcgen05.ld(tcgen05.tmem_address(tmem, lane=32 * (warp % 4), column=32 * c), num=32)
        tcgen05.wait_ld()
        for j in tsjit.range_constexpr(32):
            out[row, 32 * c + j] = values[j]
    tcgen05.fence_before_thread_sync()
    tsjit.cluster_sync()
    if warp == 0:
        tcgen05.dealloc(tmem, N, cta_group=2)


def _launch(n: int, peer_allocs: bool = True):
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((256, 64)), BF16)
    b = numerics.encode(rng.standard_normal((n, 64)), BF16)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (128, 64), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (n // 2, 64), swizzle="128B")
    out = tsjit.empty((256, n), tsjit.Float32).fill_bytes(0xFF)
    pair_umma[(2,), (128,)](a_map, b_map, out, N=n, PEER_ALLOCS=peer_allocs, cluster=(2, 1, 1))
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    return out.numpy(), want


@pytest.mark.parametrize("n", [64, 256])
def test_a_pair_mma_is_a_at_b_over_both_ctas(n):
    got, want = _launch(n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_pair_alloc_waits_for_a_warp_of_the_peer_cta():
    with pytest.raises(InterpretError, match="deadlock") as info:
        _launch(64, peer_allocs=False)
    assert "waiting for a warp of CTA rank 1" in str(info.value)
