"""Tutorial 9 (split-K, a DSMEM reduce-scatter epilogue, the staging buffer aliasing the A/B ring): for sm_100a
it compiles, the exhaustive checker proves it SAFE, ptxas assembles it, its SASS has the UMMA / UTCBAR
instructions and no local memory; the same source builds wgmma code for sm_90a; both builds run under the CPU
interpreter against float64 numpy (clusters of 2 and 4 CTAs, ragged shapes, a rank without K tiles)."""
import numpy as np
import pytest

import tsjit
from tsjit.examples import bw_splitk
from blackwell.toolchain import cuobjdump, sass_opcodes

RING_BYTES = bw_splitk.STAGES * (bw_splitk.BM + bw_splitk.BN) * bw_splitk.BK * 2
STAGING_BYTES = bw_splitk.BM * (bw_splitk.BN + bw_splitk.PAD) * 4


def test_sm100a_build_is_verified_safe_and_reduces_through_dsmem(verdicts):
    compiled = bw_splitk.compile_for("sm_100a")
    assert [v.verdict for v in verdicts] == ["SAFE"]
    ptx = compiled.ptx
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one") >= 2   # stage release + accumulator
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    assert "mapa.shared::cluster" in ptx and "st.shared::cluster" in ptx
    assert "mbarrier.arrive.release.cluster.shared::cluster" in ptx
    assert "wgmma" not in ptx
    assert compiled.metadata["launch_requirements"].cluster == (1, 1, 2)
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
def test_the_staging_buffer_shares_the_rings_bytes(target):
    smem = bw_splitk.compile_for(target).metadata["smem_bytes"]
    assert RING_BYTES <= smem < RING_BYTES + 2048, f"{smem} B: the staging ({STAGING_BYTES} B) is not aliased"


def test_sm90a_build_of_the_same_source_uses_wgmma(verdicts):
    compiled = bw_splitk.compile_for("sm_90a", split=4)
    assert [v.verdict for v in verdicts] == ["SAFE"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in compiled.ptx
    assert "tcgen05" not in compiled.ptx and "st.shared::cluster" in compiled.ptx
    assert compiled.metadata["launch_requirements"].cluster == (1, 1, 4)
    assert compiled.metadata["spill_stores_bytes"] == 0


def test_a_split_other_than_2_or_4_names_split():
    with pytest.raises(tsjit.UsageError, match="SPLIT must be one of"):
        bw_splitk.compile_for("sm_100a", split=3)


def test_sm100a_sass_has_umma_and_no_local_memory(tmp_path):
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(bw_splitk.compile_for("sm_100a").cubin, tmp_path)
    assert "UTCHMMA" in opcodes, "no UMMA (UTC*MMA) instruction in the SASS"
    assert "UTCBAR" in opcodes, "no tcgen05.commit (UTCBAR) in the SASS"
    assert "UTMALDG" in opcodes and "LDTM" in opcodes
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


@pytest.mark.parametrize("target,M,N,K,split", [("sm_100a", 128, 128, 256, 2), ("sm_100a", 200, 136, 200, 4),
                                                ("sm_90a", 128, 128, 256, 2), ("sm_90a", 64, 100, 8, 4)])
def test_runs_under_the_interpreter_and_matches_float64(monkeypatch, target, M, N, K, split):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", target)
    a, b = bw_splitk.random_operands(M, N, K)
    got = bw_splitk.run_splitk(a, b, split, target=target)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    assert np.max(np.abs(got - ref) - (2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(K))) <= 0


def test_a_launch_without_the_cluster_is_a_launch_error_naming_it(monkeypatch):
    """The kernel carries its cluster (1, 1, SPLIT) in the launch contract: a 1-CTA cluster would send the DSMEM
    stores to a CTA that does not exist."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    a, b = bw_splitk.random_operands(128, 128, 128)
    c = tsjit.empty((128, 128), tsjit.BFloat16)
    a_map = tsjit.TensorMap(tsjit.to_device(a, dtype=tsjit.BFloat16), (bw_splitk.BM, bw_splitk.BK), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, dtype=tsjit.BFloat16), (bw_splitk.BN, bw_splitk.BK), swizzle="128B")
    with pytest.raises(tsjit.LaunchError, match="cluster"):
        bw_splitk.splitk_gemm[(1, 1, 2), (bw_splitk.threads_for("sm_100a"),)](a_map, b_map, c, 128, 2,
                                                                              cluster=(1, 1, 1))


def test_run_splitk_refuses_a_split_of_three_naming_it():
    a, b = bw_splitk.random_operands(128, 128, 128)
    with pytest.raises(tsjit.UsageError, match="split must be one of"):
        bw_splitk.run_splitk(a, b, 3, target="sm_100a")
