"""Device arrays, host/device copies, bfloat16 conversion and the array-argument adapter.

:class:`DeviceArray` is tsjit's own device allocation (``cuMemAlloc``; freed when
garbage-collected).  Shapes and strides are numpy-ordered (outermost first); **strides
are in elements**, not bytes.  It exports ``__cuda_array_interface__`` v3, so
``torch.as_tensor(arr, device="cuda")`` and ``cupy.asarray(arr)`` wrap it without a copy.

bfloat16 has no numpy dtype: host arrays of it are ``uint16`` bit patterns.  ``.numpy()``
of a BFloat16 array returns those bits; :func:`bfloat16_bits_to_float32` decodes them
exactly, :func:`float_to_bfloat16_bits` encodes with round-to-nearest-even.

:func:`describe_array_argument` is how the launcher looks at an argument.  It understands,
in this order: :class:`DeviceArray`; host numpy arrays (so the launcher can say "pass
``tsjit.to_device(x)``"); torch tensors by duck typing (``data_ptr()``, ``stride()``,
``is_cuda``, ``dtype``; torch's ``__cuda_array_interface__`` refuses bfloat16, so it is
not used for them); any ``__cuda_array_interface__`` object (cupy, numba, JAX); and
``__dlpack__`` objects on a CUDA device.  Nothing here imports torch or cupy.

:class:`ArraySpec` (:func:`spec`, :func:`spec_from_object`) stands for an array on a
machine without a GPU, for ahead-of-time compilation.
"""
from __future__ import annotations

import ctypes
import math
import weakref
from dataclasses import dataclass

import numpy as np

from tsjit import env
from tsjit.errors import LaunchError, TsjitError, UsageTypeError, hide_from_pytest
from tsjit.lang import dtypes
from tsjit.lang.dtypes import BFloat16, DType
from tsjit.runtime import driver

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames


def resolve_dtype(value, field: str = "dtype") -> DType:
    """A tsjit :class:`DType` from a DType, a numpy dtype, or a name.

    Names may be tsjit's (``"BFloat16"``), numpy's (``"float32"``) or torch's
    (``"torch.bfloat16"``, ``"half"``).

    Raises:
        TsjitError: naming ``field`` and the value when it is no supported dtype.
    """
    found = dtypes.lookup(value)
    if found is None:
        raise TsjitError(f"{field} {value!r} is not a supported dtype; expected one of "
                         f"{[d.name for d in dtypes.ALL_DTYPES]} or a matching numpy dtype")
    return found


# ------------------------------------------------------------------ bfloat16

def float_to_bfloat16_bits(values) -> np.ndarray:
    """Round ``values`` to bfloat16 (round-to-nearest-even); returns the ``uint16`` bit patterns.

    float16/float32 inputs are rounded once.  float64 inputs are first rounded to float32
    with round-to-odd, which makes the final rounding exact (no double-rounding error);
    integers go through float64.  NaN stays NaN (quieted, sign kept), +-inf stay inf,
    values beyond the bfloat16 range round to inf, tiny values to (signed) zero or a
    subnormal.  Source: bfloat16 is the top 16 bits of an IEEE-754 binary32.
    """
    array = np.asarray(values)
    if array.dtype in (np.float16, np.float32):
        single = array.astype(np.float32)
        bits = single.view(np.uint32)
    else:
        wide = array.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            single = wide.astype(np.float32)
            back = single.astype(np.float64)
        bits = single.view(np.uint32).copy()
        inexact = (back != wide) & ~np.isnan(wide)
        bits[inexact & (np.abs(back) > np.abs(wide))] -= 1  # truncate toward zero ...
        bits[inexact] |= 1                                 # ... and make it sticky (round-to-odd)
    with np.errstate(over="ignore"):
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    result = np.where(np.isnan(single), quiet_nan, rounded)
    return result.astype(np.uint16)


def bfloat16_bits_to_float32(bits) -> np.ndarray:
    """Decode ``uint16`` bfloat16 bit patterns to float32 (exact)."""
    wide = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return wide.view(np.float32)


def host_array_for(array, dtype: DType) -> np.ndarray:
    """``array`` as a C-contiguous numpy array holding ``dtype``'s device bytes.

    BFloat16 takes ``uint16`` bit patterns as they are and rounds floats/ints
    (:func:`float_to_bfloat16_bits`).  Other dtypes accept the same numpy dtype or one
    that casts to it within its kind (``np.can_cast(..., "same_kind")``, e.g. float64 to
    Float32); anything else raises.

    Raises:
        TsjitError: the host dtype cannot become ``dtype``.
    """
    host = np.asarray(array)
    if dtype is BFloat16:
        if host.dtype == np.uint16:
            return np.ascontiguousarray(host)
        if host.dtype.kind in "fiub":
            return float_to_bfloat16_bits(host)
    else:
        target = dtype.numpy
        if host.dtype == target:
            return np.ascontiguousarray(host)
        if np.can_cast(host.dtype, target, "same_kind"):
            return np.ascontiguousarray(host.astype(target))
    raise TsjitError(f"cannot convert a host array of numpy dtype {host.dtype} to {dtype.name}; "
                     f"convert it first (e.g. array.astype(...))")


# ------------------------------------------------------- argument descriptions

def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _alignment(address: int) -> int:
    """Largest power of two dividing ``address``, capped at 256 (256 for address 0)."""
    return 256 if address == 0 else min(256, address & -address)


@dataclass(frozen=True)
class ArrayArg:
    """What the launcher needs to know about one array argument.

    Attributes:
        data_ptr: address of element ``[0, ..., 0]`` (device address unless host).
        shape: extents, outermost first.
        strides: element strides, outermost first (not bytes).
        dtype: the element type; ``None`` only for a host array of a dtype tsjit lacks.
        device_kind: ``"cuda"`` or ``"host"``.
        owner: the object described (kept alive while this description lives).
    """

    data_ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType | None
    device_kind: str
    owner: object = None

    @property
    def alignment(self) -> int:
        """Largest power of two (<= 256) dividing ``data_ptr``, in bytes."""
        return _alignment(self.data_ptr)

    @property
    def is_c_contiguous(self) -> bool:
        return self.strides == _c_strides(self.shape) or math.prod(self.shape) <= 1


@dataclass(frozen=True)
class ArraySpec:
    """An array's compile-relevant facts without memory: for ``tsjit.compile`` on any machine.

    Attributes:
        shape, strides (elements), dtype: as in :class:`ArrayArg`.
        align: alignment in bytes (power of two) the kernel may assume of the base address.
    """

    shape: tuple[int, ...]
    dtype: DType
    strides: tuple[int, ...]
    align: int = 16


def spec(shape, dtype, *, strides=None, align: int = 16) -> ArraySpec:
    """An :class:`ArraySpec` of ``shape`` (ints >= 0), ``dtype`` and element ``strides``
    (default C-contiguous), with a base address aligned to ``align`` bytes (power of two).

    Raises:
        TsjitError: naming ``shape``, ``strides``, ``dtype`` or ``align``.
    """
    dims = _shape(shape)
    kind = resolve_dtype(dtype)
    if strides is None:
        steps = _c_strides(dims)
    else:
        try:
            steps = tuple(int(s) for s in strides)
        except (TypeError, ValueError):
            raise TsjitError(f"spec strides must be a tuple of ints; got {strides!r}") from None
        if len(steps) != len(dims):
            raise TsjitError(f"spec strides {steps} must have one entry per dimension of shape {dims}")
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        raise TsjitError(f"spec align must be a power of two number of bytes; got {align!r}")
    return ArraySpec(dims, kind, steps, align)


def spec_from_object(obj, name: str = "argument") -> ArraySpec:
    """The :class:`ArraySpec` an object stands for.

    An ``ArraySpec`` is returned as is.  Device arrays (anything
    :func:`describe_array_argument` understands) give their shape, strides, dtype and
    alignment (capped at 16).  A host numpy array stands for a device array of the same
    shape and dtype with a 16-byte aligned base (what device allocations give); a
    bfloat16 array needs :func:`spec` with ``BFloat16``.

    Raises:
        TsjitError: ``obj`` is not an array (message names ``name``).
    """
    if isinstance(obj, ArraySpec):
        return obj
    arg = describe_array_argument(obj, name)
    if arg is None:
        raise TsjitError(f"{name} ({type(obj).__name__}) is not an array or array spec")
    if arg.dtype is None:
        raise TsjitError(f"{name} has a host dtype tsjit does not support")
    align = 16 if arg.device_kind == "host" else min(16, arg.alignment)
    return ArraySpec(arg.shape, arg.dtype, arg.strides, align)


def _shape(shape) -> tuple[int, ...]:
    items = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(int(n) for n in items)
    except (TypeError, ValueError):
        raise TsjitError(f"shape must be an int or a tuple of ints; got {shape!r}") from None
    if any(n < 0 for n in dims):
        raise TsjitError(f"shape must not have negative extents; got {dims}")
    return dims


def _host_argument(array: np.ndarray) -> ArrayArg:
    itemsize = array.dtype.itemsize
    return ArrayArg(array.ctypes.data, array.shape, tuple(s // itemsize for s in array.strides),
                    dtypes.from_numpy(array.dtype), "host", array)


def _torch_argument(obj, name: str) -> ArrayArg:
    dtype = resolve_dtype(str(obj.dtype), f"{name} dtype")
    kind = "cuda" if obj.is_cuda else "host"
    return ArrayArg(int(obj.data_ptr()), tuple(obj.shape), tuple(obj.stride()), dtype, kind, obj)


def _cai_argument(interface: dict, obj, name: str) -> ArrayArg:
    shape = tuple(int(n) for n in interface["shape"])
    typestr = interface["typestr"]
    try:
        dtype = dtypes.from_numpy(np.dtype(typestr))
    except TypeError:
        dtype = None
    if dtype is None:
        raise LaunchError(f"{name}: __cuda_array_interface__ typestr {typestr!r} is not a supported dtype")
    if interface.get("mask") is not None:
        raise LaunchError(f"{name}: masked __cuda_array_interface__ arrays are not supported")
    byte_strides = interface.get("strides")
    if byte_strides is None:
        strides = _c_strides(shape)
    else:
        itemsize = dtype.itemsize
        if any(s % itemsize for s in byte_strides):
            raise LaunchError(f"{name}: byte strides {tuple(byte_strides)} are not multiples of the "
                              f"element size {itemsize}")
        strides = tuple(s // itemsize for s in byte_strides)
    return ArrayArg(int(interface["data"][0] or 0), shape, strides, dtype, "cuda", obj)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DLPACK_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged (dlpack.h)
_DLPACK_DTYPES = {  # (DLDataTypeCode, bits) -> DType; codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
    (0, 8): dtypes.Int8, (0, 16): dtypes.Int16, (0, 32): dtypes.Int32, (0, 64): dtypes.Int64,
    (1, 8): dtypes.Uint8, (1, 16): dtypes.Uint16, (1, 32): dtypes.Uint32, (1, 64): dtypes.Uint64,
    (2, 16): dtypes.Float16, (2, 32): dtypes.Float32, (2, 64): dtypes.Float64,
    (4, 16): BFloat16, (6, 8): dtypes.Boolean,
}


def _dlpack_argument(obj, name: str) -> ArrayArg:
    """Read a legacy ``"dltensor"`` capsule without consuming it (its destructor frees it)."""
    capsule = obj.__dlpack__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        address = get_pointer(capsule, b"dltensor")
    except ValueError:
        raise LaunchError(f"{name}: __dlpack__ returned an unsupported capsule (expected 'dltensor')") from None
    tensor = _DLTensor.from_address(address)  # DLManagedTensor starts with its DLTensor
    code, bits = tensor.dtype.code, tensor.dtype.bits
    dtype = _DLPACK_DTYPES.get((code, bits))
    if dtype is None or tensor.dtype.lanes != 1:
        raise LaunchError(f"{name}: DLPack dtype (code {code}, bits {bits}, lanes "
                          f"{tensor.dtype.lanes}) is not supported")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = tuple(tensor.strides[i] for i in range(tensor.ndim)) if tensor.strides else _c_strides(shape)
    return ArrayArg((tensor.data or 0) + tensor.byte_offset, shape, strides, dtype, "cuda", obj)


def describe_array_argument(obj, name: str = "argument") -> ArrayArg | None:
    """Describe an array-like argument, or return ``None`` when ``obj`` is not an array.

    Recognizes (first match wins): :class:`DeviceArray`; host ``numpy.ndarray``
    (``device_kind="host"``); torch tensors by duck typing (CPU ones are ``"host"``);
    ``__cuda_array_interface__`` objects; ``__dlpack__`` objects whose
    ``__dlpack_device__`` is CUDA (host DLPack objects are ``"host"``).  Any stream in a
    foreign interface is ignored: the caller orders work on its own stream.

    Raises:
        LaunchError: ``obj`` is an array whose dtype or layout tsjit cannot use (names ``name``).
    """
    if type(obj) is DeviceArray:
        return obj._argument
    if isinstance(obj, np.ndarray):
        return _host_argument(obj)
    if isinstance(obj, DeviceArray):
        return obj._argument
    if hasattr(obj, "data_ptr") and hasattr(obj, "is_cuda") and hasattr(obj, "stride"):
        return _torch_argument(obj, name)
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        return _cai_argument(interface, obj, name)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        device_type = int(obj.__dlpack_device__()[0])
        if device_type in _DLPACK_CUDA_DEVICES:
            return _dlpack_argument(obj, name)
        if device_type == 1:  # kDLCPU
            return _host_argument(np.from_dlpack(obj))
    return None


# ------------------------------------------------------------ device memory
# Thin checked calls; synchronous with respect to the host, ordered on the legacy stream.

#: interpreter-mode device memory (TSJIT_INTERPRET=1): host buffers by address (tsjit.interpret reads them)
_HOST_BUFFERS: dict[int, np.ndarray] = {}


def host_allocation(address: int):
    """``(base address, uint8 buffer)`` of the interpreter-mode device allocation holding ``address``,
    or None (a real device address, or unknown)."""
    for base, buffer in _HOST_BUFFERS.items():
        if base <= address < base + max(buffer.nbytes, 1):
            return base, buffer
    return None


def _host_view(address: int, nbytes: int):
    found = host_allocation(address)
    if found is None:
        return None
    base, buffer = found
    return buffer[address - base:address - base + nbytes]


def _alloc(nbytes: int) -> int:
    """``cuMemAlloc`` (256-byte aligned); 0 for ``nbytes == 0``.  LaunchError when out of memory.
    Under ``TSJIT_INTERPRET=1`` the memory is a 256-byte aligned host buffer (no GPU needed)."""
    if env.interpret():
        if nbytes == 0:
            return 0
        raw = np.zeros(nbytes + 256, np.uint8)
        shift = -raw.ctypes.data % 256
        buffer = raw[shift:shift + nbytes]
        _HOST_BUFFERS[int(buffer.ctypes.data)] = buffer
        return int(buffer.ctypes.data)
    if nbytes == 0:
        driver.ensure_context()
        return 0
    return int(driver.check(driver.bindings().cuMemAlloc(nbytes), f"cuMemAlloc({nbytes} bytes)"))


def _free_quietly(address: int) -> None:
    """``cuMemFree`` for finalizers: never raises."""
    if _HOST_BUFFERS.pop(address, None) is not None:
        return
    try:
        driver.bindings().cuMemFree(address)
    except Exception:
        pass


def _copy_to_device(address: int, host: np.ndarray, nbytes: int) -> None:
    # Host addresses are passed as ints (a 0-d numpy array would convert to an int *value*).
    view = _host_view(address, nbytes) if _HOST_BUFFERS else None
    if view is not None:
        view[:] = np.ascontiguousarray(host).reshape(-1).view(np.uint8)[:nbytes]
        return
    if nbytes:
        driver.check(driver.bindings().cuMemcpyHtoD(address, host.ctypes.data, nbytes),
                     f"cuMemcpyHtoD({nbytes} bytes)")


def _copy_to_host(host: np.ndarray, address: int, nbytes: int) -> None:
    view = _host_view(address, nbytes) if _HOST_BUFFERS else None
    if view is not None:
        host.reshape(-1).view(np.uint8)[:nbytes] = view
        return
    if nbytes:
        driver.check(driver.bindings().cuMemcpyDtoH(host.ctypes.data, address, nbytes),
                     f"cuMemcpyDtoH({nbytes} bytes)")


# --------------------------------------------------------------- DeviceArray

class DeviceArray:
    """An array in device memory.

    Args:
        shape: extents, outermost first.
        dtype: a tsjit DType (or anything :func:`resolve_dtype` accepts).
        strides: element strides (default C-contiguous).
        data_ptr: wrap existing device memory instead of allocating (not freed by tsjit).
        owner: object keeping wrapped memory alive.

    Allocation is ``cuMemAlloc`` (256-byte aligned) and is freed by ``cuMemFree`` when the
    array is garbage-collected.  Raises :class:`LaunchError` without a GPU, unless
    ``TSJIT_INTERPRET=1``: then the memory is a host buffer and launches run on the CPU interpreter.
    """

    def __init__(self, shape, dtype, *, strides=None, data_ptr: int | None = None, owner=None):
        self.dtype: DType = resolve_dtype(dtype)
        self.shape: tuple[int, ...] = _shape(shape)
        self.strides: tuple[int, ...] = (_c_strides(self.shape) if strides is None
                                         else tuple(int(s) for s in strides))
        if len(self.strides) != len(self.shape):
            raise TsjitError(f"strides {self.strides} must have one entry per dimension of shape {self.shape}")
        self.owner = owner
        if data_ptr is None:
            self.data_ptr = _alloc(self.span_bytes)
            if self.data_ptr:
                finalizer = weakref.finalize(self, _free_quietly, self.data_ptr)
                finalizer.atexit = False
        else:
            self.data_ptr = int(data_ptr)
        self._argument = ArrayArg(self.data_ptr, self.shape, self.strides, self.dtype, "cuda", self)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """``size * itemsize`` (numpy's meaning)."""
        return self.size * self.dtype.itemsize

    @property
    def span_bytes(self) -> int:
        """Bytes from the first to one past the last element (== ``nbytes`` when contiguous)."""
        if self.size == 0:
            return 0
        last = sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return (last + 1) * self.dtype.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        return self._argument.is_c_contiguous

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3. BFloat16 is exported as ``"<u2"`` (its bit patterns);
        view it as bfloat16 on the consumer side (``t.view(torch.bfloat16)``)."""
        itemsize = self.dtype.itemsize
        return {"shape": self.shape, "typestr": self.dtype.numpy.str,
                "data": (self.data_ptr, False), "version": 3, "stream": 1,
                "strides": None if self.is_c_contiguous else tuple(s * itemsize for s in self.strides)}

    def numpy(self) -> np.ndarray:
        """Copy to a new host array (BFloat16 comes back as ``uint16`` bit patterns; decode with
        ``tsjit.bfloat16_bits_to_float32(a.numpy())``).  Synchronous.

        Raises:
            LaunchError: no GPU, or an earlier kernel faulted.
        """
        host_dtype = self.dtype.numpy
        if self.is_c_contiguous:
            out = np.empty(self.shape, dtype=host_dtype)
            _copy_to_host(out, self.data_ptr, self.nbytes)
            return out
        raw = np.empty(self.span_bytes // self.dtype.itemsize, dtype=host_dtype)
        _copy_to_host(raw, self.data_ptr, self.span_bytes)
        itemsize = self.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(raw, self.shape, tuple(s * itemsize for s in self.strides))
        return np.ascontiguousarray(view)

    def __array__(self, dtype=None, copy=None):
        """Refused, as torch and CuPy refuse it for device memory: ``np.asarray(x)`` made a 0-d object array, so
        ``np.array_equal(x, ref)`` was silently False.  Copy explicitly with :meth:`numpy`."""
        raise UsageTypeError(f"{self!r} is in device memory: numpy cannot read it in place; copy it with x.numpy() "
                        f"(BFloat16 as uint16 bits: tsjit.bfloat16_bits_to_float32(x.numpy()))")

    def copy_from(self, array) -> "DeviceArray":
        """Overwrite this C-contiguous array with host ``array`` (same shape; converted as in
        :func:`to_device`). Synchronous; returns ``self``.

        Raises:
            LaunchError: shape mismatch or non-contiguous destination (names ``array``).
        """
        host = host_array_for(array, self.dtype)
        if host.shape != self.shape:
            raise LaunchError(f"copy_from: array has shape {host.shape}; expected {self.shape}")
        if not self.is_c_contiguous:
            raise LaunchError(f"copy_from needs a C-contiguous destination; strides are {self.strides}")
        _copy_to_device(self.data_ptr, host, self.nbytes)
        return self

    def fill_bytes(self, byte: int) -> "DeviceArray":
        """Set every byte this array spans to ``byte`` (0..255) with ``cuMemsetD8``; returns
        ``self``.  Use ``0xFF`` to poison an output (NaN for floats, -1 for ints)."""
        if not 0 <= byte <= 255:
            raise LaunchError(f"fill_bytes: byte must be in 0..255; got {byte}")
        view = _host_view(self.data_ptr, self.span_bytes) if _HOST_BUFFERS and self.span_bytes else None
        if view is not None:
            view[:] = byte
        elif self.span_bytes:
            driver.check(driver.bindings().cuMemsetD8(self.data_ptr, byte, self.span_bytes), "cuMemsetD8")
        return self

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, data_ptr=0x{self.data_ptr:x})"


def empty(shape, dtype) -> DeviceArray:
    """A new uninitialized C-contiguous device array."""
    return DeviceArray(shape, dtype)


def zeros(shape, dtype) -> DeviceArray:
    """A new device array filled with zero bytes (0 for every dtype)."""
    return DeviceArray(shape, dtype).fill_bytes(0)


_TORCH_BIT_DTYPES = {"torch.bfloat16": BFloat16, "torch.float8_e4m3fn": dtypes.Float8E4M3,   # no numpy dtype
                     "torch.float8_e5m2": dtypes.Float8E5M2}


def _torch_bits(array, dtype):
    """``(array, dtype)`` for :func:`to_device`: a CPU torch tensor of bfloat16 / fp8, which ``np.asarray``
    refuses, becomes a numpy array of its bit patterns and its tsjit dtype; anything else is returned as is."""
    if isinstance(array, np.ndarray) or not (hasattr(array, "data_ptr") and hasattr(array, "is_cuda")
                                             and hasattr(array, "stride")):
        return array, dtype
    if array.is_cuda:
        raise LaunchError("tsjit.to_device: the argument is a CUDA torch tensor, already on the GPU; pass it to "
                          "kernels and tsjit.ops as it is (to_device copies host arrays to the device)")
    kind = _TORCH_BIT_DTYPES.get(str(array.dtype))
    if kind is None:
        return array, dtype
    if dtype is not None and resolve_dtype(dtype) is not kind:
        raise TsjitError(f"tsjit.to_device: a {array.dtype} tensor cannot become {resolve_dtype(dtype).name} here; "
                         f"convert it in torch first (x.to(torch.float32)) or leave dtype=None")
    tensor = array.detach().contiguous()
    nbytes = tensor.numel() * tensor.element_size()
    bits = np.empty(nbytes, np.uint8)
    if nbytes:
        ctypes.memmove(bits.ctypes.data, tensor.data_ptr(), nbytes)
    return bits.view(kind.numpy).reshape(tuple(tensor.shape)), kind


def to_device(array, dtype=None) -> DeviceArray:
    """Copy a host array to a new C-contiguous device array.

    Args:
        array: a numpy array or anything ``np.asarray`` accepts; a CPU torch tensor, bfloat16 and
            float8 ones included (copied bit for bit).
        dtype: the device dtype; default: the host array's.  ``BFloat16`` takes a
            ``uint16`` array as bit patterns, or floats/ints rounded to nearest even.

    Raises:
        TsjitError: unsupported or unconvertible dtype; LaunchError: no GPU (and not
        ``TSJIT_INTERPRET=1``, under which the copy lives in host memory for the CPU interpreter),
        or ``array`` is a CUDA torch tensor (already a device array).
    """
    array, dtype = _torch_bits(array, dtype)
    host = np.asarray(array)
    target = resolve_dtype(host.dtype if dtype is None else dtype)
    data = host_array_for(host, target)
    device = DeviceArray(data.shape, target)
    _copy_to_device(device.data_ptr, data, device.nbytes)
    return device
