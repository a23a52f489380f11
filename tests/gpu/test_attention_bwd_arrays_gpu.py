"""The attention backward kernel (tsjit.examples.attention_bwd) on tsjit device arrays (no torch), on the GPU and
under the CPU interpreter (``gpu_or_interpret``): the torch-free counterpart of test_attention_bwd_gpu.py at small
sizes, so CI (no GPU, no torch) checks its numerics.

The launch is assembled here as ``tsjit.ops.attention_backward`` assembles it (TMA maps of Q, dO, K, V, the padded
statistics, the Float32 dQ workspace, rank-2 dK / dV views).  Each case: fresh random inputs, dK / dV poisoned
(NaN), compared with float64 gradients (numpy): the max abs error of each within a fraction of its largest
reference value: 2**-7 in bf16 (P and dS are rounded to 8 bits before the wgmmas, as in FlashAttention), 2**-9 in
fp16 (measured on the interpreter: 0.2-0.3% bf16, 0.04% fp16)."""
import math

import numpy as np
import pytest

import tsjit
from tsjit import env
from tsjit.examples import attention_bwd as program
from tsjit.examples import attention_bwd_parts as parts
from tsjit.examples.attention_config import BOX, LOG2_E
from tsjit.interpret.numerics import decode, encode

from .attention_reference import masked_scores, round_to, softmax_rows

pytestmark = pytest.mark.gpu_or_interpret

SMS = 132


def _random(shape, dtype, rng):
    bits = encode(rng.standard_normal(shape), dtype)
    return bits, decode(bits, dtype).astype(np.float64)


def _device(bits, dtype):
    return tsjit.to_device(bits.view(np.float16) if dtype is tsjit.Float16 else bits, dtype=dtype)


def reference_backward(q, k, v, do, causal, scale):
    """float64 (out, lse, dq, dk, dv) of (B, S, H, D) arrays (GQA: dk / dv summed over each group)."""
    heads, kv_heads = q.shape[2], k.shape[2]
    group = heads // kv_heads
    s = masked_scores(q, k, causal, scale)                               # (B, H, Sq, Sk)
    p, lse = softmax_rows(s)
    qd, dod = q.transpose(0, 2, 1, 3), do.transpose(0, 2, 1, 3)
    kd = np.repeat(k.transpose(0, 2, 1, 3), group, axis=1)
    vd = np.repeat(v.transpose(0, 2, 1, 3), group, axis=1)
    out = p @ vd
    dv = p.transpose(0, 1, 3, 2) @ dod
    dp = dod @ vd.transpose(0, 1, 3, 2)
    ds = p * (dp - np.sum(dod * out, axis=-1, keepdims=True))
    dq = scale * ds @ kd
    dk = scale * ds.transpose(0, 1, 3, 2) @ qd
    b, _, sk, d = dk.shape
    dk = dk.reshape(b, kv_heads, group, sk, d).sum(2)
    dv = dv.reshape(b, kv_heads, group, sk, d).sum(2)
    return (out.transpose(0, 2, 1, 3), lse, dq.transpose(0, 2, 1, 3), dk.transpose(0, 2, 1, 3),
            dv.transpose(0, 2, 1, 3))


def launch(q, k, v, do, stats, dq, dk, dv, *, causal, scale, padded, stages=None, dq_shared=None, kv_stages=1,
           sms=SMS):
    """Launch attention_backward as tsjit.ops.attention_backward does."""
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    swizzled = dict(swizzle="128B")
    maps = [tsjit.TensorMap(q, (1, program.BWD_BLOCK_M, 1, BOX), **swizzled),
            tsjit.TensorMap(k, (1, program.BWD_BLOCK_N, 1, BOX), **swizzled),
            tsjit.TensorMap(v, (1, program.BWD_BLOCK_N, 1, BOX), **swizzled),
            tsjit.TensorMap(do, (1, program.BWD_BLOCK_M, 1, BOX), **swizzled),
            tsjit.TensorMap(stats, (1, 1, 2, program.BWD_BLOCK_M)), tsjit.TensorMap(dq, (64, 64))]
    view = tsjit.runtime.arrays.DeviceArray
    dk2 = view((batch * seqlen_k, kv_heads * head_dim), dk.dtype, data_ptr=dk.data_ptr, owner=dk)
    dv2 = view((batch * seqlen_k, kv_heads * head_dim), dv.dtype, data_ptr=dv.data_ptr, owner=dv)
    tiles = batch * kv_heads * -(-seqlen_k // program.BWD_BLOCK_N)
    program.attention_backward[(max(1, min(tiles, sms)),), (program.BWD_THREADS,)](
        *maps, dq, dk2, dv2, batch, seqlen_q, seqlen_k, heads, kv_heads, heads // kv_heads, padded, scale,
        scale * LOG2_E,
        head_dim, causal, stages or program.BWD_STAGES[head_dim], kv_stages,
        program.BWD_DQ_SHARED[head_dim] if dq_shared is None else dq_shared)


def _values(array, dtype):
    host = array.numpy()
    return host.astype(np.float64) if dtype is tsjit.Float32 else decode(host, dtype).astype(np.float64)


def check(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal, dtype=tsjit.BFloat16, **options):
    rng = np.random.default_rng()
    (qb, q64), (kb, k64), (vb, v64), (dob, do64) = (_random((batch, s, h, head_dim), dtype, rng) for s, h in
                                                    ((seqlen_q, heads), (seqlen_k, kv_heads), (seqlen_k, kv_heads),
                                                     (seqlen_q, heads)))
    scale = 1.0 / math.sqrt(head_dim)
    out, lse, ref_dq, ref_dk, ref_dv = reference_backward(q64, k64, v64, do64, causal, scale)
    out = round_to(out, dtype)                                     # the forward's output, in the input dtype
    padded = -(-seqlen_q // program.BWD_BLOCK_M) * program.BWD_BLOCK_M
    stats = np.zeros((batch, heads, 2, padded), np.float32)
    stats[:, :, 0, :] = np.inf
    stats[:, :, 0, :seqlen_q] = np.where(np.isinf(lse), np.inf, lse * LOG2_E)
    stats[:, :, 1, :seqlen_q] = np.sum(do64 * out, axis=-1).transpose(0, 2, 1)
    q, k, v, do = (_device(b, dtype) for b in (qb, kb, vb, dob))
    dq = tsjit.zeros((batch * heads * padded, head_dim), tsjit.Float32)
    dk = tsjit.empty(k.shape, dtype).fill_bytes(0xFF)
    dv = tsjit.empty(v.shape, dtype).fill_bytes(0xFF)
    launch(q, k, v, do, tsjit.to_device(stats), dq, dk, dv, causal=causal, scale=scale, padded=padded, **options)
    got_dq = _values(dq, tsjit.Float32).reshape(batch, heads, padded, head_dim)[:, :, :seqlen_q]
    got_dq = got_dq.transpose(0, 2, 1, 3)
    got_dk, got_dv = _values(dk, dtype), _values(dv, dtype)
    for name, got, ref in (("dq", got_dq, ref_dq), ("dk", got_dk, ref_dk), ("dv", got_dv, ref_dv)):
        assert not np.isnan(got).any(), f"{name}: {np.isnan(got).sum()} elements left unwritten (poison survived)"
        err, top = np.abs(got - ref).max(), np.abs(ref).max()
        assert err <= (2.0 ** -7 if dtype is tsjit.BFloat16 else 2.0 ** -9) * max(top, 1.0), (name, err, top)


@pytest.mark.parametrize("head_dim,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_backward_matches_float64(head_dim, causal):
    check(1, 128, 128, 1, 1, head_dim, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_own_dq_at_head_dim_128(causal):
    """``DQ_SHARED=False`` at head_dim 128 (the default shares dQ between the warpgroups): each warpgroup computes
    all of dQ over its own 64 keys; two Q blocks, so both dS buffers are used."""
    check(1, 128, 128, 1, 1, 128, causal, dq_shared=False)


def test_backward_persistent_tiles_and_two_kv_stages():
    """One CTA runs every work tile (the persistent loop: K / V reloaded per tile, dK / dV stored per tile), with a
    K / V ring of two stages (the next tile's K and V load during the current one) and of one."""
    for kv_stages in (2, 1):
        check(1, 128, 256, 2, 1, 64, True, kv_stages=kv_stages, sms=1)


def test_backward_gqa_fp16_and_partial_tiles():
    """Two query heads per KV head (dk / dv summed over the group), fp16, a partial Q block and KV block, and a
    causal mask with more keys than queries (bottom-right aligned)."""
    check(1, 70, 150 if env.interpret() else 700, 2, 1, 64, True, dtype=tsjit.Float16)


def test_preprocess_matches_float64():
    """attention_backward_preprocess: the statistics rows (LSE * log2 e, +inf for -inf and the padding; D =
    rowsum(dO * O) in Float32, 0 for the padding), every entry written (the output poisoned)."""
    dtype, batch, seqlen_q, heads, head_dim = tsjit.BFloat16, 2, 70, 3, 128
    rng = np.random.default_rng()
    (ob, o64), (gb, g64) = (_random((batch, seqlen_q, heads, head_dim), dtype, rng) for _ in range(2))
    lse = rng.standard_normal((batch, heads, seqlen_q)).astype(np.float32)
    lse[0, 1, 5] = -np.inf                                      # a row that sees no key
    padded = 128
    stats = tsjit.empty((batch, heads, 2, padded), tsjit.Float32).fill_bytes(0xFF)
    flat = [_device(b.reshape(-1), dtype) for b in (ob, gb)]
    rows = batch * padded * heads
    parts.attention_backward_preprocess[(4,), (parts.PREPROCESS_THREADS,)](
        *flat, tsjit.to_device(lse), stats, seqlen_q, heads, padded, rows, head_dim)
    got = stats.numpy()
    assert not np.isnan(got).any()
    expected_lse = np.full((batch, heads, padded), np.inf)
    expected_lse[:, :, :seqlen_q] = np.where(np.isinf(lse), np.inf, lse.astype(np.float64) * LOG2_E)
    np.testing.assert_allclose(got[:, :, 0], expected_lse, rtol=1e-6)
    expected_d = np.zeros((batch, heads, padded))
    expected_d[:, :, :seqlen_q] = np.sum(o64 * g64, axis=-1).transpose(0, 2, 1)
    np.testing.assert_allclose(got[:, :, 1], expected_d, rtol=1e-4, atol=1e-4)
