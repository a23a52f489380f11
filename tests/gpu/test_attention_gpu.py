"""tsjit.ops.attention on the GPU (issue 16): against a float64 reference (per-row softmax in float64) on
fresh random inputs with poisoned outputs; the max abs error is compared with torch's flash backend's on
the same inputs (where flash cannot run a case: twice the error of rounding the reference); head_dim
64/128/256, bf16/fp16, causal/non-causal, sliding windows, GQA/MQA, variable-length batches (lengths 0, 1,
129), lengths not a multiple of the tile, unequal query/key lengths, strided (packed QKV) inputs, and the
LaunchErrors."""
import importlib
import itertools
import math
import os
import warnings

import pytest

REASON = ("needs torch CUDA tensors and torch's flash attention (the second reference); the interpreter checks "
          "these kernels' numerics in test_attention_arrays_gpu.py")
pytestmark = pytest.mark.gpu(reason=REASON)

torch = pytest.importorskip("torch", reason=REASON)

import tsjit  # noqa: E402
import tsjit.ops  # noqa: E402


def reference(q, k, v, causal, scale, window=None):
    """float64 attention in FlashAttention's layout: (out (B, Sq, H, D), lse (B, H, Sq)); rows that see no
    key give 0 and -inf.  ``window``: (left, right), None for an unbounded side (causal: right = 0)."""
    heads, kv_heads = q.shape[2], k.shape[2]
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(heads // kv_heads, dim=1)
    vd = v.double().transpose(1, 2).repeat_interleave(heads // kv_heads, dim=1)
    s = (qd @ kd.transpose(-1, -2)) * scale
    sq, sk = q.shape[1], k.shape[1]
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    rows = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    cols = torch.arange(sk, device=q.device)[None, :]
    if right is not None:
        s = s.masked_fill(cols > rows + right, float("-inf"))
    if left is not None:
        s = s.masked_fill(cols < rows - left, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])
    out = (p @ vd).transpose(1, 2)
    return out, lse


def flash_error(q, k, v, causal, scale, ref):
    """Max abs error of torch's SDPA flash backend on the same inputs (None where it cannot run them)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if causal and q.shape[1] != k.shape[1]:
        return None                              # SDPA's is_causal is top-left aligned
    group = q.shape[2] // k.shape[2]
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(group, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(group, dim=1)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    except RuntimeError:
        return None
    return (o.transpose(1, 2).double() - ref).abs().max().item()


def random_inputs(batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, dtype, seed=None):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed if seed is not None else torch.seed() % 2**31)
    q = torch.randn(batch, seqlen_q, heads, head_dim, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(batch, seqlen_k, kv_heads, head_dim, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(batch, seqlen_k, kv_heads, head_dim, device="cuda", dtype=dtype, generator=g)
    return q, k, v


def check(q, k, v, causal, scale=None, window=None, **kwargs):
    """Run tsjit with poisoned outputs; return (our max abs error, flash's (or, where flash cannot run the
    case, twice the error of rounding the reference to q's dtype), lse error)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    out = torch.full_like(q, float("nan"))
    lse = torch.full((q.shape[0], q.shape[2], q.shape[1]), float("nan"), device="cuda", dtype=torch.float32)
    got, got_lse = tsjit.ops.attention(q, k, v, causal=causal, scale=scale, out=out, lse_out=lse, window=window,
                                       **kwargs)
    torch.cuda.synchronize()
    assert got is out and got_lse is lse
    ref, ref_lse = reference(q, k, v, causal, scale, window)
    assert not torch.isnan(out).any(), "output rows left unwritten (poison survived)"
    assert not torch.isnan(lse).any(), "LSE rows left unwritten (poison survived)"
    err = (out.double() - ref).abs().max().item()
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    lse_err = (lse.double()[finite] - ref_lse[finite]).abs().max().item() if finite.any() else 0.0
    flash = flash_error(q, k, v, causal, scale, ref) if window is None else None
    if flash is None:
        flash = 2 * (ref.to(q.dtype).double() - ref).abs().max().item()
    return err, flash, lse_err


def log_errors(err, flash, lse_err):
    """Append the errors to $ATTENTION_ERROR_LOG (the benchmark report's error table), if it is set."""
    path = os.environ.get("ATTENTION_ERROR_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\t{err:.3e}\t{flash:.3e}\t"
                     f"{lse_err:.3e}\n")


def assert_close_to_flash(err, flash, lse_err, factor=1.5):
    """Our max abs error within 1.5x flash's on the same inputs (or 2**-10).  The two are statistically equal
    (H200, 2026-12-01, 172 cases: median ratio 1.00, 90th percentile 1.02, largest 1.35, the one-tile schedule's
    up to 1.17): the max over a tensor of rounding errors scatters; a wrong tile or rescale is off by >> 2x."""
    log_errors(err, flash, lse_err)
    assert err <= max(factor * flash, 2.0 ** -10), (err, flash)
    assert lse_err < 2e-3, lse_err


SCHEDULES = {"one-tile": dict(overlap=False), "overlapped": dict(overlap=True, pingpong=False),
             "pingpong": dict(overlap=True, pingpong=True), "default": {},
             "block-n-160": dict(block_n=160, q_stages=1)}


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_attention_matches_float64(head_dim, causal, dtype, schedule):
    q, k, v = random_inputs(2, 1000, 1000, 4, 4, head_dim, getattr(torch, dtype))
    assert_close_to_flash(*check(q, k, v, causal, **SCHEDULES[schedule]))


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen", [1, 64, 129, 255, 2048])
def test_attention_lengths_not_a_multiple_of_the_tile(seqlen, causal, schedule):
    q, k, v = random_inputs(1, seqlen, seqlen, 3, 3, 128, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal, **SCHEDULES[schedule]))


@pytest.mark.parametrize("schedule", ["one-tile", "default"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,kv_heads,head_dim", [(8, 2, 128), (8, 1, 64), (32, 8, 128)])
def test_attention_gqa_and_mqa(heads, kv_heads, head_dim, causal, schedule):
    q, k, v = random_inputs(2, 700, 700, heads, kv_heads, head_dim, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal, **SCHEDULES[schedule]))


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(300, 1000), (1000, 300), (128, 4096)])
def test_attention_unequal_lengths(seqlen_q, seqlen_k, causal, schedule):
    q, k, v = random_inputs(2, seqlen_q, seqlen_k, 4, 2, 128, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal, **SCHEDULES[schedule]))


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("causal", [False, True])
def test_attention_persistent_many_tiles(causal, schedule):
    """More work tiles (2 * 16 * 16 = 512) than CTAs: every CTA loops over several tiles."""
    q, k, v = random_inputs(2, 2048, 2048, 16, 16, 128, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal, **SCHEDULES[schedule]))


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_attention_small_grid_and_block_n_64(schedule):
    """7 CTAs loop over 64 tiles each (both Q stages in use); 64-key tiles."""
    q, k, v = random_inputs(2, 1000, 1000, 4, 4, 128, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, True, **dict(SCHEDULES[schedule], block_n=64, sms=7)))
    assert_close_to_flash(*check(q, k, v, False, **dict(SCHEDULES[schedule], sms=3, q_stages=1)))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(8192, 8192), (300, 8500)])
def test_attention_long_key_sequences_run_the_long_kv_default(monkeypatch, seqlen_q, seqlen_k, causal):
    """seqlen_k from LONG_KV_CONFIG's threshold on, every tile option left None: the default is 160-key tiles with
    O staged in Q under a causal mask, 176-key tiles with O staged in one Q stage without one (LONG_KV_FULL_CONFIG;
    the last KV tile partial: 8192 and 8500 keys are no multiple of 160 or 176; 300 rows bottom-aligned), also
    through the packed launch of a repeated call with new data in the same buffers."""
    from tsjit.examples.attention_config import LONG_KV_CONFIG, LONG_KV_FULL_CONFIG
    threshold, block_n, stages = LONG_KV_CONFIG[128]
    q_stages = 2
    if not causal:
        threshold, block_n, stages, q_stages = LONG_KV_FULL_CONFIG[128]
    assert seqlen_k >= threshold and seqlen_k % block_n
    ops_module = importlib.import_module("tsjit.ops.attention")
    original, chosen = ops_module.default_kv_tiles, []

    def spy(*args):
        chosen.append(original(*args))
        return chosen[-1]
    monkeypatch.setattr(ops_module, "default_kv_tiles", spy)
    q, k, v = random_inputs(1, seqlen_q, seqlen_k, 2, 1, 128, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal))
    assert chosen == [(block_n, stages, True, q_stages)]
    out = torch.full_like(q, float("nan"))
    tsjit.ops.attention(q, k, v, causal=causal, out=out)
    q.copy_(torch.randn_like(q))
    out.fill_(float("nan"))
    tsjit.ops.attention(q, k, v, causal=causal, out=out)        # the packed launch of the long-KV configuration
    ref, _ = reference(q, k, v, causal, 1 / math.sqrt(128))
    assert _within_bf16(out, ref)


#: the error bound (x flash's) with a rescale threshold > 0: the stale maxima leave no P exactly 1.0 (the largest
#: P of a row, exact in bf16 when the maximum is current, is rounded then), so the error grows (H200, 2026-12-01:
#: threshold 8 gave 1.3x-2.3x flash's on the non-causal cases; threshold 0 keeps the maxima current, the default)
STALE_MAX_FACTOR = 3.0
FAST_OPTIONS = {"wg2": dict(warpgroups=2), "wg3-overlapped": dict(warpgroups=3, overlap=True, pingpong=False),
                "wg3-bn96": dict(warpgroups=3, block_n=96), "rescale-8": dict(rescale_threshold=8.0),
                "rescale-0": dict(rescale_threshold=0.0), "rescale-off": dict(rescale_threshold=-1)}


@pytest.mark.parametrize("options", list(FAST_OPTIONS))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen,heads,kv_heads,head_dim", [(1000, 4, 4, 64), (129, 3, 1, 64), (2048, 4, 2, 64),
                                                            (1000, 4, 4, 128)])
def test_attention_three_warpgroups_and_conditional_rescale(seqlen, heads, kv_heads, head_dim, causal, options):
    """The configurations of issue 16's tuning besides the defaults: two or three consumer warpgroups at head_dim 64
    (three: 192-row Q tiles; S = 129 is one partial tile, 1000 and 2048 end in one) and conditional rescaling on
    or off (head_dim 128 too)."""
    options = FAST_OPTIONS[options]
    if head_dim != 64 and "warpgroups" in options:
        pytest.skip("the warpgroup count is a head_dim-64 option")
    q, k, v = random_inputs(2, seqlen, seqlen, heads, kv_heads, head_dim, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal, **options), factor=STALE_MAX_FACTOR
                          if options.get("rescale_threshold", 0) > 0 else 1.5)


def test_attention_conditional_rescale_with_growing_scores():
    """Keys scaled up along the sequence: the running maxima grow past the threshold on later KV tiles, so the
    rescale runs in the middle of the loop (and P stays below 2**8 in between)."""
    q, k, v = random_inputs(1, 1024, 1024, 4, 4, 64, torch.bfloat16)
    k = (k * torch.linspace(0.25, 6.0, 1024, device="cuda", dtype=torch.bfloat16)[None, :, None, None]).contiguous()
    for options in (dict(rescale_threshold=8.0), dict(rescale_threshold=8.0, warpgroups=3)):
        assert_close_to_flash(*check(q, k, v, False, **options), factor=STALE_MAX_FACTOR)
    assert_close_to_flash(*check(q, k, v, False, rescale_threshold=0.0))


def test_attention_bad_tuning_options_raise_launch_errors():
    q, k, v = random_inputs(1, 64, 64, 2, 2, 128, torch.bfloat16)
    with pytest.raises(tsjit.LaunchError, match="warpgroups"):
        tsjit.ops.attention(q, k, v, warpgroups=3)
    with pytest.raises(tsjit.LaunchError, match="rescale_threshold"):
        tsjit.ops.attention(q, k, v, rescale_threshold=20.0)


def test_attention_packed_qkv_strides_and_scale():
    """q, k, v as views of one (B, S, 3, H, D) tensor: last dim contiguous, other strides arbitrary."""
    qkv = torch.randn(2, 333, 3, 4, 64, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    assert_close_to_flash(*check(q, k, v, False, scale=0.3))


def test_attention_default_output_and_no_lse():
    q, k, v = random_inputs(1, 200, 200, 2, 2, 64, torch.float16)
    out = tsjit.ops.attention(q, k, v, causal=True)
    ref, _ = reference(q, k, v, True, 1 / 8)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert (out.double() - ref).abs().max().item() < 2 ** -7


def test_attention_rows_that_see_no_key_are_zero():
    q, k, v = random_inputs(1, 300, 100, 2, 2, 64, torch.bfloat16)
    out, lse = tsjit.ops.attention(q, k, v, causal=True, return_lse=True)
    assert torch.all(out[:, :200] == 0) and torch.all(torch.isinf(lse[:, :, :200]))


@pytest.mark.parametrize("change,word", [
    (lambda q, k, v: (q[..., :32].contiguous(), k[..., :32].contiguous(), v[..., :32].contiguous()), "head_dim"),
    (lambda q, k, v: (torch.randn(1, 64, 4, 96, device="cuda", dtype=torch.bfloat16),) * 3, "256"),
    (lambda q, k, v: (q.float(), k.float(), v.float()), "dtype"),
    (lambda q, k, v: (q, k[:, :, :3], v[:, :, :3]), "divide"),
    (lambda q, k, v: (q, k, v[:, :50]), "same shape"),
    (lambda q, k, v: (q.cpu(), k, v), "CUDA"),
    (lambda q, k, v: (torch.randn(1, 64, 4, 128, device="cuda", dtype=torch.bfloat16)[..., ::2], k, v),
     "contiguous"),
    (lambda q, k, v: (torch.randn(1, 64, 4, 65, device="cuda", dtype=torch.bfloat16)[..., :64], k, v), "16 bytes"),
])
def test_attention_bad_arguments_raise_launch_errors(change, word):
    q, k, v = random_inputs(1, 64, 64, 4, 4, 64, torch.bfloat16)
    q, k, v = change(q, k, v)
    with pytest.raises(tsjit.LaunchError, match=word):
        tsjit.ops.attention(q, k, v)


def test_attention_bad_scale_and_out():
    q, k, v = random_inputs(1, 64, 64, 4, 4, 64, torch.bfloat16)
    with pytest.raises(tsjit.LaunchError, match="scale"):
        tsjit.ops.attention(q, k, v, scale=-1.0)
    with pytest.raises(tsjit.LaunchError, match="out"):
        tsjit.ops.attention(q, k, v, out=torch.empty_like(q)[:, :10])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_attention_head_dim_256(causal, dtype):
    """head_dim 256: 80-key tiles (the default; 700 keys: the last tile partial), one Q stage, O stored from
    registers (its staging buffer would not fit); and 64-key tiles."""
    q, k, v = random_inputs(2, 700, 700, 4, 2, 256, getattr(torch, dtype))
    assert_close_to_flash(*check(q, k, v, causal))
    assert_close_to_flash(*check(q, k, v, causal, block_n=64))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k,heads,kv_heads", [(2048, 2048, 2, 1), (300, 1900, 3, 3), (1000, 77, 2, 2)])
def test_attention_head_dim_256_longer_and_unequal_lengths(seqlen_q, seqlen_k, heads, kv_heads, causal):
    """head_dim 256 over many KV tiles (the pipelined loop's steady state), GQA, unequal lengths (bottom-right
    aligned causal mask; 77 keys: one partial 80-key tile, some rows see no key)."""
    q, k, v = random_inputs(1, seqlen_q, seqlen_k, heads, kv_heads, 256, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal))


def test_attention_head_dim_256_strided_output():
    """An output O with rows that are not (heads * head_dim) apart goes through a contiguous buffer."""
    q, k, v = random_inputs(1, 300, 300, 2, 2, 256, torch.bfloat16)
    base = torch.full((1, 300, 3, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = base[:, :, :2]
    got = tsjit.ops.attention(q, k, v, out=out)
    ref, _ = reference(q, k, v, False, 1 / 16)
    assert got is out and torch.isnan(base[:, :, 2]).all()
    assert (out.double() - ref).abs().max().item() < 2 ** -7


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1000, 1000), (700, 1300), (1300, 700)])
@pytest.mark.parametrize("causal,window", [(False, (256, 100)), (True, (300, None)), (False, (None, 40)),
                                           (True, (0, 0)), (False, (1, 1))])
def test_attention_sliding_window(seqlen_q, seqlen_k, causal, window):
    q, k, v = random_inputs(2, seqlen_q, seqlen_k, 4, 2, 128, torch.bfloat16)
    assert_close_to_flash(*check(q, k, v, causal, window=window))


def varlen_inputs(lens_q, lens_k, heads, kv_heads, head_dim, dtype):
    total_q, total_k = sum(lens_q), sum(lens_k)
    q = torch.randn(total_q, heads, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(total_k, kv_heads, head_dim, device="cuda", dtype=dtype)
    v = torch.randn(total_k, kv_heads, head_dim, device="cuda", dtype=dtype)
    cu_q = torch.tensor([0] + list(itertools.accumulate(lens_q)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(itertools.accumulate(lens_k)), dtype=torch.int32, device="cuda")
    return q, k, v, cu_q, cu_k


@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (True, (200, None))])
@pytest.mark.parametrize("head_dim,heads,kv_heads", [(128, 4, 2), (64, 3, 3), (256, 2, 1)])
def test_attention_varlen(head_dim, heads, kv_heads, causal, window):
    """Packed sequences of lengths 0, 1, 129, ... (no padding) against a float64 reference per sequence; every
    output row and LSE entry written (poisoned before), nothing written past the packed tokens."""
    lens_q, lens_k = [0, 1, 129, 1000, 300, 64, 5], [7, 0, 129, 700, 2000, 64, 1]
    q, k, v, cu_q, cu_k = varlen_inputs(lens_q, lens_k, heads, kv_heads, head_dim, torch.bfloat16)
    scale = 1 / math.sqrt(head_dim)
    base = torch.full((q.shape[0] + 8, heads, head_dim), float("nan"), device="cuda", dtype=q.dtype)
    out = base[:q.shape[0]]
    lse = torch.full((heads, q.shape[0]), float("nan"), device="cuda", dtype=torch.float32)
    got, got_lse = tsjit.ops.attention(q, k, v, causal=causal, window=window, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                       max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert got is out and got_lse is lse and torch.isnan(base[q.shape[0]:]).all()
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    errors, bound = [], 0.0
    for b, (sq, sk) in enumerate(zip(lens_q, lens_k)):
        q0, k0 = sum(lens_q[:b]), sum(lens_k[:b])
        if sq == 0:
            continue
        ref, ref_lse = reference(q[None, q0:q0 + sq], k[None, k0:k0 + sk], v[None, k0:k0 + sk], causal, scale, window)
        errors.append((out[q0:q0 + sq].double() - ref[0]).abs().max().item())
        bound = max(bound, 2 * (ref.to(q.dtype).double() - ref).abs().max().item())
        finite = torch.isfinite(ref_lse[0])
        assert torch.equal(torch.isfinite(lse[:, q0:q0 + sq]), finite)
        if finite.any():
            assert (lse[:, q0:q0 + sq].double()[finite] - ref_lse[0][finite]).abs().max().item() < 2e-3
    log_errors(max(errors), bound, 0.0)
    assert max(errors) <= max(1.5 * bound, 2.0 ** -9), (errors, bound)


def test_attention_varlen_default_output_and_lse_layout():
    q, k, v, cu_q, cu_k = varlen_inputs([3, 200], [50, 0], 2, 2, 64, torch.float16)
    out, lse = tsjit.ops.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    assert out.shape == q.shape and lse.shape == (2, 203)
    assert torch.all(out[3:] == 0) and torch.isinf(lse[:, 3:]).all()          # the second sequence has no keys
    ref, _ = reference(q[None, :3], k[None, :50], v[None, :50], False, 1 / 8)
    assert (out[:3].double() - ref[0]).abs().max().item() < 2 ** -8


@pytest.mark.parametrize("change,word", [
    (lambda cu_q, cu_k: dict(cu_seqlens_q=cu_q.flip(0), cu_seqlens_k=cu_k), "never decrease"),
    (lambda cu_q, cu_k: dict(cu_seqlens_q=cu_q.long(), cu_seqlens_k=cu_k), "int32"),
    (lambda cu_q, cu_k: dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k[:2]), "same length"),
    (lambda cu_q, cu_k: dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=3), "max_seqlen_q"),
    (lambda cu_q, cu_k: dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, window=5), "window"),
])
def test_attention_bad_varlen_and_window_arguments_raise_launch_errors(change, word):
    q, k, v, cu_q, cu_k = varlen_inputs([30, 20], [50, 10], 2, 2, 64, torch.bfloat16)
    with pytest.raises(tsjit.LaunchError, match=word):
        tsjit.ops.attention(q, k, v, **change(cu_q, cu_k))


def test_attention_repeated_calls_reuse_the_packed_launch_correctly():
    """The host fast path (same tensors' addresses and metadata, options, stream: one driver call) computes on
    the memory as it is at each call: new data in the same buffers, a new scale, a new output all come out right."""
    ops_module = importlib.import_module("tsjit.ops.attention")
    q, k, v = random_inputs(2, 500, 500, 4, 2, 128, torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tsjit.ops.attention(q, k, v, causal=True, out=out)
    assert not [w for w in caught if "packed launch" in str(w.message)], [str(w.message) for w in caught]
    assert any(key[3][3] == out.data_ptr() for key in ops_module._FAST), "the call was not packed"
    for step in range(3):
        if step:
            for t in (q, k, v):
                t.copy_(torch.randn_like(t))              # same addresses, new contents
            out.fill_(float("nan"))
        tsjit.ops.attention(q, k, v, causal=True, out=out)
        ref, _ = reference(q, k, v, True, 1 / math.sqrt(128))
        assert _within_bf16(out, ref), step
    tsjit.ops.attention(q, k, v, causal=True, scale=0.05, out=out)
    ref, _ = reference(q, k, v, True, 0.05)
    assert _within_bf16(out, ref)
    other = torch.full_like(q, float("nan"))
    tsjit.ops.attention(q, k, v, causal=False, out=other)
    ref, _ = reference(q, k, v, False, 1 / math.sqrt(128))
    assert _within_bf16(other, ref)



def _within_bf16(out, ref) -> bool:
    """Every element within 2**-7 of the float64 reference, relative above 1.0 (one to two bf16 ulps
    there; a stale buffer or pointer is off by O(1).  An absolute 2**-7 is under one ulp for outputs
    above 1, which fresh N(0, 1) inputs produce: the H200 run failed at 0.0088 on a 1.2 output)."""
    return bool(((out.double() - ref).abs() <= 2 ** -7 * ref.abs().clamp(min=1.0)).all())
