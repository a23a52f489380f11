"""``tsjit.ops.attention``: FlashAttention-style forward attention on torch tensors (Hopper, sm_90a).

It needs PyTorch: q, k, v (and out / lse_out) must be CUDA torch tensors (numpy arrays, tsjit
``DeviceArray`` s and other GPU arrays are refused with a LaunchError; ``tsjit.ops.matmul`` takes those), or,
under ``TSJIT_INTERPRET=1``, CPU torch tensors: the bf16 / fp16 forward then runs on the CPU interpreter.

The kernel is the Task Scheduling program of :mod:`tsjit.examples.attention` (a TMA producer warp,
two consumer warpgroups with wgmma and an online softmax, persistent tiles); float8_e4m3fn inputs with per-tensor
scales run its fp8 form (:mod:`tsjit.ops.attention_fp8`, :mod:`tsjit.examples.attention_fp8`).  This module checks the
arguments, builds the TMA descriptors and launches it on torch's current stream.  Host cost: a fixed-length
call with ``out`` given (and ``lse_out``, if the LSE is wanted) whose tensors' shapes, strides, dtypes and
addresses, options and stream were seen before reuses its packed launch: one dict lookup, one driver call
(the kernel reads the memory at those addresses when it runs, whatever it holds then).
"""
from __future__ import annotations

from tsjit import env
from tsjit.errors import LaunchError, warn
from tsjit.ops.attention_args import check_causal as _check_causal
from tsjit.ops.attention_args import check_counts as _check_counts
from tsjit.ops.attention_args import check_kv_heads as _check_kv_heads
from tsjit.ops.attention_args import softmax_scale as _softmax_scale
from tsjit.ops.attention_args import check_cu_seqlens as _check_cu_seqlens
from tsjit.ops.attention_args import check_out_apart as _check_out_apart
from tsjit.ops.attention_args import check_cuda as _check_cuda
from tsjit.ops.attention_args import check_rescale_threshold as _check_rescale_threshold
from tsjit.ops.attention_args import check_tensor as _check_tensor
from tsjit.ops.attention_fp8 import attention_fp8
from tsjit.ops.attention_bwd import differentiable_attention, wants_grad
from tsjit.ops.attention_args import device_table as _device_table
from tsjit.ops.attention_args import dummy_tensors as _dummy
from tsjit.ops.attention_args import lse_buffer as _lse_buffer
from tsjit.ops.attention_args import device_view as _device_view
from tsjit.ops.attention_args import tensor_key as _tensor_key
from tsjit.ops.attention_args import torch_module as _torch
from tsjit.ops.attention_args import window_bounds as _window_bounds
from tsjit.examples import attention as program
from tsjit.examples import attention_tiles as tiles
from tsjit.examples.attention_config import default_kv_tiles
from tsjit.runtime.tensormap import TensorMap

__all__ = ["attention", "SUPPORTED_HEAD_DIMS", "INTERPRETER_SMS"]

SUPPORTED_HEAD_DIMS = program.HEAD_DIMS
#: the persistent grid's CTAs under the CPU interpreter (``TSJIT_INTERPRET=1``) when ``sms`` is not given: an
#: H200's 132 multiprocessors, as ``tsjit.ops.matmul.explain`` assumes without a GPU
INTERPRETER_SMS = 132



def _check_arguments(q, k, v, out, causal, scale, torch):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t, torch, require_cuda=False)   # shapes first: they are wrong on any device
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
    _check_kv_heads(heads, kv_heads)
    _check_causal(causal)
    scale = _softmax_scale(scale, head_dim)
    if out is not None:
        _check_tensor("out", out, torch, require_cuda=False)
        if tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype:
            raise LaunchError(f"argument 'out' must be a {q.dtype} tensor of shape {tuple(q.shape)}, "
                              f"got {out.dtype} {tuple(out.shape)}")
        _check_out_apart(out, q, k, v)
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):   # the device last: the rest is checkable anywhere
        if t is not None and not env.interpret_requested():        # the CPU interpreter takes CPU tensors
            _check_cuda(name, t)
    if q.device != k.device or q.device != v.device or (out is not None and out.device != q.device):
        devices = ", ".join(str(t.device) for t in (q, k, v, out) if t is not None)
        raise LaunchError(f"arguments q, k, v{', out' if out is not None else ''} must be on one device, got {devices}")
    return float(scale)


def _check_varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, torch):
    """Validate the packed (variable-length) arguments; returns the per-sequence lengths (host ints; reading
    ``cu_seqlens`` costs one device-to-host copy)."""
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise LaunchError(f"with cu_seqlens_q / cu_seqlens_k, argument '{name}' must be a packed "
                              f"(total_tokens, heads, head_dim) tensor, got "
                              f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        given, missing = ("cu_seqlens_q", "cu_seqlens_k") if cu_seqlens_k is None else ("cu_seqlens_k", "cu_seqlens_q")
        raise LaunchError(f"argument '{missing}' is None but '{given}' is given: a packed batch needs both prefix "
                          f"sums (pass {missing} too, torch.int32 (batch + 1); the same tensor when q and k have "
                          f"the same lengths)")
    lengths = [_check_cu_seqlens(name, cu, total, q.device, torch) for name, cu, total in
               (("cu_seqlens_q", cu_seqlens_q, q.shape[0]), ("cu_seqlens_k", cu_seqlens_k, k.shape[0]))]
    if len(lengths[0]) != len(lengths[1]):
        raise LaunchError(f"arguments 'cu_seqlens_q' and 'cu_seqlens_k' must have the same length (batch + 1), "
                          f"got {cu_seqlens_q.numel()} and {cu_seqlens_k.numel()}")
    for name, given, lens in (("max_seqlen_q", max_seqlen_q, lengths[0]), ("max_seqlen_k", max_seqlen_k, lengths[1])):
        if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < max(lens)):
            raise LaunchError(f"argument '{name}' must be an int >= the longest sequence ({max(lens)}), got {given!r}")
    return lengths


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, window=None, cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
              return_lse: bool = False, out=None, lse_out=None, block_n: int | None = None, stages: int | None = None,
              sms: int | None = None, overlap: bool | None = None, pingpong: bool | None = None,
              q_stages: int | None = None, tile_table: bool | None = None, rescale_threshold=None,
              warpgroups: int | None = None, direct_store: bool | None = None,
              o_in_q: bool | None = None, q_scale=None, k_scale=None, v_scale=None, v_transposed: bool = False,
              exp2_polynomial: int | None = None):
    """Scaled dot-product attention forward: ``softmax(scale * q k^T [+ mask]) v``.

    Forward only: there is no backward (autograd does not see the call; the result has no ``grad_fn`` even when
    q, k or v require grad).

    Args:
        q: (batch, seqlen_q, heads, head_dim) torch.bfloat16 or torch.float16 CUDA tensor (torch is
            required; other array types are refused; under ``TSJIT_INTERPRET=1`` a CPU tensor, run on the
            CPU interpreter with ``sms`` defaulting to :data:`INTERPRETER_SMS`), last dimension contiguous,
            other strides positive multiples of 16 bytes, no ``expand()``ed views (FlashAttention's layout;
            ``scaled_dot_product_attention``'s (batch, heads, seqlen, head_dim) tensors are passed as
            ``q.transpose(1, 2)``, read in place); with ``cu_seqlens_q``, packed (total_q, heads, head_dim).
        k, v: (batch, seqlen_k, kv_heads, head_dim) (packed: (total_k, kv_heads, head_dim)), same dtype;
            ``kv_heads`` divides ``heads`` (GQA/MQA: query head ``h`` uses KV head ``h // (heads // kv_heads)``;
            K and V are not copied).
        causal: mask keys after the query, bottom-right aligned as in FlashAttention 2 (row ``i`` sees keys
            ``j <= i + seqlen_k - seqlen_q``; the usual causal mask when the lengths are equal).  Rows that
            see no key give 0 and LSE -inf.
        scale: softmax scale, default ``1 / sqrt(head_dim)``; finite and > 0.
        window: sliding window ``(left, right)``: row ``i`` sees keys ``i + d - left <= j <= i + d + right``
            (``d = seqlen_k - seqlen_q``; None or -1 for an unbounded side; with ``causal`` right is 0), as
            FlashAttention's ``window_size``.  KV tiles no row of a Q tile sees are skipped.
        cu_seqlens_q, cu_seqlens_k: variable-length batches: (batch + 1) torch.int32 prefix sums of the
            sequence lengths into the packed q and k / v (FlashAttention's varlen API; no padding; lengths 0
            allowed).  Reading them costs one device-to-host copy (the tile table is built from them).
        max_seqlen_q, max_seqlen_k: optional with cu_seqlens (checked against the lengths).
        return_lse: also return the log-sum-exp per row, (batch, heads, seqlen_q) torch.float32 (natural log;
            packed: (heads, total_q)).
        out: optional output tensor (q's shape and dtype, same layout rules as q); it shares no memory with k or
            v, and with q only by being q itself.
        lse_out: optional contiguous torch.float32 tensor of the LSE's shape (implies ``return_lse``).
        block_n, stages: KV tile rows (``tsjit.examples.attention.BLOCK_NS``) and ring depth (an int >= 1 whose
            ring fits the shared memory); defaults per
            head_dim (``tsjit.examples.attention.DEFAULT_CONFIG``; for long key sequences of a fixed-length problem
            without a window whose tile options are all None, ``LONG_KV_CONFIG`` (causal) or
            ``LONG_KV_FULL_CONFIG`` with O staged in Q:
            ``tsjit.examples.attention_config.default_kv_tiles``).
        sms: CTAs of the persistent grid, an int >= 1 (default: the device's multiprocessor count; under the CPU
            interpreter :data:`INTERPRETER_SMS`).
        overlap: software-pipeline each warpgroup's loop (the softmax of a KV tile runs while the previous
            tile's PV wgmma is in flight); False: one tile at a time (default per head_dim:
            ``tsjit.examples.attention.DEFAULT_OVERLAP``).
        pingpong: the two warpgroups take turns at the tensor cores through named barriers (default per
            head_dim: ``tsjit.examples.attention.DEFAULT_PINGPONG``); only with ``overlap``.
        q_stages: stages of the Q ring (1 or 2; default ``DEFAULT_Q_STAGES`` per head_dim).
        tile_table: order the work tiles by a host-built table (``tsjit.examples.attention_tiles.tile_table``:
            longest first, balanced over the CTAs); default: with a causal mask, a window or cu_seqlens (which
            need it); False: the grid order (a head's tiles consecutive, longest first under a causal mask).
        rescale_threshold: conditional rescaling: a warp's running row maxima move only when one grew by more
            than this many powers of 2 (the output is rescaled only then); a number in [0, 16], or ``-1`` for a
            rescale after every KV tile (default per head_dim: ``DEFAULT_RESCALE_THRESHOLD``).  0 rounds as -1
            does; above 0 the largest P of a row is rounded too (a larger error:
            :func:`tsjit.examples.attention_softmax.online_softmax`).
        warpgroups: consumer warpgroups of 64 Q rows each: 2 (128-row Q tiles), or 3 (192 rows; head_dim 64
            only, whose registers fit 160 per thread); default ``DEFAULT_WARPGROUPS`` per head_dim.
        direct_store: store O from registers (True) rather than through a shared-memory staging buffer and TMA
            (False; its 32 KiB at head_dim 128 free room for larger KV tiles); default
            ``tsjit.examples.attention_config.DEFAULT_DIRECT_STORE`` per head_dim, always with cu_seqlens and
            head_dim 256 (whose staging buffer would not fit).
        o_in_q: stage O for its TMA stores in the work tile's Q buffer rather than a buffer of its own (room for
            larger KV tiles); default ``tsjit.examples.attention_config.DEFAULT_O_IN_Q`` where O is not stored
            from registers.

        q_scale, k_scale, v_scale: fp8 inputs (q, k, v all torch.float8_e4m3fn): the per-tensor dequantization
            scales (finite numbers > 0, default 1.0): the result is that of ``q_scale * q`` etc., written to a
            torch.bfloat16 ``out`` (:mod:`tsjit.ops.attention_fp8`, FlashAttention-3's fp8 forward: P rounded to
            e4m3).  fp8 takes fixed-length and packed (cu_seqlens) batches, with the default schedule (``overlap``
            and ``warpgroups`` keep their defaults; ``rescale_threshold`` default
            ``tsjit.examples.attention_fp8.default_rescale_threshold``); ``block_n`` is 64, 128, 160, 192, 224 or 256
            (default ``tsjit.examples.attention_fp8.default_config``).
        v_transposed: fp8 only: ``v`` is already in the kernel's layout, ``tsjit.ops.attention_fp8.transpose_v_fp8
            (v)`` ((batch, kv_heads, head_dim, keys padded to 16); packed: ``transpose_v_fp8(v, cu_seqlens_k)``);
            otherwise each call transposes V (one launch of a transpose kernel that reads and writes V once, counted
            in the call's time; packed: after a scatter of V to the sequences' 16-key aligned starts).
        exp2_polynomial: fp8 only: of every 16 exponentials of P, how many run on the FMA pipe (a cubic, relative
            error 7.5e-5: ``tsjit.examples.attention_softmax.exp2_polynomial``) instead of the MUFU unit, an
            int in [0, 16] (default ``tsjit.examples.attention_fp8.default_exp2_polynomial``: 3 at head_dim 128
            without a causal mask, else 0).

    Returns:
        ``out``, or ``(out, lse)`` with ``return_lse``.  Where grad mode is on and q, k or v requires grad, ``out``
        is recorded for autograd: its ``.backward()`` runs ``tsjit.ops.attention_backward`` (head_dim 64 / 128,
        causal or not, GQA; the LSE is not differentiable).

    Raises:
        LaunchError: torch is not installed, or an argument is not a CUDA torch tensor (not checked under
            ``TSJIT_INTERPRET=1``, except for fp8, which needs a GPU); an unsupported head_dim
            (64, 128 and 256 are supported) or dtype, a layout TMA cannot address, mismatched shapes/devices,
            bad cu_seqlens (both or neither), window, scale, stages or sms, each naming the argument; with inputs
            that require grad, an argument the backward does not support (window, cu_seqlens, fp8, out, lse_out) or
            head_dim 256.
    """
    torch = _torch(q)
    if stages is not None or sms is not None:
        _check_counts(stages=stages, sms=sms)
    if wants_grad(q, k, v, torch):          # recorded for autograd: .backward() runs tsjit.ops.attention_backward
        given = {"window": window, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k, "out": out,
                 "lse_out": lse_out, "q_scale": q_scale, "k_scale": k_scale, "v_scale": v_scale,
                 "exp2_polynomial": exp2_polynomial, "v_transposed": v_transposed or None}
        options = dict(block_n=block_n, stages=stages, sms=sms, overlap=overlap, pingpong=pingpong, q_stages=q_stages,
                       tile_table=tile_table, rescale_threshold=rescale_threshold, warpgroups=warpgroups,
                       direct_store=direct_store, o_in_q=o_in_q)
        return differentiable_attention(attention, q, k, v, causal=causal, scale=scale, return_lse=return_lse,
                                        refused=[name for name, value in given.items() if value is not None],
                                        options=options)
    fp8 = tuple(getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name))
    if any(isinstance(t, torch.Tensor) and t.dtype in fp8 for t in (q, k, v)):
        lengths = None
        if cu_seqlens_q is not None or cu_seqlens_k is not None:
            lengths = _check_varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, torch)
        for name, value, default in (("overlap", overlap, True), ("warpgroups", warpgroups, 2), ("o_in_q", o_in_q, False),
                                     ("direct_store", direct_store, None)):
            if value is not None and value != default:
                raise LaunchError(f"tsjit.ops.attention: argument '{name}' = {value!r} is not supported with fp8 "
                                  f"inputs (the fp8 forward runs the default schedule); leave it None")
        _check_causal(causal)
        left, right = _window_bounds(window, causal)
        return attention_fp8(q, k, v, causal=causal, scale=scale, left=left, right=right,
                             q_scale=1.0 if q_scale is None else q_scale, k_scale=1.0 if k_scale is None else k_scale,
                             v_scale=1.0 if v_scale is None else v_scale, v_transposed=bool(v_transposed),
                             return_lse=return_lse, out=out, lse_out=lse_out, block_n=block_n, stages=stages, sms=sms,
                             pingpong=pingpong, q_stages=q_stages, tile_table=tile_table,
                             exp2_polynomial=exp2_polynomial, rescale_threshold=rescale_threshold, torch=torch,
                             lengths=lengths,
                             cu_seqlens=(cu_seqlens_q, cu_seqlens_k))
    for name, value in (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale)):
        if value is not None:
            raise LaunchError(f"tsjit.ops.attention: argument '{name}' is the dequantization scale of fp8 inputs; "
                              f"q, k, v here are {getattr(q, 'dtype', type(q).__name__)} (pass torch.float8_e4m3fn "
                              f"tensors, or leave {name} None)")
    if v_transposed:
        raise LaunchError("tsjit.ops.attention: argument 'v_transposed' applies to fp8 inputs only (a bf16 / fp16 V "
                          "is (batch, seqlen_k, kv_heads, head_dim)); leave it False")
    if exp2_polynomial is not None:
        raise LaunchError("tsjit.ops.attention: argument 'exp2_polynomial' applies to fp8 inputs only (the bf16 / fp16 "
                          "forward computes every exponential on the MUFU unit); leave it None")
    fast_key = None
    if cu_seqlens_q is None and cu_seqlens_k is None and out is not None and (lse_out is not None or not return_lse) \
            and all(type(t) is torch.Tensor for t in (q, k, v, out)) and (window is None or type(window) is tuple) \
            and q.is_cuda:                                      # a CPU q: the checks below name it (no stream)
        fast_key = (_tensor_key(q), _tensor_key(k), _tensor_key(v), _tensor_key(out), _tensor_key(lse_out), causal,
                    scale, window, return_lse, block_n, stages, sms, overlap, pingpong, q_stages, tile_table,
                    rescale_threshold, warpgroups, direct_store, o_in_q, env.code_state(),  # a launch packed for the
                    torch.cuda.current_stream(q.device).cuda_stream)   # release build is not the TSJIT_DEBUG=1 one
        try:
            bound = _FAST.get(fast_key)
        except TypeError:                                   # an unhashable argument: the full path explains it
            bound, fast_key = None, None
        if bound is not None:
            bound[0](fast_key[-1])
            return (out, lse_out) if return_lse else out
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    lengths = None
    if varlen:
        lengths = _check_varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, torch)
        for name, t in (("v", v), ("out", out)):
            if t is not None and (not isinstance(t, torch.Tensor) or t.dim() != 3):
                raise LaunchError(f"with cu_seqlens, argument '{name}' must be a packed (tokens, heads, head_dim) "
                                  f"tensor")
        q4, k4, v4 = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        out4 = None if out is None else out.unsqueeze(0)
    else:
        q4, k4, v4, out4 = q, k, v, out
    scale = _check_arguments(q4, k4, v4, out4, causal, scale, torch)
    left, right = _window_bounds(window, causal)
    batch, seqlen_q, heads, head_dim = q4.shape
    seqlen_k, kv_heads = k4.shape[1], k4.shape[2]
    long_eligible = not varlen and left is None and right == (0 if causal else None) and all(
        option is None for option in (block_n, stages, q_stages, o_in_q, direct_store))
    default_n, default_stages, staged_in_q, default_q_stages = default_kv_tiles(head_dim, seqlen_k, long_eligible,
                                                                               causal)
    if long_eligible and staged_in_q:
        o_in_q = True
    if long_eligible:
        q_stages = default_q_stages
    block_n = default_n if block_n is None else block_n
    stages = default_stages if stages is None else stages
    if overlap is None:
        overlap = program.DEFAULT_OVERLAP[head_dim]
    if pingpong is None:
        pingpong = program.DEFAULT_PINGPONG[head_dim]
    q_stages = program.DEFAULT_Q_STAGES[head_dim] if q_stages is None else q_stages
    if q_stages not in (1, 2):
        raise LaunchError(f"argument 'q_stages' must be 1 or 2, got {q_stages!r}")
    rescale_threshold = _check_rescale_threshold(program.DEFAULT_RESCALE_THRESHOLD[head_dim]
                                                 if rescale_threshold is None else rescale_threshold)
    if warpgroups is None:
        warpgroups = program.DEFAULT_WARPGROUPS[head_dim]
    if warpgroups not in (2, 3) or isinstance(warpgroups, bool) or (warpgroups == 3 and head_dim != 64):
        raise LaunchError(f"argument 'warpgroups' must be 2, or 3 with head_dim 64 (the registers of larger head_dims "
                          f"do not fit 160 per thread), got {warpgroups!r} with head_dim {head_dim}")
    block_m = 64 * warpgroups
    if block_n not in program.BLOCK_NS:
        raise LaunchError(f"argument 'block_n' must be one of {list(program.BLOCK_NS)}, got {block_n!r}")
    if out4 is None:
        out4 = torch.empty_like(q4, memory_format=torch.contiguous_format)
    lse_shape = (heads, seqlen_q) if varlen else (batch, heads, seqlen_q)
    lse, return_lse = _lse_buffer(lse_out, return_lse, lse_shape, q.device, torch)
    result_out = out if out is not None else (out4.squeeze(0) if varlen else out4)
    if batch == 0 or seqlen_q == 0 or heads == 0:
        return (result_out, lse) if return_lse else result_out
    if seqlen_k == 0 or (lengths is not None and not any(lengths[0])):
        out4.zero_()
        if return_lse:
            lse.fill_(float("-inf"))
        return (result_out, lse) if return_lse else result_out
    interpreted = env.interpret_requested()
    if sms is None:
        sms = INTERPRETER_SMS if interpreted else torch.cuda.get_device_properties(q.device).multi_processor_count
    direct = varlen or head_dim == 256 or (program.DEFAULT_DIRECT_STORE[head_dim] if direct_store is None
                                           else direct_store)
    if direct_store is False and direct:
        raise LaunchError(f"argument 'direct_store' cannot be False with {'cu_seqlens' if varlen else 'head_dim 256'} "
                          f"(O is stored from registers there); leave it None")
    if o_in_q is None:
        o_in_q = program.DEFAULT_O_IN_Q[head_dim] and not direct
    elif o_in_q and direct:
        raise LaunchError("argument 'o_in_q' cannot be True where O is stored from registers (direct_store, "
                          "cu_seqlens, head_dim 256)")
    store = out4
    if direct and not (out4.stride(2) == head_dim and out4.stride(0) == seqlen_q * out4.stride(1)):
        store = torch.empty_like(q4, memory_format=torch.contiguous_format)    # rows of (heads * head_dim)
    ordered = causal or left is not None or right is not None
    if tile_table is None:
        tile_table = varlen or ordered
    if varlen and not tile_table:
        raise LaunchError("argument 'tile_table' cannot be False with cu_seqlens (the table lists the sequences' "
                          "tiles); leave it None")
    table = None
    if tile_table:
        seqlens = lengths if varlen else ([seqlen_q] * batch, [seqlen_k] * batch)
        table = _device_table(tiles.tile_table(seqlens[0], seqlens[1], heads, block_n, causal, sms, (left, right),
                                               block_m, causal and not direct), q.device, torch)
        num_tiles = table.shape[0]
    else:
        num_tiles = batch * heads * -(-seqlen_q // block_m)
    if num_tiles == 0:
        return (result_out, lse) if return_lse else result_out
    grid = max(1, min(num_tiles, sms))            # the table of min(tiles, sms) CTAs is the same table
    dummy = _dummy(q.device, torch)
    if return_lse:
        lse_arg = lse.unsqueeze(0) if varlen else lse
    else:     # the grid order reads the batch from the LSE argument's first dimension
        lse_arg = torch.empty((batch, 1, 1), dtype=torch.float32, device=q.device)
    q_map = TensorMap(q4, (1, block_m, 1, program.BOX), swizzle="128B")
    k_map = TensorMap(k4, (1, block_n, 1, program.BOX), swizzle="128B")
    v_map = TensorMap(v4, (1, block_n, 1, program.BOX), swizzle="128B")
    o_map = TensorMap(store, (1, 64, 1, program.BOX), swizzle="128B")
    out2d = store.as_strided((store.shape[0] * store.shape[1], heads * head_dim), (store.stride(1), 1)) if direct \
        else dummy["out"]
    stream = None if interpreted else torch.cuda.current_stream(q.device).cuda_stream
    rest = (table if table is not None else dummy["table"], cu_seqlens_q if varlen else dummy["cu"],
            cu_seqlens_k if varlen else dummy["cu"], seqlen_q, seqlen_k, heads, heads // kv_heads,
            program.log2_scale(scale), 0 if left is None else left, 0 if right is None else right, head_dim, block_n,
            stages, right is not None, return_lse, bool(overlap), bool(pingpong) and bool(overlap), q_stages,
            left is not None, table is not None, varlen, direct, float(rescale_threshold), warpgroups, bool(o_in_q))
    if fast_key is not None and store is out4:
        # a packed launch over non-owning views of the same memory (it keeps no user tensor alive); a later call
        # with the same tensors' metadata, addresses, options and stream is one driver call
        bound = _pack(q4, k4, v4, store, out2d, lse_arg, rest, block_m, block_n, grid, torch)
        if bound is not None:
            if len(_FAST) >= FAST_ENTRIES:
                _FAST.pop(next(iter(_FAST)))
            _FAST[fast_key] = (bound, lse_arg, rest[0])     # the LSE placeholder and the table are ours: kept
            bound(stream)
            return (result_out, lse) if return_lse else result_out
    program.attention_forward[(grid,), (program.threads(warpgroups),)](q_map, k_map, v_map, o_map, out2d, lse_arg,
                                                                       *rest, stream=stream)
    if store is not out4:
        out4.copy_(store)
    return (result_out, lse) if return_lse else result_out


def _pack(q4, k4, v4, store, out2d, lse_arg, rest, block_m, block_n, grid, torch):
    """The packed launch (``Kernel.bind``) of these arguments over non-owning views, or None (with a warning)
    where it cannot be built: the caller then launches unpacked, so the fast path never costs a working call."""
    try:
        maps = [TensorMap(_device_view(t, torch), box, swizzle="128B") for t, box in (
            (q4, (1, block_m, 1, program.BOX)), (k4, (1, block_n, 1, program.BOX)),
            (v4, (1, block_n, 1, program.BOX)), (store, (1, 64, 1, program.BOX)))]
        arrays = [_device_view(t, torch) for t in (out2d, lse_arg, rest[0], rest[1], rest[2])]
        return program.attention_forward.bind(*maps, *arrays, *rest[3:], grid=(grid,),
                                              block=(program.threads(block_m // 64),))
    except Exception as err:  # noqa: BLE001 -- any failure here falls back to the plain launch, which reports
        warn(f"tsjit.ops.attention: the packed launch could not be built ({type(err).__name__}: {err}); "
             f"launching unpacked (slower on the host)")
        return None


_FAST: dict = {}                 # fast-path key (tensor metadata + addresses + options + stream) -> packed launch
FAST_ENTRIES = 256
