"""How ``tsjit.ops.matmul`` reads its array arguments: any GPU array (torch tensor, tsjit
``DeviceArray``, ``__cuda_array_interface__`` / DLPack object) becomes an :class:`Operand`
(rank-3 ``(batch, rows, cols)`` shape and element strides, dtype, address); :func:`operand_layout`
says whether TMA can read it in place and with which major; :func:`scale_operand` reads the
fp8 dequantization scales; :func:`stream_handle` resolves the stream argument.

Layout rules (hardware facts): a TMA descriptor needs a 16-byte aligned base and 16-byte
multiples for every stride but the innermost, which must be 1 (CUDA driver API
``cuTensorMapEncodeTiled``); fp8 wgmma reads only K-major shared-memory operands (PTX ISA
§9.7.15.5.1: the transpose bits exist for 16-bit types only), so an fp8 operand whose K is not
contiguous is staged (copied into a K-major buffer, :mod:`tsjit.ops.staging`).
"""
from __future__ import annotations

import sys

from tsjit import env
from tsjit.errors import LaunchError, TsjitError
from tsjit.lang import dtypes as dt
from tsjit.runtime import streams
from tsjit.runtime.arrays import ArraySpec, DeviceArray, describe_array_argument, spec_from_object

TORCH_DTYPES = {"torch.bfloat16": dt.BFloat16, "torch.float16": dt.Float16, "torch.float32": dt.Float32,
                "torch.float8_e4m3fn": dt.Float8E4M3, "torch.float8_e5m2": dt.Float8E5M2}
FP8_DTYPES = ("Float8E4M3", "Float8E5M2")
#: types :func:`operand` recognized as torch tensors (the fast path of matmul checks membership)
TORCH_TYPES: set = set()
_TORCH_DTYPE_OBJECTS: dict = {}       # torch dtype object -> tsjit dtype, filled on first sight


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Operand:
    """One array argument as the planner sees it: rank-3 ``(batch, rows, cols)`` shape and element
    strides, dtype, data pointer, and the original object (kept alive)."""

    __slots__ = ("shape", "strides", "dtype", "ptr", "obj", "torch")

    def __init__(self, shape, strides, dtype, ptr, obj, is_torch):
        self.shape, self.strides, self.dtype, self.ptr, self.obj, self.torch = shape, strides, dtype, ptr, obj, is_torch

    def view(self, shape=None, strides=None) -> DeviceArray:
        """A DeviceArray over the same memory (optionally re-shaped / re-strided).  It does not keep
        the original alive: packed launches are reused only for calls that pass memory at the same
        addresses again."""
        return DeviceArray(shape or self.shape, self.dtype, strides=strides or self.strides, data_ptr=self.ptr)

    @property
    def signature(self):
        """What a plan depends on: shape, strides, dtype, 16-byte alignment of the address."""
        return (self.shape, self.strides, self.dtype, not self.ptr & 15)


def _rank_error(name: str, ranks, shape, op: str = "matmul"):
    return LaunchError(f"tsjit.ops.{op}: argument '{name}' must have rank {' or '.join(map(str, ranks))}; got "
                       f"shape {shape}")


def _described_operand(x, name: str, ranks, op: str = "matmul") -> Operand | None:
    """For ``explain``: an ``ArraySpec``, a host (numpy) array or a CPU torch tensor as an operand without
    memory (its fake address has exactly the spec's alignment), or None for anything else."""
    if hasattr(x, "data_ptr") and hasattr(x, "is_cuda") and hasattr(x, "stride"):
        if x.is_cuda:
            return None                           # a CUDA torch tensor: read as a device array (fp8 included)
        dtype = TORCH_DTYPES.get(str(x.dtype))    # a CPU one stands for a 16-byte aligned CUDA copy of it
        if dtype is None:
            raise LaunchError(f"tsjit.ops.{op}.explain: argument '{name}' has dtype {x.dtype}; expected "
                              f"{', '.join(TORCH_DTYPES)}")
        spec = ArraySpec(tuple(x.shape), dtype, tuple(x.stride()), 16)
    else:
        if not isinstance(x, ArraySpec):
            arg = describe_array_argument(x, name)
            if arg is None or arg.device_kind != "host":
                return None
        try:
            spec = spec_from_object(x, name)
        except TsjitError as exc:
            raise LaunchError(f"tsjit.ops.{op}.explain: argument '{name}': {exc}") from None
    shape, strides = tuple(spec.shape), tuple(spec.strides)
    if len(shape) not in ranks:
        raise _rank_error(name, ranks, shape, op)
    while len(shape) < 3:
        shape, strides = (1,) + shape, (0,) + strides
    return Operand(shape, strides, spec.dtype, spec.align, x, False)


def shape_dtype(value, op: str = "matmul"):
    """The tsjit dtype of ``explain``'s ``dtype=`` argument (the dtype of its shape-tuple arguments): a tsjit dtype,
    a torch dtype (``torch.bfloat16``, fp8 included) or a numpy dtype or name.

    Raises:
        LaunchError: ``value`` names no dtype, naming the argument.
    """
    found = value if isinstance(value, dt.DType) else TORCH_DTYPES.get(str(value))
    if found is None:
        try:
            found = dt.lookup(value)
        except TsjitError:
            found = None
    if found is None:
        raise LaunchError(f"tsjit.ops.{op}.explain: argument 'dtype' is {value!r}, which names no dtype; pass a "
                          f"tsjit, torch or numpy dtype (tsjit.BFloat16, torch.float8_e4m3fn, np.float16)")
    return found


def _host_hint() -> str:
    """What to do with a host array: on the CPU interpreter a DeviceArray copy, else a GPU copy."""
    if env.interpret_requested():
        return ("; under TSJIT_INTERPRET=1 copy it with tsjit.to_device(x) (the copy stays in host memory for the "
                "CPU interpreter)")
    return "; copy it with tsjit.to_device(x) (under TSJIT_INTERPRET=1 that array stays in host memory)"


def operand(x, name: str, ranks, described: bool = False, op: str = "matmul") -> Operand:
    """The :class:`Operand` of argument ``name`` (rank in ``ranks``, padded to rank 3 with leading 1s).

    ``described``: specs, host arrays and CPU torch tensors stand for device arrays (``explain``).
    ``op``: the calling op (``"matmul"`` / ``"bmm"``), for the messages.

    Raises:
        LaunchError: a CPU tensor, an unsupported dtype, a wrong rank, or not an array; names ``name``.
    """
    if described:
        described_op = _described_operand(x, name, ranks, op)
        if described_op is not None:
            return described_op
    if hasattr(x, "data_ptr") and hasattr(x, "is_cuda") and hasattr(x, "stride"):
        if not x.is_cuda:
            raise LaunchError(f"tsjit.ops.{op}: argument '{name}' is a CPU tensor; pass it on the GPU (x.cuda())"
                              + (_host_hint() if env.interpret_requested() else
                                 f"; tsjit.ops.{op}.explain takes CPU tensors (shapes only)"))
        dtype = _TORCH_DTYPE_OBJECTS.get(x.dtype)
        if dtype is None:
            dtype = TORCH_DTYPES.get(str(x.dtype))
            if dtype is not None:
                _TORCH_DTYPE_OBJECTS[x.dtype] = dtype
        if dtype is None:
            raise LaunchError(f"tsjit.ops.{op}: argument '{name}' has dtype {x.dtype}; expected torch.bfloat16, "
                              f"torch.float16, torch.float8_e4m3fn, torch.float8_e5m2 (or torch.float32 for bias / "
                              f"residual / out / scales)")
        shape, strides, ptr, is_torch = tuple(x.shape), tuple(x.stride()), x.data_ptr(), True
        TORCH_TYPES.add(type(x))
    else:
        arg = describe_array_argument(x, name)
        if arg is None or arg.device_kind != "cuda":
            what = "a host array" if arg is not None else type(x).__name__
            raise LaunchError(f"tsjit.ops.{op}: argument '{name}' must be a GPU array (torch CUDA tensor, "
                              f"tsjit.DeviceArray, __cuda_array_interface__ or DLPack); got {what}"
                              + (_host_hint() if arg is not None else ""))
        dtype, shape, strides, ptr, is_torch = arg.dtype, tuple(arg.shape), tuple(arg.strides), arg.data_ptr, False
    if len(shape) not in ranks:
        raise _rank_error(name, ranks, shape, op)
    while len(shape) < 3:
        shape, strides = (1,) + shape, (0,) + strides
    return Operand(shape, strides, dtype, ptr, x, is_torch)


def tma_matrix(op: Operand, contiguous_axis: int):
    """(batch, rows, cols) shape and strides of ``op`` stored with ``contiguous_axis`` (1 or 2 of the
    rank-3 shape) innermost, or None when TMA cannot read it in place."""
    shape, strides, size = op.shape, op.strides, op.dtype.itemsize
    other = 3 - contiguous_axis
    if shape[contiguous_axis] > 1 and strides[contiguous_axis] != 1:
        return None
    row_stride = strides[other] if shape[other] > 1 else ceil_div(shape[contiguous_axis] * size, 16) * 16 // size
    batch_stride = strides[0] if shape[0] > 1 else row_stride * shape[other]
    if op.ptr % 16 or (row_stride * size) % 16 or (batch_stride * size) % 16 or row_stride <= 0 or batch_stride <= 0:
        return None
    return (shape[0], shape[other], shape[contiguous_axis]), (batch_stride, row_stride, 1)


def operand_layout(op: Operand, k_axis: int):
    """(major, storage shape, storage strides) of an operand: K-major when its K axis (1 or 2) is
    contiguous, else MN-major when the other one is (16-bit types only), else None (needs the
    staging copy)."""
    majors = (("K", k_axis),) if op.dtype.name in FP8_DTYPES else (("K", k_axis), ("MN", 3 - k_axis))
    for major, axis in majors:
        layout = tma_matrix(op, axis)
        if layout is not None:
            return major, layout[0], layout[1]
    return None


#: above this many contiguous runs per operand :func:`shares_memory` answers True without enumerating them
_MAX_RUNS = 1 << 20


def _run_layout(shape, strides, itemsize):
    """(run length in bytes, outer (stride, extent)s) of an array's elements as contiguous runs: a unit-stride
    dimension is one run per index of the others; without one, every element is a run."""
    dims = sorted((s, n) for s, n in zip(strides, shape) if n > 1)
    if dims and dims[0][0] == 1:
        return dims[0][1] * itemsize, dims[1:]
    return itemsize, dims


def _run_starts(ptr, itemsize, outer):
    import numpy as np   # lazily: as in tsjit.lang.dtypes
    starts = np.array([ptr], dtype=np.int64)
    for stride, extent in outer:
        starts = (starts[:, None] + np.arange(extent, dtype=np.int64) * (stride * itemsize)).ravel()
    return np.sort(starts)


def arrays_overlap(x, y) -> bool:
    """Whether two strided arrays, each ``(address, shape, element strides, itemsize)``, have a byte in common
    (exact; True without counting when one has more than ``_MAX_RUNS`` contiguous runs): their address ranges
    first, then, where those meet (two slices of one buffer), their contiguous runs."""
    import numpy as np   # lazily: as in tsjit.lang.dtypes
    ranges = []
    for ptr, shape, strides, itemsize in (x, y):
        if any(s < 0 for s in strides):
            return True                          # not met from torch or tsjit arrays: assume the worst
        if 0 in shape:
            return False
        ranges.append((ptr, ptr + sum((n - 1) * s for s, n in zip(strides, shape)) * itemsize + itemsize))
    (x_lo, x_hi), (y_lo, y_hi) = ranges
    if x_hi <= y_lo or y_hi <= x_lo:
        return False
    (x_length, x_outer), (y_length, y_outer) = _run_layout(*x[1:]), _run_layout(*y[1:])
    if max(int(np.prod([n for _, n in outer])) for outer in (x_outer, y_outer)) > _MAX_RUNS:
        return True
    x_starts, y_starts = _run_starts(x[0], x[3], x_outer), _run_starts(y[0], y[3], y_outer)
    last = np.searchsorted(x_starts, y_starts + y_length, side="left") - 1   # x's last run starting before each y end
    return bool(np.any((last >= 0) & (x_starts[np.maximum(last, 0)] + x_length > y_starts)))


def shares_memory(x: Operand, y: Operand) -> bool:
    """:func:`arrays_overlap` of two operands."""
    return arrays_overlap((x.ptr, x.shape, x.strides, x.dtype.itemsize), (y.ptr, y.shape, y.strides, y.dtype.itemsize))


def staging_reason(op: Operand, k_axis: int) -> str:
    """Why :func:`operand_layout` found no in-place layout for ``op`` (K axis ``k_axis``), for ``explain``."""
    if op.dtype.name in FP8_DTYPES and tma_matrix(op, 3 - k_axis) is not None:
        return ("fp8: wgmma reads fp8 operands K-major only (PTX ISA 9.7.15.5.1) and its contiguous axis is M / N, "
                "not K")
    return "no unit stride, or its base or row stride is not a multiple of 16 bytes"


def scale_operand(scale, name: str, length: int, axis: str, described: bool = False, op: str = "matmul"):
    """An fp8 dequantization scale: ``(kind, operand_or_None, factor)``.

    ``scale`` is None (kind ``"none"``), a Python number (kind ``"none"``, folded into alpha as
    ``factor``), a Float32 GPU array of one element (``"tensor"``), or of ``length`` elements shaped
    ``(length,)`` or, for ``axis`` ``"row"`` (scale_a), ``(M, 1)`` / for ``"col"`` (scale_b) ``(1, N)``
    (``"vector"``: one scale per row of a / column of b).

    Raises:
        LaunchError: another shape or dtype, naming ``name``.
    """
    if scale is None:
        return "none", None, 1.0
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        return "none", None, float(scale)
    scales = operand(scale, name, (0, 1, 2), described, op)
    count = scales.shape[0] * scales.shape[1] * scales.shape[2]
    want = (length, 1) if axis == "row" else (1, length)
    if scales.dtype is not dt.Float32:
        raise LaunchError(f"tsjit.ops.{op}: argument '{name}' has dtype {getattr(scales.dtype, 'name', None)}; "
                          f"scales are Float32 (torch.float32)")
    if count == 1:
        return "tensor", scales, 1.0
    if scales.shape[0] == 1 and count == length and scales.shape[1:] in ((1, length), want):
        return "vector", scales, 1.0
    given = getattr(scale, "shape", None)       # as passed (the operand is padded to rank 3)
    shape = tuple(given) if given is not None else scales.shape[1:] if scales.shape[0] == 1 else scales.shape
    raise LaunchError(f"tsjit.ops.{op}: argument '{name}' has shape {shape}; "
                      f"expected one element (per-tensor scale), ({length},) or {want} (one per "
                      f"{'row of a' if axis == 'row' else 'column of b'})")


def scale_vector(op: Operand) -> DeviceArray:
    """A rank-1 view of a scale operand (its elements in order)."""
    count = op.shape[0] * op.shape[1] * op.shape[2]
    stride = op.strides[2] if op.shape[2] > 1 else op.strides[1] if op.shape[1] > 1 else 1
    return op.view((count,), (stride,))


def stream_handle(stream, like) -> int:
    """The raw handle of ``stream``; by default torch's current stream on ``like``'s device (a torch
    tensor) or tsjit's current stream.

    Raises:
        LaunchError: ``stream`` is none of the stream kinds, naming the argument.
    """
    if stream is None:
        torch = sys.modules.get("torch") if like is not None else None
        if torch is not None:
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is not None:
                return raw(like.get_device())
            return torch.cuda.current_stream().cuda_stream
        return streams.current_stream().value
    if type(stream) is int:
        return stream
    for attribute in ("cuda_stream", "ptr", "value"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise LaunchError(f"argument 'stream' must be a CUDA stream: a raw handle (int), a torch.cuda.Stream, a "
                          f"tsjit stream or an object with an int cuda_stream / ptr / value attribute; got "
                          f"{stream!r} (of type {type(stream).__name__})") from None
