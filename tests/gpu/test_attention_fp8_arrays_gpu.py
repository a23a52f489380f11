"""The fp8 (e4m3) attention forward (tsjit.examples.attention_fp8, issue 16) on tsjit device arrays, on the GPU
and under the CPU interpreter (``gpu_or_interpret``): the torch-free counterpart of test_attention_fp8_gpu.py at
small sizes, so CI checks the e4m3 wgmma operands, the P packing and the V^T key order.

The launch is assembled as ``tsjit.ops.attention`` assembles it for float8_e4m3fn inputs (TMA maps of Q, K and the
host-transposed V^T, a bf16 O); each case checks against a float64 reference computed from the dequantized
inputs (``q_scale * Q`` ...) on fresh random inputs with poisoned (NaN) outputs.  The bound: P is rounded to e4m3
in the kernel (3 mantissa bits), so the max abs error may reach 2.5x that of the float64 attention whose P is
rounded to e4m3 (plus bf16 output rounding); a wrong key order or fragment layout is off by O(1)."""
import itertools
import math

import numpy as np
import pytest

import tsjit
from tsjit import env
from tsjit.examples import attention_fp8 as program
from tsjit.examples import attention_tiles as tiles
from tsjit.interpret.numerics import decode, encode

from .attention_reference import masked_scores, reference, round_to

pytestmark = pytest.mark.gpu_or_interpret

SMS = 132
FP8 = tsjit.Float8E4M3


def launch(q, k, vt, out, lse, *, seqlen_k, causal, scale_log2, v_scale, window=(None, None), block_n=None,
           stages=None, pingpong=True, exp2_polynomial=None, lengths=None, rescale_threshold=None, mma_row_sums=None,
           exp2_degree=None, ordering=3, fused_exp2=True, store_lse=True, stale_maxima=False):
    """Launch attention_forward_fp8 as tsjit.ops.attention does: q (B, Sq, H, D), k (B, Sk, Hkv, D) and vt
    (B, Hkv, D, Sk padded to 16) Float8E4M3, out (B, Sq, H, D) BFloat16, lse (B, H, Sq) Float32 device arrays;
    ``lengths``: (lengths_q, lengths_k) of a packed variable-length batch (B = 1, vt from
    ``program.transposed_v_varlen``)."""
    batch, seqlen_q, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    default_n, default_stages = program.default_config(head_dim, causal)
    block_n, stages = block_n or default_n, stages or default_stages
    left, right = window
    if causal:
        right = 0 if right is None else min(right, 0)
    varlen = lengths is not None
    direct = head_dim == 256 or varlen
    if exp2_polynomial is None:
        exp2_polynomial = program.default_exp2_polynomial(head_dim, left is not None or right is not None)
    if rescale_threshold is None:
        rescale_threshold = program.default_rescale_threshold(head_dim, left is not None or right is not None)
    table = None
    cu = [tsjit.zeros((2,), tsjit.Int32)] * 2
    if varlen:
        cu = [tsjit.to_device(np.array([0] + list(itertools.accumulate(n)), np.int32)) for n in lengths]
    if causal or left is not None or right is not None or varlen:
        lens_q, lens_k = lengths if varlen else ([seqlen_q] * batch, [seqlen_k] * batch)
        table = tsjit.to_device(np.ascontiguousarray(
            tiles.tile_table(lens_q, lens_k, heads, block_n, causal, SMS, (left, right), 128, causal and not direct),
            dtype=np.int32))
        num_tiles = table.shape[0]
    else:
        num_tiles = batch * heads * -(-seqlen_q // 128)
    width = min(128, head_dim)
    q_map = tsjit.TensorMap(q, (1, 128, 1, width), swizzle=f"{width}B")
    k_map = tsjit.TensorMap(k, (1, block_n, 1, width), swizzle=f"{width}B")
    keys = program.value_box_keys(block_n)
    vt_map = tsjit.TensorMap(vt, (1, 1, head_dim, keys), swizzle=f"{keys}B")
    o_map = tsjit.TensorMap(out, (1, 64, 1, 64), swizzle="128B")
    out2d = tsjit.runtime.arrays.DeviceArray((batch * seqlen_q, heads * head_dim), out.dtype, data_ptr=out.data_ptr,
                                             owner=out) if direct else tsjit.empty((1, 8), tsjit.BFloat16)
    grid = max(1, min(num_tiles, SMS))
    program.attention_forward_fp8[(grid,), (384,)](
        q_map, k_map, vt_map, o_map, out2d, lse, table if table is not None else tsjit.zeros((1, 2), tsjit.Int32),
        *cu, seqlen_q, seqlen_k, heads, heads // kv_heads, scale_log2, v_scale, 0 if left is None else left,
        0 if right is None else right, head_dim, block_n, stages, right is not None, store_lse, pingpong, 2,
        left is not None, table is not None, direct, exp2_polynomial, varlen, float(rescale_threshold),
        program.default_mma_row_sums(head_dim, causal) if mma_row_sums is None else mma_row_sums,
        program.default_exp2_degree(head_dim, causal) if exp2_degree is None else exp2_degree, ordering, 4, False,
        fused_exp2, stale_maxima)


def _fp8(shape, rng, spread=2.0):
    bits = encode(rng.standard_normal(shape) * spread, FP8)
    return bits, decode(bits, FP8).astype(np.float64)


def rounded_p_reference(q, k, v, causal, scale, window):
    """float64 attention whose normalized-by-the-row-max P is rounded to e4m3 before P V (the row sums are not):
    the rounding the kernel adds."""
    heads, kv_heads = q.shape[2], k.shape[2]
    s = masked_scores(q, k, causal, scale, window)
    peak = np.max(s, axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isinf(peak), 0.0, peak))
    total = p.sum(-1, keepdims=True)
    o = (round_to(p, FP8) @ np.repeat(v.transpose(0, 2, 1, 3), heads // kv_heads, axis=1)) / np.where(total > 0, total,
                                                                                                      1.0)
    return o.transpose(0, 2, 1, 3)


def check(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal, window=(None, None), late_keys=None,
          **options):
    """One case with poisoned outputs against the float64 reference of the dequantized inputs (module docstring).
    With ``mma_row_sums`` the LSE is the log of the sum of the e4m3-rounded P (rounded against the kernel's running
    maxima), checked to log(1 + 2**-4), e4m3's relative rounding (interpreted: up to 1e-2 seen; 2e-3 otherwise).
    ``late_keys``: (first key, gain): K from that key on is that many times larger and the Q and K scales are 1, so
    the rows' maxima jump by far more than 2**8 at a late KV tile."""
    rng = np.random.default_rng()
    (qb, q8), (kb, k8), (vb, v8) = (_fp8((batch, s, h, head_dim), rng) for s, h in
                                    ((seqlen_q, heads), (seqlen_k, kv_heads), (seqlen_k, kv_heads)))
    q_scale, k_scale, v_scale = (float(x) for x in rng.uniform(0.05, 0.3, 3))
    if late_keys is not None:
        first, gain = late_keys
        k8[:, first:] *= gain
        kb = encode(k8, FP8)
        k8 = decode(kb, FP8).astype(np.float64)
        q_scale = k_scale = 1.0
    q, k = tsjit.to_device(qb, dtype=FP8), tsjit.to_device(kb, dtype=FP8)
    vt = tsjit.to_device(program.transposed_v(vb), dtype=FP8)
    out = tsjit.empty(q.shape, tsjit.BFloat16).fill_bytes(0xFF)
    lse = tsjit.empty((batch, heads, seqlen_q), tsjit.Float32).fill_bytes(0xFF)
    scale = 1.0 / math.sqrt(head_dim)
    launch(q, k, vt, out, lse, seqlen_k=seqlen_k, causal=causal, scale_log2=scale * q_scale * k_scale * math.log2(math.e),
           v_scale=v_scale, window=window, **options)
    qd, kd, vd = q8 * q_scale, k8 * k_scale, v8 * v_scale
    ref, ref_lse = reference(qd, kd, vd, causal, scale, window)
    got = decode(out.numpy(), tsjit.BFloat16).astype(np.float64)
    got_lse = lse.numpy().astype(np.float64)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} output elements left unwritten (poison survived)"
    assert not options.get("store_lse", True) or not np.isnan(got_lse).any(), "LSE rows left unwritten"
    err = np.abs(got - ref).max()
    bound = np.abs(rounded_p_reference(qd, kd, vd, causal, scale, window) - ref).max() + \
        np.abs(round_to(ref, tsjit.BFloat16) - ref).max()
    assert err <= 2.5 * bound, (err, bound)
    if not options.get("store_lse", True):
        return err, bound
    finite = np.isfinite(ref_lse)
    np.testing.assert_array_equal(np.isfinite(got_lse), finite)
    if finite.any() and options.get("mma_row_sums"):
        assert np.abs(got_lse[finite] - ref_lse[finite]).max() < math.log1p(2.0**-4)
    elif finite.any():
        assert np.abs(got_lse[finite] - ref_lse[finite]).max() < 2e-3
    return err, bound


@pytest.mark.parametrize("head_dim,causal", [(128, False), (128, True), (64, True)])
def test_attention_fp8_matches_float64(head_dim, causal):
    """S = 192 (interpreted; 1000 on the GPU): a whole and a partial KV tile, keys past the end masked and V^T
    zero-padded; the causal diagonal crosses both."""
    seqlen = 192 if env.interpret() else 1000
    check(1, seqlen, seqlen, 2, 1 if causal else 2, head_dim, causal)


@pytest.mark.parametrize("causal,polynomial", [(False, 0), (True, 3)])
def test_attention_fp8_224_key_tiles_match_float64(causal, polynomial):
    """224-key tiles (FlashAttention-3's fp8 tile at head_dim 128): V^T in seven 32-key boxes with 32B swizzle, a
    QK^T of N = 224 and seven k32 PV steps; 600 keys (interpreted; 1000 on the GPU) are two whole KV tiles and a
    partial one; with 3 of 16 exponentials on the FMA pipe in the causal case."""
    seqlen = 600 if env.interpret() else 1000
    check(1, 200 if env.interpret() else seqlen, seqlen, 2, 1, 128, causal, block_n=224, stages=2,
          exp2_polynomial=polynomial)


@pytest.mark.parametrize("causal,block_n,degree", [(False, 192, 2), (True, 224, 3), (False, 64, 2)])
def test_attention_fp8_row_sums_in_the_pv_wgmma_match_float64(causal, block_n, degree):
    """``MMA_ROW_SUMS``: a ones row below every V^T box (32B / 64B / 128B swizzled boxes of 32 / 64 / 128 keys per
    block_n) makes the PV wgmma m64n136 and column 128 of O the row sums of P (the LSE comes from it too), with 4 of
    16 exponentials on the FMA pipe at polynomial ``degree``; 2.5 KV tiles (interpreted: fewer queries)."""
    seqlen = 5 * block_n // 2
    check(1, 130 if env.interpret() else seqlen, seqlen, 2, 1, 128, causal, block_n=block_n,
          stages=3 if block_n == 192 else 2, exp2_polynomial=4, mma_row_sums=True, exp2_degree=degree)


def test_attention_fp8_polynomial_exp2_rows_without_keys():
    """Every exponential on the FMA pipe (exp2_polynomial 16), causal with more queries than keys: masked keys give
    P = 0 exactly, so the rows that see no key get O = 0 and LSE -inf as with MUFU exp2."""
    check(1, 300, 100, 2, 1, 128, True, exp2_polynomial=16)


def check_varlen(lens_q, lens_k, heads, kv_heads, head_dim, causal, window=(None, None), **options):
    """A packed variable-length batch (no padding: Q, K and O packed, V^T packed per sequence from a multiple of 16
    keys) with poisoned outputs, each sequence against its own float64 reference (the bound of :func:`check`)."""
    rng = np.random.default_rng()
    total_q, total_k = sum(lens_q), sum(lens_k)
    (qb, q8), (kb, k8), (vb, v8) = (_fp8((1, n, h, head_dim), rng) for n, h in
                                    ((total_q, heads), (total_k, kv_heads), (total_k, kv_heads)))
    q_scale, k_scale, v_scale = (float(x) for x in rng.uniform(0.05, 0.3, 3))
    q, k = tsjit.to_device(qb, dtype=FP8), tsjit.to_device(kb, dtype=FP8)
    vt = tsjit.to_device(program.transposed_v_varlen(vb[0], lens_k), dtype=FP8)
    out = tsjit.empty(q.shape, tsjit.BFloat16).fill_bytes(0xFF)
    lse = tsjit.empty((1, heads, total_q), tsjit.Float32).fill_bytes(0xFF)
    scale = 1.0 / math.sqrt(head_dim)
    launch(q, k, vt, out, lse, seqlen_k=total_k, causal=causal, v_scale=v_scale, lengths=(lens_q, lens_k),
           scale_log2=scale * q_scale * k_scale * math.log2(math.e), window=window, **options)
    got = decode(out.numpy(), tsjit.BFloat16).astype(np.float64)[0]
    got_lse = lse.numpy().astype(np.float64)[0]
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} output elements left unwritten (poison survived)"
    assert not np.isnan(got_lse).any(), "LSE rows left unwritten (poison survived)"
    worst = []
    for b, (sq, sk) in enumerate(zip(lens_q, lens_k)):
        q0, k0 = sum(lens_q[:b]), sum(lens_k[:b])
        if sq == 0:
            continue
        qd, kd, vd = (x[:, lo:lo + n] * c for x, lo, n, c in
                      ((q8, q0, sq, q_scale), (k8, k0, sk, k_scale), (v8, k0, sk, v_scale)))
        ref, ref_lse = reference(qd, kd, vd, causal, scale, window)
        bound = np.abs(round_to(ref, tsjit.BFloat16) - ref).max()
        if sk:
            bound += np.abs(rounded_p_reference(qd, kd, vd, causal, scale, window) - ref).max()
        err = np.abs(got[q0:q0 + sq] - ref[0]).max()
        assert err <= 2.5 * bound, (b, sq, sk, err, bound)
        finite = np.isfinite(ref_lse[0])
        np.testing.assert_array_equal(np.isfinite(got_lse[:, q0:q0 + sq]), finite)
        if finite.any():
            assert np.abs(got_lse[:, q0:q0 + sq][finite] - ref_lse[0][finite]).max() < 2e-3
        worst.append(err)
    return max(worst)


def test_attention_fp8_conditional_rescaling_matches_float64():
    """``RESCALE_THRESHOLD`` 8 (FlashAttention-4's conditional rescaling): stale row maxima let P reach 2**8 (e4m3's
    range is 448); a row's first KV tile moves its maxima (from -inf) and later ones mostly do not, so both sides of
    the warp-uniform rescale branch run."""
    seqlen = 384 if env.interpret() else 1000
    check(1, seqlen, seqlen, 2, 1, 128, True, rescale_threshold=8.0)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_fp8_varlen_matches_float64(causal):
    """Packed sequences of lengths 0, 1 and 129 (and a query sequence with no keys; the third sequence's keys start
    at packed key 8, so its V^T is realigned to 16), GQA 2:1, head_dim 128: every row and LSE entry written."""
    check_varlen([0, 1, 129, 3, 20], [7, 1, 129, 0, 150], 2, 1, 128, causal)


def test_attention_fp8_varlen_sliding_window_matches_float64():
    """Packed sequences under a causal sliding window of 40 keys: the KV tiles before the window are skipped per
    sequence (the V^T loads start from the sequence's realigned start plus the first visible tile)."""
    check_varlen([0, 1, 129, 200], [7, 1, 129, 300], 2, 1, 128, True, window=(40, None), block_n=64, stages=3)


@pytest.mark.parametrize("causal,polynomial,threshold,store_lse", [(False, 3, 8.0, False), (False, 5, -1.0, False),
                                                                  (True, 0, -1.0, True), (True, 3, 8.0, False)])
def test_attention_fp8_packed_ordering_and_fused_exp2_match_float64(causal, polynomial, threshold, store_lse):
    """The launch without LSE (row sums in the PV wgmma, 192-key tiles): P packed before the PV wait (``ORDERING``
    3) and, where some exponentials run on the FMA pipe and no LSE is stored, ``FUSED_EXP2`` (integral row maxima);
    conditional rescaling or none; 2.5 KV tiles (interpreted: fewer queries)."""
    seqlen = 480
    check(1, 130 if env.interpret() else seqlen, seqlen, 2, 1, 128, causal, block_n=192, stages=3,
          exp2_polynomial=polynomial, mma_row_sums=True, exp2_degree=2, rescale_threshold=threshold,
          store_lse=store_lse)


def test_attention_fp8_fused_exp2_rows_without_keys():
    """Every exponential on the FMA pipe through ``FUSED_EXP2``, causal with more queries than keys, no LSE: masked
    keys give P below 2**-124, which e4m3 rounds to 0, so rows that see no key get O = 0."""
    check(1, 300, 100, 2, 1, 128, True, block_n=192, stages=3, exp2_polynomial=16, mma_row_sums=True, exp2_degree=2,
          store_lse=False)


@pytest.mark.parametrize("causal,block_n,polynomial", [(False, 160, 3), (True, 128, 0), (False, 160, 16),
                                                        (True, 160, 4)])
def test_attention_fp8_stale_maxima_match_float64(causal, block_n, polynomial):
    """``STALE_MAXIMA`` (no LSE): P against the stale integral row maxima, packed, and only where some P reaches 2**8
    (or a row has no maximum yet) the warp moves to the tile's maxima and computes P again; the keys of the last KV
    tiles are 4x larger (Q and K scales 1), so rows move late as well as on their first tile."""
    seqlen = 3 * block_n
    check(1, 130 if env.interpret() else seqlen, seqlen, 2, 1, 128, causal, block_n=block_n, stages=3,
          exp2_polynomial=polynomial, mma_row_sums=True, exp2_degree=2, store_lse=False, stale_maxima=True,
          late_keys=(2 * block_n, 4.0))
