"""TMA descriptors (``CUtensorMap``) built through one validated host constructor.

A :class:`TensorMap` describes a tiled view of a device array for the Tensor Memory
Accelerator: the array's shape and byte strides, the box (tile) copied per TMA
instruction, the shared-memory swizzle, L2 promotion and out-of-bounds fill.  The kernel
receives its 128 opaque bytes by value as a ``__grid_constant__`` parameter
(``ptr byval([128 x i8]) align 128``; ``shared/reference/toolchain.md`` §4).

Dimensions are given **outermost first**, like numpy (``box_shape=(64, 128)`` for a
64-row, 128-column tile of a row-major matrix); ``cuTensorMapEncodeTiled`` wants them
innermost first, and this module reverses them.

Bad descriptors are a known source of illegal-instruction faults and silently wrong
results (anchors.md §5 #18), so :func:`validate_tensormap` checks every documented rule
before the driver sees it and names the field that breaks it.  It is a pure function,
testable without a GPU.  Source of the rules: CUDA Driver API,
``cuTensorMapEncodeTiled`` ("The parameters passed are bound to the following
requirements"), CUDA 12.x/13.x.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

from tsjit.errors import LaunchError
from tsjit.lang.dtypes import DType
from tsjit.runtime import driver
from tsjit.runtime.arrays import describe_array_argument, resolve_dtype

DESCRIPTOR_BYTES = 128

# DType -> CUtensorMapDataType member name. TMA moves bytes; the type matters only for
# NaN out-of-bounds fill, so signed 8/16-bit and Boolean use the unsigned types of their width.
TENSOR_MAP_DATA_TYPES: dict[str, str] = {
    "Uint8": "UINT8", "Int8": "UINT8", "Boolean": "UINT8",
    "Uint16": "UINT16", "Int16": "UINT16",
    "Uint32": "UINT32", "Int32": "INT32",
    "Uint64": "UINT64", "Int64": "INT64",
    "Float16": "FLOAT16", "BFloat16": "BFLOAT16", "Float32": "FLOAT32", "Float64": "FLOAT64",
}
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTIONS = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
OOB_FILLS = {"zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}
INTERLEAVES = {"none": "NONE", "16B": "16B", "32B": "32B"}
MAX_RANK = 5
MAX_BOX_DIM = 256
MAX_ELEMENT_STRIDE = 8
MAX_GLOBAL_DIM = 2 ** 32
MAX_GLOBAL_STRIDE = 2 ** 40


@dataclass(frozen=True)
class TensorMapLayout:
    """The validated arguments of ``cuTensorMapEncodeTiled``, in the driver's order.

    Attributes:
        dtype: element type.
        global_address: base address (bytes).
        global_dims: extents, innermost first (``len == rank``).
        global_strides: byte strides of dimensions 1..rank-1, innermost first.
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
        """Bytes one TMA copy of a full box moves (the ``expect_tx`` count): the product over
        dimensions of ``ceil(box / element_stride)`` times the element size; the innermost
        element stride is ignored without interleave (as TMA does)."""
        counts = [math.ceil(box / step) for box, step in zip(self.box_dims, self.element_strides)]
        if self.interleave == "none":
            counts[0] = self.box_dims[0]
        return math.prod(counts) * self.dtype.itemsize


def _choice(value: str, table: dict, field: str) -> str:
    if value not in table:
        raise LaunchError(f"tensor map field '{field}' must be one of {list(table)}; got {value!r}")
    return value


def _int_tuple(values, field: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise LaunchError(f"tensor map field '{field}' must be a tuple of ints; got {values!r}") from None


def validate_tensormap(shape, strides_bytes, dtype, base_ptr: int, box_shape, *, element_strides=None,
                       swizzle: str = "none", l2_promotion: str = "none", oob_fill: str = "zero",
                       interleave: str = "none") -> TensorMapLayout:
    """Check a tiled TMA descriptor against ``cuTensorMapEncodeTiled``'s requirements.

    Args:
        shape: global extents, outermost first; rank 1..5, each 1..2**32.
        strides_bytes: byte stride of every dimension, outermost first; the innermost must
            equal the element size (dense rows), the others be multiples of 16 (of 32 with
            ``interleave="32B"``) and below 2**40.
        dtype: element DType (see :data:`TENSOR_MAP_DATA_TYPES`).
        base_ptr: device address; 16-byte aligned (32 with ``interleave="32B"``).
        box_shape: box extents, outermost first; each 1..256; without interleave the
            innermost box row must be a multiple of 16 bytes, and with a swizzle at most
            the swizzle span (32, 64 or 128 bytes).
        element_strides: traversal steps, outermost first, each 1..8 (default all 1).
        swizzle: ``"none"``, ``"32B"``, ``"64B"``, ``"128B"``.
        l2_promotion: ``"none"``, ``"64B"``, ``"128B"``, ``"256B"``.
        oob_fill: ``"zero"``, or ``"nan"`` (float dtypes only).
        interleave: ``"none"``, ``"16B"``, ``"32B"``; interleaved layouts need rank >= 3,
            and ``"32B"`` needs ``swizzle="32B"``.

    Returns:
        The driver's arguments, innermost first (:class:`TensorMapLayout`).

    Raises:
        LaunchError: naming the field (``rank``, ``dtype``, ``base_ptr``, ``shape[i]``,
            ``strides_bytes[i]``, ``box_shape[i]``, ``element_strides[i]``, ``swizzle``,
            ``oob_fill``, ``interleave``), the rule, and the value given.  Indices are
            numpy-ordered (outermost first).
    """
    _choice(swizzle, SWIZZLE_BYTES, "swizzle")
    _choice(l2_promotion, L2_PROMOTIONS, "l2_promotion")
    _choice(oob_fill, OOB_FILLS, "oob_fill")
    _choice(interleave, INTERLEAVES, "interleave")
    try:
        kind = resolve_dtype(dtype)
    except Exception:
        raise LaunchError(f"tensor map field 'dtype' must be a tsjit dtype; got {dtype!r}") from None
    if kind.name not in TENSOR_MAP_DATA_TYPES:
        raise LaunchError(f"tensor map field 'dtype' {kind.name} is not supported by TMA; supported: "
                          f"{sorted(TENSOR_MAP_DATA_TYPES)}")
    dims = _int_tuple(shape, "shape")
    strides = _int_tuple(strides_bytes, "strides_bytes")
    box = _int_tuple(box_shape, "box_shape")
    rank = len(dims)
    if not 1 <= rank <= MAX_RANK:
        raise LaunchError(f"tensor map field 'rank' must be in 1..{MAX_RANK}; got {rank} (shape={dims})")
    if interleave != "none" and rank < 3:
        raise LaunchError(f"tensor map field 'rank' must be >= 3 with interleave={interleave!r}; got {rank}")
    steps = (1,) * rank if element_strides is None else _int_tuple(element_strides, "element_strides")
    for field, values in (("strides_bytes", strides), ("box_shape", box), ("element_strides", steps)):
        if len(values) != rank:
            raise LaunchError(f"tensor map field '{field}' must have {rank} entries (one per dimension "
                              f"of shape {dims}); got {values}")
    itemsize = kind.itemsize
    stride_multiple = 32 if interleave == "32B" else 16
    if base_ptr % stride_multiple:
        raise LaunchError(f"tensor map field 'base_ptr' must be {stride_multiple}-byte aligned; got "
                          f"0x{base_ptr:x} (offset {base_ptr % stride_multiple} bytes)")
    for axis, extent in enumerate(dims):
        if not 1 <= extent <= MAX_GLOBAL_DIM:
            raise LaunchError(f"tensor map field 'shape[{axis}]' must be in 1..2**32; got {extent}")
    if strides[-1] != itemsize:
        raise LaunchError(f"tensor map field 'strides_bytes[{rank - 1}]' (innermost) must equal the element "
                          f"size {itemsize} (TMA needs a dense innermost dimension); got {strides[-1]}")
    for axis in range(rank - 1):
        stride = strides[axis]
        if stride <= 0 or stride % stride_multiple or stride >= MAX_GLOBAL_STRIDE:
            raise LaunchError(f"tensor map field 'strides_bytes[{axis}]' must be a positive multiple of "
                              f"{stride_multiple} below 2**40; got {stride} (shape={dims}, "
                              f"strides_bytes={strides})")
    for axis, extent in enumerate(box):
        if not 1 <= extent <= MAX_BOX_DIM:
            raise LaunchError(f"tensor map field 'box_shape[{axis}]' must be in 1..{MAX_BOX_DIM}; got {extent}")
    inner_bytes = box[-1] * itemsize
    if interleave == "none":
        if inner_bytes % 16:
            raise LaunchError(f"tensor map field 'box_shape[{rank - 1}]' (innermost) times the element size "
                              f"must be a multiple of 16 bytes; got {box[-1]} x {itemsize} = {inner_bytes}")
        span = SWIZZLE_BYTES[swizzle]
        if span and inner_bytes > span:
            raise LaunchError(f"tensor map field 'box_shape[{rank - 1}]' (innermost) spans {inner_bytes} bytes; "
                              f"swizzle={swizzle!r} allows at most {span} (got {box[-1]} x {itemsize})")
    elif interleave == "32B" and swizzle != "32B":
        raise LaunchError(f"tensor map field 'swizzle' must be '32B' with interleave='32B'; got {swizzle!r}")
    for axis, step in enumerate(steps):
        if not 1 <= step <= MAX_ELEMENT_STRIDE:
            raise LaunchError(f"tensor map field 'element_strides[{axis}]' must be in 1..{MAX_ELEMENT_STRIDE}; "
                              f"got {step}")
    if oob_fill == "nan" and not kind.is_float:
        raise LaunchError(f"tensor map field 'oob_fill' may be 'nan' only for float dtypes; dtype is {kind.name}")
    return TensorMapLayout(kind, int(base_ptr), dims[::-1], strides[-2::-1], box[::-1], steps[::-1],
                           interleave, swizzle, l2_promotion, oob_fill)


def encode_tensormap(layout: TensorMapLayout):
    """Call ``cuTensorMapEncodeTiled`` for a validated layout; returns the ``CUtensorMap``.

    Raises:
        LaunchError: no GPU, or the driver rejected the descriptor.
    """
    cu = driver.bindings()
    swizzle = "NONE" if layout.swizzle == "none" else layout.swizzle
    return driver.check(cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + TENSOR_MAP_DATA_TYPES[layout.dtype.name]),
        layout.rank, layout.global_address,
        [cu.cuuint64_t(d) for d in layout.global_dims],
        [cu.cuuint64_t(s) for s in layout.global_strides],
        [cu.cuuint32_t(b) for b in layout.box_dims],
        [cu.cuuint32_t(e) for e in layout.element_strides],
        getattr(cu.CUtensorMapInterleave, "CU_TENSOR_MAP_INTERLEAVE_" + INTERLEAVES[layout.interleave]),
        getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + swizzle),
        getattr(cu.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + L2_PROMOTIONS[layout.l2_promotion]),
        getattr(cu.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + OOB_FILLS[layout.oob_fill]),
    ), "cuTensorMapEncodeTiled")


class TensorMap:
    """A TMA descriptor for a tiled view of a device array.

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

    Raises:
        LaunchError: ``array`` is not a device array, a rule of :func:`validate_tensormap`
            is broken, no GPU is present, or the driver refuses.
    """

    def __init__(self, array, box_shape, *, element_strides=None, swizzle: str = "none",
                 l2_promotion: str = "none", oob_fill: str = "zero", interleave: str = "none"):
        arg = describe_array_argument(array, "tensor map array")
        if arg is None or arg.device_kind != "cuda":
            kind = "a host array" if arg is not None else type(array).__name__
            raise LaunchError(f"tensor map field 'array' must be a device array; got {kind} "
                              f"(pass tsjit.to_device(x))")
        itemsize = arg.dtype.itemsize
        self.array = array
        self.layout = validate_tensormap(arg.shape, [s * itemsize for s in arg.strides], arg.dtype, arg.data_ptr,
                                         box_shape, element_strides=element_strides, swizzle=swizzle,
                                         l2_promotion=l2_promotion, oob_fill=oob_fill, interleave=interleave)
        self.box_shape: tuple[int, ...] = self.layout.box_dims[::-1]
        self.dtype: DType = arg.dtype
        self._tensor_map = encode_tensormap(self.layout)

    @property
    def box_bytes(self) -> int:
        """Bytes one TMA copy of a full box delivers (see :attr:`TensorMapLayout.box_bytes`)."""
        return self.layout.box_bytes

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
        from tsjit.frontend.specs import TensorMapSpec  # lazily: the frontend needs llvmlite

        return TensorMapSpec(self.dtype, self.box_shape, self.layout.rank, self.layout.swizzle)

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
        self._key = (layout.dtype.name, layout.rank, self.box_shape, layout.element_strides[::-1], layout.swizzle,
                     layout.interleave, layout.l2_promotion, layout.oob_fill)
        return self._key

    def __repr__(self) -> str:
        return (f"TensorMap(dtype={self.dtype.name}, shape={self.layout.global_dims[::-1]}, "
                f"box_shape={self.box_shape}, swizzle={self.layout.swizzle!r})")
