"""Tutorial 3 (non-persistent 128 x 256 bf16 GEMM, load -> MMA -> TMEM -> store): for sm_100a it compiles,
the exhaustive checker proves it SAFE, ptxas assembles it, and its SASS has the UMMA / UTCBAR instructions and
no local memory; the same source builds wgmma code for sm_90a."""
import pytest

import tsjit

from tsjit.examples import bw_gemm
from blackwell.toolchain import cuobjdump, sass_opcodes


def test_sm100a_build_is_verified_safe_and_uses_tcgen05(verdicts):
    compiled = bw_gemm.compile_for("sm_100a")
    assert [v.verdict for v in verdicts] == ["SAFE"]
    ptx = compiled.ptx
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one") >= 2   # stage release + accumulator
    assert "tcgen05.alloc.cta_group::1" in ptx and "tcgen05.dealloc.cta_group::1" in ptx
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    assert "wgmma" not in ptx
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0


def test_sm90a_build_of_the_same_source_uses_wgmma(verdicts):
    compiled = bw_gemm.compile_for("sm_90a")
    assert [v.verdict for v in verdicts] == ["SAFE"]
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in compiled.ptx
    assert "tcgen05" not in compiled.ptx
    assert compiled.metadata["spill_stores_bytes"] == 0


def test_sm100a_sass_has_umma_and_no_local_memory(tmp_path):
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(bw_gemm.compile_for("sm_100a").cubin, tmp_path)
    assert "UTCHMMA" in opcodes, "no UMMA (UTC*MMA) instruction in the SASS"
    assert "UTCBAR" in opcodes, "no tcgen05.commit (UTCBAR) in the SASS"
    assert "UTMALDG" in opcodes and "LDTM" in opcodes
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


def test_sm100a_tma_epilogue_is_verified_safe_and_stages_through_stmatrix(verdicts, tmp_path):
    """EPILOGUE="tma": tcgen05.ld.16x256b from TMEM, stmatrix into the swizzled staging boxes, one thread's
    TMA stores; SAFE, no spills, and the SASS has STSM and the TMA store (UTMASTG)."""
    compiled = bw_gemm.compile_for("sm_100a", epilogue="tma")
    assert [v.verdict for v in verdicts] == ["SAFE"]
    ptx = compiled.ptx
    assert ptx.count("tcgen05.ld.sync.aligned.16x256b.x4.b32") == 16       # 2 slabs x 256 / 32 columns
    assert "tcgen05.ld.sync.aligned.32x32b" not in ptx
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4") == 32                # 2 slabs x 16 groups of 16 columns
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4    # four 128 x 64 boxes
    assert "fence.proxy.async" in ptx
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(compiled.cubin, tmp_path)
    assert {"UTCHMMA", "UTCBAR", "LDTM", "STSM", "UTMASTG"} <= opcodes, sorted(opcodes)
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


def test_the_tma_epilogue_is_refused_on_sm90a():
    with pytest.raises(tsjit.CompilationError, match="EPILOGUE='tma' is the sm_100a TMEM epilogue"):
        bw_gemm.compile_for("sm_90a", epilogue="tma")
