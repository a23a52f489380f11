"""The fp8 (e4m3) forward of ``tsjit.ops.attention``: float8_e4m3fn q, k, v with per-tensor dequantization
scales, a bf16 output (the Task Scheduling program of :mod:`tsjit.examples.attention_fp8`).

V goes to the kernel transposed, ``(batch, kv_heads, head_dim, keys)`` with each 16 keys in the kernel's order
(:func:`transpose_v_fp8`; 8-bit wgmma reads its shared-memory operands K-major only, PTX ISA §9.7.15.5.1.2).  A
call with the usual ``(batch, seqlen_k, kv_heads, head_dim)`` V transposes it first (one launch of the transpose
kernel of :mod:`tsjit.examples.attention_v_transpose`, a read and a write of V, part of the call's time); a caller
that keeps V in the kernel's layout passes ``transpose_v_fp8(v)`` with ``v_transposed=True`` and pays nothing.
"""
from __future__ import annotations

import math
import numbers

from tsjit.errors import LaunchError
from tsjit.examples import attention_fp8 as program
from tsjit.examples import attention_tiles as tiles
from tsjit.examples import attention_v_transpose as transpose
from tsjit.lang.dtypes import Float8E4M3
from tsjit.ops.attention_args import check_tensor, device_table, dummy_tensors, lse_buffer, torch_module
from tsjit.runtime.arrays import DeviceArray
from tsjit.runtime.tensormap import TensorMap

__all__ = ["attention_fp8", "transpose_v_fp8", "FP8_DTYPE"]

FP8_DTYPE = "float8_e4m3fn"


def transpose_v_fp8(v):
    """V in the fp8 kernel's layout: ``(batch, kv_heads, head_dim, keys rounded up to 16)`` torch.float8_e4m3fn,
    contiguous, the padding keys zero, each group of 16 keys in :data:`tsjit.examples.attention_fp8.KEY_ORDER`
    (``out[b, h, d, 16 g + l] = v[b, 16 g + KEY_ORDER[l], h, d]``).

    Args:
        v: (batch, seqlen_k, kv_heads, head_dim) torch.float8_e4m3fn CUDA tensor, last dimension contiguous, head_dim
            64, 128 or 256.

    Returns:
        The tensor to pass as ``v`` with ``v_transposed=True``: one launch of the bandwidth-bound transpose kernel
        :func:`tsjit.examples.attention_v_transpose.transpose_v_kernel` (one read and one write of V) on the
        current stream.

    Raises:
        LaunchError: ``v`` is not such a tensor, or has more than 65535 * 128 keys (the kernel's grid).
    """
    torch = torch_module(v)
    check_tensor("v", v, torch, (FP8_DTYPE,))
    batch, keys, heads, head_dim = v.shape
    _check_head_dim(head_dim)
    padded = -(-keys // program.KEY_GROUP) * program.KEY_GROUP
    launch_grid = transpose.grid(batch, keys, heads)
    if launch_grid[1] > 65535:                  # CUDA's grid.y limit
        raise LaunchError(f"argument 'v' has {keys} keys; the fp8 V transpose takes at most "
                          f"{65535 * transpose.TILE_KEYS}; split the keys")
    out = torch.empty((batch, heads, head_dim, padded), dtype=torch.uint8, device=v.device)
    if out.numel() == 0:
        return out.view(torch.float8_e4m3fn)
    bits = v.view(torch.uint8)
    if any(stride % 16 for stride in bits.stride()[:3]):     # a size-1 dimension's stride: rows 16-byte aligned
        bits = torch.empty(bits.shape, dtype=torch.uint8, device=v.device).copy_(bits)
    stream = torch.cuda.current_stream(v.device).cuda_stream
    transpose.transpose_v_kernel[launch_grid, (transpose.threads(head_dim),)](
        bits.view(torch.int32), out.view(torch.int32), keys, head_dim, stream=stream)
    return out.view(torch.float8_e4m3fn)


def _check_head_dim(head_dim):
    if head_dim not in program.HEAD_DIMS:
        raise LaunchError(f"head_dim {head_dim} is not supported by the fp8 forward; supported: "
                          f"{list(program.HEAD_DIMS)}")


def _fp8_map(t, box, swizzle):
    """A TensorMap of the float8_e4m3fn torch tensor ``t`` (through a non-owning Float8E4M3 view: the call keeps
    ``t`` alive while it launches, and torch frees memory in stream order)."""
    view = DeviceArray(tuple(t.shape), Float8E4M3, strides=t.stride(), data_ptr=t.data_ptr())
    return TensorMap(view, box, swizzle=swizzle)


def _scale_value(name, value, torch):
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)                     # a device-to-host copy where the tensor is on the GPU
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise LaunchError(f"argument '{name}' must be a finite number > 0 (the per-tensor dequantization scale of "
                          f"the fp8 input; default 1.0), got {value!r}")
    return float(value)


def _check(q, k, v, out, v_transposed, torch):
    fp8 = getattr(torch, FP8_DTYPE)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if isinstance(t, torch.Tensor) and t.dtype != fp8:
            raise LaunchError(f"argument '{name}' has dtype {t.dtype}, but the fp8 forward takes q, k and v all in "
                              f"torch.float8_e4m3fn (float8_e5m2 is not supported); convert with .to(torch."
                              f"float8_e4m3fn) and pass the scales as q_scale / k_scale / v_scale")
    check_tensor("q", q, torch, (FP8_DTYPE,))
    check_tensor("k", k, torch, (FP8_DTYPE,))
    batch, _, heads, head_dim = q.shape
    _, seqlen_k, kv_heads, _ = k.shape
    if v_transposed:
        check_tensor("v", v, torch, (FP8_DTYPE,), layout="(batch, kv_heads, head_dim, keys padded to 16)")
        expected = (batch, kv_heads, head_dim, -(-seqlen_k // program.KEY_GROUP) * program.KEY_GROUP)
        if tuple(v.shape) != expected:
            raise LaunchError(f"with v_transposed=True, argument 'v' must be tsjit.ops.attention_fp8."
                              f"transpose_v_fp8(v) of shape {expected}, got {tuple(v.shape)}")
    else:
        check_tensor("v", v, torch, (FP8_DTYPE,))
        if tuple(v.shape) != tuple(k.shape):
            raise LaunchError(f"arguments 'k' and 'v' must have the same shape, got {tuple(k.shape)} and "
                              f"{tuple(v.shape)}")
    if k.shape[0] != batch or k.shape[3] != head_dim:
        raise LaunchError(f"argument 'k' has shape {tuple(k.shape)}, which does not match 'q' {tuple(q.shape)} in "
                          f"batch or head_dim")
    _check_head_dim(head_dim)
    if kv_heads < 1 or heads % kv_heads:
        raise LaunchError(f"argument 'k' has {kv_heads} heads, which must divide the {heads} heads of 'q' (GQA/MQA)")
    if q.device != k.device or q.device != v.device:
        raise LaunchError(f"arguments q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if out is not None:
        check_tensor("out", out, torch, ("bfloat16",))
        if tuple(out.shape) != tuple(q.shape) or out.device != q.device:
            raise LaunchError(f"argument 'out' must be a torch.bfloat16 tensor of shape {tuple(q.shape)} on "
                              f"{q.device} (the fp8 forward writes bf16), got {tuple(out.shape)} on {out.device}")


def attention_fp8(q, k, v, *, causal, scale, left, right, q_scale, k_scale, v_scale, v_transposed, return_lse, out,
                  lse_out, block_n, stages, sms, pingpong, q_stages, tile_table, torch, exp2_polynomial=None):
    """The fp8 forward behind ``tsjit.ops.attention`` (its docstring has the arguments; ``left`` / ``right``: the
    mask's bounds, None for unbounded).  Returns ``out`` or ``(out, lse)``.

    Raises:
        LaunchError: an argument the fp8 forward does not take (see :func:`_check`), or a bad scale / option.
    """
    _check(q, k, v, out, v_transposed, torch)
    q_scale, k_scale, v_scale = (_scale_value(n, s, torch) for n, s in
                                 (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale)))
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale) or scale <= 0:
        raise LaunchError(f"argument 'scale' must be a finite number > 0 (default 1/sqrt(head_dim)), got {scale!r}")
    default_n, default_stages = program.default_config(head_dim, causal)
    block_n = default_n if block_n is None else block_n
    stages = default_stages if stages is None else stages
    if block_n not in program.BLOCK_NS:
        raise LaunchError(f"argument 'block_n' must be one of {list(program.BLOCK_NS)} for fp8 inputs, got "
                          f"{block_n!r}")
    q_stages = 2 if q_stages is None else q_stages
    if q_stages not in (1, 2):
        raise LaunchError(f"argument 'q_stages' must be 1 or 2, got {q_stages!r}")
    pingpong = True if pingpong is None else bool(pingpong)
    if exp2_polynomial is None:
        exp2_polynomial = program.default_exp2_polynomial(head_dim, left is not None or right is not None)
    if isinstance(exp2_polynomial, bool) or not isinstance(exp2_polynomial, int) or not 0 <= exp2_polynomial <= 16:
        raise LaunchError(f"argument 'exp2_polynomial' must be an int in [0, 16] (exponentials of every 16 computed "
                          f"on the FMA pipe), got {exp2_polynomial!r}")
    if out is None:
        out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    lse_shape = (batch, heads, seqlen_q)
    lse, return_lse = lse_buffer(lse_out, return_lse, lse_shape, q.device, torch)
    if batch == 0 or seqlen_q == 0 or heads == 0:
        return (out, lse) if return_lse else out
    if seqlen_k == 0:
        out.zero_()
        if return_lse:
            lse.fill_(float("-inf"))
        return (out, lse) if return_lse else out
    vt = v if v_transposed else transpose_v_fp8(v)
    if sms is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    direct = head_dim == 256
    store = out
    if direct and not (out.stride(2) == head_dim and out.stride(0) == seqlen_q * out.stride(1)):
        store = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)    # rows of (heads * head_dim)
    ordered = causal or left is not None or right is not None
    tile_table = ordered if tile_table is None else bool(tile_table)
    dummy = dummy_tensors(q.device, torch)
    table = None
    if tile_table:
        table = device_table(tiles.tile_table([seqlen_q] * batch, [seqlen_k] * batch, heads, block_n, causal, sms,
                                              (left, right), 128, causal and not direct), q.device, torch)
        num_tiles = table.shape[0]
    else:
        num_tiles = batch * heads * -(-seqlen_q // 128)
    grid = max(1, min(num_tiles, sms))
    lse_arg = lse if return_lse else torch.empty((batch, 1, 1), dtype=torch.float32, device=q.device)
    width = min(128, head_dim)
    q_map = _fp8_map(q, (1, 128, 1, width), f"{width}B")
    k_map = _fp8_map(k, (1, block_n, 1, width), f"{width}B")
    keys = program.value_box_keys(block_n)
    vt_map = _fp8_map(vt, (1, 1, head_dim, keys), f"{keys}B")
    o_map = TensorMap(store, (1, 64, 1, 64), swizzle="128B")
    out2d = store.as_strided((batch * seqlen_q, heads * head_dim), (store.stride(1), 1)) if direct else dummy["out"]
    stream = torch.cuda.current_stream(q.device).cuda_stream
    program.attention_forward_fp8[(grid,), (384,)](
        q_map, k_map, vt_map, o_map, out2d, lse_arg, table if table is not None else dummy["table"], seqlen_q,
        seqlen_k, heads, heads // kv_heads, scale * q_scale * k_scale * math.log2(math.e), v_scale,
        0 if left is None else left, 0 if right is None else right, head_dim, block_n, stages, right is not None,
        return_lse, pingpong, q_stages, left is not None, table is not None, direct, exp2_polynomial, stream=stream)
    if store is not out:
        out.copy_(store)
    return (out, lse) if return_lse else out
