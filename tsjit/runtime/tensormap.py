"""TMA descriptors (``CUtensorMap``) built through one validated host constructor.

A :class:`TensorMap` describes a tiled view of a device array for the Tensor Memory
Accelerator: the array's shape and byte strides, the box (tile) copied per TMA
instruction, the shared-memory swizzle, L2 promotion and out-of-bounds fill.  The kernel
receives its 128 opaque bytes by value as a ``__grid_constant__`` parameter
(``ptr byval([128 x i8]) align 128``; ``shared/reference/toolchain.md`` §4).  Ranks 1 to 5
are supported.

Dimensions are given **outermost first**, like numpy (``box_shape=(64, 128)`` for a
64-row, 128-column tile of a row-major matrix); ``cuTensorMapEncodeTiled`` wants them
innermost first, and this module reverses them.

The pipeline has three pure steps and one driver call:

1. :func:`validate_tensormap` checks every rule ``cuTensorMapEncodeTiled`` documents (CUDA
   Driver API 12.x/13.x, "The parameters passed are bound to the following requirements")
   before the driver sees anything, and returns a :class:`TensorMapLayout`.  A broken rule
   is a :class:`~tsjit.errors.LaunchError` that describes the array (shape, dtype, byte
   strides, address), names the field, and says what to change.  The rules:

   * rank 1..5; interleaved layouts need rank >= 3;
   * the base address is non-zero and 16-byte aligned (32 with ``interleave="32B"``);
   * every extent is in 1..2**32;
   * the innermost dimension is dense (its stride is the element size: TMA has no
     innermost stride); every other stride is a positive multiple of 16 bytes (32 with
     ``interleave="32B"``) below 2**40;
   * every box extent is in 1..256; without interleave the innermost box row is a
     multiple of 16 bytes and, with a swizzle, at most the swizzle span (32/64/128 B);
   * ``interleave="32B"`` needs ``swizzle="32B"``;
   * element strides are in 1..8 (tsjit also requires the innermost one to be 1: the
     driver ignores it without interleave, so anything else would be silently dropped);
   * ``oob_fill="nan"`` needs a floating-point TMA data type (not 8-bit floats, which TMA
     moves as UINT8);
   * the option names (swizzle, L2 promotion, OOB fill, interleave) are from their
     enums; the packed 4/6-bit data types and the ``128B_ATOM_*`` swizzles are not offered.

2. :func:`encode_arguments` turns a layout into the exact values of the driver call
   (:class:`EncodeArguments`).  For rank 1 the driver still dereferences ``globalStrides``
   and returns ``CUDA_ERROR_INVALID_VALUE`` for a NULL array (NVIDIA CCCL PR #1567/#1568,
   nvbug 4575531); cuda-bindings passes NULL for an empty list, so rank 1 gets one unused,
   valid stride.  That was the rank-1 ``CUDA_ERROR_INVALID_VALUE`` of issue 9.
3. :func:`encode_tensormap` makes the one ``cuTensorMapEncodeTiled`` call.
"""
from __future__ import annotations

import ctypes
import math
import operator
from collections import namedtuple
from dataclasses import dataclass

from tsjit import abi, env
from tsjit.errors import LaunchError
from tsjit.lang.dtypes import DType
from tsjit.runtime import driver
from tsjit.runtime.arrays import describe_array_argument, resolve_dtype

DESCRIPTOR_BYTES = 128

# DType -> CUtensorMapDataType member name. TMA moves bytes; the type matters only for
# NaN out-of-bounds fill, so signed 8/16-bit, Boolean and the 8-bit floats use the unsigned
# types of their width.
TENSOR_MAP_DATA_TYPES: dict[str, str] = {
    "Uint8": "UINT8", "Int8": "UINT8", "Boolean": "UINT8", "Float8E4M3": "UINT8", "Float8E5M2": "UINT8",
    "Uint16": "UINT16", "Int16": "UINT16",
    "Uint32": "UINT32", "Int32": "INT32",
    "Uint64": "UINT64", "Int64": "INT64",
    "Float16": "FLOAT16", "BFloat16": "BFLOAT16", "Float32": "FLOAT32", "Float64": "FLOAT64",
}
FLOAT_DATA_TYPES = frozenset({"FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"})  # may use NaN fill
SWIZZLE_BYTES = abi.TMA_SWIZZLE_BYTES
SWIZZLES = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}
L2_PROMOTIONS = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
OOB_FILLS = {"zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}
INTERLEAVES = {"none": "NONE", "16B": "16B", "32B": "32B"}
MAX_RANK = 5
MAX_BOX_DIM = abi.TMA_MAX_BOX_DIM
MAX_ELEMENT_STRIDE = abi.TMA_MAX_ELEMENT_STRIDE
MAX_GLOBAL_DIM = 2 ** 32
MAX_GLOBAL_STRIDE = 2 ** 40
STRIDE_ALIGN = abi.TMA_ALIGN  # bytes, globalStrides and globalAddress
INTERLEAVE_32B_ALIGN = 32    # bytes, globalStrides and globalAddress with interleave="32B"


@dataclass(frozen=True)
class TensorMapLayout:
    """The validated arguments of ``cuTensorMapEncodeTiled``, in the driver's order.

    Attributes:
        dtype: element type.
        global_address: base address (bytes).
        global_dims: extents, innermost first (``len == rank``).
        global_strides: byte strides of dimensions 1..rank-1, innermost first (empty for rank 1).
        box_dims: box extents, innermost first.
        element_strides: traversal steps, innermost first.
        interleave, swizzle, l2_promotion, oob_fill: the option names given.
    """

    dtype: DType
    global_address: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def box_bytes(self) -> int:
        """Bytes one TMA copy of a full box moves (the ``expect_tx`` count, out-of-bounds
        elements included): the product over dimensions of ``ceil(box / element_stride)``
        times the element size (see :func:`traversed_box`)."""
        return math.prod(traversed_box(self.box_dims, self.element_strides)) * self.dtype.itemsize

    @property
    def smem_bytes(self) -> int:
        """Bytes of shared memory one copy of a full box spans: :attr:`box_bytes`, or rows times the
        swizzle span when the span is wider than the innermost row (:func:`tsjit.abi.tma_smem_footprint`)."""
        tile = traversed_box(self.box_dims, self.element_strides)[::-1]
        return abi.tma_smem_footprint(tile, self.dtype.itemsize, self.swizzle)


def traversed_box(box_dims, element_strides) -> tuple[int, ...]:
    """Elements one TMA copy visits per dimension: ``ceil(box[i] / element_stride[i])``.

    Both sequences in the same order (either order works); the shared-memory tile of a copy
    is this shape, packed.  Source: CUDA Driver API ``cuTensorMapEncodeTiled``, elementStrides.
    """
    return tuple(-(-box // step) for box, step in zip(box_dims, element_strides))


EncodeArguments = namedtuple("EncodeArguments", "data_type rank global_address global_dims global_strides box_dims "
                             "element_strides interleave swizzle l2_promotion oob_fill")
EncodeArguments.__doc__ = """The plain values of one ``cuTensorMapEncodeTiled`` call, in its order, buildable without a GPU.

Fields:
    data_type: ``CUtensorMapDataType`` member suffix (``"FLOAT32"``).
    rank: ``tensorRank``.
    global_address: ``globalAddress``.
    global_dims, global_strides, box_dims, element_strides: the arrays, innermost first;
        ``global_strides`` has ``max(1, rank - 1)`` entries (rank 1: one unused stride).
    interleave, swizzle, l2_promotion, oob_fill: enum member suffixes (``"NONE"``, ``"128B"``,
        ``"L2_128B"``, ``"NAN_REQUEST_ZERO_FMA"``).
"""


def encode_arguments(layout: TensorMapLayout) -> EncodeArguments:
    """The driver-call values for ``layout`` (pure; no GPU needed).

    For rank 1 the driver rejects a NULL ``globalStrides`` (CUDA_ERROR_INVALID_VALUE), so one
    stride is passed that it never uses: the innermost row rounded up to 16 bytes, which is
    itself valid.  Other ranks pass the layout's strides unchanged.
    """
    strides = layout.global_strides
    if not strides:
        row = layout.global_dims[0] * layout.dtype.itemsize
        strides = (-(-row // STRIDE_ALIGN) * STRIDE_ALIGN,)
    return EncodeArguments(TENSOR_MAP_DATA_TYPES[layout.dtype.name], layout.rank, layout.global_address,
                           layout.global_dims, strides, layout.box_dims, layout.element_strides,
                           INTERLEAVES[layout.interleave], SWIZZLES[layout.swizzle],
                           L2_PROMOTIONS[layout.l2_promotion], OOB_FILLS[layout.oob_fill])


# ------------------------------------------------------------------ validation

def describe_tensor(shape, strides_bytes, dtype, base_ptr) -> str:
    """``"the (100, 33) Float16 array (byte strides (66, 2), at 0x7f0000000000)"``: how every
    tensor-map message names the user's array."""
    name = getattr(dtype, "name", dtype)
    address = f"0x{base_ptr:x}" if isinstance(base_ptr, int) else repr(base_ptr)
    return f"the {tuple(shape)} {name} array (byte strides {tuple(strides_bytes)}, at {address})"


def _choice(value, table: dict, field: str, refuse: abi.Refusal) -> str:
    if value not in table:
        refuse(field, f"is {value!r}", f"Pass one of {list(table)}.")
    return value


def _int_tuple(values, field: str, refuse: abi.Refusal) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        refuse(field, f"is {values!r}", "Pass a tuple of ints, one per dimension, outermost first.")


def _padding_fix(dims, strides, axis: int, itemsize: int, multiple: int) -> str:
    """What to do when ``strides[axis]`` (bytes) is not a multiple of ``multiple``."""
    inner_stride, inner_extent = strides[axis + 1], dims[axis + 1]
    if strides[axis] == inner_stride * inner_extent:   # dimension axis+1 is packed: pad it
        step = multiple // math.gcd(multiple, inner_stride)
        padded = list(dims)
        padded[axis + 1] = abi.round_up(inner_extent, step)
        view = ", ".join(":" if i != axis + 1 else f":{inner_extent}" for i in range(len(dims)))
        return (f"Pad to a multiple of {multiple} bytes, e.g. allocate {tuple(padded)} and pass the {tuple(dims)} "
                f"view of it (x[{view}]; element strides "
                f"{_packed_strides(padded)}).")
    return (f"Use a byte stride that is a multiple of {multiple}, e.g. {abi.round_up(strides[axis], multiple)} "
            f"(allocate with padding and pass a view).")


def _packed_strides(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(strides[::-1])


def validate_tensormap(shape, strides_bytes, dtype, base_ptr: int, box_shape, *, element_strides=None,
                       swizzle: str = "none", l2_promotion: str = "none", oob_fill: str = "zero",
                       interleave: str = "none") -> TensorMapLayout:
    """Check a tiled TMA descriptor against every ``cuTensorMapEncodeTiled`` requirement.

    Args:
        shape: global extents, outermost first; rank 1..5, each 1..2**32.
        strides_bytes: byte stride of every dimension, outermost first; the innermost must
            equal the element size (dense rows), the others be positive multiples of 16 (of 32
            with ``interleave="32B"``) below 2**40.
        dtype: element DType (see :data:`TENSOR_MAP_DATA_TYPES`).
        base_ptr: device address; non-zero, 16-byte aligned (32 with ``interleave="32B"``).
        box_shape: box extents, outermost first; each 1..256; without interleave the
            innermost box row must be a multiple of 16 bytes, and with a swizzle at most
            the swizzle span (32, 64 or 128 bytes).
        element_strides: traversal steps, outermost first, each 1..8, the innermost 1
            (default all 1).  A copy then visits ``ceil(box / step)`` elements per dimension.
        swizzle: ``"none"``, ``"32B"``, ``"64B"``, ``"128B"``.
        l2_promotion: ``"none"``, ``"64B"``, ``"128B"``, ``"256B"``.
        oob_fill: ``"zero"``, or ``"nan"`` (Float16/BFloat16/Float32/Float64 only).
        interleave: ``"none"``, ``"16B"``, ``"32B"``; interleaved layouts need rank >= 3,
            and ``"32B"`` needs ``swizzle="32B"``.

    Returns:
        The driver's arguments, innermost first (:class:`TensorMapLayout`).

    Raises:
        LaunchError: starting "TensorMap of the <shape> <dtype> array (byte strides ..., at
            0x...)", naming the field (``rank``, ``dtype``, ``base_ptr``, ``shape[i]``,
            ``strides_bytes[i]``, ``box_shape[i]``, ``element_strides[i]``, ``swizzle``,
            ``l2_promotion``, ``oob_fill``, ``interleave``), the value given, and what to
            change.  Indices are numpy-ordered (outermost first).

    Source: CUDA Driver API, ``cuTensorMapEncodeTiled`` (12.x/13.x).
    """
    base_ptr = _address(base_ptr)
    refuse = abi.Refusal("TensorMap of " + describe_tensor(_loose(shape), _loose(strides_bytes), dtype, base_ptr))
    _choice(swizzle, SWIZZLE_BYTES, "swizzle", refuse)
    _choice(l2_promotion, L2_PROMOTIONS, "l2_promotion", refuse)
    _choice(oob_fill, OOB_FILLS, "oob_fill", refuse)
    _choice(interleave, INTERLEAVES, "interleave", refuse)
    try:
        kind = resolve_dtype(dtype)
    except Exception:
        kind = None
    if kind is None or kind.name not in TENSOR_MAP_DATA_TYPES:
        refuse("dtype", f"{getattr(kind, 'name', dtype)!r} has no TMA data type",
               f"Use one of {sorted(TENSOR_MAP_DATA_TYPES)}.")
    dims = _int_tuple(shape, "shape", refuse)
    strides = _int_tuple(strides_bytes, "strides_bytes", refuse)
    box = _int_tuple(box_shape, "box_shape", refuse)
    refuse.subject = "TensorMap of " + describe_tensor(dims, strides, kind, base_ptr)
    rank = len(dims)
    _check_rank(rank, interleave, refuse)
    steps = (1,) * rank if element_strides is None else _int_tuple(element_strides, "element_strides", refuse)
    for field, values in (("strides_bytes", strides), ("box_shape", box), ("element_strides", steps)):
        if len(values) != rank:
            refuse(field, f"has {len(values)} entries {values}", f"Give {rank}, one per dimension of the array.")
    itemsize = kind.itemsize
    align = INTERLEAVE_32B_ALIGN if interleave == "32B" else STRIDE_ALIGN
    _check_extents(dims, refuse)
    _check_base(base_ptr, align, itemsize, interleave, refuse)
    _check_strides(dims, strides, itemsize, align, interleave, refuse)
    abi.check_tma_box(box, itemsize, swizzle, interleave, refuse)
    abi.check_tma_element_strides(steps, refuse)
    if oob_fill == "nan" and TENSOR_MAP_DATA_TYPES[kind.name] not in FLOAT_DATA_TYPES:
        refuse("oob_fill", f"is 'nan' but TMA moves {kind.name} as {TENSOR_MAP_DATA_TYPES[kind.name]}",
               "NaN fill needs Float16, BFloat16, Float32 or Float64 data; use oob_fill='zero'.")
    return TensorMapLayout(kind, int(base_ptr), dims[::-1], strides[-2::-1], box[::-1], steps[::-1],
                           interleave, swizzle, l2_promotion, oob_fill)


def _address(value):
    """``value`` as an int address when it is one (numpy ints included), else unchanged."""
    try:
        return operator.index(value)
    except TypeError:
        return value


def _loose(values):
    """``values`` as a tuple for a message, whatever it is."""
    try:
        return tuple(values)
    except TypeError:
        return (values,)


def _check_rank(rank: int, interleave: str, refuse: abi.Refusal) -> None:
    if rank == 0:
        refuse("rank", "is 0", "TMA copies boxes of 1 to 5 dimensions: reshape the array to (1,).")
    if rank > MAX_RANK:
        refuse("rank", f"is {rank}; TMA supports 1 to {MAX_RANK} dimensions",
               "Merge dimensions that are contiguous with each other (reshape), or give the outer "
               "dimensions to separate tensor maps / launches.")
    if interleave != "none" and rank < 3:
        refuse("rank", f"is {rank}, but interleave={interleave!r} needs rank >= 3",
               "Use interleave='none', or describe the interleaved layout with its 3+ dimensions.")


def _check_extents(dims, refuse: abi.Refusal) -> None:
    for axis, extent in enumerate(dims):
        if extent < 1:
            refuse(f"shape[{axis}]", f"is {extent}: TMA needs at least one element per dimension",
                   "Skip the copy for an empty array.")
        if extent > MAX_GLOBAL_DIM:
            refuse(f"shape[{axis}]", f"is {extent} > 2**32", f"Split dimension {axis} in two (reshape).")


def _check_base(base_ptr: int, align: int, itemsize: int, interleave: str, refuse: abi.Refusal) -> None:
    if not isinstance(base_ptr, int) or isinstance(base_ptr, bool) or base_ptr <= 0:
        refuse("base_ptr", f"is {base_ptr!r}: the array has no device memory", "Pass an allocated device array.")
    offset = base_ptr % align
    if offset:
        why = f" (interleave={interleave!r})" if interleave == "32B" else ""
        refuse("base_ptr", f"is {offset} bytes past a {align}-byte boundary; TMA needs {align}-byte aligned "
               f"data{why}", f"Start the view at a multiple of {max(1, align // itemsize)} elements from a "
               f"{align}-byte aligned allocation (tsjit.empty is 256-byte aligned), or copy it.")


def _check_strides(dims, strides, itemsize: int, align: int, interleave: str, refuse: abi.Refusal) -> None:
    rank = len(dims)
    if strides[-1] != itemsize:
        refuse(f"strides_bytes[{rank - 1}]", f"(innermost) is {strides[-1]} bytes; TMA reads the innermost "
               f"dimension densely ({itemsize} bytes apart)",
               "Pass a C-contiguous copy, or order the dimensions so that the unit-stride one is last.")
    for axis in range(rank - 2, -1, -1):          # innermost first: the first fix to make
        stride = strides[axis]
        if stride <= 0:
            refuse(f"strides_bytes[{axis}]", f"is {stride}: TMA needs positive strides (no broadcast or "
                   f"reversed dimensions)", "Materialize the array with a copy.")
        if stride >= MAX_GLOBAL_STRIDE:
            refuse(f"strides_bytes[{axis}]", f"is {stride} >= 2**40 bytes", "Use a smaller allocation or "
                   "split the tensor into several tensor maps.")
        if stride % align:
            why = " with interleave='32B'" if align == INTERLEAVE_32B_ALIGN else ""
            refuse(f"strides_bytes[{axis}]", f"is {stride}: rows of {stride} bytes (the stride of dimension "
                   f"{axis}) are not a multiple of {align}{why}",
                   _padding_fix(dims, strides, axis, itemsize, align))


# ------------------------------------------------------------------ the driver call

def encode_tensormap(layout: TensorMapLayout, what: str = "a tensor map"):
    """Call ``cuTensorMapEncodeTiled`` with :func:`encode_arguments` of ``layout``; returns the
    ``CUtensorMap``.  Pass only layouts from :func:`validate_tensormap`; ``what`` names the
    array in the message.

    Raises:
        LaunchError: no GPU, or the driver rejected the descriptor (a rule tsjit does not know:
            the message shows every argument of the call).
    """
    cu = driver.bindings()
    args = encode_arguments(layout)
    return driver.check(cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + args.data_type),
        args.rank, args.global_address,
        [cu.cuuint64_t(d) for d in args.global_dims],
        [cu.cuuint64_t(s) for s in args.global_strides],
        [cu.cuuint32_t(b) for b in args.box_dims],
        [cu.cuuint32_t(e) for e in args.element_strides],
        getattr(cu.CUtensorMapInterleave, "CU_TENSOR_MAP_INTERLEAVE_" + args.interleave),
        getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + args.swizzle),
        getattr(cu.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + args.l2_promotion),
        getattr(cu.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + args.oob_fill),
    ), f"cuTensorMapEncodeTiled for {what} ({args})")


INTERPRETER_MAGIC = b"TSJITMAP"
_INTERPRETER_LAYOUTS: dict[int, tuple] = {}


class _InterpreterDescriptor:
    """The 128 descriptor bytes of a TensorMap made under ``TSJIT_INTERPRET=1``: :data:`INTERPRETER_MAGIC`,
    then a little-endian u64 handle of the layout (:func:`interpreter_layout` reads it back)."""

    def __init__(self, layout: TensorMapLayout, array):
        handle = len(_INTERPRETER_LAYOUTS) + 1
        _INTERPRETER_LAYOUTS[handle] = (layout, array)
        self._bytes = (ctypes.c_ubyte * DESCRIPTOR_BYTES).from_buffer_copy(
            INTERPRETER_MAGIC + handle.to_bytes(8, "little") + bytes(DESCRIPTOR_BYTES - 16))

    def getPtr(self) -> int:  # noqa: N802 - the driver object's method name
        return ctypes.addressof(self._bytes)


def interpreter_layout(descriptor: bytes):
    """``(TensorMapLayout, array)`` of descriptor bytes made under ``TSJIT_INTERPRET=1``, or None for other bytes."""
    if bytes(descriptor[:8]) != INTERPRETER_MAGIC:
        return None
    return _INTERPRETER_LAYOUTS.get(int.from_bytes(bytes(descriptor[8:16]), "little"))


class TensorMap:
    """A TMA descriptor for a tiled view of a device array (rank 1 to 5).

    Args:
        array: a :class:`~tsjit.runtime.arrays.DeviceArray`, a ``__cuda_array_interface__``
            or DLPack object, or a CUDA torch tensor (dims outermost first, like numpy).
        box_shape: the tile, outermost first.
        element_strides, swizzle, l2_promotion, oob_fill, interleave: see
            :func:`validate_tensormap`.

    Attributes:
        layout: the validated :class:`TensorMapLayout`.
        box_shape: the tile, outermost first.
        dtype: element type.

    The array must outlive every launch that uses this descriptor (it holds a reference).
    Out-of-bounds parts of a box are filled (zero or NaN) on loads and not written on stores.

    Raises:
        LaunchError: ``array`` is not a device array, a rule of :func:`validate_tensormap`
            is broken, no GPU is present, or the driver refuses.

    Under ``TSJIT_INTERPRET=1`` no GPU is needed: the descriptor describes the host memory of an
    array made by :func:`tsjit.to_device` / :func:`tsjit.empty` in that mode, for the CPU interpreter.
    Without a GPU, a host array (numpy) also gets such a descriptor, for
    ``kernel.interpret[grid, block](...)``.
    """

    def __init__(self, array, box_shape, *, element_strides=None, swizzle: str = "none",
                 l2_promotion: str = "none", oob_fill: str = "zero", interleave: str = "none"):
        arg = describe_array_argument(array, "tensor map array")
        # a host array without a GPU: a descriptor for kernel.interpret[grid, block](...) (README)
        interpreting = env.interpret() or (arg is not None and arg.device_kind != "cuda"
                                           and not driver.gpu_available())
        if arg is None or (arg.device_kind != "cuda" and not interpreting):
            kind = "a host array" if arg is not None else type(array).__name__
            raise LaunchError(f"TensorMap: 'array' must be a device array; got {kind}.\n  Pass "
                              f"tsjit.to_device(x) for a GPU launch; a numpy array describes host memory for the "
                              f"CPU interpreter (kernel.interpret[grid, block](...) on a machine without a GPU, "
                              f"or any launch under TSJIT_INTERPRET=1).")
        itemsize = arg.dtype.itemsize
        self.array = array
        self.layout = validate_tensormap(arg.shape, [s * itemsize for s in arg.strides], arg.dtype, arg.data_ptr,
                                         box_shape, element_strides=element_strides, swizzle=swizzle,
                                         l2_promotion=l2_promotion, oob_fill=oob_fill, interleave=interleave)
        self.box_shape: tuple[int, ...] = self.layout.box_dims[::-1]
        self.dtype: DType = arg.dtype
        if interpreting:   # the CPU interpreter: a handle to the layout instead of the driver's bytes
            self._tensor_map = _InterpreterDescriptor(self.layout, array)
        else:
            self._tensor_map = encode_tensormap(self.layout, "TensorMap of " + describe_tensor(
                arg.shape, [s * itemsize for s in arg.strides], arg.dtype, arg.data_ptr))

    @property
    def box_bytes(self) -> int:
        """Bytes one TMA copy of a full box delivers (see :attr:`TensorMapLayout.box_bytes`)."""
        return self.layout.box_bytes

    @property
    def smem_bytes(self) -> int:
        """Bytes of shared memory one copy spans (see :attr:`TensorMapLayout.smem_bytes`)."""
        return self.layout.smem_bytes

    @property
    def element_strides(self) -> tuple[int, ...]:
        """Traversal steps, outermost first."""
        return self.layout.element_strides[::-1]

    @property
    def descriptor_bytes(self) -> bytes:
        """The 128 opaque descriptor bytes (what the kernel receives by value)."""
        return ctypes.string_at(self.address(), DESCRIPTOR_BYTES)

    def address(self) -> int:
        """Host address of the 128-byte descriptor storage: the ``kernelParams`` entry for a
        by-value ``__grid_constant__`` tensor-map parameter.  Valid while ``self`` lives."""
        return self._tensor_map.getPtr()

    __tsjit_tensormap__ = True  # marks descriptor arguments for tsjit.runtime.specialize

    def spec(self):
        """The argument specialization compiled code depends on (``TensorMapSpec``)."""
        steps = self.element_strides
        return abi.TensorMapSpec(self.dtype, self.box_shape, self.layout.rank, self.layout.swizzle,
                             None if set(steps) == {1} else steps)

    def parameter(self) -> ctypes.Array:
        """A ctypes copy of the 128 descriptor bytes: ``ctypes.addressof`` of it is the
        ``kernelParams`` entry of the by-value tensor-map parameter."""
        return (ctypes.c_ubyte * DESCRIPTOR_BYTES).from_buffer_copy(self.descriptor_bytes)

    def key(self) -> tuple:
        """What compiled code may depend on: dtype, rank, box shape, element strides, options (cached:
        a TensorMap never changes)."""
        cached = self.__dict__.get("_key")
        if cached is not None:
            return cached
        layout = self.layout
        self._key = (layout.dtype.name, layout.rank, self.box_shape, self.element_strides, layout.swizzle,
                     layout.interleave, layout.l2_promotion, layout.oob_fill)
        return self._key

    def __repr__(self) -> str:
        return (f"TensorMap(dtype={self.dtype.name}, shape={self.layout.global_dims[::-1]}, "
                f"box_shape={self.box_shape}, swizzle={self.layout.swizzle!r})")
