"""``tsjit.ops.attention_backward``: the gradients of FlashAttention-style attention (Hopper, sm_90a; issue 16).

The main kernel is the Task Scheduling program of :mod:`tsjit.examples.attention_bwd` (a TMA producer per ring,
two consumer warpgroups with wgmma, dQ by fp32 atomics) after its preprocess kernel (``D = rowsum(dO * O)`` and the
padded LSE statistics, :func:`~tsjit.examples.attention_bwd_parts.attention_backward_preprocess`).  This module checks
the arguments, zeroes the Float32 dQ workspace, launches both on torch's current stream and converts dQ to the input
dtype (torch operations: ``zeros`` and one strided ``copy_``).  :func:`differentiable_attention`
records ``tsjit.ops.attention`` for autograd (a ``torch.autograd.Function`` whose backward is this one).
"""
from __future__ import annotations

from tsjit import env
from tsjit.errors import LaunchError
from tsjit.ops.attention_args import check_causal as _check_causal
from tsjit.ops.attention_args import check_cuda as _check_cuda
from tsjit.ops.attention_args import check_kv_heads as _check_kv_heads
from tsjit.ops.attention_args import softmax_scale as _softmax_scale
from tsjit.ops.attention_args import check_tensor as _check_tensor
from tsjit.ops.attention_args import torch_module as _torch
from tsjit.examples import attention_bwd as program
from tsjit.examples import attention_bwd_parts as parts
from tsjit.examples.attention_config import BOX, LOG2_E
from tsjit.runtime.tensormap import TensorMap

__all__ = ["attention_backward", "BACKWARD_HEAD_DIMS", "wants_grad", "differentiable_attention"]

BACKWARD_HEAD_DIMS = program.BWD_HEAD_DIMS


def _check(q, k, v, out, lse, dout, causal, scale, torch):
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout)):
        _check_tensor(name, t, torch, require_cuda=False)
    if any(t.dtype != q.dtype for t in (k, v, out, dout)):
        raise LaunchError(f"arguments q, k, v, out, dout must have one dtype, got "
                          f"{', '.join(str(t.dtype) for t in (q, k, v, out, dout))}")
    if tuple(k.shape) != tuple(v.shape):
        raise LaunchError(f"arguments 'k' and 'v' must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    for name, t in (("out", out), ("dout", dout)):
        if tuple(t.shape) != tuple(q.shape):
            raise LaunchError(f"argument '{name}' must have q's shape {tuple(q.shape)}, got {tuple(t.shape)}")
    batch, seqlen_q, heads, head_dim = q.shape
    if k.shape[0] != batch or k.shape[3] != head_dim:
        raise LaunchError(f"argument 'k' must be (batch={batch}, seqlen_k, kv_heads, head_dim={head_dim}), got "
                          f"{tuple(k.shape)}")
    if head_dim not in BACKWARD_HEAD_DIMS:
        raise LaunchError(f"head_dim {head_dim} is not supported by tsjit.ops.attention_backward; supported: "
                          f"{list(BACKWARD_HEAD_DIMS)} (the forward also runs 256)")
    kv_heads = k.shape[2]
    _check_kv_heads(heads, kv_heads)
    if not isinstance(lse, torch.Tensor) or lse.dtype != torch.float32 or tuple(lse.shape) != (batch, heads, seqlen_q):
        got = f"{lse.dtype} {tuple(lse.shape)}" if isinstance(lse, torch.Tensor) else type(lse).__name__
        raise LaunchError(f"argument 'lse' must be the forward's torch.float32 log-sum-exp of shape "
                          f"{(batch, heads, seqlen_q)} (tsjit.ops.attention(..., return_lse=True)), got {got}")
    _check_causal(causal)
    scale = _softmax_scale(scale, head_dim)
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse), ("dout", dout)):
        if not env.interpret_requested():          # the CPU interpreter takes CPU tensors
            _check_cuda(name, t)
    if any(t.device != q.device for t in (k, v, out, lse, dout)):
        raise LaunchError("arguments q, k, v, out, lse, dout must be on one device")
    return float(scale)


def attention_backward(q, k, v, out, lse, dout, *, causal: bool = False, scale: float | None = None,
                       sms: int | None = None, stages: int | None = None, dq_shared: bool | None = None,
                       dq_tma: bool | None = None, kv_stages: int = 1):
    """The gradients (dq, dk, dv) of ``out = softmax(scale * q k^T [+ causal mask]) v`` given ``dout``.

    Args:
        q: (batch, seqlen_q, heads, head_dim) torch.bfloat16 or torch.float16 CUDA tensor, last dimension
            contiguous, other strides multiples of 16 bytes (FlashAttention's layout); head_dim 64 or 128.
        k, v: (batch, seqlen_k, kv_heads, head_dim), same dtype; ``kv_heads`` divides ``heads`` (GQA/MQA: dk / dv
            are summed over each KV head's group of query heads).
        out: the forward's output (q's shape and dtype); lse: its (batch, heads, seqlen_q) torch.float32 natural
            log-sum-exp (``tsjit.ops.attention(..., return_lse=True)``); rows with -inf (no visible key) get 0.
        dout: the gradient of ``out`` (q's shape and dtype).
        causal: the forward's bottom-right aligned causal mask (row ``i`` sees keys ``j <= i + seqlen_k -
            seqlen_q``); scale: the softmax scale, default ``1 / sqrt(head_dim)``.
        sms: CTAs of the persistent grid (default: the device's multiprocessor count); stages: stages of the
            Q / dO ring (default ``tsjit.examples.attention_bwd.BWD_STAGES``); dq_shared: the two warpgroups share
            dQ (head_dim 128 only; default ``tsjit.examples.attention_bwd.BWD_DQ_SHARED``); dq_tma: add dQ tiles by
            TMA reductions from shared memory rather than one ``atom.global.add.f32`` per element (default
            ``tsjit.examples.attention_bwd.BWD_DQ_TMA``; inline PTX the CPU interpreter does not run: under
            ``TSJIT_INTERPRET=1`` dQ is added with the atomics); kv_stages: stages of the K / V ring (1, or 2 so that
            the next tile's K and V load during the current one; shared memory allows 2 at head_dim 64 only).
            Measurements: BENCHMARKS.md.

    Returns:
        (dq, dk, dv): new contiguous tensors of q's, k's and v's shapes and dtype.

    Raises:
        LaunchError: torch is missing, a non-CUDA tensor or ``TSJIT_INTERPRET=1`` (the backward runs on the GPU
            only), an unsupported head_dim (256) or dtype, mismatched shapes, dtypes or devices, a bad ``lse`` or
            ``scale``, each naming the argument.  Sliding windows and variable-length batches have no backward
            here (the function takes no such arguments).
    """
    torch = _torch(q)
    scale = _check(q, k, v, out, lse, dout, causal, scale, torch)
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    if batch == 0 or heads == 0 or seqlen_q == 0 or seqlen_k == 0:
        return tuple(torch.zeros(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)        # the kernel writes every row
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    stages = program.BWD_STAGES[head_dim] if stages is None else stages
    if stages not in (1, 2, 3, 4) or isinstance(stages, bool):
        raise LaunchError(f"argument 'stages' must be 1 to 4, got {stages!r}")
    if kv_stages not in (1, 2) or isinstance(kv_stages, bool):
        raise LaunchError(f"argument 'kv_stages' must be 1 or 2, got {kv_stages!r}")
    if dq_shared is None:
        dq_shared = program.BWD_DQ_SHARED[head_dim]
    if dq_tma is None:
        dq_tma = program.BWD_DQ_TMA[head_dim]
    if dq_shared and head_dim != 128:
        raise LaunchError(f"argument 'dq_shared' needs head_dim 128 (64-column halves per warpgroup), got {head_dim}")
    block_m = program.BWD_BLOCK_M
    interpreted = env.interpret_requested()
    if sms is None:       # under the interpreter: an H200's 132 multiprocessors (as tsjit.ops.attention)
        sms = 132 if interpreted else torch.cuda.get_device_properties(q.device).multi_processor_count
    stream = None if interpreted else torch.cuda.current_stream(q.device).cuda_stream
    padded = -(-seqlen_q // block_m) * block_m
    # every host step first (TMA descriptors, workspaces), so the GPU does not wait for the host between the launches
    stats = torch.empty((batch, heads, 2, padded), dtype=torch.float32, device=q.device)
    dq_accum = torch.zeros((batch * heads * padded, head_dim), dtype=torch.float32, device=q.device)
    tiles = batch * kv_heads * -(-seqlen_k // program.BWD_BLOCK_N)
    grid = max(1, min(tiles, int(sms)))
    maps = [TensorMap(q, (1, block_m, 1, BOX), swizzle="128B"),
            TensorMap(k, (1, program.BWD_BLOCK_N, 1, BOX), swizzle="128B"),
            TensorMap(v, (1, program.BWD_BLOCK_N, 1, BOX), swizzle="128B"),
            TensorMap(dout, (1, block_m, 1, BOX), swizzle="128B"),
            TensorMap(stats, (1, 1, 2, block_m)), TensorMap(dq_accum, (64, 64))]
    dk2 = dk.view(batch * seqlen_k, kv_heads * head_dim)
    dv2 = dv.view(batch * seqlen_k, kv_heads * head_dim)
    flat_out, flat_dout, lse = out.contiguous().view(-1), dout.contiguous().view(-1), lse.contiguous()
    # the preprocess kernel: D = rowsum(dO * O) and LSE * log2 e (+inf where no key is visible and past seqlen_q)
    rows = batch * padded * heads
    parts.attention_backward_preprocess[(max(1, min(-(-rows // 8), 8 * int(sms))),), (parts.PREPROCESS_THREADS,)](
        flat_out, flat_dout, lse, stats, seqlen_q, heads, padded, rows, head_dim, stream=stream)
    program.attention_backward[(grid,), (program.BWD_THREADS,)](
        *maps, dq_accum, dk2, dv2, batch, seqlen_q, seqlen_k, heads, kv_heads, heads // kv_heads, padded, scale,
        scale * LOG2_E, head_dim, causal, stages, kv_stages, bool(dq_shared), bool(dq_tma) and not interpreted,
        stream=stream)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dq.copy_(dq_accum.view(batch, heads, padded, head_dim)[:, :, :seqlen_q].transpose(1, 2))
    return dq, dk, dv


# -- autograd: tsjit.ops.attention(...) with inputs that require grad ---------------------------------------------
def wants_grad(q, k, v, torch) -> bool:
    """Whether an attention call must record a graph: grad mode on and one of q, k, v requiring grad."""
    return any(getattr(t, "requires_grad", False) for t in (q, k, v)) and torch.is_grad_enabled()


def differentiable_attention(forward, q, k, v, *, causal, scale, return_lse, refused, options):
    """``forward(q, k, v, ...)`` (``tsjit.ops.attention``) recorded for autograd: ``.backward()`` runs
    :func:`attention_backward`.  ``refused``: the names of the given arguments the backward does not support
    (sliding window, cu_seqlens, fp8 scales, out / lse_out); ``options``: the tile options, passed to the forward.
    The LSE, where returned, is not differentiable.

    Raises:
        LaunchError: a refused argument or an unsupported head_dim / dtype, naming it (and how to run the
            forward alone: under ``torch.no_grad()`` or on detached tensors)."""
    torch = _torch(q)
    how = "run the forward alone under torch.no_grad() or on detached tensors (q.detach(), ...)"
    if refused:
        raise LaunchError(f"tsjit.ops.attention: q, k or v requires grad, but the backward "
                          f"(tsjit.ops.attention_backward) does not support argument(s) {', '.join(refused)}; {how}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t, torch, require_cuda=False)
    if q.shape[3] not in BACKWARD_HEAD_DIMS:
        raise LaunchError(f"tsjit.ops.attention: q, k or v requires grad, but the backward supports head_dim "
                          f"{list(BACKWARD_HEAD_DIMS)}, not {q.shape[3]}; {how}")
    out, lse = _function(torch).apply(forward, q, k, v, causal, scale, options)
    return (out, lse) if return_lse else out


_FUNCTIONS: dict = {}


def _function(torch):
    """The torch.autograd.Function of the attention (built once: torch is imported only by callers that have it)."""
    if "attention" not in _FUNCTIONS:
        class AttentionFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, forward, q, k, v, causal, scale, options):
                out, lse = forward(q, k, v, causal=causal, scale=scale, return_lse=True, **options)
                ctx.save_for_backward(q, k, v, out, lse)
                ctx.causal, ctx.scale = causal, scale
                ctx.mark_non_differentiable(lse)
                return out, lse

            @staticmethod
            def backward(ctx, dout, _dlse):
                q, k, v, out, lse = ctx.saved_tensors
                dq, dk, dv = attention_backward(q, k, v, out, lse, dout.contiguous(), causal=ctx.causal,
                                                scale=ctx.scale)
                return None, dq, dk, dv, None, None, None

        _FUNCTIONS["attention"] = AttentionFunction
    return _FUNCTIONS["attention"]
