"""A one-CTA UMMA kernel for the interpreter's tcgen05 handlers (sm_100a)."""
import tsjit
from tsjit import tcgen05


@tsjit.kernel
def umma_tile(a_map, b_map, out, N: tsjit.Constexpr[int], MODE: tsjit.Constexpr[str] = "ok",
              SHAPE: tsjit.Constexpr[str] = "32x32b", NUM: tsjit.Constexpr[int] = 32, WS: tsjit.Constexpr[int] = 0):
    """out (128, N) Float32 = A (128, 64) @ B (N, 64)^T: TMA-loaded 128B-swizzled tiles, 4 tcgen05.mma
    k16 steps into TMEM, tcgen05.commit on an mbarrier, tcgen05.ld 32x32b by warps 0-3.  Planted bugs:
    MODE "early" reads TMEM before waiting on the commit's barrier; "overwrite" zeroes A in shared
    memory after the commit, before its arrival; "free" deallocates TMEM without waiting.  SHAPE / NUM:
    the tcgen05.ld that reads D back (the 16-lane shapes store each register at the cell the PTX ISA
    fragment names, §9.7.16.8.3; 16x256b: the m16n8 accumulator image).  WS: the M of weight-stationary
    ``tcgen05.mma.ws`` MMAs issued instead (0: plain ``tcgen05.mma``)."""
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
            if tsjit.const_expr(WS):
                tcgen05.mma_ws(tmem, a_desc.k_step(kk), b_desc.k_step(kk), m=WS, n=N, a_dtype=tsjit.BFloat16,
                               accumulate=kk > 0)
            else:
                tcgen05.mma(tmem, a_desc.k_step(kk), b_desc.k_step(kk), m=128, n=N, a_dtype=tsjit.BFloat16,
                            accumulate=kk > 0)
        tcgen05.commit(bars.ptr + 1)
    if tsjit.const_expr(MODE == "overwrite"):
        for i in range(tid, 128 * 64, 128):
            a[i // 64, i % 64] = tsjit.BFloat16(0)
    if tsjit.const_expr(MODE != "early" and MODE != "free"):
        tsjit.mbarrier_wait(bars.ptr + 1, 0)
    if tsjit.const_expr(MODE == "free"):
        tsjit.syncthreads()
        if warp == 0:
            tcgen05.dealloc(tmem, N)
    else:
        tcgen05.fence_after_thread_sync()
        _read_back(tmem, out, warp, tsjit.lane_idx(), N, SHAPE, NUM)
        if tsjit.const_expr(MODE == "early"):
            tsjit.mbarrier_wait(bars.ptr + 1, 0)
        tcgen05.fence_before_thread_sync()
        tsjit.syncthreads()
        if warp == 0:
            tcgen05.dealloc(tmem, N)


def _read_back(tmem, out, warp, lane, n: int, shape: str, num: int) -> None:
    """Device-code helper (traced into the kernel): warp ``warp`` reads its TMEM quarter of the 128 x n
    Float32 D with tcgen05.ld.<shape>.x<num> and stores each register at its (row, column) of out."""
    quarter = 32 * (warp % 4)
    if shape == "32x32b":
        for c in range(n // num):
            values = tcgen05.ld(tcgen05.tmem_address(tmem, lane=quarter, column=num * c), num=num)
            tcgen05.wait_ld()
            for j in range(num):
                out[quarter + lane, num * c + j] = values[j]
        return
    g, q = lane // 4, lane % 4
    width = {"16x64b": 2, "16x128b": 4, "16x256b": 8}[shape] * num
    for half in range(2):
        row0 = quarter + 16 * half
        for c in range(n // width):
            v = tcgen05.ld(tcgen05.tmem_address(tmem, lane=row0, column=width * c), shape=shape, num=num)
            tcgen05.wait_ld()
            for i in range(num):
                if shape == "16x256b":
                    col = width * c + 8 * i + 2 * q
                    out[row0 + g, col] = v[4 * i]
                    out[row0 + g, col + 1] = v[4 * i + 1]
                    out[row0 + g + 8, col] = v[4 * i + 2]
                    out[row0 + g + 8, col + 1] = v[4 * i + 3]
                elif shape == "16x128b":
                    out[row0 + g, width * c + 4 * i + q] = v[2 * i]
                    out[row0 + g + 8, width * c + 4 * i + q] = v[2 * i + 1]
                else:
                    out[row0 + g + 8 * (lane % 2), width * c + 2 * i + (lane // 2) % 2] = v[i]
