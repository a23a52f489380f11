"""``tsjit.ops.attention``: FlashAttention-style forward attention on torch tensors (Hopper, sm_90a).

It needs PyTorch: q, k, v (and out / lse_out) must be CUDA torch tensors (numpy arrays, tsjit
``DeviceArray`` s and other GPU arrays are refused with a LaunchError; ``tsjit.ops.matmul`` takes those).

The kernel is the Task Scheduling program of :mod:`tsjit.examples.attention` (a TMA producer warp,
two consumer warpgroups with wgmma and an online softmax, persistent tiles).  This module checks the
arguments, builds the TMA descriptors and launches it on torch's current stream.
"""
from __future__ import annotations

import math

from tsjit.errors import LaunchError
from tsjit.examples import attention as program
from tsjit.runtime.tensormap import TensorMap

__all__ = ["attention", "SUPPORTED_HEAD_DIMS"]

SUPPORTED_HEAD_DIMS = program.HEAD_DIMS
_TMA_STRIDE_BYTES = 16          # TMA: global strides and the base address are multiples of 16 bytes


def _torch(q):
    """The torch module; without torch, a LaunchError naming argument ``q`` (attention takes only
    CUDA torch tensors)."""
    try:
        import torch  # lazily: torch is optional (only tsjit.ops.attention needs it)
    except ImportError:
        raise LaunchError(f"tsjit.ops.attention: argument 'q' is a {type(q).__module__}.{type(q).__qualname__}, "
                          f"but attention needs CUDA torch tensors (q, k, v) and torch is not installed; "
                          f"install PyTorch with CUDA and pass torch.bfloat16/torch.float16 tensors on the GPU") from None
    return torch


def _check_tensor(name: str, t, torch) -> None:
    if not isinstance(t, torch.Tensor):
        raise LaunchError(f"tsjit.ops.attention: argument '{name}' must be a torch tensor on a CUDA device, "
                          f"got {type(t).__name__}; attention takes CUDA torch tensors only")
    if t.dim() != 4:
        raise LaunchError(f"argument '{name}' must have 4 dimensions (batch, seqlen, heads, head_dim) as in "
                          f"FlashAttention, got shape {tuple(t.shape)}")
    if t.dtype not in (torch.bfloat16, torch.float16):
        raise LaunchError(f"argument '{name}' has dtype {t.dtype}; tsjit.ops.attention supports torch.bfloat16 "
                          f"and torch.float16")
    if t.stride(3) != 1 and t.shape[3] > 1:
        raise LaunchError(f"argument '{name}' must have a contiguous last dimension (stride 1), got strides "
                          f"{tuple(t.stride())}; pass {name}.contiguous()")
    itemsize = t.element_size()
    for axis in range(3):
        if t.shape[axis] > 1 and (t.stride(axis) * itemsize) % _TMA_STRIDE_BYTES:
            raise LaunchError(f"argument '{name}' has stride {t.stride(axis)} in dimension {axis}, "
                              f"{t.stride(axis) * itemsize} bytes; TMA needs strides that are multiples of 16 "
                              f"bytes; pass {name}.contiguous()")
    if not t.is_cuda:
        raise LaunchError(f"argument '{name}' is on {t.device}; tsjit.ops.attention needs CUDA tensors "
                          f"(move it with {name}.cuda())")
    if t.data_ptr() % _TMA_STRIDE_BYTES:
        raise LaunchError(f"argument '{name}' starts at an address that is not 16-byte aligned; TMA needs a "
                          f"16-byte aligned base (pass {name}.clone())")


def _check_arguments(q, k, v, out, causal, scale, torch):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t, torch)
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise LaunchError(f"arguments q, k, v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if tuple(k.shape) != tuple(v.shape):
        raise LaunchError(f"arguments 'k' and 'v' must have the same shape, got {tuple(k.shape)} and "
                          f"{tuple(v.shape)}")
    batch, _, heads, head_dim = q.shape
    if k.shape[0] != batch:
        raise LaunchError(f"argument 'k' has batch {k.shape[0]} but 'q' has batch {batch}")
    if k.shape[3] != head_dim:
        raise LaunchError(f"argument 'k' has head_dim {k.shape[3]} but 'q' has head_dim {head_dim}")
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise LaunchError(f"head_dim {head_dim} is not supported by tsjit.ops.attention; supported: "
                          f"{list(SUPPORTED_HEAD_DIMS)}")
    kv_heads = k.shape[2]
    if kv_heads < 1 or heads % kv_heads:
        raise LaunchError(f"argument 'k' has {kv_heads} heads, which must divide the {heads} heads of 'q' "
                          f"(GQA/MQA)")
    if q.device != k.device or q.device != v.device:
        raise LaunchError(f"arguments q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not isinstance(causal, bool):
        raise LaunchError(f"argument 'causal' must be a bool, got {causal!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise LaunchError(f"argument 'scale' must be a finite number > 0 (default 1/sqrt(head_dim)), got {scale!r}")
    if out is not None:
        _check_tensor("out", out, torch)
        if tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype or out.device != q.device:
            raise LaunchError(f"argument 'out' must be a {q.dtype} tensor of shape {tuple(q.shape)} on {q.device}, "
                              f"got {out.dtype} {tuple(out.shape)} on {out.device}")
    return float(scale)


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, return_lse: bool = False, out=None,
              lse_out=None, block_n: int | None = None, stages: int | None = None, sms: int | None = None,
              overlap: bool | None = None, pingpong: bool | None = None, q_stages: int | None = None):
    """Scaled dot-product attention forward: ``softmax(scale * q k^T [+ causal mask]) v``.

    Args:
        q: (batch, seqlen_q, heads, head_dim) torch.bfloat16 or torch.float16 CUDA tensor (torch is
            required; other array types are refused), last dimension
            contiguous, other strides multiples of 16 bytes (FlashAttention's layout).
        k, v: (batch, seqlen_k, kv_heads, head_dim), same dtype; ``kv_heads`` divides ``heads`` (GQA/MQA:
            query head ``h`` uses KV head ``h // (heads // kv_heads)``; K and V are not copied).
        causal: mask keys after the query, bottom-right aligned as in FlashAttention 2 (row ``i`` sees keys
            ``j <= i + seqlen_k - seqlen_q``; the usual causal mask when the lengths are equal).  Rows that
            see no key give 0 and LSE -inf.
        scale: softmax scale, default ``1 / sqrt(head_dim)``; finite and > 0.
        return_lse: also return the log-sum-exp per row, (batch, heads, seqlen_q) torch.float32 (natural log).
        out: optional output tensor (q's shape and dtype, same layout rules as q).
        lse_out: optional (batch, heads, seqlen_q) contiguous torch.float32 tensor for the LSE (implies
            ``return_lse``).
        block_n, stages: KV tile rows (64 or 128) and ring depth; defaults per head_dim
            (``tsjit.examples.attention.DEFAULT_CONFIG``).
        sms: CTAs of the persistent grid (default: the device's multiprocessor count).
        overlap: software-pipeline each warpgroup's loop (the softmax of a KV tile runs while the previous
            tile's PV wgmma is in flight); False: one tile at a time (default per head_dim:
            ``tsjit.examples.attention.DEFAULT_OVERLAP``).
        pingpong: the two warpgroups take turns at the tensor cores through named barriers (default per
            head_dim: ``tsjit.examples.attention.DEFAULT_PINGPONG``); only with ``overlap``.
        q_stages: stages of the Q ring (1 or 2; default ``DEFAULT_Q_STAGES`` per head_dim).

    Returns:
        ``out`` (batch, seqlen_q, heads, head_dim), or ``(out, lse)`` with ``return_lse``.

    Raises:
        LaunchError: torch is not installed, or an argument is not a CUDA torch tensor; an unsupported head_dim (64 and 128 are supported) or dtype, a layout TMA cannot
            address, mismatched shapes/devices, or a bad scale, each naming the argument.
    """
    torch = _torch(q)
    scale = _check_arguments(q, k, v, out, causal, scale, torch)
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    default_n, default_stages = program.DEFAULT_CONFIG[head_dim]
    block_n = default_n if block_n is None else block_n
    stages = default_stages if stages is None else stages
    if overlap is None:
        overlap = program.DEFAULT_OVERLAP[head_dim]
    if pingpong is None:
        pingpong = program.DEFAULT_PINGPONG[head_dim]
    q_stages = program.DEFAULT_Q_STAGES[head_dim] if q_stages is None else q_stages
    if q_stages not in (1, 2):
        raise LaunchError(f"argument 'q_stages' must be 1 or 2, got {q_stages!r}")
    if block_n not in (64, 128):
        raise LaunchError(f"argument 'block_n' must be 64 or 128, got {block_n!r}")
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if lse_out is not None:
        if not isinstance(lse_out, torch.Tensor) or tuple(lse_out.shape) != (batch, heads, seqlen_q) or \
                lse_out.dtype != torch.float32 or lse_out.device != q.device or not lse_out.is_contiguous():
            raise LaunchError(f"argument 'lse_out' must be a contiguous torch.float32 tensor of shape "
                              f"{(batch, heads, seqlen_q)} on {q.device}")
        return_lse = True
    lse = lse_out
    if return_lse and lse is None:
        lse = torch.empty((batch, heads, seqlen_q), dtype=torch.float32, device=q.device)
    if batch == 0 or seqlen_q == 0 or heads == 0:
        return (out, lse) if return_lse else out
    if seqlen_k == 0:
        out.zero_()
        if return_lse:
            lse.fill_(float("-inf"))
        return (out, lse) if return_lse else out
    lse_arg = lse if return_lse else torch.empty((batch, 1, 1), dtype=torch.float32, device=q.device)
    q_map = TensorMap(q, (1, program.BLOCK_M, 1, program.BOX), swizzle="128B")
    k_map = TensorMap(k, (1, block_n, 1, program.BOX), swizzle="128B")
    v_map = TensorMap(v, (1, block_n, 1, program.BOX), swizzle="128B")
    o_map = TensorMap(out, (1, 64, 1, program.BOX), swizzle="128B")
    tiles = batch * heads * -(-seqlen_q // program.BLOCK_M)
    if sms is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    grid = max(1, min(tiles, sms))
    stream = torch.cuda.current_stream(q.device).cuda_stream
    program.attention_forward[(grid,), (program.THREADS,)](
        q_map, k_map, v_map, o_map, lse_arg, seqlen_q, seqlen_k, heads, heads // kv_heads,
        program.log2_scale(scale), head_dim, block_n, stages, causal, return_lse, bool(overlap),
        bool(pingpong) and bool(overlap), q_stages, stream=stream)
    return (out, lse) if return_lse else out
