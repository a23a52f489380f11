"""tsjit.ops.attention_backward on the GPU (issue 16's backward): dq, dk, dv against float64 autograd of the math
attention on fresh random inputs; the outputs' memory is poisoned (NaN blocks freed into torch's caching allocator
just before the call, which the kernel's outputs then reuse); the max abs error is compared with that of torch's
SDPA backward (flash backend, where it runs) on the same inputs.  head_dim 64/128, bf16/fp16, causal or not, GQA,
lengths not a multiple of the tiles, unequal query / key lengths."""
import math

import pytest

REASON = "needs torch CUDA tensors (the backward runs on the GPU only)"
pytestmark = pytest.mark.gpu(reason=REASON)

torch = pytest.importorskip("torch", reason=REASON)

import tsjit.ops  # noqa: E402


def reference_grads(q, k, v, dout, causal, scale):
    """float64 (dq, dk, dv) by autograd of the math attention (bottom-right aligned causal mask)."""
    group = q.shape[2] // k.shape[2]
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    qt = qd.transpose(1, 2)
    kt = kd.transpose(1, 2).repeat_interleave(group, dim=1)
    vt = vd.transpose(1, 2).repeat_interleave(group, dim=1)
    s = (qt @ kt.transpose(-1, -2)) * scale
    sq, sk = q.shape[1], k.shape[1]
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        cols = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(cols > rows, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    o = (p @ vt).transpose(1, 2)
    o.backward(dout.double())
    return qd.grad, kd.grad, vd.grad


def forward(q, k, v, causal, scale):
    """(out in q's dtype, lse float32) of the float64 math attention: the backward's inputs (no forward compile)."""
    group = q.shape[2] // k.shape[2]
    qt = q.double().transpose(1, 2)
    kt = k.double().transpose(1, 2).repeat_interleave(group, dim=1)
    vt = v.double().transpose(1, 2).repeat_interleave(group, dim=1)
    s = (qt @ kt.transpose(-1, -2)) * scale
    sq, sk = q.shape[1], k.shape[1]
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        cols = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(cols > rows, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])
    return (p @ vt).transpose(1, 2).to(q.dtype), lse.float()


def flash_grads(q, k, v, dout, causal, scale):
    """torch SDPA's flash backward on the same inputs (None where it cannot run them)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if causal and q.shape[1] != k.shape[1]:
        return None
    group = q.shape[2] // k.shape[2]
    qd, kd, vd = (t.detach().clone().requires_grad_() for t in (q, k, v))
    qt = qd.transpose(1, 2)
    kt = kd.transpose(1, 2).repeat_interleave(group, dim=1)
    vt = vd.transpose(1, 2).repeat_interleave(group, dim=1)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    except RuntimeError:
        return None
    o.transpose(1, 2).backward(dout)
    return qd.grad, kd.grad, vd.grad


def poison_allocator(*shapes_dtypes):
    """Fill and free blocks of these sizes so the next allocations of them start as NaN."""
    blocks = [torch.full(shape, float("nan"), dtype=dtype, device="cuda") for shape, dtype in shapes_dtypes]
    del blocks


CASES = [  # (batch, seqlen_q, seqlen_k, heads, kv_heads, head_dim, causal, dtype)
    (1, 128, 128, 1, 1, 64, False, "bfloat16"),
    (2, 256, 256, 4, 4, 64, False, "bfloat16"),
    (2, 200, 200, 3, 3, 64, True, "bfloat16"),
    (1, 256, 256, 2, 2, 128, False, "bfloat16"),
    (2, 333, 333, 4, 2, 128, True, "float16"),
    (1, 384, 384, 8, 1, 64, True, "float16"),
    (2, 130, 257, 4, 4, 128, False, "bfloat16"),
    (1, 100, 300, 2, 1, 128, True, "bfloat16"),
    (1, 300, 100, 2, 2, 64, True, "bfloat16"),
    (1, 1024, 1024, 4, 4, 128, True, "bfloat16"),
]


def case_id(case):
    b, sq, sk, h, hk, d, causal, dtype = case
    return f"b{b}-q{sq}-k{sk}-h{h}-kv{hk}-d{d}-{'causal' if causal else 'full'}-{dtype}"


def run_case(case, seed=0, options=None):
    b, sq, sk, h, hk, d, causal, dtype = case
    dtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn((b, sq, h, d), generator=gen, device="cuda").to(dtype)
    k = torch.randn((b, sk, hk, d), generator=gen, device="cuda").to(dtype)
    v = torch.randn((b, sk, hk, d), generator=gen, device="cuda").to(dtype)
    dout = torch.randn((b, sq, h, d), generator=gen, device="cuda").to(dtype)
    scale = 1.0 / math.sqrt(d)
    out, lse = forward(q, k, v, causal, scale)
    poison_allocator((q.shape, dtype), (k.shape, dtype), (v.shape, dtype))
    grads = tsjit.ops.attention_backward(q, k, v, out, lse, dout, causal=causal, scale=scale, **(options or {}))
    torch.cuda.synchronize()
    ref = reference_grads(q, k, v, dout, causal, scale)
    flash = flash_grads(q, k, v, dout, causal, scale)
    errors = [(g.double() - r).abs().max().item() for g, r in zip(grads, ref)]
    scales = [r.abs().max().item() for r in ref]
    flash_errors = None if flash is None else [(g.double() - r).abs().max().item() for g, r in zip(flash, ref)]
    return grads, errors, scales, flash_errors


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_backward_matches_float64(case):
    grads, errors, scales, flash_errors = run_case(case)
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert torch.isfinite(g).all(), f"{name} has non-finite values (an unwritten row?)"
    for i, name in enumerate(("dq", "dk", "dv")):
        # a rounding of the reference to 16 bits is ~2**-8 relative; the recomputed P and dS are rounded too
        bound = 2.0 * flash_errors[i] + 1e-3 * scales[i] if flash_errors is not None else 2e-2 * scales[i]
        assert errors[i] <= bound, (name, errors, flash_errors, scales)


def test_backward_refuses_what_it_does_not_run():
    q = torch.randn((1, 64, 2, 256), device="cuda", dtype=torch.bfloat16)
    lse = torch.zeros((1, 2, 64), device="cuda")
    with pytest.raises(tsjit.LaunchError, match="head_dim 256"):
        tsjit.ops.attention_backward(q, q, q, q, lse, q)
    q = torch.randn((1, 64, 2, 64), device="cuda", dtype=torch.bfloat16)
    with pytest.raises(tsjit.LaunchError, match="lse"):
        tsjit.ops.attention_backward(q, q, q, q, lse[:, :1], q)


@pytest.mark.parametrize("causal,heads,kv_heads", [(False, 2, 2), (True, 4, 2)])
def test_attention_records_autograd(causal, heads, kv_heads):
    """``tsjit.ops.attention`` on inputs that require grad: ``loss.backward()`` gives the float64 gradients (the
    backward is tsjit.ops.attention_backward), and the LSE it returns is not differentiable."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn((2, 200, heads, 64), generator=gen, device="cuda").to(torch.bfloat16).requires_grad_()
    k = torch.randn((2, 200, kv_heads, 64), generator=gen, device="cuda").to(torch.bfloat16).requires_grad_()
    v = torch.randn((2, 200, kv_heads, 64), generator=gen, device="cuda").to(torch.bfloat16).requires_grad_()
    dout = torch.randn((2, 200, heads, 64), generator=gen, device="cuda").to(torch.bfloat16)
    out, lse = tsjit.ops.attention(q, k, v, causal=causal, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    (out.float() * dout.float()).sum().backward()
    ref = reference_grads(q, k, v, dout, causal, 1 / 8)
    for name, g, r in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), ref):
        assert g is not None and g.dtype == torch.bfloat16, name
        assert (g.double() - r).abs().max().item() <= 2.0 ** -7 * max(r.abs().max().item(), 1.0), name


def test_attention_with_grad_refuses_what_the_backward_does_not_run():
    q = torch.randn((1, 64, 2, 64), device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(tsjit.LaunchError, match="window.*torch.no_grad"):
        tsjit.ops.attention(q, q, q, window=(16, 0))
    with torch.no_grad():                                  # the forward alone still runs
        assert tsjit.ops.attention(q, q, q, window=(16, 0)).shape == q.shape


@pytest.mark.parametrize("option", ["atomics", "own_dq"])
@pytest.mark.parametrize("case", [CASES[2], CASES[4], CASES[7]],
                         ids=[case_id(c) for c in (CASES[2], CASES[4], CASES[7])])
def test_dq_variants_match_float64(case, option):
    """The other ways of adding dQ: atomics from registers (what the CPU interpreter runs), and (head_dim 128) each
    warpgroup all of dQ over its own 64 keys."""
    if option == "own_dq" and case[5] == 64:
        pytest.skip("head_dim 64 computes dQ over its own keys by default")
    grads, errors, scales, flash_errors = run_case(case, options={"atomics": dict(dq_tma=False),
                                                                  "own_dq": dict(dq_shared=False)}[option])
    for i, name in enumerate(("dq", "dk", "dv")):
        assert torch.isfinite(grads[i]).all(), name
        bound = 2.0 * flash_errors[i] + 1e-3 * scales[i] if flash_errors is not None else 2e-2 * scales[i]
        assert errors[i] <= bound, (name, errors, flash_errors, scales)
