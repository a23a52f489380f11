"""The argument checks ``tsjit.ops.attention`` shares between its bf16/fp16 and fp8 forwards: torch itself, the
tensors TMA reads, the mask's window, and the device-side tile table and placeholder tensors (cached)."""
from __future__ import annotations

import math
import numbers

from tsjit import env
from tsjit.errors import LaunchError
from tsjit.lang.dtypes import BFloat16, Float8E4M3, Float16, Float32, Int32
from tsjit.ops.operands import arrays_overlap
from tsjit.runtime.arrays import DeviceArray

__all__ = ["torch_module", "check_tensor", "check_cuda", "window_bounds", "device_table", "check_cu_seqlens",
           "check_rescale_threshold", "check_counts", "check_out_apart", "dummy_tensors", "tensor_key", "device_view", "lse_buffer",
           "TMA_STRIDE_BYTES"]

TMA_STRIDE_BYTES = 16          # TMA: global strides and the base address are multiples of 16 bytes


def torch_module(q):
    """The torch module; without torch, a LaunchError naming argument ``q`` (attention takes only
    CUDA torch tensors)."""
    try:
        import torch  # lazily: torch is optional (only tsjit.ops.attention needs it)
    except ImportError:
        raise LaunchError(f"tsjit.ops.attention: argument 'q' is a {type(q).__module__}.{type(q).__qualname__}, "
                          f"but attention needs CUDA torch tensors (q, k, v) and torch is not installed; "
                          f"install PyTorch with CUDA and pass torch.bfloat16/torch.float16 tensors on the GPU "
                          f"(without a GPU: a CPU build of torch, CPU tensors and TSJIT_INTERPRET=1 run the bf16 / "
                          f"fp16 forward on the CPU interpreter)") from None
    return torch


def check_tensor(name: str, t, torch, dtypes=("bfloat16", "float16"),
                 layout="(batch, seqlen, heads, head_dim)", require_cuda: bool = True) -> None:
    """Check that ``t`` is a 4-D CUDA torch tensor of one of ``dtypes`` (torch attribute names) that TMA can
    address: last dimension contiguous, other strides positive (no broadcast) and, like the base address,
    multiples of 16 bytes.
    ``require_cuda=False`` leaves the device to a later :func:`check_cuda` (so that a shape or head_dim
    error is reported first, also for CPU tensors).

    Raises:
        LaunchError: naming argument ``name``, what it is and what to pass instead.
    """
    if not isinstance(t, torch.Tensor):
        raise LaunchError(f"tsjit.ops.attention: argument '{name}' must be a torch tensor on a CUDA device, "
                          f"got {type(t).__name__}; attention takes torch tensors only: CUDA ones, or CPU ones "
                          f"under TSJIT_INTERPRET=1 (torch.from_numpy(x) wraps a numpy array)")
    if t.dim() != 4:
        raise LaunchError(f"argument '{name}' must have 4 dimensions {layout} as in "
                          f"FlashAttention, got shape {tuple(t.shape)}")
    if t.dtype not in tuple(getattr(torch, d) for d in dtypes):
        names = " and ".join(f"torch.{d}" for d in dtypes)
        raise LaunchError(f"argument '{name}' has dtype {t.dtype}; tsjit.ops.attention supports {names} here")
    fix = ("pass a tensor of its own (torch.empty of that shape) or none" if name.startswith("out")
           else f"pass {name}.contiguous()")          # a copy of out would not receive the result
    if t.stride(3) != 1 and t.shape[3] > 1:
        raise LaunchError(f"argument '{name}' must have a contiguous last dimension (stride 1), got strides "
                          f"{tuple(t.stride())}; {fix}")
    itemsize = t.element_size()
    for axis in range(3):
        if t.shape[axis] > 1 and t.stride(axis) <= 0:
            raise LaunchError(f"argument '{name}' has stride {t.stride(axis)} in dimension {axis} (a broadcast view, "
                              f"as expand() makes); TMA needs positive strides; {fix}")
        if t.shape[axis] > 1 and (t.stride(axis) * itemsize) % TMA_STRIDE_BYTES:
            raise LaunchError(f"argument '{name}' has stride {t.stride(axis)} in dimension {axis}, "
                              f"{t.stride(axis) * itemsize} bytes; TMA needs strides that are multiples of 16 "
                              f"bytes; {fix}")
    if require_cuda:
        check_cuda(name, t)
    if t.data_ptr() % TMA_STRIDE_BYTES:
        raise LaunchError(f"argument '{name}' starts at an address that is not 16-byte aligned; TMA needs a "
                          f"16-byte aligned base (pass {name}.clone())")


def check_cuda(name: str, t) -> None:
    """Raise a LaunchError naming argument ``name`` unless the torch tensor ``t`` is on a CUDA device."""
    if not t.is_cuda:
        raise LaunchError(f"argument '{name}' is on {t.device}; tsjit.ops.attention needs CUDA tensors "
                          f"(move it with {name}.cuda())" + ("; under TSJIT_INTERPRET=1 the bf16 / fp16 forward takes "
                                                             "CPU tensors, the fp8 one needs a GPU"
                                                             if env.interpret_requested() else
                                                             "; without a GPU, TSJIT_INTERPRET=1 runs the bf16 / fp16 "
                                                             "forward on CPU tensors (the CPU interpreter)"))


def window_bounds(window, causal):
    """(left, right) of the mask: None for an unbounded side; causal masking is right = 0."""
    if window is None:
        left = right = None
    elif isinstance(window, (tuple, list)) and len(window) == 2:
        left, right = (None if w is None or (isinstance(w, int) and not isinstance(w, bool) and w < 0) else w
                       for w in window)
    else:
        raise LaunchError(f"argument 'window' must be None or (left, right) keys before / after the diagonal (None "
                          f"or -1: unbounded), got {window!r}")
    for name, w in (("left", left), ("right", right)):
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w >= 2 ** 30):
            raise LaunchError(f"argument 'window' {name} bound must be an int (or None / -1 for unbounded), got {w!r}")
    if causal:
        right = 0 if right is None else min(right, 0)
    return left, right


def device_table(host, device, torch, dtype=None):
    """The tile table (or another host-built numpy array, uploaded as ``dtype``, default torch.int32) on the device,
    cached by the host array's identity (tile_table caches its results, so a repeated shape uploads nothing)."""
    key = (id(host), str(device))
    entry = _TABLES.get(key)
    if entry is None or entry[0] is not host:
        if len(_TABLES) > 64:
            _TABLES.clear()
        entry = _TABLES[key] = (host, torch.tensor(host, dtype=torch.int32 if dtype is None else dtype).to(device))
    return entry[1]


def check_cu_seqlens(name: str, cu, total: int, device, torch) -> list:
    """The sequence lengths (host ints) of the prefix sums ``cu`` of a packed variable-length batch (one
    device-to-host copy).

    Raises:
        LaunchError: ``cu`` (argument ``name``) is not a 1-D torch.int32 tensor of >= 2 entries on ``device`` that
            starts at 0, never decreases and ends at most at the ``total`` packed tokens.
    """
    if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.dtype != torch.int32 or cu.numel() < 2 \
            or cu.device != device:
        raise LaunchError(f"argument '{name}' must be a 1-D torch.int32 tensor of batch + 1 >= 2 prefix sums on "
                          f"{device}, got {cu.dtype if isinstance(cu, torch.Tensor) else type(cu).__name__}"
                          f"{' ' + str(tuple(cu.shape)) if isinstance(cu, torch.Tensor) else ''}")
    host = cu.cpu().tolist()
    if host[0] != 0 or any(b < a for a, b in zip(host, host[1:])) or host[-1] > total:
        raise LaunchError(f"argument '{name}' must start at 0, never decrease and end at most at the "
                          f"{total} packed tokens, got {host[:8]}{' ...' if len(host) > 8 else ''}")
    return [b - a for a, b in zip(host, host[1:])]


_TABLES: dict = {}


def dummy_tensors(device, torch):
    """Placeholder tensors for the kernel arguments a configuration does not use (cached per device)."""
    key = str(device)
    if key not in _DUMMIES:
        _DUMMIES[key] = {"table": torch.zeros((1, 2), dtype=torch.int32, device=device),
                         "cu": torch.zeros((2,), dtype=torch.int32, device=device),
                         "out": torch.empty((1, 8), dtype=torch.bfloat16, device=device)}
    return _DUMMIES[key]


_DUMMIES: dict = {}


def lse_buffer(lse_out, return_lse: bool, shape: tuple, device, torch):
    """The float32 log-sum-exp buffer of ``shape`` (``(batch, heads, seqlen_q)``, or ``(heads, total_q)`` for
    varlen) the forward writes: ``lse_out`` when given (then the LSE is returned whatever ``return_lse`` says),
    a new tensor on ``device`` when ``return_lse``, else None.  Returns ``(lse, return_lse)``.

    Raises:
        LaunchError: ``lse_out`` is not a contiguous torch.float32 tensor of ``shape`` on ``device``.
    """
    if lse_out is not None:
        if not isinstance(lse_out, torch.Tensor) or tuple(lse_out.shape) != tuple(shape) or \
                lse_out.dtype != torch.float32 or lse_out.device != device or not lse_out.is_contiguous():
            got = (f"{'a contiguous' if lse_out.is_contiguous() else 'a non-contiguous'} {lse_out.dtype} tensor of "
                   f"shape {tuple(lse_out.shape)} on {lse_out.device}" if isinstance(lse_out, torch.Tensor)
                   else type(lse_out).__name__)
            raise LaunchError(f"argument 'lse_out' must be a contiguous torch.float32 tensor of shape {tuple(shape)} "
                              f"on {device} ((batch, heads, seqlen_q); packed: (heads, total_q)), got {got}")
        return lse_out, True
    if return_lse:
        return torch.empty(shape, dtype=torch.float32, device=device), True
    return None, False


def check_rescale_threshold(value) -> float:
    """``rescale_threshold`` as a float: a number in [0, 16] (powers of 2), or -1 for a rescale after every KV tile.

    Raises:
        LaunchError: any other value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value == -1 or 0 <= value <= 16):
        raise LaunchError(f"argument 'rescale_threshold' must be a number in [0, 16] or -1 (rescale after every KV "
                          f"tile), got {value!r}")
    return float(value)


def check_counts(**counts) -> None:
    """Check the launch-shape options given by keyword (``stages=``, ``sms=``, ...): each None (its default) or an
    int >= 1.  Checked before anything compiles, so that a 0 or a float is named here, not as a pipeline rule or a
    launch field of the kernel.

    Raises:
        LaunchError: naming the first argument that is not an int >= 1.
    """
    for name, value in counts.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise LaunchError(f"tsjit.ops.attention: argument '{name}' must be an int >= 1 (or None for the "
                              f"default), got {value!r}")


def check_out_apart(out, q, k, v) -> None:
    """Refuse an ``out`` that shares memory with ``k`` or ``v`` (every query tile reads all of them: an O store
    would corrupt keys other tiles still read), or with ``q`` other than by being ``q`` itself (each tile reads its
    own Q rows before it writes the same O rows; a shifted view would overwrite other tiles' Q rows).

    Raises:
        LaunchError: naming the argument ``out`` shares memory with.
    """
    def layout(t):
        return t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.element_size()

    if 0 in tuple(out.shape):
        return                                   # no element to overwrite (torch gives empty tensors address 0)
    for name, t in (("k", k), ("v", v), ("q", q)):
        if (name == "q" and layout(out) == layout(q)) or 0 in tuple(t.shape):
            continue
        if out.data_ptr() == t.data_ptr():
            raise LaunchError(f"argument 'out' is the memory of argument '{name}', which every query tile "
                              f"reads: the result would be wrong. Pass a separate out (or none: a new tensor "
                              f"is returned)")
        if arrays_overlap(layout(out), layout(t)):
            raise LaunchError(f"argument 'out' overlaps the memory of argument '{name}' (some elements of out are "
                              f"elements of {name}), which the query tiles read: the result would be wrong. Pass an "
                              f"out that shares no memory with k and v (out=q itself is fine), or none")


def tensor_key(t):
    """What a packed launch depends on of a tensor argument: shape, strides, dtype, address, device (None: not
    given)."""
    return None if t is None else (tuple(t.shape), t.stride(), t.dtype, t.data_ptr(), t.device)


def device_view(t, torch):
    """A :class:`~tsjit.runtime.arrays.DeviceArray` over the torch tensor ``t``'s memory that does not own it (a
    packed launch built from it pins nothing): torch.bfloat16 / float16 / float32 / int32 / float8_e4m3fn."""
    dtypes = {torch.bfloat16: BFloat16, torch.float16: Float16, torch.float32: Float32, torch.int32: Int32,
              torch.float8_e4m3fn: Float8E4M3}
    return DeviceArray(tuple(t.shape), dtypes[t.dtype], strides=t.stride(), data_ptr=t.data_ptr())


def check_kv_heads(heads: int, kv_heads: int) -> None:
    """GQA/MQA: ``k``/``v``'s head count must divide ``q``'s.

    Raises:
        LaunchError: naming ``k`` and both counts.
    """
    if kv_heads < 1 or heads % kv_heads:
        raise LaunchError(f"argument 'k' has {kv_heads} heads, which must divide the {heads} heads of 'q' (GQA/MQA)")


def check_causal(causal) -> None:
    """Raises LaunchError unless ``causal`` is a bool (``0``/``1`` or a tensor would hide a typo)."""
    if not isinstance(causal, bool):
        raise LaunchError(f"argument 'causal' must be a bool, got {causal!r}")


def softmax_scale(scale, head_dim: int) -> float:
    """The softmax scale: ``scale`` (a finite real > 0) or, when None, ``1 / sqrt(head_dim)``.

    Raises:
        LaunchError: ``scale`` is a bool, not a real number, not finite or <= 0.
    """
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale) or scale <= 0:
        raise LaunchError(f"argument 'scale' must be a finite number > 0 (default 1/sqrt(head_dim)), got {scale!r}")
    return scale
