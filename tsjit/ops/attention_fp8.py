"""The fp8 (e4m3) forward of ``tsjit.ops.attention``: float8_e4m3fn q, k, v with per-tensor dequantization
scales, a bf16 output (the Task Scheduling program of :mod:`tsjit.examples.attention_fp8`).

V goes to the kernel transposed, ``(batch, kv_heads, head_dim, keys)`` with each 16 keys in the kernel's order
(:func:`transpose_v_fp8`; 8-bit wgmma reads its shared-memory operands K-major only, PTX ISA §9.7.15.5.1.2).  A
call with the usual ``(batch, seqlen_k, kv_heads, head_dim)`` V transposes it first (one launch of the transpose
kernel of :mod:`tsjit.examples.attention_v_transpose`, a read and a write of V, part of the call's time); a caller
that keeps V in the kernel's layout passes ``transpose_v_fp8(v)`` with ``v_transposed=True`` and pays nothing.

Host cost: a fixed-length call with ``out`` given (and ``lse_out``, if the LSE is wanted) whose tensors' shapes,
strides, dtypes and addresses, scales (Python numbers), options and stream were seen before reuses its packed
launches, as the bf16 forward does: one driver call (two when V is transposed in the call: that entry keeps its own
V^T buffer, at most ``FAST_ENTRIES_WITH_V`` such entries).  The unpacked path costs 250-360 us per call on the
H200's host (BENCHMARKS.md), more than the GPU time of small problems.

Packed variable-length batches (``cu_seqlens_q`` / ``cu_seqlens_k``) keep Q, K and O packed without padding; their
V^T starts every sequence at a multiple of 16 keys (the key order is relative to the sequence), so the transpose
scatters V to those starts first (``transpose_v_fp8(v, cu_seqlens_k)``), and O is stored from registers.
"""
from __future__ import annotations

import functools
import math
import numbers

from tsjit import env
from tsjit.errors import LaunchError, warn
from tsjit.examples import attention_fp8 as program
from tsjit.examples import attention_tiles as tiles
from tsjit.examples import attention_v_transpose as transpose
from tsjit.examples.attention_fp8_softmax import EXP2_DEGREES
from tsjit.lang.dtypes import Float8E4M3
from tsjit.ops.attention_args import (check_cu_seqlens, check_kv_heads, check_rescale_threshold, check_tensor,
                                      device_table, device_view, dummy_tensors, lse_buffer, softmax_scale, tensor_key,
                                      torch_module)
from tsjit.runtime.arrays import DeviceArray
from tsjit.runtime.tensormap import TensorMap

__all__ = ["attention_fp8", "transpose_v_fp8", "FP8_DTYPE"]

FP8_DTYPE = "float8_e4m3fn"


def transpose_v_fp8(v, cu_seqlens_k=None):
    """V in the fp8 kernel's layout: ``(batch, kv_heads, head_dim, keys rounded up to 16)`` torch.float8_e4m3fn,
    contiguous, the padding keys zero, each group of 16 keys in :data:`tsjit.examples.attention_fp8.KEY_ORDER`
    (``out[b, h, d, 16 g + l] = v[b, 16 g + KEY_ORDER[l], h, d]``).

    Args:
        v: (batch, seqlen_k, kv_heads, head_dim) torch.float8_e4m3fn CUDA tensor, last dimension contiguous, head_dim
            64, 128 or 256; with ``cu_seqlens_k``, packed (total_k, kv_heads, head_dim).
        cu_seqlens_k: a variable-length batch's (batch + 1) torch.int32 prefix sums (as for ``tsjit.ops.attention``;
            read on the host, one device-to-host copy).  The result is then ``(1, kv_heads, head_dim,
            varlen_value_keys(total_k, batch))``: sequence ``b`` from key ``varlen_value_start(cu_seqlens_k[b], b)``
            (a multiple of 16; :mod:`tsjit.examples.attention_fp8`), zeros between sequences.

    Returns:
        The tensor to pass as ``v`` with ``v_transposed=True``: one launch of the bandwidth-bound transpose kernel
        :func:`tsjit.examples.attention_v_transpose.transpose_v_kernel` (one read and one write of V) on the
        current stream (variable length: after a scatter of V into the padded sequence starts).

    Raises:
        LaunchError: ``v`` is not such a tensor, bad ``cu_seqlens_k``, or more than 65535 * 128 keys (the kernel's
            grid).
    """
    torch = torch_module(v)
    if cu_seqlens_k is not None:
        if not isinstance(v, torch.Tensor) or v.dim() != 3:
            raise LaunchError(f"with cu_seqlens_k, argument 'v' must be a packed (total_k, kv_heads, head_dim) "
                              f"tensor, got {tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__}")
        return _transpose_varlen(v, check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, v.shape[0], v.device, torch), torch)
    check_tensor("v", v, torch, (FP8_DTYPE,))
    _check_head_dim(v.shape[3])
    return _transpose(v, torch)


def _transpose(v, torch, bound=None):
    """The transpose kernel's V^T of a checked (batch, keys, kv_heads, head_dim) fp8 ``v``.  ``bound``: a list that
    receives the launch packed over non-owning views (``Kernel.bind``: a later launch with the same memory is one
    driver call) when ``v``'s rows need no aligned copy first; the launch then runs through it."""
    batch, keys, heads, head_dim = v.shape
    padded = -(-keys // program.KEY_GROUP) * program.KEY_GROUP
    launch_grid = transpose.grid(batch, keys, heads)
    if launch_grid[1] > 65535:                  # CUDA's grid.y limit
        raise LaunchError(f"argument 'v' has {keys} keys; the fp8 V transpose takes at most "
                          f"{65535 * transpose.TILE_KEYS}; split the keys")
    out = torch.empty((batch, heads, head_dim, padded), dtype=torch.uint8, device=v.device)
    if out.numel() == 0:
        return out.view(torch.float8_e4m3fn)
    bits = v.view(torch.uint8)
    copied = any(stride % 16 for stride in bits.stride()[:3])     # a size-1 dimension's stride: rows 16-byte aligned
    if copied:
        bits = torch.empty(bits.shape, dtype=torch.uint8, device=v.device).copy_(bits)
    stream = torch.cuda.current_stream(v.device).cuda_stream
    words, out_words = bits.view(torch.int32), out.view(torch.int32)
    if bound is not None and not copied:
        bound.append(transpose.transpose_v_kernel.bind(device_view(words, torch), device_view(out_words, torch), keys,
                                                       head_dim, grid=launch_grid,
                                                       block=(transpose.threads(head_dim),)))
        bound[-1](stream)
    else:
        transpose.transpose_v_kernel[launch_grid, (transpose.threads(head_dim),)](words, out_words, keys, head_dim,
                                                                                 stream=stream)
    return out.view(torch.float8_e4m3fn)


def _transpose_varlen(v, lengths_k, torch):
    """The packed V^T of a packed (total_k, kv_heads, head_dim) fp8 ``v`` with sequence lengths ``lengths_k``
    (host ints): V scattered to the sequences' V^T starts (zeros between), then :func:`_transpose`."""
    check_tensor("v", v.unsqueeze(0), torch, (FP8_DTYPE,), layout="(total_k, kv_heads, head_dim)")
    total, heads, head_dim = v.shape
    _check_head_dim(head_dim)
    padded = torch.zeros((program.varlen_value_keys(total, len(lengths_k)), heads, head_dim), dtype=torch.uint8,
                         device=v.device)
    if total:
        rows = device_table(_value_rows(tuple(lengths_k)), v.device, torch, torch.int64)
        padded.index_copy_(0, rows, v.view(torch.uint8))
    return _transpose(padded.view(torch.float8_e4m3fn).unsqueeze(0), torch)


@functools.lru_cache(maxsize=64)
def _value_rows(lengths_k):
    return program.varlen_value_rows(lengths_k)


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


def _check(q, k, v, out, v_transposed, torch, value_keys=None):
    """Check the 4-D (packed: B = 1) fp8 arguments; ``value_keys``: the keys of a pre-transposed packed V^T
    (:func:`~tsjit.examples.attention_fp8.varlen_value_keys`), None for a fixed-length batch."""
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
        keys = -(-seqlen_k // program.KEY_GROUP) * program.KEY_GROUP if value_keys is None else value_keys
        expected = (batch, kv_heads, head_dim, keys)
        if tuple(v.shape) != expected:
            call = "transpose_v_fp8(v)" if value_keys is None else "transpose_v_fp8(v, cu_seqlens_k)"
            raise LaunchError(f"with v_transposed=True, argument 'v' must be tsjit.ops.attention_fp8.{call} of shape "
                              f"{expected}, got {tuple(v.shape)}")
    else:
        check_tensor("v", v, torch, (FP8_DTYPE,))
        if tuple(v.shape) != tuple(k.shape):
            raise LaunchError(f"arguments 'k' and 'v' must have the same shape, got {tuple(k.shape)} and "
                              f"{tuple(v.shape)}")
    if k.shape[0] != batch or k.shape[3] != head_dim:
        raise LaunchError(f"argument 'k' has shape {tuple(k.shape)}, which does not match 'q' {tuple(q.shape)} in "
                          f"batch or head_dim")
    _check_head_dim(head_dim)
    check_kv_heads(heads, kv_heads)
    if q.device != k.device or q.device != v.device:
        raise LaunchError(f"arguments q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if out is not None:
        check_tensor("out", out, torch, ("bfloat16",))
        if tuple(out.shape) != tuple(q.shape) or out.device != q.device:
            raise LaunchError(f"argument 'out' must be a torch.bfloat16 tensor of shape {tuple(q.shape)} on "
                              f"{q.device} (the fp8 forward writes bf16), got {tuple(out.shape)} on {out.device}")


def attention_fp8(q, k, v, *, causal, scale, left, right, q_scale, k_scale, v_scale, v_transposed, return_lse, out,
                  lse_out, block_n, stages, sms, pingpong, q_stages, tile_table, torch, exp2_polynomial=None,
                  rescale_threshold=None, lengths=None, cu_seqlens=(None, None), mma_row_sums=None, exp2_degree=None,
                  ordering=3, max_chains=4, moved_descriptors=None, fused_exp2=True, stale_maxima=None):
    """The fp8 forward behind ``tsjit.ops.attention`` (its docstring has the arguments; ``left`` / ``right``: the
    mask's bounds, None for unbounded; ``lengths``: the (lengths_q, lengths_k) host ints of a packed batch whose
    ``cu_seqlens`` (cu_seqlens_q, cu_seqlens_k) the caller has checked, None for a fixed-length one;
    ``mma_row_sums``, ``exp2_degree``, ``ordering``, ``max_chains``, ``moved_descriptors``: the kernel's
    ``MMA_ROW_SUMS``, ``EXP2_DEGREE``, ``ORDERING``, ``MAX_CHAINS`` and ``MOVED_DESCRIPTORS``
    (None: :func:`~tsjit.examples.attention_fp8.default_mma_row_sums`, only where no LSE is stored and block_n /
    stages are not given, and ``default_exp2_degree``)).  Returns
    ``out`` or ``(out, lse)`` (packed: ``out`` (total_q, heads, head_dim), LSE (heads, total_q)).

    Raises:
        LaunchError: an argument the fp8 forward does not take (see :func:`_check`), or a bad scale / option.
    """
    varlen = lengths is not None
    fast_key = None
    if not varlen and out is not None and (lse_out is not None or not return_lse) \
            and all(type(t) is torch.Tensor for t in (q, k, v, out)) \
            and all(type(x) in (float, int) for x in (q_scale, k_scale, v_scale)):
        fast_key = (tensor_key(q), tensor_key(k), tensor_key(v), tensor_key(out), tensor_key(lse_out), causal, scale,
                    left, right, q_scale, k_scale, v_scale, v_transposed, return_lse, block_n, stages, sms, pingpong,
                    q_stages, tile_table, exp2_polynomial, rescale_threshold, mma_row_sums, exp2_degree, ordering,
                    max_chains, moved_descriptors, fused_exp2, stale_maxima, env.code_state(),
                    torch.cuda.current_stream(q.device).cuda_stream)
        try:
            bound = _FAST.get(fast_key)
        except TypeError:                                   # an unhashable argument: the full path explains it
            bound, fast_key = None, None
        if bound is not None:
            for launch in bound[0]:
                launch(fast_key[-1])
            return (out, lse_out) if return_lse else out
    given_out = out
    value_keys = None
    if varlen:
        for name, t in (("v", v), ("out", out)):
            rank = 4 if name == "v" and v_transposed else 3
            if t is not None and (not isinstance(t, torch.Tensor) or t.dim() != rank):
                layout = "(1, kv_heads, head_dim, keys) transpose_v_fp8(v, cu_seqlens_k)" if rank == 4 else \
                    "(tokens, heads, head_dim)"
                raise LaunchError(f"with cu_seqlens, argument '{name}' must be a packed {layout} tensor")
        value_keys = program.varlen_value_keys(k.shape[0], len(lengths[1]))
        q, k = q.unsqueeze(0), k.unsqueeze(0)
        v = v if v_transposed else v.unsqueeze(0)
        out = None if out is None else out.unsqueeze(0)
    _check(q, k, v, out, v_transposed, torch, value_keys)
    q_scale, k_scale, v_scale = (_scale_value(n, s, torch) for n, s in
                                 (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale)))
    batch, seqlen_q, heads, head_dim = q.shape
    seqlen_k, kv_heads = k.shape[1], k.shape[2]
    scale = softmax_scale(scale, head_dim)
    masked = left is not None or right is not None
    if mma_row_sums is None:      # the row sums of the e4m3 P, where no LSE is stored and the tile is the default
        mma_row_sums = block_n is None and stages is None and \
            program.default_mma_row_sums(head_dim, masked, return_lse or lse_out is not None)
    mma_row_sums = bool(mma_row_sums)
    if stale_maxima is None:      # with the default row-sum launch only (its tiles are the stale-maxima ones)
        stale_maxima = block_n is None and stages is None and \
            program.default_stale_maxima(head_dim, mma_row_sums, masked)
    default_n, default_stages = program.default_config(head_dim, causal, mma_row_sums)
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
        exp2_polynomial = program.default_exp2_polynomial(head_dim, masked, bool(stale_maxima))
    if isinstance(exp2_polynomial, bool) or not isinstance(exp2_polynomial, int) or not 0 <= exp2_polynomial <= 16:
        raise LaunchError(f"argument 'exp2_polynomial' must be an int in [0, 16] (exponentials of every 16 computed "
                          f"on the FMA pipe), got {exp2_polynomial!r}")
    if rescale_threshold is None:
        rescale_threshold = program.default_rescale_threshold(head_dim, masked)
    rescale_threshold = check_rescale_threshold(rescale_threshold)
    exp2_degree = program.default_exp2_degree(head_dim, masked, mma_row_sums) if exp2_degree is None else exp2_degree
    if exp2_degree not in EXP2_DEGREES:
        raise LaunchError(f"argument 'exp2_degree' must be one of {list(EXP2_DEGREES)} (the polynomial of the "
                          f"FMA-pipe exponentials), got {exp2_degree!r}")
    if out is None:
        out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
    result_out = given_out if given_out is not None else (out.squeeze(0) if varlen else out)   # the caller's own
    lse_shape = (heads, seqlen_q) if varlen else (batch, heads, seqlen_q)
    lse, return_lse = lse_buffer(lse_out, return_lse, lse_shape, q.device, torch)
    if batch == 0 or seqlen_q == 0 or heads == 0:
        return (result_out, lse) if return_lse else result_out
    if seqlen_k == 0 or (varlen and not any(lengths[0])):
        out.zero_()
        if return_lse:
            lse.fill_(float("-inf"))
        return (result_out, lse) if return_lse else result_out
    launches = [] if fast_key is not None else None      # the packed launches of a fast-path entry
    if v_transposed:
        vt = v
    else:      # V^T in a buffer of this call (of the fast-path entry, which keeps it, when the launch is packed)
        vt = _transpose_varlen(v[0], lengths[1], torch) if varlen else _transpose(v, torch, launches)
        if launches == []:                                   # V's rows needed an aligned copy: no fast path
            launches = fast_key = None
    if sms is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    direct = varlen or head_dim == 256
    store = out
    if direct and not (out.stride(2) == head_dim and out.stride(0) == seqlen_q * out.stride(1)):
        store = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)    # rows of (heads * head_dim)
    ordered = causal or left is not None or right is not None
    if varlen and tile_table is False:
        raise LaunchError("argument 'tile_table' cannot be False with cu_seqlens (the table lists the sequences' "
                          "tiles); leave it None")
    tile_table = (ordered or varlen) if tile_table is None else bool(tile_table)
    dummy = dummy_tensors(q.device, torch)
    table = None
    if tile_table:
        seqlens = lengths if varlen else ([seqlen_q] * batch, [seqlen_k] * batch)
        table = device_table(tiles.tile_table(seqlens[0], seqlens[1], heads, block_n, causal, sms, (left, right), 128,
                                              causal and not direct), q.device, torch)
        num_tiles = table.shape[0]
    else:
        num_tiles = batch * heads * -(-seqlen_q // 128)
    if num_tiles == 0:
        return (result_out, lse) if return_lse else result_out
    grid = max(1, min(num_tiles, sms))
    if return_lse:
        lse_arg = lse.unsqueeze(0) if varlen else lse
    else:     # the grid order reads the batch from the LSE argument's first dimension
        lse_arg = torch.empty((batch, 1, 1), dtype=torch.float32, device=q.device)
    width = min(128, head_dim)
    q_map = _fp8_map(q, (1, 128, 1, width), f"{width}B")
    k_map = _fp8_map(k, (1, block_n, 1, width), f"{width}B")
    keys = program.value_box_keys(block_n)
    vt_map = _fp8_map(vt, (1, 1, head_dim, keys), f"{keys}B")
    o_map = TensorMap(store, (1, 64, 1, 64), swizzle="128B")
    out2d = store.as_strided((batch * seqlen_q, heads * head_dim), (store.stride(1), 1)) if direct else dummy["out"]
    cu_q, cu_k = cu_seqlens if varlen else (dummy["cu"], dummy["cu"])
    stream = torch.cuda.current_stream(q.device).cuda_stream
    arrays = (out2d, lse_arg, table if table is not None else dummy["table"], cu_q, cu_k)
    scalars = (seqlen_q, seqlen_k, heads, heads // kv_heads, scale * q_scale * k_scale * math.log2(math.e), v_scale,
               0 if left is None else left, 0 if right is None else right, head_dim, block_n, stages,
               right is not None, return_lse, pingpong, q_stages, left is not None, table is not None, direct,
               exp2_polynomial, varlen, rescale_threshold, mma_row_sums, exp2_degree, int(ordering),
               int(max_chains), mma_row_sums if moved_descriptors is None else bool(moved_descriptors),
               bool(fused_exp2), bool(stale_maxima))
    if fast_key is not None and store is out:
        # a packed launch over non-owning views (it keeps no user tensor alive): a later call with the same tensors'
        # metadata, addresses, options and stream is one driver call (two with the V transpose)
        bound = _bind((q_map, k_map, vt_map), store, arrays, scalars, grid, torch)
        if bound is not None:
            entries = _FAST_TRANSPOSED if v_transposed else _FAST_WITH_V
            if len(entries) >= (FAST_ENTRIES if v_transposed else FAST_ENTRIES_WITH_V):
                _FAST.pop(entries.pop(0), None)
            entries.append(fast_key)
            # kept: the LSE placeholder, the table and (V transposed in the call) the V^T buffer are ours
            _FAST[fast_key] = ((*launches, bound) if launches else (bound,), lse_arg, arrays[2],
                               None if v_transposed else vt)
            bound(stream)
            return (result_out, lse) if return_lse else result_out
    program.attention_forward_fp8[(grid,), (384,)](q_map, k_map, vt_map, o_map, *arrays, *scalars, stream=stream)
    if store is not out:
        out.copy_(store)
    return (result_out, lse) if return_lse else result_out


def _bind(fp8_maps, store, arrays, scalars, grid, torch):
    """The packed launch (``Kernel.bind``) of these arguments over non-owning views (``fp8_maps`` are already over
    views, :func:`_fp8_map`), or None (with a warning) where it cannot be built: the caller then launches unpacked."""
    try:
        o_map = TensorMap(device_view(store, torch), (1, 64, 1, 64), swizzle="128B")
        views = [device_view(t, torch) for t in arrays]
        return program.attention_forward_fp8.bind(*fp8_maps, o_map, *views, *scalars, grid=(grid,), block=(384,))
    except Exception as err:  # noqa: BLE001 -- any failure here falls back to the plain launch, which reports
        warn(f"tsjit.ops.attention: the packed fp8 launch could not be built ({type(err).__name__}: {err}); "
             f"launching unpacked (slower on the host)")
        return None


_FAST: dict = {}          # fast-path key (tensor metadata + addresses + options + stream) -> packed fp8 launches
_FAST_TRANSPOSED: list = []       # the keys of entries given V^T, oldest first
_FAST_WITH_V: list = []           # the keys of entries that transpose V themselves (each keeps a V^T buffer)
FAST_ENTRIES = 256
FAST_ENTRIES_WITH_V = 4           # each holds a buffer the size of V
