"""Planted kernel bugs the interpreter catches, by its numerics or its detectors (issue 13 "Sensitivity").

With test_races.py (missing syncthreads), test_core.py (a shuffle lane outside its mask) and
test_deadlock.py (missing commit, named barrier short of a warp) that makes the issue's ten and more."""
import os
import sys

import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError
from tsjit.examples import ts_tma_copy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu"))
import hang_programs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")


@tsjit.kernel
def scale_through_tma_store(dst_map, x, FENCE: tsjit.Constexpr[bool]):
    """Every thread writes 2 * x into a 32 x 32 shared tile; one thread TMA-stores it."""
    tile = tsjit.shared_array(tsjit.Float32, (32, 32), align=128)
    tid = tsjit.thread_idx().x
    for i in range(tid, 1024, 128):
        tile[i // 32, i % 32] = x[i // 32, i % 32] * tsjit.Float32(2)
    if tsjit.const_expr(FENCE):
        tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tid == 0:
        tsjit.tma_store(dst_map, tile, (0, 0))
        tsjit.bulk_commit_group()
        tsjit.bulk_wait_group(0)


def _store_case(fence: bool):
    x = np.random.default_rng().standard_normal((32, 32)).astype(np.float32)
    dst = tsjit.empty((32, 32), tsjit.Float32).fill_bytes(0xFF)
    scale_through_tma_store[(1,), (128,)](tsjit.TensorMap(dst, (32, 32)), tsjit.to_device(x), fence)
    return dst.numpy(), x


def test_missing_fence_proxy_async_before_a_tma_store_is_reported(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    got, x = _store_case(True)
    np.testing.assert_array_equal(got, 2 * x)
    with pytest.raises(InterpretError, match="missing fence.proxy.async") as info:
        _store_case(False)
    assert "test_planted_bugs.py:" in str(info.value)


def test_a_wrong_swizzle_gives_the_wrong_numbers_the_gpu_gives(monkeypatch):
    """The TMA copy tutorial's store warps read the tile unswizzled: with a 128B-swizzled descriptor
    every 16-byte chunk of a 128-byte row lands elsewhere (PTX ISA, tensor-map swizzle modes)."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    a = np.random.default_rng().standard_normal((64, 64)).astype(np.float32)
    for swizzle, exact in (("none", True), ("128B", False)):
        src = tsjit.to_device(a)
        dst = tsjit.empty((64, 64), tsjit.Float32).fill_bytes(0xFF)
        src_map = tsjit.TensorMap(src, (32, 32), swizzle=swizzle)
        ts_tma_copy.tma_copy_ts[(1,), (160,)](src_map, dst, 4, 2, 32, 32, 2)
        got = dst.numpy()
        assert np.array_equal(got, a) == exact
        if not exact:   # a permutation of 16-byte chunks within each row: same values, wrong places
            np.testing.assert_array_equal(np.sort(got, axis=1), np.sort(a, axis=1))
            np.testing.assert_array_equal(got[0, :4], a[0, :4])   # row 0 of each 1024-byte atom is not moved


def test_expect_tx_short_by_one_tile_deadlocks_on_the_full_barrier(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    _, _, launch = hang_programs._prepare("short_tma_bytes")
    with pytest.raises(InterpretError, match="deadlock") as info:
        launch()
    text = str(info.value)
    assert "mbarrier smem.full[0]" in text and "16384 transaction bytes pending" in text


def test_a_block_too_small_with_the_launch_check_off_deadlocks(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    _, _, launch = hang_programs._prepare("wrong_block")
    with pytest.raises(InterpretError, match="deadlock") as info:
        launch()
    assert "task 'load" in str(info.value) and "mbarrier smem.empty[0]" in str(info.value)


@tsjit.kernel
def reuse_after_tma_store(dst_map, x, WAIT: tsjit.Constexpr[bool]):
    """Thread 0 stores a tile with TMA, then reuses the tile: legal only after bulk_wait_group(read=True)."""
    tile = tsjit.shared_array(tsjit.Float32, (32, 32), align=128)
    if tsjit.thread_idx().x == 0:
        for i in range(1024):
            tile[i // 32, i % 32] = x[i // 32, i % 32]
        tsjit.fence_proxy_async()
        tsjit.tma_store(dst_map, tile, (0, 0))
        tsjit.bulk_commit_group()
        if tsjit.const_expr(WAIT):
            tsjit.bulk_wait_group(0, read=True)
        tile[0, 0] = tsjit.Float32(0)
        tsjit.bulk_wait_group(0)


def test_reusing_a_tma_store_source_before_its_read_completes_is_a_race(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    x = np.random.default_rng().standard_normal((32, 32)).astype(np.float32)
    for wait in (True, False):
        dst = tsjit.empty((32, 32), tsjit.Float32).fill_bytes(0xFF)
        launch = lambda: reuse_after_tma_store[(1,), (32,)](tsjit.TensorMap(dst, (32, 32)), tsjit.to_device(x), wait)
        if wait:
            launch()
            np.testing.assert_array_equal(dst.numpy(), x)
        else:
            with pytest.raises(InterpretError, match="still reads"):
                launch()


def test_a_wgmma_descriptor_one_stage_off_gives_wrong_numbers(monkeypatch):
    """The GEMM's MMAs read the A/B tiles of the next ring stage: the descriptors are decoded against
    shared memory as on the GPU, so the product is wrong (and right with the true stage)."""
    from tsjit.examples import gemm
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    original = gemm.ABStages.operand_tiles

    def next_stage(self, stage, warpgroup):
        return original(self, (stage + 1) % self.pipeline_config.num_stages, warpgroup)

    rng = np.random.default_rng()
    a = gemm.bf16_round(rng.standard_normal((128, 256)).astype(np.float32))
    b = gemm.bf16_round(rng.standard_normal((256, 256)).astype(np.float32))
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    for planted in (False, True):
        if planted:
            monkeypatch.setattr(gemm.ABStages, "operand_tiles", next_stage)
        c = tsjit.empty((128, 256), tsjit.BFloat16).fill_bytes(0xFF)
        a_map = tsjit.TensorMap(tsjit.to_device(a, tsjit.BFloat16), (gemm.BM, gemm.BK), swizzle="128B")
        b_map = tsjit.TensorMap(tsjit.to_device(b, tsjit.BFloat16), (256, gemm.BK), swizzle="128B")
        c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B")
        group_m = 5 if planted else 7   # distinct specializations: the planted program is lowered afresh
        gemm.gemm_ts[(1,), (gemm.THREADS,)](a_map, b_map, c, c_map, 128, 256, 256, 256, 3, group_m, 1, "tma", "K")
        from tsjit.runtime.arrays import bfloat16_bits_to_float32
        got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert (err > 0.3) if planted else (err < 1e-2), (planted, err)


def test_a_release_before_the_mma_retired_is_a_race(monkeypatch):
    """The GEMM's consumer drops its wgmma.wait_group(1): the ring releases a stage whose MMA is still
    reading it, and the producer's next TMA overwrites it.  The TaskManager's checker refuses this program;
    with skip_validation=True the interpreter's race checker reports both lines."""
    from interpret.planted_gemm import gemm_error, plant_early_release
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    plant_early_release(monkeypatch, None)
    with pytest.raises(InterpretError, match="still reads") as info:
        gemm_error(6)
    text = str(info.value)
    assert "planted_gemm.py:" in text and "gemm.py:" in text and "task 'load" in text
