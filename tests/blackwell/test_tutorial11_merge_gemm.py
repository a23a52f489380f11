"""Tutorial 11 (Merge GEMM with ReLU, UMMA members: A by cp.async into an AsyncUmma ring, B by TMA into a
TmaUmma ring, merged before the MMA warp; UmmaAsync TMEM accumulators): for sm_100a it compiles, the exhaustive
checker proves it SAFE, ptxas assembles it, its SASS has the UMMA / UTCBAR instructions and no local memory, it
runs under the CPU interpreter against float64 numpy; sm_90a is refused naming the pipeline."""
import numpy as np
import pytest

import tsjit
from tsjit.examples import bw_merge_gemm
from blackwell.toolchain import cuobjdump, sass_opcodes


def test_sm100a_build_is_verified_safe_and_uses_umma(verdicts):
    compiled = bw_merge_gemm.compile_for()
    assert [v.verdict for v in verdicts] == ["SAFE"]
    ptx = compiled.ptx
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    assert "cp.async.mbarrier.arrive.noinc.shared" in ptx and "fence.proxy.async" in ptx
    assert "wgmma" not in ptx
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0


def test_the_merge_group_shares_one_empty_barrier_per_stage():
    """4 stages: two members' full barriers + one shared empty (12) instead of 2 x 2 x 4 (16); plus the
    accumulator ring's 2 x 2."""
    grouped = bw_merge_gemm.compile_for(grouped=True).ptx
    separate = bw_merge_gemm.compile_for(grouped=False).ptx
    assert grouped.count("mbarrier.init") == 12 + 4 and separate.count("mbarrier.init") == 16 + 4
    # one tcgen05.commit releases both rings' stage; separate rings commit twice per K tile
    assert separate.count("tcgen05.commit") == grouped.count("tcgen05.commit") + 1


def test_sm90a_refuses_the_umma_rings_naming_one():
    with pytest.raises(tsjit.CompilationError, match="'smem_a': AsyncUmma pipelines need .*sm_100a"):
        bw_merge_gemm.compile_for("sm_90a")


def test_sm100a_sass_has_umma_and_no_local_memory(tmp_path):
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(bw_merge_gemm.compile_for().cubin, tmp_path)
    assert "UTCHMMA" in opcodes and "UTCBAR" in opcodes
    assert "LDGSTS" in opcodes and "UTMALDG" in opcodes and "LDTM" in opcodes   # cp.async, TMA, tcgen05.ld
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


@pytest.mark.parametrize("grouped", [True, False])
def test_runs_under_the_interpreter_and_matches_float64(monkeypatch, grouped):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    got, ref = bw_merge_gemm.run_merge_gemm_umma(200, 300, 136, block_n=128, stages=2, grouped=grouped)
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    assert np.max(np.abs(got - ref) - (2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(136))) <= 0
