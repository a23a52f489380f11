"""wgmma follows wait_group semantics under the interpreter (issue 13; PTX ISA §9.7.15.7): the MMA reads its
shared-memory operands and writes its accumulators asynchronously, before the ``wgmma.wait_group`` that
retires its group returns.  So reading the accumulators before the wait gives poison (NaN), overwriting the
operands before the wait changes the product, and a GEMM that releases a stage to the producer before its
MMA retired gets wrong numbers (a planted bug caught by numerics alone)."""
import numpy as np
import pytest

import tsjit
from interpret.planted_gemm import gemm_error, plant_early_release
from interpret.tensor_probe_kernels import THREADS, WGMMA_CASES, random_operand_bytes, wgmma_probe
from tsjit.errors import InterpretError
from tsjit.interpret.wgmma import mma
from tsjit.lang.wgmma import MMA_K

pytestmark = pytest.mark.filterwarnings("ignore::tsjit.ts.diagnostics.VerificationWarning")

CASE = WGMMA_CASES[0]   # bf16, both K-major, 128B swizzle, n64
N = CASE.n


def _run(mode: str):
    raw = random_operand_bytes(CASE, np.random.default_rng())
    a_desc, b_desc = CASE.descriptors()
    out = tsjit.empty((THREADS * N // 2,), tsjit.Float32).fill_bytes(0x00)
    wgmma_probe[(1,), (THREADS,)](tsjit.to_device(raw), out, np.uint64(a_desc), np.uint64(b_desc), N=N, A_TYPE="bf16",
                                  B_TYPE="bf16", TRANS_A=0, TRANS_B=0, MODE=mode)
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
    assert "tensor_probe_kernels.py:" in str(info.value)


def test_a_release_before_the_mma_retired_gives_wrong_numbers(monkeypatch):
    """Planted bug (issue 13 "Sensitivity"), caught by numerics without the race checker: the GEMM's consumer
    waits with wgmma.wait_group(2) instead of (1), so the ring releases a stage whose MMA group may still be
    in flight, and the producer's next TMA overwrites it before the MMAs that read it execute."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    assert gemm_error(7) < 1e-2            # the true program (its own specialization)
    plant_early_release(monkeypatch, 2)
    assert gemm_error(4) > 0.3


def test_a_release_before_the_mma_retired_is_reported_by_the_race_checker(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    plant_early_release(monkeypatch, 2)
    with pytest.raises(InterpretError, match="still reads") as info:
        gemm_error(3)
    assert "planted_gemm.py:" in str(info.value) and "task 'load" in str(info.value)
