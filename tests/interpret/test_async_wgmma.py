"""wgmma follows wait_group semantics under the interpreter (issue 13; PTX ISA §9.7.15.7): the MMA reads its
shared-memory operands and writes its accumulators asynchronously, before the ``wgmma.wait_group`` that
retires its group returns.  So reading the accumulators before the wait gives poison (NaN), overwriting the
operands before the wait changes the product, and a GEMM that releases a stage to the producer before its
MMA retired gets wrong numbers (a planted bug caught by numerics alone)."""
import inspect

import numpy as np
import pytest

import tsjit
from interpret.planted_gemm import gemm_error, plant_early_release
from interpret.tensor_probe_kernels import THREADS, WGMMA_CASES, random_operand_bytes, wgmma_probe
from tsjit.errors import CompilationError, InterpretError
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


def _line(text: str) -> int:
    lines, first = inspect.getsourcelines(wgmma_probe.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("interpret", [False, True], ids=["sm_90a", "interpret"])
def test_reading_the_accumulators_before_the_wait_is_a_compile_error(monkeypatch, interpret):
    """``acc[i]`` between commit_group and wait_group (the newcomer's ``early = acc[0]``): the frontend sees
    that no wait_group follows the MMA before the read, compiling for the GPU and under the interpreter."""
    if interpret:
        monkeypatch.setenv("TSJIT_INTERPRET", "1")
        run = lambda: _run("early")
    else:
        a_desc, b_desc = CASE.descriptors()
        run = lambda: tsjit.compile(wgmma_probe, np.zeros(16, np.uint32), np.zeros(THREADS * N // 2, np.float32),
                                    np.uint64(a_desc), np.uint64(b_desc), N=N, A_TYPE="bf16", B_TYPE="bf16",
                                    TRANS_A=0, TRANS_B=0, MODE="early")
    with pytest.raises(CompilationError) as info:
        run()
    text = str(info.value)
    early = _line('if tsjit.const_expr(MODE == "early"):') + 2
    assert f"tensor_probe_kernels.py:{early}:" in text            # the read: `out[...] = acc[i]`
    second = _line('if tsjit.const_expr(MODE != "probe"):') + 1
    assert f"issued at {wgmma_probe.fn.__code__.co_filename}:{second}:" in text
    assert "wait_group(N) first" in text and "§9.7.15.7" in text


def test_computing_with_an_mma_still_in_flight_after_wait_group_1_is_an_error(monkeypatch):
    """Two groups, ``wait_group(1)``: the second MMA may still be in flight, which the frontend cannot tell
    from the code; the interpreter stops at the store that reads its accumulators."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    with pytest.raises(InterpretError) as info:
        _run("newest")
    text = str(info.value)
    store = _line("tsjit.wgmma.wait_group(1)") + 2              # `out[...] = acc[i]` under the for
    assert f"tensor_probe_kernels.py:{store}:" in text
    assert "before a wgmma.wait_group retired its group" in text and "wait_group(N)" in text


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
