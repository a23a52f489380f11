"""The reference's Blackwell ring factories, run: ``create_async_umma_pipeline_cfg`` (A by cp.async,
consumed by tcgen05.mma), ``create_tma_umma_pipeline_cfg`` (B by TMA) and
``create_umma_async_pipeline_cfg`` (the TMEM accumulator, released to the epilogue by tcgen05.commit)
are the three rings of tsjit's Blackwell GEMM with ReLU (``tsjit.examples.bw_merge_gemm``, separate
rings).  It is built for sm_100a and run on the CPU interpreter on fresh random bf16 inputs into a
poisoned C, against float64."""
import numpy as np
import pytest

conformance = pytest.mark.conformance


@conformance("A1", "create_tma_umma_pipeline_cfg")
@conformance("A1", "create_umma_async_pipeline_cfg")
@conformance("A1", "create_async_umma_pipeline_cfg")
@conformance("§1.4", "create_tma_umma_pipeline_cfg")
@conformance("§1.4", "create_umma_async_pipeline_cfg")
@conformance("§1.4", "create_async_umma_pipeline_cfg")
def test_the_three_rings_of_the_blackwell_gemm_run_interpreted(monkeypatch):
    from tsjit.examples import bw_merge_gemm
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    k = 64
    got, ref = bw_merge_gemm.run_merge_gemm_umma(128, 128, k, block_n=128, stages=2, grouped=False)
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    assert np.max(np.abs(got - ref) - (2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(k))) <= 0
