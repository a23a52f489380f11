"""tcgen05.mma completes when its tcgen05.commit's mbarrier arrival fires (issue 13; PTX ISA 9.1 §9.7.16.12.1):
the interpreter queues the MMAs per CTA and executes them at the commit's arrival (as late as the hardware
may), so reading TMEM before waiting on the commit's barrier gives poison and overwriting the shared-memory
operands before the arrival changes the product."""
import numpy as np
import pytest

import tsjit
from interpret.tensor_tcgen05_kernels import umma_tile
from tsjit.errors import InterpretError
from tsjit.interpret import numerics

BF16 = tsjit.BFloat16


@pytest.fixture(autouse=True)
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


def _run(mode: str, n: int = 64):
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((128, 64)), BF16)
    b = numerics.encode(rng.standard_normal((n, 64)), BF16)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (128, 64), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (n, 64), swizzle="128B")
    out = tsjit.empty((128, n), tsjit.Float32).fill_bytes(0x00)
    umma_tile[(1,), (128,)](a_map, b_map, out, N=n, MODE=mode)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    return out.numpy(), want


def test_waiting_on_the_commit_barrier_gives_the_product():
    got, want = _run("ok")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_reading_tmem_before_the_commit_arrives_gives_poison():
    got, _ = _run("early")
    assert np.isnan(got).all()


def test_overwriting_an_operand_before_the_commit_arrives_changes_the_product():
    got, want = _run("overwrite")
    assert np.abs(want).max() > 1
    np.testing.assert_array_equal(got, np.zeros_like(got))


def test_overwriting_an_operand_before_the_commit_arrives_is_a_race_under_the_checker(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET_CHECK", "race")
    with pytest.raises(InterpretError, match="still reads") as info:
        _run("overwrite")
    assert "tensor_tcgen05_kernels.py:" in str(info.value)


def test_freeing_tmem_that_an_mma_in_flight_writes_is_reported():
    with pytest.raises(InterpretError, match="still writes columns 0..63") as info:
        _run("free")
    assert "wait on its tcgen05.commit" in str(info.value)


def _bw_gemm_error(k: int) -> float:
    from tsjit.examples import bw_gemm
    from tsjit.runtime.arrays import bfloat16_bits_to_float32
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((128, k)), BF16)
    b = numerics.encode(rng.standard_normal((256, k)), BF16)
    c = tsjit.empty((128, 256), BF16).fill_bytes(0xFF)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (bw_gemm.BM, bw_gemm.BK), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (bw_gemm.BN, bw_gemm.BK), swizzle="128B")
    bw_gemm.gemm_tutorial3[(1, 1), (bw_gemm.threads_for("sm_100a"),)](a_map, b_map, c, k)
    got = bfloat16_bits_to_float32(c.numpy()).astype(np.float64)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    return float(np.linalg.norm(np.nan_to_num(got - want, nan=1e6)) / np.linalg.norm(want))


def test_a_stage_released_before_its_umma_completed_gives_wrong_numbers(monkeypatch):
    """Planted bug: the Blackwell GEMM tutorial's A/B ring releases a stage with a plain mbarrier arrive (a
    TmaAsync ring) instead of the MMA's tcgen05.commit (TmaUmma): the producer's next TMA overwrites the
    stage before the queued MMAs that read it complete."""
    from tsjit import ts
    from tsjit.examples import bw_gemm
    from tsjit.ts import task_manager
    assert _bw_gemm_error(448) < 4e-3
    monkeypatch.setattr(ts.PipelineConfig, "create_tma_umma_pipeline_cfg", staticmethod(
        lambda stages, nbytes, producer, consumer, cluster:
        ts.PipelineConfig.create_tma_async_pipeline_cfg(stages, nbytes, producer, consumer)))
    original_init = task_manager.TaskManager.__init__
    monkeypatch.setattr(task_manager.TaskManager, "__init__", lambda self, *args, **keywords: original_init(
        self, *args, **{**keywords, "skip_validation": True}))
    monkeypatch.setitem(bw_gemm.gemm_tutorial3.__dict__, "_interpret_programs", {})   # lower the planted program
    assert _bw_gemm_error(448) > 0.3
