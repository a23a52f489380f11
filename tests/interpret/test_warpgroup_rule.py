"""A warpgroup collective run by warps that are not a warpgroup (newcomer report 6, item 7): the
interpreter names the rule (4 consecutive warps starting at a multiple of 4, PTX ISA 9.7.15) instead
of "thread 0 is in the member mask but has exited"."""
import numpy as np
import pytest

import tsjit
from tsjit import wgmma


@tsjit.kernel
def _wgmma_from_warp(c, FIRST_WARP: tsjit.Constexpr[int]):
    a_s = tsjit.shared_array(tsjit.Float16, (64, 64), align=1024)
    b_s = tsjit.shared_array(tsjit.Float16, (64, 64), align=1024)
    tid = tsjit.thread_idx().x
    for i in range(tid, 64 * 64, tsjit.block_dim().x):
        a_s[i // 64, i % 64] = 1.0
        b_s[i // 64, i % 64] = 1.0
    tsjit.syncthreads()
    if tid < FIRST_WARP * 32:
        return
    acc = tsjit.Fragment.zeros(32)
    wgmma.fence()
    acc = wgmma.mma_async(acc, wgmma.make_descriptor(a_s, major="K", swizzle="128B"),
                          wgmma.make_descriptor(b_s, major="K", swizzle="128B"), n=64)
    wgmma.commit_group()
    wgmma.wait_group(0)
    acc = wgmma.fence_operand(acc)
    c[tid - FIRST_WARP * 32] = acc[0]


def test_wgmma_by_warps_1_to_4_names_the_warpgroup_rule():
    c = np.zeros(128, np.float32)
    with pytest.raises(tsjit.InterpretError) as info:
        _wgmma_from_warp.interpret[(1,), (160,)](c, 1)
    message = str(info.value)
    # which of the two warpgroups the warps straddle is reported depends on which warp arrives first
    assert "wgmma.mma_async" in message and "multiple of 4" in message and "9.7.15" in message
    assert ("warpgroup 0 (warps 0-3)" in message and "thread(s) 0-31" in message) or \
        "warpgroup 1 of the CTA has 32 threads" in message
    assert "member mask but has exited" not in message


def test_wgmma_by_a_whole_warpgroup_after_an_exited_one_runs():
    c = np.full(128, np.nan, np.float32)
    _wgmma_from_warp.interpret[(1,), (256,)](c, 4)
    assert (c == 16.0).all()      # 16 of the K=16 products of ones (one k16 MMA)
