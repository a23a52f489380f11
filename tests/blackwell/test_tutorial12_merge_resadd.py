"""Tutorial 12 (Merge GEMM with a residual add: Merge(TmaUmma A + TmaUmma B) before the MMA warp, and
Merge(UmmaAsync accumulator + TmaAsync residual) before the epilogue): for sm_100a it compiles, the exhaustive
checker proves it SAFE, ptxas assembles it, its SASS has the UMMA / UTCBAR instructions and no local memory, and
it runs under the CPU interpreter against float64 numpy."""
import numpy as np
import pytest

from tsjit.examples import bw_merge_resadd
from blackwell.toolchain import cuobjdump, sass_opcodes


def test_sm100a_build_is_verified_safe_and_uses_umma(verdicts):
    compiled = bw_merge_resadd.compile_for()
    assert [v.verdict for v in verdicts] == ["SAFE"]
    assert "tcgen05.mma.cta_group::1.kind::f16" in compiled.ptx and "tcgen05.ld.sync.aligned.32x32b" in compiled.ptx
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0


def test_two_merge_groups_save_a_barrier_array_each():
    """ab: 4 stages x (2 full + 1 empty) = 12 instead of 16; epi: 2 stages x 3 = 6 instead of 8."""
    grouped = bw_merge_resadd.compile_for(grouped=True).ptx.count("mbarrier.init")
    separate = bw_merge_resadd.compile_for(grouped=False).ptx.count("mbarrier.init")
    assert (grouped, separate) == (12 + 6, 16 + 8)


def test_sm100a_sass_has_umma_and_no_local_memory(tmp_path):
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(bw_merge_resadd.compile_for().cubin, tmp_path)
    assert "UTCHMMA" in opcodes and "UTCBAR" in opcodes and "LDTM" in opcodes
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


@pytest.mark.parametrize("grouped", [True, False])
def test_runs_under_the_interpreter_and_matches_float64(monkeypatch, grouped):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    got, ref = bw_merge_resadd.run_resadd_umma(200, 256, 136, block_n=128, stages=2, grouped=grouped)
    assert np.isfinite(got).all(), "an element of D was not written (still the NaN poison)"
    assert np.max(np.abs(got - ref) - (2.0 ** -8 * np.abs(ref) + 1e-3 * np.sqrt(136))) <= 0
