"""wgmma follows wait_group semantics under the interpreter (issue 13; PTX ISA §9.7.15.7): the MMA reads its
shared-memory operands and writes its accumulators asynchronously, before the ``wgmma.wait_group`` that
retires its group returns.  So reading the accumulators before the wait gives poison (NaN), overwriting the
operands before the wait changes the product, and a GEMM that releases a stage to the producer before its
MMA retired gets wrong numbers (a planted bug caught by numerics alone)."""
import numpy as np
import pytest

import tsjit
from tsjit.errors import InterpretError
from tsjit.interpret.wgmma import mma
from tsjit.lang.fragment import Fragment
from tsjit.lang.wgmma import MMA_K

from .tensor_probe_kernels import SMEM_WORDS, THREADS, WGMMA_CASES, random_operand_bytes

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")

CASE = WGMMA_CASES[0]   # bf16, both K-major, 128B swizzle, n64
N = CASE.n


@tsjit.kernel
def wgmma_hazard(raw, out, desc_a, desc_b, MODE: tsjit.Constexpr[str]):
    """Shared memory = raw; two chained m64n64k16 wgmmas (acc = A B + A B) in one group, then by MODE:
    "ok" wait, then store; "early" store the accumulators, then wait; "overwrite" zero the operands,
    then wait and store."""
    smem = tsjit.shared_array(tsjit.Uint32, SMEM_WORDS, align=1024)
    tid = tsjit.thread_idx().x
    for i in range(tid, SMEM_WORDS, THREADS):
        smem[i] = raw[i]
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    base = tsjit.wgmma.make_descriptor(smem, major="K", swizzle="none", leading_byte_offset=16,
                                       stride_byte_offset=16)
    field = base & 0x3FFF
    acc = Fragment.zeros(N // 2)
    tsjit.wgmma.fence()
    acc = tsjit.wgmma.mma_async(acc, field + desc_a, field + desc_b, n=N, a_dtype="bf16", b_dtype="bf16")
    acc = tsjit.wgmma.mma_async(acc, field + desc_a, field + desc_b, n=N, a_dtype="bf16", b_dtype="bf16")
    tsjit.wgmma.commit_group()
    if tsjit.const_expr(MODE == "early"):
        for i in tsjit.range_constexpr(N // 2):
            out[tid * (N // 2) + i] = acc[i]
    if tsjit.const_expr(MODE == "overwrite"):
        for i in range(tid, SMEM_WORDS, THREADS):
            smem[i] = tsjit.Uint32(0)
        tsjit.syncthreads()
    tsjit.wgmma.wait_group(0)
    acc = tsjit.wgmma.fence_operand(acc)
    if tsjit.const_expr(MODE != "early"):
        for i in tsjit.range_constexpr(N // 2):
            out[tid * (N // 2) + i] = acc[i]


def _run(mode: str):
    raw = random_operand_bytes(CASE, np.random.default_rng())
    a_desc, b_desc = CASE.descriptors()
    out = tsjit.empty((THREADS * N // 2,), tsjit.Float32).fill_bytes(0x00)
    wgmma_hazard[(1,), (THREADS,)](tsjit.to_device(raw), out, np.uint64(a_desc), np.uint64(b_desc), mode)
    zero = np.zeros((THREADS, N // 2), np.float32)
    once = mma(64, N, MMA_K["bf16"], "bf16", "bf16", "f32", a_desc, None, b_desc, raw.view(np.uint8), zero, False,
               1, 1, 0, 0)
    return out.numpy().reshape(THREADS, N // 2), once


def test_accumulators_are_valid_after_the_wait_and_chain_through_in_flight_registers(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, once = _run("ok")
    assert np.abs(once).max() > 1
    np.testing.assert_allclose(got, 2 * once.astype(np.float64), rtol=1e-6, atol=1e-5)


def test_reading_the_accumulators_before_the_wait_gives_poison(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, _ = _run("early")
    assert np.isnan(got).all()


def test_overwriting_the_operands_before_the_wait_changes_the_product(monkeypatch):
    """The MMA reads shared memory as late as the hardware may: here after the zeroing (the GPU may too)."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    got, once = _run("overwrite")
    assert np.abs(once).max() > 1
    np.testing.assert_array_equal(got, np.zeros_like(got))


def test_overwriting_the_operands_before_the_wait_is_a_race_under_the_checker(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    with pytest.raises(InterpretError, match="still reads") as info:
        _run("overwrite")
    assert "test_async_wgmma.py:" in str(info.value)


def _gemm_keeping_two_groups_in_flight(monkeypatch):
    """The GEMM with the consumer's ``wgmma.wait_group(1)`` weakened to ``wait_group(2)``: the ring releases
    the previous stage while its MMA group may still be in flight (skip_validation: the TaskManager's
    checker cannot see the wait count)."""
    from tsjit import ts, wgmma
    from tsjit.examples import gemm
    from tsjit.ops import gemm_program
    from tsjit.ts import task_manager

    @ts.consumer_work(returns="acc")
    def mma_wait_two(self, stage_info, acc):
        x_tile, x_major, y_tile, y_major = self.operand_tiles(stage_info.stage_idx, tsjit.warp_idx() // 4 - 1)
        x_desc = wgmma.make_descriptor(x_tile, major=x_major, swizzle="128B")
        y_desc = wgmma.make_descriptor(y_tile, major=y_major, swizzle="128B")
        wgmma.fence()
        for k in tsjit.range_constexpr(gemm_program.K_STEPS):
            acc = wgmma.mma_async(acc, x_desc.k_step(k), y_desc.k_step(k), n=self.block_n)
        wgmma.commit_group()
        wgmma.wait_group(2)   # the planted bug: the stage released next may still be read
        return acc

    original_init = task_manager.TaskManager.__init__

    def unchecked(self, *args, **keywords):
        original_init(self, *args, **{**keywords, "skip_validation": True})
    monkeypatch.setattr(gemm.ABStages, "mma", mma_wait_two)
    monkeypatch.setattr(task_manager.TaskManager, "__init__", unchecked)
    return gemm


def _gemm_error(gemm, group_m: int) -> float:
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    rng = np.random.default_rng()
    a = gemm._bf16_round(rng.standard_normal((128, 512)).astype(np.float32))
    b = gemm._bf16_round(rng.standard_normal((256, 512)).astype(np.float32))
    c = tsjit.empty((128, 256), tsjit.BFloat16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(tsjit.to_device(a, tsjit.BFloat16), (gemm.BM, gemm.BK), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, tsjit.BFloat16), (256, gemm.BK), swizzle="128B")
    c_map = tsjit.TensorMap(c, (64, 64), swizzle="128B")
    gemm.gemm_ts[(1,), (gemm.THREADS,)](a_map, b_map, c, c_map, 128, 256, 512, 256, 3, group_m, 1, "tma", "K")
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    return float(np.linalg.norm(np.nan_to_num(got, nan=1e6) - ref) / np.linalg.norm(ref))


def test_a_release_before_the_mma_retired_gives_wrong_numbers(monkeypatch):
    """Planted bug (issue 13 "Sensitivity"), caught by numerics without the race checker: the producer's
    next TMA overwrites the released stage before the MMAs that read it execute."""
    from tsjit.examples import gemm
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    assert _gemm_error(gemm, 7) < 1e-2            # the true program (its own specialization)
    planted = _gemm_keeping_two_groups_in_flight(monkeypatch)
    assert _gemm_error(planted, 4) > 0.3


def test_a_release_before_the_mma_retired_is_reported_by_the_race_checker(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    planted = _gemm_keeping_two_groups_in_flight(monkeypatch)
    with pytest.raises(InterpretError, match="still reads") as info:
        _gemm_error(planted, 3)
    assert "test_async_wgmma.py:" in str(info.value) and "task 'load" in str(info.value)
