"""A one-CTA UMMA kernel for the interpreter's tcgen05 handlers (sm_100a)."""
import tsjit
from tsjit import tcgen05


@tsjit.kernel
def umma_tile(a_map, b_map, out, N: tsjit.Constexpr[int], MODE: tsjit.Constexpr[str] = "ok"):
    """out (128, N) Float32 = A (128, 64) @ B (N, 64)^T: TMA-loaded 128B-swizzled tiles, 4 tcgen05.mma
    k16 steps into TMEM, tcgen05.commit on an mbarrier, tcgen05.ld 32x32b by warps 0-3.  Planted bugs:
    MODE "early" reads TMEM before waiting on the commit's barrier; "overwrite" zeroes A in shared
    memory after the commit, before its arrival."""
    a = tsjit.shared_array(tsjit.BFloat16, (128, 64), align=1024)
    b = tsjit.shared_array(tsjit.BFloat16, (N, 64), align=1024)
    bars = tsjit.shared_array(tsjit.Int64, 2, align=8)
    slot = tsjit.shared_array(tsjit.Uint32, (1,), align=4)
    tid = tsjit.thread_idx().x
    warp = tsjit.warp_idx()
    if tid == 0:
        tsjit.mbarrier_init(bars.ptr, 1)
        tsjit.mbarrier_init(bars.ptr + 1, 1)
        tsjit.fence_mbarrier_init()
    if warp == 0:
        tcgen05.alloc(slot, N)
        tcgen05.relinquish_alloc_permit()
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    tcgen05.fence_after_thread_sync()
    tmem = slot[0]
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bars.ptr, a_map.box_bytes + b_map.box_bytes)
        tsjit.tma_load(a_map, a, bars.ptr, (0, 0))
        tsjit.tma_load(b_map, b, bars.ptr, (0, 0))
    tsjit.mbarrier_wait(bars.ptr, 0)
    if tid == 0:
        a_desc = tcgen05.make_smem_descriptor(a)
        b_desc = tcgen05.make_smem_descriptor(b)
        for kk in tsjit.range_constexpr(4):
            tcgen05.mma(tmem, a_desc.k_step(kk), b_desc.k_step(kk), m=128, n=N, a_dtype=tsjit.BFloat16,
                        accumulate=kk > 0)
        tcgen05.commit(bars.ptr + 1)
    if tsjit.const_expr(MODE == "overwrite"):
        for i in range(tid, 128 * 64, 128):
            a[i // 64, i % 64] = tsjit.BFloat16(0)
    if tsjit.const_expr(MODE != "early"):
        tsjit.mbarrier_wait(bars.ptr + 1, 0)
    tcgen05.fence_after_thread_sync()
    row = 32 * (warp % 4) + tsjit.lane_idx()
    for c in tsjit.range_constexpr(N // 32):
        values = tcgen05.ld(tcgen05.tmem_address(tmem, lane=32 * (warp % 4), column=32 * c), num=32)
        tcgen05.wait_ld()
        for j in tsjit.range_constexpr(32):
            out[row, 32 * c + j] = values[j]
    if tsjit.const_expr(MODE == "early"):
        tsjit.mbarrier_wait(bars.ptr + 1, 0)
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    if warp == 0:
        tcgen05.dealloc(tmem, N)
