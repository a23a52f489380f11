"""The attention kernel (tsjit.examples.attention, issue 16) on tsjit device arrays (no torch), on the GPU and
under the CPU interpreter (``gpu_or_interpret``; issue 13): the torch-free counterpart of
test_attention_gpu.py at small sizes, so CI (no GPU, no torch) checks its numerics.

The launch is assembled here as ``tsjit.ops.attention`` assembles it (TMA maps of Q, K, V, O with 128-byte
swizzled boxes, the host tile table, the LSE output); every case checks against a float64 reference
(per-row softmax in float64) on fresh random bf16 / fp16 inputs with poisoned (NaN) outputs: the max abs
error within 1.5x twice the error of rounding the reference to the input dtype (or 2**-10), the LSE within
2e-3, no row left unwritten.  Sizes: one 128-row Q tile per (batch, head) (S = 128 / 192: a partial KV
tile), head_dim 64 / 128, causal / non-causal, each software schedule, GQA / MQA, a sliding window, and
variable-length batches with lengths 0, 1 and 129."""
import itertools
import math

import numpy as np
import pytest

import tsjit
from tsjit import env
from tsjit.examples import attention as program
from tsjit.examples import attention_tiles as tiles
from tsjit.interpret.numerics import decode, encode

from .attention_reference import reference, round_to

pytestmark = pytest.mark.gpu_or_interpret

SMS = 132
SCHEDULES = {"one-tile": dict(overlap=False), "overlapped": dict(overlap=True, pingpong=False),
             "pingpong": dict(overlap=True, pingpong=True), "block-n-64": dict(block_n=64, q_stages=1)}


def _random(shape, dtype, rng):
    bits = encode(rng.standard_normal(shape), dtype)
    return bits, decode(bits, dtype).astype(np.float64)


def _device(bits, dtype):
    return tsjit.to_device(bits.view(np.float16) if dtype is tsjit.Float16 else bits, dtype=dtype)


def launch(q, k, v, out, lse, *, causal, scale, window=(None, None), lengths=None, cu=(None, None), block_n=None,
           stages=None, overlap=None, pingpong=None, q_stages=None, rescale_threshold=None, warpgroups=None):
    """Launch attention_forward as tsjit.ops.attention does: q (B, Sq, H, D), k / v (B, Sk, Hkv, D), out like q,
    lse (B, H, Sq) Float32 device arrays (packed variable-length: B = 1 and ``lengths`` = (lens_q, lens_k),
    ``cu`` their Int32 prefix sums)."""
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    default_n, default_stages = program.DEFAULT_CONFIG[head_dim]
    block_n, stages = block_n or default_n, stages or default_stages
    overlap = program.DEFAULT_OVERLAP[head_dim] if overlap is None else overlap
    pingpong = program.DEFAULT_PINGPONG[head_dim] if pingpong is None else pingpong
    q_stages = q_stages or program.DEFAULT_Q_STAGES[head_dim]
    warpgroups = warpgroups or program.DEFAULT_WARPGROUPS[head_dim]
    left, right = window
    if causal:
        right = 0 if right is None else min(right, 0)
    varlen = lengths is not None
    direct = varlen or head_dim == 256
    table = None
    if varlen or causal or left is not None or right is not None:
        seqlens = lengths if varlen else ([seqlen_q] * batch, [seqlen_k] * batch)
        table = tsjit.to_device(np.ascontiguousarray(
            tiles.tile_table(seqlens[0], seqlens[1], heads, block_n, causal, SMS, (left, right), 64 * warpgroups,
                             causal and not direct),
            dtype=np.int32))
        num_tiles = table.shape[0]
    else:
        num_tiles = batch * heads * -(-seqlen_q // (64 * warpgroups))
    dummy_table = tsjit.zeros((1, 2), tsjit.Int32)
    dummy_cu = tsjit.zeros((2,), tsjit.Int32)
    swizzled = dict(swizzle="128B")
    q_map = tsjit.TensorMap(q, (1, 64 * warpgroups, 1, program.BOX), **swizzled)
    k_map = tsjit.TensorMap(k, (1, block_n, 1, program.BOX), **swizzled)
    v_map = tsjit.TensorMap(v, (1, block_n, 1, program.BOX), **swizzled)
    o_map = tsjit.TensorMap(out, (1, 64, 1, program.BOX), **swizzled)
    out2d = tsjit.runtime.arrays.DeviceArray((batch * seqlen_q, heads * head_dim), out.dtype, data_ptr=out.data_ptr,
                                             owner=out) if direct else tsjit.empty((1, 8), tsjit.BFloat16)
    rest = (table if table is not None else dummy_table, cu[0] if varlen else dummy_cu,
            cu[1] if varlen else dummy_cu, seqlen_q, seqlen_k, heads, heads // kv_heads, program.log2_scale(scale),
            0 if left is None else left, 0 if right is None else right, head_dim, block_n, stages, right is not None,
            True, bool(overlap), bool(pingpong) and bool(overlap), q_stages, left is not None, table is not None, varlen,
            direct, float(program.DEFAULT_RESCALE_THRESHOLD[head_dim] if rescale_threshold is None else rescale_threshold),
            warpgroups)
    grid = max(1, min(num_tiles, SMS))
    program.attention_forward[(grid,), (program.threads(warpgroups),)](q_map, k_map, v_map, o_map, out2d, lse, *rest)


def _values(array, dtype):
    host = array.numpy()
    return host.astype(np.float64) if dtype is tsjit.Float32 else decode(host, dtype).astype(np.float64)


def check(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal, dtype=tsjit.BFloat16, window=(None, None),
          k_tile_scales=None, **options):
    """Run one case with poisoned outputs against the float64 reference (module docstring)."""
    rng = np.random.default_rng()
    (qb, q64), (kb, k64), (vb, v64) = (_random((batch, s, h, head_dim), dtype, rng) for s, h in
                                       ((seqlen_q, heads), (seqlen_k, kv_heads), (seqlen_k, kv_heads)))
    if k_tile_scales is not None:            # keys of KV tile j scaled by k_tile_scales[j] (128-key tiles; the last
        scales = list(k_tile_scales) + [k_tile_scales[-1]] * (-(-seqlen_k // 128))        # scale for the rest)
        rows = np.repeat(np.asarray(scales, dtype=np.float64), 128)[:seqlen_k]
        kb = encode(k64 * rows[None, :, None, None], dtype)
        k64 = decode(kb, dtype).astype(np.float64)
    q, k, v = (_device(b, dtype) for b in (qb, kb, vb))
    out = tsjit.empty(q.shape, dtype).fill_bytes(0xFF)
    lse = tsjit.empty((batch, heads, seqlen_q), tsjit.Float32).fill_bytes(0xFF)
    scale = 1.0 / math.sqrt(head_dim)
    launch(q, k, v, out, lse, causal=causal, scale=scale, window=window, **options)
    ref, ref_lse = reference(q64, k64, v64, causal, scale, window)
    got, got_lse = _values(out, dtype), _values(lse, tsjit.Float32)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} output elements left unwritten (poison survived)"
    assert not np.isnan(got_lse).any(), "LSE rows left unwritten (poison survived)"
    err = np.abs(got - ref).max()
    bound = 2 * np.abs(round_to(ref, dtype) - ref).max()
    assert err <= max(1.5 * bound, 2.0 ** -10), (err, bound)
    finite = np.isfinite(ref_lse)
    np.testing.assert_array_equal(np.isfinite(got_lse), finite)
    if finite.any():
        assert np.abs(got_lse[finite] - ref_lse[finite]).max() < 2e-3
    return got


@pytest.mark.parametrize("head_dim,causal,schedule", [(64, False, "one-tile"), (64, True, "overlapped"),
                                                      (64, True, "pingpong"), (64, False, "block-n-64"),
                                                      (128, True, "one-tile"), (128, False, "pingpong")])
def test_attention_matches_float64(head_dim, causal, schedule):
    seqlen = 192 if env.interpret() else 1000          # 192: a partial KV tile after a whole one
    check(1, seqlen if causal else 128, seqlen, 2, 2, head_dim, causal, **SCHEDULES[schedule])


@pytest.mark.parametrize("causal", [False, True])
def test_attention_fp16_and_lengths_not_a_multiple_of_the_tile(causal):
    check(1, 129 if env.interpret() else 255, 129 if env.interpret() else 255, 1, 1, 64, causal, dtype=tsjit.Float16)


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (4, 1)], ids=["gqa", "mqa"])
def test_attention_gqa_and_mqa(heads, kv_heads):
    check(1, 128, 128 if env.interpret() else 700, heads, kv_heads, 64, True)


def test_attention_unequal_lengths_and_a_sliding_window():
    check(1, 128, 200, 2, 1, 64, True, window=(60, None))
    check(1, 128, 100, 1, 1, 64, False)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_varlen(causal):
    """Packed sequences of lengths 0, 1, 129 (no padding) against a float64 reference per sequence; every output
    row and LSE entry written (poisoned before), nothing written past the packed tokens."""
    dtype, heads, kv_heads, head_dim = tsjit.BFloat16, (1 if env.interpret() else 2), 1, 64
    lens_q, lens_k = [0, 1, 129, 5], [7, 0, 129, 64]
    if not env.interpret():
        lens_q, lens_k = lens_q + [1000, 300], lens_k + [700, 2000]
    rng = np.random.default_rng()
    (qb, q64), (kb, k64), (vb, v64) = (_random((1, sum(lens), h, head_dim), dtype, rng) for lens, h in
                                       ((lens_q, heads), (lens_k, kv_heads), (lens_k, kv_heads)))
    q, k, v = (_device(b, dtype) for b in (qb, kb, vb))
    total_q = sum(lens_q)
    base = tsjit.empty((total_q + 8, heads, head_dim), dtype).fill_bytes(0xFF)
    out = tsjit.runtime.arrays.DeviceArray((1, total_q, heads, head_dim), dtype, data_ptr=base.data_ptr, owner=base)
    lse = tsjit.empty((1, heads, total_q), tsjit.Float32).fill_bytes(0xFF)
    cu = [tsjit.to_device(np.array([0] + list(itertools.accumulate(lens)), np.int32)) for lens in (lens_q, lens_k)]
    scale = 1 / math.sqrt(head_dim)
    launch(q, k, v, out, lse, causal=causal, scale=scale, lengths=(lens_q, lens_k), cu=cu)
    got_all, got_lse = _values(base, dtype), _values(lse, tsjit.Float32)[0]
    assert np.isnan(got_all[total_q:]).all(), "written past the packed tokens"
    got = got_all[:total_q]
    assert not np.isnan(got).any() and not np.isnan(got_lse).any(), "rows left unwritten (poison survived)"
    for b, (sq, sk) in enumerate(zip(lens_q, lens_k)):
        q0, k0 = sum(lens_q[:b]), sum(lens_k[:b])
        if sq == 0:
            continue
        ref, ref_lse = reference(q64[:, q0:q0 + sq], k64[:, k0:k0 + sk], v64[:, k0:k0 + sk], causal, scale)
        err = np.abs(got[q0:q0 + sq] - ref[0]).max()
        bound = 2 * np.abs(round_to(ref, dtype) - ref).max()
        assert err <= max(1.5 * bound, 2.0 ** -9), (b, err, bound)
        finite = np.isfinite(ref_lse[0])
        np.testing.assert_array_equal(np.isfinite(got_lse[:, q0:q0 + sq]), finite)
        if finite.any():
            assert np.abs(got_lse[:, q0:q0 + sq][finite] - ref_lse[0][finite]).max() < 2e-3


@pytest.mark.parametrize("threshold,causal,k_tile_scales", [(8.0, False, None), (8.0, True, (1.0, 8.0)),
                                                            (0.0, False, (1.0, 4.0))],
                         ids=["stale-max", "causal-growth", "threshold-0"])
def test_attention_conditional_rescale(threshold, causal, k_tile_scales):
    """Conditional rescaling (``RESCALE_THRESHOLD``): unit-normal scores never grow by 2**8, so the second KV
    tile keeps the first one's maxima (P up to 2**8, no rescale); keys scaled by 8 in the second tile grow the
    maxima past the threshold (the rescale runs); threshold 0 rescales whenever a row's maximum grows."""
    check(1, 128, 192 if env.interpret() else 700, 1, 1, 64, causal, rescale_threshold=threshold,
          k_tile_scales=k_tile_scales)


@pytest.mark.parametrize("warpgroups,causal,schedule", [(3, True, "overlapped"), (2, True, "pingpong")])
def test_attention_head_dim_64_warpgroups(warpgroups, causal, schedule):
    """head_dim 64 with three consumer warpgroups (the default: 192-row Q tiles, round-robin turns; S = 200 is two
    Q tiles, the second partial: rows past the end zero-filled by TMA, stores clipped) or two (128-row tiles);
    two KV tiles, the second partial; GQA 2/1 and a causal mask whose diagonal crosses both KV tiles."""
    check(1, 200, 200, 2, 1, 64, causal, warpgroups=warpgroups, **SCHEDULES[schedule])
