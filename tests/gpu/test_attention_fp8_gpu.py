"""The fp8 (e4m3) tsjit.ops.attention on the GPU (issue 16): float8_e4m3fn q, k, v with per-tensor scales against a
float64 reference computed from the dequantized inputs, on fresh random inputs with poisoned (NaN) outputs;
head_dim 64 / 128 / 256, causal and not, GQA, a sliding window, lengths not a multiple of the tile, V passed
pre-transposed; and the LaunchErrors of unsupported combinations.

The bound: the kernel rounds P to e4m3 (3 mantissa bits) for the PV wgmma, so its max abs error may reach 2.5x that
of the float64 attention whose P (normalized by the row maximum) is rounded to e4m3, plus the bf16 rounding of the
output.  A wrong fragment layout, key order or scale is off by O(1)."""
import itertools
import math

import pytest

REASON = ("needs torch float8_e4m3fn CUDA tensors; the interpreter checks the fp8 forward's numerics in "
          "test_attention_fp8_arrays_gpu.py")
pytestmark = pytest.mark.gpu(reason=REASON)

torch = pytest.importorskip("torch", reason=REASON)

import tsjit  # noqa: E402
import tsjit.ops  # noqa: E402
from tsjit.ops.attention_fp8 import transpose_v_fp8  # noqa: E402

from .test_attention_gpu import reference  # noqa: E402

E4M3 = torch.float8_e4m3fn


def fp8_inputs(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim):
    g = torch.Generator(device="cuda")
    g.manual_seed(torch.seed() % 2**31)
    shapes = ((batch, seqlen_q, heads, head_dim), (batch, seqlen_k, kv_heads, head_dim),
              (batch, seqlen_k, kv_heads, head_dim))
    q, k, v = ((torch.randn(s, device="cuda", generator=g) * 2).to(E4M3) for s in shapes)
    scales = (torch.rand(3, generator=torch.Generator().manual_seed(torch.seed() % 2**31)) * 0.25 + 0.05).tolist()
    return q, k, v, scales


def rounded_p_error(qd, kd, vd, causal, scale, window, ref):
    """Max abs error of the float64 attention whose P (normalized by the row max) is rounded to e4m3."""
    heads, kv_heads = qd.shape[2], kd.shape[2]
    s = (qd.transpose(1, 2) @ kd.transpose(1, 2).repeat_interleave(heads // kv_heads, 1).transpose(-1, -2)) * scale
    sq, sk = qd.shape[1], kd.shape[1]
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    rows = torch.arange(sq, device="cuda")[:, None] + (sk - sq)
    cols = torch.arange(sk, device="cuda")[None, :]
    if right is not None:
        s = s.masked_fill(cols > rows + right, float("-inf"))
    if left is not None:
        s = s.masked_fill(cols < rows - left, float("-inf"))
    peak = s.amax(-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isinf(peak), torch.zeros_like(peak), peak))
    total = p.sum(-1, keepdim=True)
    v_heads = vd.transpose(1, 2).repeat_interleave(heads // kv_heads, 1)
    o = (p.float().to(E4M3).float().double() @ v_heads) / total.clamp_min(1e-300)
    return (o.transpose(1, 2) - ref).abs().max().item()


def check(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal, window=None, pretransposed=False,
          with_lse=True, **options):
    """One case against float64 (outputs poisoned); ``with_lse=False``: no LSE asked for (the launch that sums the
    e4m3 P in the PV wgmma where DEFAULT_MMA_ROW_SUMS says so), only O checked."""
    q, k, v, (sq, sk, sv) = fp8_inputs(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim)
    scale = 1.0 / math.sqrt(head_dim)
    out = torch.full(q.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
    lse = torch.full((batch, heads, seqlen_q), float("nan"), device="cuda", dtype=torch.float32)
    v_arg = transpose_v_fp8(v) if pretransposed else v
    result = tsjit.ops.attention(q, k, v_arg, causal=causal, scale=scale, window=window, out=out,
                                 lse_out=lse if with_lse else None, return_lse=with_lse, q_scale=sq, k_scale=sk,
                                 v_scale=sv, v_transposed=pretransposed, **options)
    got, got_lse = result if with_lse else (result, lse)
    assert got is out and got_lse is lse
    qd, kd, vd = q.float().double() * sq, k.float().double() * sk, v.float().double() * sv
    ref, ref_lse = reference(qd, kd, vd, causal, scale, window)
    assert not torch.isnan(out).any(), f"{torch.isnan(out).sum().item()} outputs left unwritten (poison survived)"
    assert not with_lse or not torch.isnan(lse).any(), "LSE rows left unwritten"
    err = (out.double() - ref).abs().max().item()
    bound = rounded_p_error(qd, kd, vd, causal, scale, window, ref) + \
        (ref.bfloat16().double() - ref).abs().max().item()
    assert err <= 2.5 * bound, (err, bound)
    if not with_lse:
        return err, bound
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    if finite.any():
        assert (lse.double()[finite] - ref_lse[finite]).abs().max().item() < 2e-3
    return err, bound


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_attention_matches_float64(head_dim, causal):
    check(2, 1000, 1000, 4, 4, head_dim, causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pretransposed", [False, True])
def test_fp8_attention_without_lse(causal, pretransposed):
    """No LSE asked for: head_dim 128 takes the row sums of the e4m3 P from the PV wgmma (DEFAULT_MMA_ROW_SUMS, a
    ones row below V^T) with its own tiles; GQA, lengths not a multiple of the tile."""
    check(2, 1000, 1111, 4, 2, 128, causal, pretransposed=pretransposed, with_lse=False)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_attention_gqa_unequal_lengths(causal):
    check(1, 300, 777, 8, 2, 128, causal)


def test_fp8_attention_sliding_window():
    check(1, 700, 700, 2, 1, 128, True, window=(200, None))


@pytest.mark.parametrize("head_dim", [64, 128])
def test_fp8_attention_pretransposed_v_and_block_n_64(head_dim):
    check(1, 513, 513, 2, 2, head_dim, False, pretransposed=True)
    check(1, 513, 513, 2, 2, head_dim, True, block_n=64, stages=3)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_attention_block_n_192(causal):
    """192-key tiles: V^T in three 64-key boxes (64B swizzle), QK^T of N = 192, a partial last tile."""
    check(1, 1000, 1000, 2, 1, 128, causal, block_n=192, stages=3)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_attention_conditional_rescaling(causal):
    """``rescale_threshold=8``: the running maxima move only when a row's grew by more than 2**8, so P reaches 256
    (e4m3 holds 448) and most KV tiles skip ``O *= alpha``; the bound is the same."""
    check(2, 1000, 1000, 4, 2, 128, causal, rescale_threshold=8.0)


def test_fp8_attention_pretransposed_v_is_the_same_result():
    q, k, v, (sq, sk, sv) = fp8_inputs(1, 256, 4000, 4, 4, 128)
    a = tsjit.ops.attention(q, k, v, q_scale=sq, k_scale=sk, v_scale=sv)
    b = tsjit.ops.attention(q, k, transpose_v_fp8(v), q_scale=sq, k_scale=sk, v_scale=sv, v_transposed=True)
    assert torch.equal(a, b)


@pytest.mark.parametrize("shape", [(2, 4000, 3, 128), (1, 37, 2, 64), (1, 300, 1, 256)])
def test_transpose_v_fp8_matches_the_host_layout(shape):
    """The device transpose kernel against the numpy layout of the fp8 program (padding keys 0, KEY_ORDER), on a
    V whose heads are a strided slice (rows 16-byte aligned, not contiguous)."""
    from tsjit.examples.attention_fp8 import transposed_v
    batch, keys, heads, head_dim = shape
    full = (torch.randn(batch, keys, heads + 1, head_dim, device="cuda") * 2).to(E4M3)
    v = full[:, :, 1:]
    vt = transpose_v_fp8(v)
    expected = transposed_v(v.contiguous().view(torch.uint8).cpu().numpy())
    assert vt.is_contiguous() and tuple(vt.shape) == expected.shape
    assert (vt.view(torch.uint8).cpu().numpy() == expected).all()


def test_fp8_launch_errors():
    q, k, v, _ = fp8_inputs(1, 128, 128, 2, 2, 128)
    with pytest.raises(tsjit.LaunchError, match="'k' has dtype torch.bfloat16"):
        tsjit.ops.attention(q, k.float().bfloat16(), v)
    with pytest.raises(tsjit.LaunchError, match="q_scale"):
        tsjit.ops.attention(q, k, v, q_scale=-1.0)
    with pytest.raises(tsjit.LaunchError, match="q_scale"):
        tsjit.ops.attention(*(t.float().bfloat16() for t in (q, k, v)), q_scale=2.0)
    cu = torch.tensor([0, 128], dtype=torch.int32, device="cuda")
    with pytest.raises(tsjit.LaunchError, match="packed"):
        tsjit.ops.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(tsjit.LaunchError, match="cu_seqlens_k"):
        tsjit.ops.attention(q[0], k[0], transpose_v_fp8(v), v_transposed=True, cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(tsjit.LaunchError, match="'out'"):
        tsjit.ops.attention(q, k, v, out=torch.empty(q.shape, dtype=torch.float16, device="cuda"))
    with pytest.raises(tsjit.LaunchError, match="v_transposed"):
        tsjit.ops.attention(q, k, v, v_transposed=True)
    with pytest.raises(tsjit.LaunchError, match="block_n"):
        tsjit.ops.attention(q, k, v, block_n=96)
    with pytest.raises(tsjit.LaunchError, match="e5m2"):
        tsjit.ops.attention(q.float().to(torch.float8_e5m2), k, v)
    with pytest.raises(tsjit.LaunchError, match="rescale_threshold"):
        tsjit.ops.attention(q, k, v, rescale_threshold=20.0)


@pytest.mark.parametrize("causal,pretransposed,with_lse", [(False, False, True), (True, False, True),
                                                            (True, True, True), (False, False, False),
                                                            (True, True, False)])
def test_fp8_attention_varlen(causal, pretransposed, with_lse):
    """Packed sequences of lengths 0, 1, 129, ... (no padding; key starts not multiples of 16, so V^T is realigned
    per sequence) against a float64 reference per sequence on the dequantized inputs; every output row and LSE entry
    written (poisoned before), nothing written past the packed tokens.  Without the LSE: the launch of row sums in the
    PV wgmma (its own tiles, P packed before the PV wait, the FMA exp2 from the scores)."""
    lens_q, lens_k = [0, 1, 129, 1000, 300, 64, 5], [7, 0, 129, 700, 2000, 64, 1]
    heads, kv_heads, head_dim = 4, 2, 128
    q, k, v, (sq, sk, sv) = fp8_inputs(1, sum(lens_q), sum(lens_k), heads, kv_heads, head_dim)
    q, k, v = q[0], k[0], v[0]
    cu_q, cu_k = (torch.tensor([0] + list(itertools.accumulate(n)), dtype=torch.int32, device="cuda")
                  for n in (lens_q, lens_k))
    scale = 1.0 / math.sqrt(head_dim)
    base = torch.full((q.shape[0] + 8, heads, head_dim), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = base[:q.shape[0]]
    lse = torch.full((heads, q.shape[0]), float("nan"), device="cuda", dtype=torch.float32)
    v_arg = transpose_v_fp8(v, cu_k) if pretransposed else v
    result = tsjit.ops.attention(q, k, v_arg, causal=causal, scale=scale, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                 out=out, lse_out=lse if with_lse else None, return_lse=with_lse, q_scale=sq,
                                 k_scale=sk, v_scale=sv, v_transposed=pretransposed)
    got, got_lse = result if with_lse else (result, lse)
    torch.cuda.synchronize()
    assert got is out and got_lse is lse and torch.isnan(base[q.shape[0]:]).all()
    assert not torch.isnan(out).any() and (not with_lse or not torch.isnan(lse).any())
    qd, kd, vd = q.float().double() * sq, k.float().double() * sk, v.float().double() * sv
    for b, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        q0, k0 = sum(lens_q[:b]), sum(lens_k[:b])
        if nq == 0:
            continue
        qs, ks, vs = qd[None, q0:q0 + nq], kd[None, k0:k0 + nk], vd[None, k0:k0 + nk]
        ref, ref_lse = reference(qs, ks, vs, causal, scale, None)
        bound = (ref.bfloat16().double() - ref).abs().max().item()
        if nk:
            bound += rounded_p_error(qs, ks, vs, causal, scale, None, ref)
        err = (out[q0:q0 + nq].double() - ref[0]).abs().max().item()
        assert err <= 2.5 * bound, (b, nq, nk, err, bound)
        if not with_lse:
            continue
        finite = torch.isfinite(ref_lse[0])
        assert torch.equal(torch.isfinite(lse[:, q0:q0 + nq]), finite)
        if finite.any():
            assert (lse[:, q0:q0 + nq].double()[finite] - ref_lse[0][finite]).abs().max().item() < 2e-3


def test_transpose_v_fp8_varlen_matches_the_host_layout():
    """The packed V^T of ``transpose_v_fp8(v, cu_seqlens_k)`` against the numpy layout (sequence starts realigned to
    16 keys, zeros between sequences)."""
    from tsjit.examples.attention_fp8 import transposed_v_varlen
    lens = [7, 0, 129, 1, 40]
    v = (torch.randn(sum(lens), 3, 128, device="cuda") * 2).to(E4M3)
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device="cuda")
    vt = transpose_v_fp8(v, cu)
    expected = transposed_v_varlen(v.view(torch.uint8).cpu().numpy(), lens)
    assert tuple(vt.shape) == expected.shape
    assert (vt.view(torch.uint8).cpu().numpy() == expected).all()


def test_fp8_repeated_calls_reuse_the_packed_launch_correctly():
    """The fp8 host fast path (same tensors' addresses and metadata, scales, options, stream: one driver call, two
    with V transposed in the call) computes on the memory as it is at each call: new data in the same buffers, new
    scales, a new LSE buffer, each against the float64 reference with the output poisoned first."""
    import importlib
    import warnings
    ops_module = importlib.import_module("tsjit.ops.attention_fp8")
    q, k, v, (sq, sk, sv) = fp8_inputs(2, 500, 500, 4, 2, 128)
    vt = transpose_v_fp8(v)
    out = torch.full(q.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
    scale = 1.0 / math.sqrt(128)

    def run_and_check(q_scale, lse=None, pretransposed=True):
        out.fill_(float("nan"))
        if lse is not None:
            lse.fill_(float("nan"))
        tsjit.ops.attention(q, k, vt if pretransposed else v, causal=True, out=out, lse_out=lse, q_scale=q_scale,
                            k_scale=sk, v_scale=sv, v_transposed=pretransposed)
        qd, kd, vd = q.float().double() * q_scale, k.float().double() * sk, v.float().double() * sv
        ref, ref_lse = reference(qd, kd, vd, True, scale, None)
        bound = rounded_p_error(qd, kd, vd, True, scale, None, ref) + (ref.bfloat16().double() - ref).abs().max().item()
        assert (out.double() - ref).abs().max().item() <= 2.5 * bound
        if lse is not None:
            assert (lse.double() - ref_lse).abs().max().item() < 2e-3

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_and_check(sq)
    assert not [w for w in caught if "packed" in str(w.message)], [str(w.message) for w in caught]
    assert any(key[3][3] == out.data_ptr() for key in ops_module._FAST), "the call was not packed"
    for step in range(2):
        for t in (q, k, v):
            t.copy_((torch.randn(t.shape, device="cuda") * 2).to(E4M3))      # same addresses, new contents
        vt.copy_(transpose_v_fp8(v))
        run_and_check(sq)
    run_and_check(sq * 2.0)                                                  # another scale: another launch
    run_and_check(sq, torch.empty((2, 4, 500), device="cuda", dtype=torch.float32))
    for step in range(2):                # V transposed in the call: the entry's own V^T buffer, rewritten each call
        run_and_check(sq, pretransposed=False)
        v.copy_((torch.randn(v.shape, device="cuda") * 2).to(E4M3))
    assert any(key[3][3] == out.data_ptr() and not key[12] for key in ops_module._FAST), "not packed with V"
