"""The fp8 (e4m3) attention forward (tsjit.examples.attention_fp8, issue 16) compiles and verifies for sm_90a
without a GPU: every head_dim, causal or not, a sliding window, 64-key tiles, packed variable-length batches, with 0
spills; the PTX has the QK^T and PV wgmma with e4m3 operands (k32; the PV's A from registers, its B K-major from the
V^T ring), the
``cvt.rn.satfinite.e4m3x2`` packing of P, 4-D TMA loads of V^T, setmaxnreg and the ping-pong turns; the TaskManager
proves the program SAFE in under 2 s; and the key order of the P packing matches the 8-bit wgmma A fragment."""
import re

import numpy as np
import pytest

import tsjit
from tsjit.backend.assemble import assemble
from tsjit.examples import attention as base
from tsjit.examples import attention_fp8 as program
from tsjit.examples import attention_v_transpose as transpose
from tsjit.examples.attention_fp8_softmax import EXP2_FMA_MIN, EXP2_FUSED_MIN, FusedExp2, exp2_fma, integral
from tsjit.examples.attention_softmax import EXP2_POLYNOMIAL_MIN, exp2_polynomial, polynomial_registers
from tsjit.interpret.numerics import decode
from tsjit.interpret.wgmma import accumulator_coords, register_a_coords
from .verification_time import verification_seconds


@pytest.fixture(autouse=True)
def _default_assembler(monkeypatch):
    """The default assembler (``auto``: nvPTXCompiler, else ptxas), which keeps setmaxnreg."""
    monkeypatch.delenv("TSJIT_ASSEMBLER", raising=False)


CONFIGS = [(d, causal, {}) for d in (64, 128, 256) for causal in (False, True)]
CONFIGS += [(128, True, dict(window=True)), (128, False, dict(block_n=64, stages=3)), (128, False, dict(block_n=192)),
            (128, False, dict(block_n=224, stages=2)), (128, False, dict(block_n=224, stages=3, q_stages=1)),
            (128, False, dict(exp2_polynomial=3)), (128, False, dict(block_n=224, stages=2, exp2_polynomial=3)),
            (64, False, dict(block_n=256)),
            (128, False, dict(stages=3, q_stages=1, pingpong=False)),
            (128, False, dict(varlen=True)), (128, True, dict(varlen=True)), (64, True, dict(varlen=True)),
            (128, False, dict(rescale_threshold=8.0)), (128, True, dict(rescale_threshold=8.0))]


@pytest.mark.parametrize("head_dim,causal,options", CONFIGS,
                         ids=["-".join([f"d{d}", "causal" if c else "full", *sorted(o)]) for d, c, o in CONFIGS])
def test_fp8_attention_compiles_without_spills(head_dim, causal, options):
    kernel = program.compile_config(head_dim, causal, **options)
    meta = kernel.metadata
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    ptx = kernel.ptx
    block_n = options.get("block_n") or program.default_config(head_dim, causal)[0]
    qk = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{block_n}k32\.f32\.e4m3\.e4m3 \{{[^}}]*\}}, %rd", ptx)
    pv = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{head_dim}k32\.f32\.e4m3\.e4m3 \{{[^}}]*\}}, \{{%r", ptx)
    assert len(qk) == 2 * head_dim // 32, "one QK^T wgmma per 32 columns of head_dim, twice (the peeled first tile)"
    assert len(pv) == 2 * block_n // 32, "one PV wgmma per 32 keys, A (P) from registers, in and after the loop"
    assert "bf16.bf16" not in ptx, "no 16-bit wgmma"
    assert len(re.findall(r"cvt\.rn\.satfinite\.e4m3x2\.f32", ptx)) >= block_n // 2 // 2
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx)
    assert bool(re.findall(r"bar\.(sync|arrive)\s+(\d+|%r\d+), 256;", ptx)) == options.get("pingpong", True)
    threshold = program.default_rescale_threshold(head_dim, causal or options.get("window", False))
    assert ("vote.sync.any.pred" in ptx) == (options.get("rescale_threshold", threshold) >= 0), \
        "conditional rescaling decides per warp (vote.any) whether the maxima move"

    polynomial = program.default_exp2_polynomial(head_dim, causal or options.get("window", False))
    emulated = polynomial_registers(options.get("exp2_polynomial", polynomial), block_n // 2)
    assert len(re.findall(r"ex2\.approx\.ftz\.f32", ptx)) == 2 * (block_n // 2 - len(emulated) + 2), \
        "per softmax (the peeled tile's and the loop's): one MUFU exp2 per P register not emulated, two for alpha"


def test_fp8_attention_schedule_verifies_safe_quickly(monkeypatch):
    managers = []
    monkeypatch.setattr(base, "MANAGER_OBSERVERS", [managers.append])
    durations = verification_seconds(monkeypatch, lambda: program.compile_config(64, True, window=True, q_stages=1))
    assert durations and max(durations) < 2.0, durations
    assert managers and all(m.exhaustive_result.verdict == "SAFE" for m in managers)


def test_packed_p_carries_the_keys_of_the_v_transposed_order(monkeypatch):
    """Register ``r`` element ``j`` of the e4m3 A fragment (PTX ISA's m64nNk32 8-bit layout, as the interpreter
    reads it) holds, as :func:`pack_probabilities_fp8` packs it, the S accumulator entry of the same row whose key
    is KEY_ORDER[K position] of its 16: the key V^T stores at that K position."""
    monkeypatch.setattr(program, "pack_fp8_quad", lambda values, dtype: list(values))
    monkeypatch.setattr(program, "Fragment", lambda items, dtype: list(items))
    packed = program.pack_probabilities_fp8(list(range(64)), tsjit.Float8E4M3)   # S register indices, 128 keys
    assert len(packed) == 16
    rows_s, cols_s = accumulator_coords(128)              # (128 threads, 64 registers) of a 128-key S tile
    rows_a, cols_a = register_a_coords("e4m3")            # (128 threads, 4 registers, 4 elements) of one k32 step
    order = np.array(program.KEY_ORDER)
    for step in range(4):
        for r in range(4):
            for j in range(4):
                i = packed[4 * step + r][j]                    # the S register packed as element j
                assert np.array_equal(rows_s[:, i], rows_a[:, r, j])
                position = 32 * step + cols_a[:, r, j]
                assert np.array_equal(cols_s[:, i], 16 * (position // 16) + order[position % 16])
    assert sorted(program.KEY_ORDER) == list(range(16))


def test_transposed_v_layout():
    rng = np.random.default_rng()
    v = rng.integers(0, 256, (2, 37, 3, 64), dtype=np.uint8)
    vt = program.transposed_v(v)
    assert vt.shape == (2, 3, 64, 48) and vt.flags.c_contiguous
    order = np.array(program.KEY_ORDER)
    for key_slot in range(48):
        key = 16 * (key_slot // 16) + order[key_slot % 16]
        expected = v[:, key] if key < 37 else np.zeros((2, 3, 64), np.uint8)
        assert np.array_equal(vt[:, :, :, key_slot], expected)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_v_transpose_kernel_compiles_to_vector_copies_without_spills(head_dim):
    kernel = tsjit.compile(transpose.transpose_v_kernel, tsjit.spec((2, 4096, 8, head_dim // 4), tsjit.Int32),
                           tsjit.spec((2, 8, head_dim, 1024), tsjit.Int32), 4096, head_dim)
    meta = kernel.metadata
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    ptx = kernel.ptx
    assert len(re.findall(r"ld\.global\.v4\.b32", ptx)) == transpose.TILE_KEYS // 32, "16-byte loads of V rows"
    assert len(re.findall(r"st\.shared\.v4\.b32", ptx)) == transpose.TILE_KEYS // 32
    assert len(re.findall(r"ld\.shared\.v4\.b32", ptx)) == 4, "four 16-byte reads: the lane's four key rows"
    assert len(re.findall(r"st\.global\.b32", ptx)) == 16, "16 words of V^T per lane"


@pytest.mark.parametrize("shape", [(1, 37, 2, 64), (2, 130, 1, 128), (1, 20, 1, 256)])
def test_v_transpose_kernel_interpreted_matches_the_definition(shape):
    """The transpose kernel on the CPU interpreter: every byte of the poisoned V^T is the fp8 code of V at the key
    KEY_ORDER puts there, or 0 past the keys (lengths not a multiple of 16, two tiles at 130 keys); the dequantized
    V^T equals float64 V permuted."""
    batch, keys, heads, head_dim = shape
    rng = np.random.default_rng()
    v = rng.integers(0, 256, shape, dtype=np.uint8)
    v[(v & 0x7F) == 0x7F] = 0                       # no NaN codes (e4m3fn: S.1111.111)
    padded = -(-keys // 16) * 16
    vt = np.full((batch, heads, head_dim, padded), 0xA5, np.uint8)
    transpose.transpose_v_kernel.interpret[transpose.grid(batch, keys, heads), (transpose.threads(head_dim),)](
        v.view(np.int32), vt.view(np.int32), keys, head_dim)
    slots = np.arange(padded)
    source = 16 * (slots // 16) + np.array(program.KEY_ORDER)[slots % 16]
    expected = np.zeros((batch, heads, head_dim, padded), np.uint8)
    inside = source < keys
    expected[..., inside] = v[:, source[inside]].transpose(0, 2, 3, 1)
    assert np.array_equal(vt, expected)
    values = decode(v, tsjit.Float8E4M3).astype(np.float64)
    dequantized = np.zeros((batch, heads, head_dim, padded))
    dequantized[..., inside] = values[:, source[inside]].transpose(0, 2, 3, 1)
    assert np.array_equal(decode(vt, tsjit.Float8E4M3).astype(np.float64), dequantized)


@tsjit.kernel
def _exp2_polynomial_kernel(x, out):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < x.shape[0]:
        out[i] = exp2_polynomial(x[i])


def test_exp2_polynomial_interpreted_matches_float64():
    """The FMA-pipe exp2 of the fp8 softmax on the CPU interpreter: relative error <= 8e-5 against float64 over
    the exponents P takes (<= 0), exactly 0 below EXP2_POLYNOMIAL_MIN and at -inf (masked keys), 1 at 0."""
    rng = np.random.default_rng()
    x = np.concatenate([-rng.exponential(4.0, 200), rng.uniform(EXP2_POLYNOMIAL_MIN, 0.0, 50),
                        [0.0, -0.5, -1.5, -124.9, -125.5, -300.0, -np.inf]]).astype(np.float32)
    out = np.full(x.shape, np.nan, np.float32)
    _exp2_polynomial_kernel.interpret[(-(-x.size // 128),), (128,)](x, out)
    inside = x >= EXP2_POLYNOMIAL_MIN
    exact = np.exp2(x[inside].astype(np.float64))
    assert np.abs(out[inside] / exact - 1.0).max() <= 8e-5
    assert (out[~inside] == 0.0).all() and out[x == 0.0][0] == pytest.approx(1.0, rel=8e-5)


def test_polynomial_registers_spread_evenly():
    assert polynomial_registers(0, 96) == frozenset()
    assert polynomial_registers(16, 32) == frozenset(range(32))
    chosen = polynomial_registers(3, 96)
    assert len(chosen) == 18 and {i % 16 for i in chosen} == {0, 5, 10}
    for count in range(1, 17):          # each count exactly, and over both rows and parities (i % 4) once it can
        chosen = {i % 16 for i in polynomial_registers(count, 16)}
        assert len(chosen) == count and len({i % 4 for i in chosen}) == min(count, 4), count
    with pytest.raises(tsjit.CompilationError, match="0 to 16"):
        polynomial_registers(17, 96)


def test_pack_fp8_quad_rejects_other_types():
    with pytest.raises(tsjit.CompilationError, match="Float8E4M3"):
        from tsjit.lang.epilogue import pack_fp8_quad
        pack_fp8_quad([0.0] * 4, tsjit.BFloat16)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_row_sums_in_the_pv_wgmma_compile_without_spills(causal):
    """``MMA_ROW_SUMS`` with the tiles a launch without LSE takes (ROW_SUMS_CONFIG): the PV wgmma is m64n136 (the
    ones row below V^T), the softmax has no row-sum FADD chain left for ptxas to spill around, and the quadratic
    exponentials (EXP2_DEGREE 2) replace the cubic ones."""
    block_n, stages = program.default_config(128, causal, row_sums=True)
    kernel = program.compile_config(128, causal, store_lse=False, mma_row_sums=True, block_n=block_n, stages=stages,
                                    exp2_polynomial=3)
    meta = kernel.metadata
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    pv = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n136k32\.f32\.e4m3\.e4m3 \{[^}]*\}, \{%r", kernel.ptx)
    assert len(pv) == 2 * block_n // 32
    assert not re.findall(r"m64n128k32\.f32\.e4m3\.e4m3 \{[^}]*\}, \{%r", kernel.ptx), "no PV of N = head_dim left"


def test_row_sums_defaults_follow_the_lse():
    """A launch that stores the LSE never sums the e4m3 P (its LSE would be ~1e-2 off); one that does not follows
    DEFAULT_MMA_ROW_SUMS, with the row-sum tiles."""
    for head_dim in program.HEAD_DIMS:
        for masked in (False, True):
            assert not program.default_mma_row_sums(head_dim, masked, store_lse=True)
            table = program.CAUSAL_MMA_ROW_SUMS if masked else program.DEFAULT_MMA_ROW_SUMS
            assert program.default_mma_row_sums(head_dim, masked, store_lse=False) == table[head_dim]
            if table[head_dim]:
                assert program.default_config(head_dim, masked, row_sums=True)[0] in program.BLOCK_NS


@tsjit.kernel
def _exp2_fma_kernel(x, out, DEGREE: tsjit.Constexpr[int]):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < x.shape[0]:
        out[i] = exp2_fma(x[i], DEGREE)


@pytest.mark.parametrize("degree,tolerance", [(2, 1.8e-3), (3, 8e-5)])
def test_exp2_fma_interpreted_matches_float64(degree, tolerance):
    """The fp8 softmax's FMA-pipe exp2 (clamped, quadratic or cubic) on the CPU interpreter: relative error within
    the fit's over [-126, 0]; below (and at -inf, masked keys) a value in [0, 2**-125], which e4m3 rounds to 0."""
    rng = np.random.default_rng()
    x = np.concatenate([-rng.exponential(4.0, 200), rng.uniform(EXP2_FMA_MIN, 0.0, 50),
                        [0.0, -0.5, -1.5, -125.9, -126.5, -300.0, -np.inf]]).astype(np.float32)
    out = np.full(x.shape, np.nan, np.float32)
    _exp2_fma_kernel.interpret[(-(-x.size // 128),), (128,)](x, out, degree)
    inside = x >= EXP2_FMA_MIN
    exact = np.exp2(x[inside].astype(np.float64))
    assert np.abs(out[inside] / exact - 1.0).max() <= tolerance
    assert ((out[~inside] >= 0.0) & (out[~inside] <= 2.0**-125)).all()


@tsjit.kernel
def _fused_exp2_kernel(s, m, out, scale):
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < s.shape[0]:
        m_int = integral(m[i])
        out[i] = FusedExp2(scale, m_int, 1.0 / scale)(s[i])


def test_fused_exp2_interpreted_matches_float64():
    """FusedExp2 (the FMA-pipe exp2 straight from a score, against an integral row maximum) on the CPU interpreter:
    ``2**(s * scale - round(m))`` within the quadratic's relative error (1.8e-3) where the argument is at least
    EXP2_FUSED_MIN, and a value in [0, 2**-124] below it and for masked (-inf) scores, which e4m3 rounds to 0."""
    rng = np.random.default_rng()
    scale = np.float32(rng.uniform(0.01, 0.5))
    m = rng.uniform(-300.0, 300.0, 400).astype(np.float32)                 # row maxima in exp2 units
    x = np.concatenate([-rng.exponential(4.0, 300), rng.uniform(EXP2_FUSED_MIN, 0.0, 60),
                        [0.0, -0.5, -1.5, -124.5, -126.0, -200.0, -1e4, -np.inf]])[:400]
    m = m[:x.size]
    m_int = np.round(m.astype(np.float64))
    s = ((x + m_int) / scale).astype(np.float32)                           # scores whose argument is about x
    out = np.full(s.shape, np.nan, np.float32)
    _fused_exp2_kernel.interpret[(-(-s.size // 128),), (128,)](s, m, out, float(scale))
    argument = s.astype(np.float64) * np.float64(scale) - m_int
    inside = argument >= EXP2_FUSED_MIN
    exact = np.exp2(argument[inside])
    assert np.abs(out[inside] / exact - 1.0).max() <= 1.8e-3
    assert ((out[~inside] >= 0.0) & (out[~inside] <= 2.0**-124)).all()


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_packed_ordering_keeps_the_wgmma_pipeline(causal):
    """``ORDERING`` 3 (the default with row sums in the PV wgmma): the ordering store depends on P packed to e4m3
    (an OR of the packed registers, 0x80808080), the packing crosses the PV wait in S's registers and an XOR with that
    zero writes P's A registers after it (the loop's and the peeled tile's block_n / 8 each); 0 spills, and ptxas
    keeps the wgmma pipeline (its info log would report a serialization as C7513 "Potential Performance Loss"; the
    log of assembling the same PTX with ptxas is checked).  Without it (``ORDERING`` 1) the same store ORs the sign
    bits of the fp32 P."""
    block_n, stages = program.default_config(128, causal, row_sums=True)
    kernel = program.compile_config(128, causal, store_lse=False, stale_maxima=False)
    meta = kernel.metadata
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    ptx = kernel.ptx
    assert "-2139062144" in ptx, "the sign bits of the packed e4m3 codes (0x80808080)"
    assert len(re.findall(r"xor\.b32", ptx)) >= 2 * block_n // 8
    log = assemble(ptx, "sm_90a", kernel_name="attention_forward_fp8", tool="ptxas").info_log
    assert "Potential Performance Loss" not in log, [line for line in log.splitlines() if "C75" in line]
    old = program.compile_config(128, causal, store_lse=False, ordering=1, stale_maxima=False).ptx
    assert "-2139062144" not in old and len(re.findall(r"xor\.b32", old)) < 2 * block_n // 8


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_stale_maxima_compile_without_spills(causal):
    """The launch without LSE (``STALE_MAXIMA`` with row sums in the PV wgmma, 160-key tiles): 0 spills, the wgmma
    pipeline kept (no "Potential Performance Loss" in the ptxas log), the overflow test of the packed P (its add of
    0x08080808) and the warp vote that takes the row maxima only then."""
    block_n, _ = program.default_config(128, causal, row_sums=True)
    assert not program.default_stale_maxima(128, False)
    kernel = program.compile_config(128, causal, store_lse=False, stale_maxima=True,
                                    **({} if program.default_stale_maxima(128, True, causal) else
                                       dict(block_n=128, stages=3, mma_row_sums=True)))
    block_n = 128 if not program.default_stale_maxima(128, True, causal) else block_n
    meta = kernel.metadata
    assert meta["spill_stores_bytes"] == 0 and meta["spill_loads_bytes"] == 0 and meta["stack_frame_bytes"] == 0
    ptx = kernel.ptx
    assert "134744072" in ptx and "vote.sync.any.pred" in ptx
    assert len(re.findall(rf"m64n{block_n}k32\.f32\.e4m3\.e4m3", ptx)) == 2 * 128 // 32
    log = assemble(ptx, "sm_90a", kernel_name="attention_forward_fp8", tool="ptxas").info_log
    assert "Potential Performance Loss" not in log, [line for line in log.splitlines() if "C75" in line]
