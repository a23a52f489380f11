"""An MXFP8 block-scaled UMMA kernel (sm_100a: ``tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X``) run by
the CPU interpreter against float64 numpy: E4M3 A (128 x 128) and B (N x 128) TMA-loaded with 128-byte swizzle,
one UE8M0 scale per 32 elements; one ``tcgen05.cp.32x128b.warpx4`` copies every row's four scales (one byte per
MMA) into TMEM and MMA ``kk`` selects byte ``kk`` with its scale-factor ids (PTX ISA 9.1 §9.7.16.10.7.2: 1X scales
sit in a 1-byte sub-column chosen by SFA_ID / SFB_ID).  Also: the same kernel with one MMA selecting the wrong
byte gives wrong numbers."""
import numpy as np
import pytest

import tsjit
from tsjit import tcgen05
from tsjit.interpret import numerics

E4M3 = tsjit.Float8E4M3


@tsjit.kernel
def mxfp8_tile(a_map, b_map, sfa, sfb, out, N: tsjit.Constexpr[int], WRONG_ID: tsjit.Constexpr[bool] = False):
    """out (128, N) Float32 = (A * SFA) @ (B * SFB)^T over K = 128 (4 MMAs of K = 32).  ``sfa`` / ``sfb``: the
    scale bytes in TMEM order, 16 per lane (row ``32 c + i`` of MMA ``kk`` at byte ``4 c + kk`` of lane ``i``),
    32 lanes for A and ``32 ceil(N / 128)`` for B."""
    a = tsjit.shared_array(E4M3, (128, 128), align=1024)
    b = tsjit.shared_array(E4M3, (N, 128), align=1024)
    scales = tsjit.shared_array(tsjit.Uint8, (64, 16), align=128)
    bars = tsjit.shared_array(tsjit.Int64, 2, align=8)
    slot = tsjit.shared_array(tsjit.Uint32, (1,), align=4)
    tid = tsjit.thread_idx().x
    warp = tsjit.warp_idx()
    for i in range(tid, 32 * 16, 128):
        scales[i // 16, i % 16] = sfa[i]
        scales[32 + i // 16, i % 16] = sfb[i]
    tsjit.fence_proxy_async()
    if tid == 0:
        tsjit.mbarrier_init(bars.ptr, 1)
        tsjit.mbarrier_init(bars.ptr + 1, 1)
        tsjit.fence_mbarrier_init()
    if warp == 0:
        tcgen05.alloc(slot, 512)
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
        blocks = scales.reshape((2, 32, 16))
        for which in tsjit.range_constexpr(2):
            desc = tcgen05.make_smem_descriptor(blocks[which], swizzle="none", leading_byte_offset=128,
                                                stride_byte_offset=128)
            tcgen05.cp(tmem + 256 + 8 * which, desc, shape="32x128b", multicast="warpx4")
        a_desc = tcgen05.make_smem_descriptor(a)
        b_desc = tcgen05.make_smem_descriptor(b)
        for kk in tsjit.range_constexpr(4):
            sf_id = (kk + 1) % 4 if tsjit.const_expr(WRONG_ID and kk == 2) else kk
            tcgen05.mma_block_scaled(tmem, a_desc.k_step(kk), b_desc.k_step(kk), tmem + 256, tmem + 264, m=128, n=N,
                                     kind="mxf8f6f4", a_dtype=E4M3, b_dtype=E4M3, scale_type="ue8m0",
                                     scale_a_id=sf_id, scale_b_id=sf_id, accumulate=kk > 0)
        tcgen05.commit(bars.ptr + 1)
    tsjit.mbarrier_wait(bars.ptr + 1, 0)
    tcgen05.fence_after_thread_sync()
    quarter = 32 * (warp % 4)
    for c in tsjit.range_constexpr(N // 32):
        values = tcgen05.ld(tcgen05.tmem_address(tmem, lane=quarter, column=32 * c), num=32)
        tcgen05.wait_ld()
        for j in tsjit.range_constexpr(32):
            out[quarter + tsjit.lane_idx(), 32 * c + j] = values[j]
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    if warp == 0:
        tcgen05.dealloc(tmem, 512)


def tmem_order(codes: np.ndarray) -> np.ndarray:
    """Scale codes (R <= 128, 4 MMAs) -> the 32 x 16 bytes the copy puts in lanes 0-31: row 32 c + i of MMA kk
    at byte 4 c + kk of lane i."""
    out = np.zeros((32, 16), np.uint8)
    for r in range(codes.shape[0]):
        out[r % 32, 4 * (r // 32):4 * (r // 32) + 4] = codes[r]
    return out.reshape(-1)


def run(n: int, wrong_id: bool = False) -> float:
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((128, 128)), E4M3)
    b = numerics.encode(rng.standard_normal((n, 128)), E4M3)
    sfa = rng.integers(122, 133, (128, 4)).astype(np.uint8)          # 2^-5 .. 2^5
    sfb = rng.integers(122, 133, (n, 4)).astype(np.uint8)
    out = tsjit.empty((128, n), tsjit.Float32).fill_bytes(0xFF)
    mxfp8_tile[(1,), (128,)](tsjit.TensorMap(tsjit.to_device(a, E4M3), (128, 128), swizzle="128B"),
                             tsjit.TensorMap(tsjit.to_device(b, E4M3), (n, 128), swizzle="128B"),
                             tmem_order(sfa), tmem_order(sfb), out, N=n, WRONG_ID=wrong_id)
    scale = lambda codes: np.repeat(2.0 ** (codes.astype(np.float64) - 127), 32, axis=1)
    want = (numerics.decode(a, E4M3) * scale(sfa)) @ (numerics.decode(b, E4M3) * scale(sfb)).T
    return np.linalg.norm(np.nan_to_num(out.numpy() - want, nan=1e30)) / np.linalg.norm(want)


@pytest.fixture(autouse=True)
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


@pytest.mark.parametrize("n", [64, 128])
def test_mxfp8_block_scaled_umma_is_the_scaled_product(n):
    assert run(n) < 1e-6


def test_an_mma_reading_another_mmas_scale_byte_gives_wrong_numbers():
    assert run(128, wrong_id=True) > 0.05
