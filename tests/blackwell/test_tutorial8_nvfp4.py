"""Tutorial 8 (block-scaled NVFP4 GEMM): for sm_100f it compiles, the exhaustive checker proves it SAFE, ptxas
assembles it, its SASS has the block-scaled UMMA (UTCOMMA), the scale copies (UTCCP) and the commits (UTCBAR) and
no local memory; sm_100a (PTX 8.6) is refused naming sm_100f.  It runs under the CPU interpreter (block-scaled
tcgen05.mma, tcgen05.cp.32x128b.warpx4) against the float64 product of the dequantized inputs, and scales laid
out other than the way the MMA reads them are caught.  The host path (NVFP4 quantization, the interleaved scale
layout) is checked here; no Blackwell GPU has run the kernel."""
import numpy as np
import pytest

import tsjit
from tsjit.examples import bw_nvfp4_gemm as nvfp4
from blackwell.toolchain import cuobjdump, sass_opcodes


def test_sm100f_build_is_verified_safe_and_issues_block_scaled_mmas(verdicts):
    compiled = nvfp4.compile_for()
    assert [v.verdict for v in verdicts] == ["SAFE"]
    ptx = compiled.ptx
    assert ptx.count("tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16") == nvfp4.K_TILE // nvfp4.MMA_K
    assert ptx.count("tcgen05.cp.cta_group::1.32x128b.warpx4") == 2 * nvfp4.MMAS      # SFA and SFB of each MMA
    assert compiled.metadata["spill_stores_bytes"] == 0 and compiled.metadata["spill_loads_bytes"] == 0


def test_the_scale_and_operand_rings_merge_into_one_empty_barrier():
    grouped = nvfp4.compile_for(grouped=True).ptx.count("mbarrier.init")
    separate = nvfp4.compile_for(grouped=False).ptx.count("mbarrier.init")
    assert (grouped, separate) == (3 * nvfp4.STAGES + 2, 4 * nvfp4.STAGES + 2)


def test_sm100a_is_refused_naming_the_family_target():
    with pytest.raises(tsjit.CompilationError, match=r"8\.7.*sm_100f"):
        nvfp4.compile_for("sm_100a")


def test_sm100f_sass_has_block_scaled_umma_and_no_local_memory(tmp_path):
    if cuobjdump() is None:
        pytest.skip("cuobjdump not found (PATH, TSJIT_CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")
    opcodes = sass_opcodes(nvfp4.compile_for().cubin, tmp_path)
    assert {"UTCOMMA", "UTCCP", "UTCBAR", "UTMALDG", "LDTM"} <= opcodes
    assert not opcodes & {"LDL", "STL"}, "local-memory traffic (spills) in the SASS"


def test_representable_values_quantize_exactly_and_pack_low_nibble_first():
    rng = np.random.default_rng()
    scales = nvfp4.UE4M3_VALUES[rng.integers(40, 70, size=(4, 2))]
    codes = rng.integers(0, 16, size=(4, 32))
    magnitudes = nvfp4.E2M1_VALUES[codes & 7]
    magnitudes[:, ::16] = 6.0                     # every block reaches amax = 6 x its scale
    values = np.where(codes & 8, -1.0, 1.0) * magnitudes * np.repeat(scales, 16, axis=1)
    packed, scale_codes, dequantized = nvfp4.quantize_nvfp4(values)
    assert np.array_equal(dequantized, values)
    assert np.array_equal(nvfp4.UE4M3_VALUES[scale_codes], scales)
    low = packed & 0xF
    assert np.array_equal(nvfp4.E2M1_VALUES[low & 7] * np.where(low & 8, -1, 1), np.sign(values[:, 0::2]) *
                          np.abs(values[:, 0::2]) / np.repeat(scales, 8, axis=1))


def test_quantization_error_is_within_half_an_e2m1_step_of_the_block_scale():
    x = np.random.default_rng().standard_normal((64, 256))
    packed, scale_codes, dequantized = nvfp4.quantize_nvfp4(x)
    assert packed.shape == (64, 128) and scale_codes.shape == (64, 16) and packed.dtype == np.uint8
    step = np.repeat(nvfp4.UE4M3_VALUES[scale_codes], 16, axis=1)        # the widest E2M1 gap is 2 x scale
    assert np.all(np.abs(dequantized - x) <= step * 1.0 + 1e-12)
    ref = nvfp4.reference(dequantized, dequantized[:32])
    assert ref.shape == (64, 32) and ref.dtype == np.float64


def test_k_not_a_multiple_of_16_is_refused():
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4.quantize_nvfp4(np.ones((2, 24)))


def test_interleaved_scales_put_row_r_chunk_c_where_the_mma_reads_it():
    codes = np.random.default_rng().integers(0, 127, size=(256, 32)).astype(np.uint8)
    blocks = nvfp4.interleave_scales(codes)
    assert blocks.shape == (256 // 128 * (32 // 4) * 32, 16)
    for r, c in [(0, 0), (37, 5), (131, 30), (255, 31)]:
        t, g, j = r // 128, c // 4, c % 4
        row = (t * 8 + g) * 32 + r % 32          # block (t, g), lane r % 32
        assert blocks[row, 4 * ((r % 128) // 32) + j] == codes[r, c]     # column (r % 128) // 32, byte j


@pytest.mark.parametrize("M,N,K,grouped", [(128, 128, 256, True), (128, 256, 1024, True), (256, 128, 512, False)])
def test_runs_under_the_interpreter_and_matches_float64(monkeypatch, M, N, K, grouped):
    """Fresh NVFP4 inputs (rows of A scaled 0.1x-10x), C poisoned with NaN; K = 1024 wraps the 3-stage rings."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100f")
    got, want = nvfp4.run_tutorial8(M, N, K, grouped=grouped)
    assert np.isfinite(got).all(), "an element of C was not written (still the NaN poison)"
    assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-5 * np.abs(want).max())   # bf16 C


def test_scales_left_row_major_give_wrong_numbers_under_the_interpreter(monkeypatch):
    """A planted host bug: the scale bytes copied as plain K-major rows instead of interleave_scales' order, so
    each MMA scales rows with other rows' scales (the interpreter reads them where the hardware does)."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100f")
    monkeypatch.setattr(nvfp4, "interleave_scales", lambda codes: np.ascontiguousarray(codes).reshape(-1, 16))
    got, want = nvfp4.run_tutorial8(128, 128, 256)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) > 0.1
