"""Tutorial 10's merge GEMM and tutorial 11's residual add under the CPU interpreter (issue 12 §4), on
fresh random bf16 inputs with a poisoned output, against numpy float64.

The shapes are reduced (the interpreter costs seconds per GEMM) but ragged: M not a multiple of the
128-row tile (A rows clamped, C rows past M never stored) and K not a multiple of the 64-column stage
(A columns clamped, B zero-filled by TMA).  Grouped and with separate rings; the three- and two-warp
A producers (the GEMM and the residual add).  The same programs on the H200:
``tests/gpu/test_ts_groups_gpu.py``."""
import numpy as np
import pytest

pytestmark = pytest.mark.interpret


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")


def _relative_error(got, ref):
    return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("M,N,K,stages", [(200, 256, 136, 3), (256, 256, 128, 4)])
def test_merge_gemm_relu_interpreted(M, N, K, stages, grouped):
    from tsjit.examples import ts_merge_gemm
    got, ref = ts_merge_gemm.run_merge_gemm(M, N, K, stages=stages, grouped=grouped)
    assert np.isfinite(got).all() and _relative_error(got, ref) < 1e-2, _relative_error(got, ref)
    assert (got >= 0).all()


def test_merge_gemm_residual_add_interpreted():
    from tsjit.examples import ts_merge_resadd
    got, ref = ts_merge_resadd.run_resadd(200, 256, 136, sms=132)
    assert np.isfinite(got).all() and _relative_error(got, ref) < 1e-2, _relative_error(got, ref)
