"""Tutorial 13 (Fork: one TMA-loaded A tile feeds the MMA warp through a TmaUmma member and a ReLU task through a
TmaAsync member; UmmaAsync TMEM accumulators): for sm_100a it compiles, the exhaustive checker proves it SAFE,
ptxas assembles it, its SASS has the UMMA / UTCBAR instructions and no local memory, and it runs under the CPU
interpreter against float64 numpy (C and R)."""
import numpy as np
import pytest

from tsjit.examples import bw_fork_gemm
from blackwell.toolchain import cuobjdump, sass_opcodes


def test_sm100a_build_is_verified_safe_and_loads_a_once(verdicts):
    compiled = bw_fork_gemm.compile_for()
    assert [v.verdict for v in verdicts] == ["SAFE"]
    ptx = compiled.ptx
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    separate = bw_fork_gemm.compile_for(grouped=False).ptx
    loads = "cp.async.bulk.tensor.2d.shared::cluster.global"
    assert separate.count(loads) == ptx.count(loads) + 1, "the Fork should load the A tile once, not twice"
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0


def test_the_fork_shares_one_full_barrier_per_stage():
    """3 stages: one shared full + two members' empties (9) instead of 2 x 2 x 3 (12), plus B's 6 and the
    accumulator ring's 4."""
    grouped = bw_fork_gemm.compile_for(grouped=True).ptx.count("mbarrier.init")
    separate = bw_fork_gemm.compile_for(grouped=False).ptx.count("mbarrier.init")
    assert (grouped, separate) == (9 + 6 + 4, 12 + 6 + 4)


def test_sm100a_sass_has_umma_and_no_local_memory(tmp_path):
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(bw_fork_gemm.compile_for().cubin, tmp_path)
    assert "UTCHMMA" in opcodes and "UTCBAR" in opcodes and "UTMALDG" in opcodes and "LDTM" in opcodes
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


@pytest.mark.parametrize("grouped", [True, False])
def test_runs_under_the_interpreter_and_matches_float64(monkeypatch, grouped):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    c, c_ref, r, r_ref = bw_fork_gemm.run_fork_umma(200, 300, 136, block_n=128, stages=2, grouped=grouped)
    assert np.isfinite(c).all() and np.isfinite(r).all(), "an element was not written (still the NaN poison)"
    assert np.max(np.abs(c - c_ref) - (2.0 ** -8 * np.abs(c_ref) + 1e-3 * np.sqrt(136))) <= 0
    assert np.array_equal(r, r_ref), "relu of bf16 values is exact"
