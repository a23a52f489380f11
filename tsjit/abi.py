"""The kernel ABI: what a compiled kernel needs from the code that launches it.

The one place the runtime and the code generators share facts about a kernel's interface.
It imports nothing from tsjit but the errors and the dtypes, so every layer may use it.

**Arguments.**  A specialization (:class:`TensorSpec`, :class:`ScalarSpec`,
:class:`ConstSpec`, :class:`TensorMapSpec`) is what the compiler knows about one argument;
it is hashable and part of the cache key.  Each spec lists its kernel parameters as
:class:`ParamField` records (:meth:`TensorSpec.parameters`), in order: the device kind of
each (``"ptr"``, ``"i32"``, ``"i64"``, ``"f32"``, ``"tensormap"``...; the frontend maps kinds
to LLVM types), its host packing (a :mod:`struct` format), and whether the value changes from
call to call under one signature (pointers and scalars) or is fixed by it (extents, strides).
The runtime packs exactly these fields (:mod:`tsjit.runtime.specialize`,
:mod:`tsjit.runtime.launch`) and the frontend declares exactly these parameters
(:mod:`tsjit.frontend.specs`); ``tests/test_abi.py`` checks both against the PTX entry.

* :class:`TensorSpec`: an array.  Parameters: the base pointer, then ``rank`` extents, then
  the strides that are not 1, each Int32 (Int64 when ``index64``).
* :class:`ScalarSpec`: a run-time scalar of a dtype; one parameter.
* :class:`ConstSpec`: a compile-time value (``Constexpr``); no parameter.
* :class:`TensorMapSpec`: a TMA descriptor passed by value as a 128-byte grid constant.

**The launch contract** (:class:`LaunchRequirements`).
A Task Scheduling program knows its launch contract when it is lowered: the CTA is
exactly the TaskManager's warps (``threads``), a clustered pipeline needs its cluster
layout (``cluster``), the SMEM allocator's layout and the pipeline barriers need
``min_smem_bytes`` of dynamic shared memory.  A plain kernel declares the same through its
launch bounds (``@tsjit.kernel(max_threads=...)`` -> ``max_threads``).  The launcher
checks a configuration against the contract *before* the driver call, once per distinct
``(grid, block, cluster, smem)`` (the verdict is cached), so a mismatched launch is a
:class:`~tsjit.errors.LaunchError` and not a hung GPU: a TS program launched with 32
threads instead of its 160 waits forever for warps that do not exist.

**The hang record** of ``TSJIT_DEBUG=1`` builds (``HANG_*``).
"""
from __future__ import annotations

import ctypes
import math
import operator
import struct
from dataclasses import asdict, dataclass, replace

from tsjit.errors import CompilationError, LaunchError, UsageTypeError, UsageValueError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType

__all__ = ["ConstSpec", "LaunchRequirements", "ParamField", "ScalarSpec", "TensorMapSpec", "TensorSpec",
           "constant_key", "dims3", "tensormap_spec"]


def dims3(value, field: str = "dimension") -> tuple[int, int, int]:
    """``value`` (an int or a tuple of 1-3 ints) as an ``(x, y, z)`` triple, padded with 1.

    Raises:
        LaunchError: ``value`` is not an int or a tuple/list of 1-3 ints (names ``field``).
    """
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    dims = []
    for item in items:
        try:
            dims.append(None if isinstance(item, bool) else operator.index(item))  # numpy.int64 is one too
        except TypeError:
            dims.append(None)
    if not 1 <= len(dims) <= 3 or None in dims:
        raise LaunchError(f"launch field '{field}' must be an int or a tuple of 1-3 ints; got {value!r}")
    return tuple(dims + [1] * (3 - len(dims)))


def _block_mismatch(count: int, threads: int) -> str:
    """What a CTA of ``count`` threads would do to a TS program written for exactly ``threads``."""
    have, need = -(-count // 32), threads // 32
    if count > threads:
        extra = f"warp {need}" if have - need == 1 else f"warps {need}-{have - 1}"
        return (f"This larger CTA's {extra} would run no task (the tasks cover warps 0-{need - 1}): idle, "
                f"holding registers that the program's register plan (launch bounds, setmaxnreg) does not count.")
    missing = f"warp {need - 1}" if need - have == 1 else f"warps {have}-{need - 1}"
    if count % 32:
        missing = f"part of warp {have - 1}" + (f" and {missing}" if need > have else "")
    return (f"This smaller CTA lacks {missing}: the tasks there would never run, and the tasks waiting on "
            f"them would wait forever.")


def _text(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ")"


@dataclass(frozen=True)
class LaunchRequirements:
    """The launch contract of one compiled kernel (stored in ``CompiledKernel.metadata``).

    Attributes:
        threads: threads per CTA the program needs exactly (a TS program: the TaskManager's
            warps x 32), or ``None`` when any block size works.
        max_threads: the most threads per CTA the kernel was compiled for (launch bound
            ``.maxntid``, ``@tsjit.kernel(max_threads=...)``), or ``None``.
        cluster: CTAs per cluster ``(x, y, z)`` the program needs (a clustered pipeline's
            ``cta_layout_vmnk``; the kernel carries ``.reqnctapercluster``), or ``None``.
            The launcher uses it when the caller gives no ``cluster``.
        min_smem_bytes: dynamic shared memory per CTA the kernel lays out itself (the SMEM
            allocator's total, pipeline barriers, ``shared_array``), bytes.  The launcher
            raises a smaller ``smem_bytes`` to it.
        max_smem_bytes: the target's dynamic shared memory per CTA, bytes (``None``: only the
            device limit given to :meth:`check` applies).
        pdl: the program has programmatic-dependent-launch barriers (``griddepcontrol``).
            Informational: without ``pdl=True`` they are no-ops and the launch is merely
            serialized, so :meth:`check` does not refuse it.

    Source: PTX ISA §11.4 (``.maxntid``, ``.reqntid``, ``.reqnctapercluster``); CUDA
    Programming Guide "Thread Block Clusters" (the grid is a whole number of clusters).
    """

    threads: int | None = None
    max_threads: int | None = None
    cluster: tuple[int, int, int] | None = None
    min_smem_bytes: int = 0
    max_smem_bytes: int | None = None
    pdl: bool = False

    def merged(self, **fields) -> "LaunchRequirements":
        """A copy with ``fields`` declared; a field declared twice with different values is a
        :class:`~tsjit.errors.CompilationError` (two TaskManagers of one kernel disagree)."""
        for name, value in fields.items():
            if name == "cluster" and value is not None:
                value = dims3(value)
            old = getattr(self, name)
            if name in ("threads", "cluster") and old is not None and value is not None and old != value:
                raise CompilationError(f"the kernel declares two launch requirements for '{name}': {old} and "
                                       f"{value}; one kernel has one CTA shape (use one TaskManager per kernel, "
                                       f"or tasks that cover the same warps)")
            fields[name] = value
        return replace(self, **fields)

    # -- the check ----------------------------------------------------------------------------
    def check(self, kernel_name: str, grid, block, cluster, smem_bytes: int, device_limit: int | None) -> None:
        """Refuse a launch configuration that does not match the contract.

        Args:
            kernel_name: the kernel, for messages.
            grid, block: CTAs per grid and threads per CTA (int or 1-3 ints).
            cluster: CTAs per cluster (int, 1-3 ints) or ``None`` (no cluster attribute).
            smem_bytes: dynamic shared memory per CTA the launch will request, bytes.
            device_limit: the device's dynamic shared memory per CTA (opt-in limit minus the
                kernel's static shared memory), bytes; ``None`` skips that check.

        Raises:
            LaunchError: naming the kernel, the field, what was given and what the program
                needs: threads per CTA not equal to ``threads`` (or above ``max_threads``);
                a cluster other than ``cluster``; a grid that is not a whole number of
                clusters; ``smem_bytes`` below ``min_smem_bytes`` or above the device's or
                the target's limit.
        """
        g, b = dims3(grid, "grid"), dims3(block, "block")
        count = b[0] * b[1] * b[2]
        who = f"kernel {kernel_name!r}"
        if self.threads is not None and count != self.threads:
            raise LaunchError(
                f"{who} was launched with block={_text(b)} ({count} threads per CTA), but its program needs "
                f"exactly {self.threads} threads ({self.threads // 32} warps: the TaskManager's tasks); launch "
                f"with block=({self.threads},). {_block_mismatch(count, self.threads)}")
        if self.max_threads is not None and count > self.max_threads:
            raise LaunchError(f"{who} was launched with block={_text(b)} ({count} threads per CTA), but it was "
                              f"compiled for at most {self.max_threads} (launch bound max_threads)")
        c = dims3(cluster, "cluster") if cluster is not None else None
        if self.cluster is not None and self.cluster != (1, 1, 1) and c != self.cluster:
            given = "no cluster" if c is None else f"cluster={_text(c)}"
            raise LaunchError(f"{who} was launched with {given}, but its program needs cluster="
                              f"{_text(self.cluster)} (the pipelines' cta_layout_vmnk); pass cluster="
                              f"{_text(self.cluster)} or leave cluster unset")
        if c is not None:
            for axis, (extent, size) in enumerate(zip(g, c)):
                if size < 1 or extent % size:
                    raise LaunchError(f"{who} was launched with grid={_text(g)}, which is not a whole number of "
                                      f"clusters of {_text(c)} (grid[{axis}]={extent} is not a multiple of "
                                      f"{size}); round grid[{axis}] up to {-(-extent // max(size, 1)) * size}")
        if smem_bytes < self.min_smem_bytes:
            raise LaunchError(f"{who} was launched with smem_bytes={smem_bytes}, but its program lays out "
                              f"{self.min_smem_bytes} bytes of dynamic shared memory; pass at least that")
        for limit, what in ((device_limit, "the device allows"), (self.max_smem_bytes, "the target allows")):
            if limit is not None and smem_bytes > limit:
                need = (f"its program needs {self.min_smem_bytes}" if self.min_smem_bytes > limit else
                        f"the launch asked for {smem_bytes}")
                raise LaunchError(f"{who} needs {smem_bytes} bytes of dynamic shared memory per CTA ({need}), "
                                  f"but {what} {limit}; use fewer stages or smaller tiles")

    # -- cache entries (JSON) -----------------------------------------------------------------
    def to_json(self) -> dict:
        """A JSON-serializable dict (for the on-disk cache entry's metadata)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> "LaunchRequirements":
        """The record :meth:`to_json` wrote; an absent or malformed value is the empty contract."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        try:
            if known.get("cluster") is not None:
                known["cluster"] = dims3(known["cluster"])
            return cls(**known)
        except (TypeError, LaunchError):  # a malformed record: the entry's checksum makes this unlikely
            return cls()


# -- the hang record of TSJIT_DEBUG=1 builds --------------------------------------------------
#: The ``.global .u64`` a debug build reads the hang-record buffer's address from; the runtime
#: sets it after loading the module (``cuModuleGetGlobal``).
HANG_RECORD_SYMBOL = "tsjit_hang_record"
#: The ``.global .u32`` counter a timed-out warp increments to claim a record slot.
HANG_CLAIMS_SYMBOL = "tsjit_hang_claims"
#: Written last into a slot: the slot holds a complete record.
HANG_MAGIC = 0x5453_4A49_5448_4E47
#: Slots in one buffer; warps that time out after they are all claimed are not recorded.
HANG_MAX_RECORDS = 32
#: The 64-bit fields of one slot, in order (``site`` indexes ``metadata["debug_waits"]``;
#: ``-1`` marks a field the wait site does not know).
HANG_FIELDS = ("magic", "site", "cta_x", "cta_y", "cta_z", "warp", "lane", "cluster_rank", "stage", "loop_offset",
               "iteration", "phase", "waited_ns", "sm", "budget_ns", "reserved")
HANG_RECORD_BYTES = 8 * len(HANG_FIELDS)
#: How long a timed-out thread waits after writing before it traps, so that the record reaches
#: host memory and other warps that time out at about the same moment can record theirs (ns).
HANG_GRACE_NS = 50_000_000


# -- the argument ABI -------------------------------------------------------------------------
#: Bytes of one device parameter of each kind (PTX ISA §5.2.2 fundamental types; an ``i1`` is
#: passed as a byte; a tensor map is a 128-byte ``.param .b8 [128]`` grid constant, PTX ISA
#: §5.5.8 "Tensor-map" and CUDA Programming Guide "grid constant").
KIND_BYTES = {"ptr": 8, "tensormap": 128, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2,
              "f32": 4, "f64": 8}

#: The host format of a parameter the launch does not pack into its buffer: the ``kernelParams``
#: entry points at the TMA descriptor's own 128 bytes.
BY_REFERENCE = "T"

#: The :mod:`struct` format of each scalar dtype the host can pass (16-bit and 8-bit floats cannot).
_SCALAR_FORMATS = {"Int8": "b", "Int16": "h", "Int32": "i", "Int64": "q", "Uint8": "B", "Uint16": "H",
                   "Uint32": "I", "Uint64": "Q", "Float32": "f", "Float64": "d", "Boolean": "?"}
_CTYPES = {"b": ctypes.c_int8, "h": ctypes.c_int16, "i": ctypes.c_int32, "q": ctypes.c_int64,
           "B": ctypes.c_uint8, "H": ctypes.c_uint16, "I": ctypes.c_uint32, "Q": ctypes.c_uint64,
           "f": ctypes.c_float, "d": ctypes.c_double, "?": ctypes.c_bool}
_INDEX_DTYPES = {False: dt.Int32, True: dt.Int64}


def scalar_kind(dtype: DType) -> str:
    """The device kind of a ``dtype`` scalar parameter (``"i1"`` for Boolean; an FP8 dtype is
    storage-only and travels as its raw byte, ``"i8"``)."""
    if dtype.is_bool:
        return "i1"
    if dtype.is_float:
        if dtype.bits == 8:
            return "i8"
        if dtype.bits == 16:
            return "bf16" if dtype.name == "BFloat16" else "f16"
        return f"f{dtype.bits}"
    return f"i{dtype.bits}"


@dataclass(frozen=True)
class ParamField:
    """One kernel parameter of an argument, as both sides of the launch see it.

    Attributes:
        suffix: the parameter's name after the argument's (``""`` for the argument itself,
            ``".shape0"``, ``".stride1"``).
        kind: the device kind (a key of :data:`KIND_BYTES`): ``"ptr"`` (a global pointer),
            ``"tensormap"`` (a 128-byte grid constant) or a scalar register kind (``"i32"``...).
        host_format: the :mod:`struct` format the launch packs (native alignment);
            :data:`BY_REFERENCE` for a tensor map; ``None`` for a scalar the host cannot pass.
        dynamic: the value changes from call to call under one argument signature (pointers,
            scalars, descriptors), rather than being fixed by it (extents, strides).
        dtype: the value's dtype (scalars, extents, strides); ``None`` for pointers and descriptors.
    """

    suffix: str
    kind: str
    host_format: str | None
    dynamic: bool
    dtype: DType | None = None

    @property
    def device_bytes(self) -> int:
        """Bytes of the device parameter."""
        return KIND_BYTES[self.kind]

    @property
    def host_bytes(self) -> int | None:
        """Bytes the ``kernelParams`` entry points at (``None``: the host cannot pass it)."""
        if self.host_format == BY_REFERENCE:
            return KIND_BYTES["tensormap"]
        return None if self.host_format is None else struct.calcsize(self.host_format)

    def host_value(self, value) -> ctypes._SimpleCData:
        """``value`` as the ctypes object whose address is this parameter's ``kernelParams`` entry."""
        return _CTYPES[self.host_format](value)


@dataclass(frozen=True)
class TensorSpec:
    """An array argument.

    Attributes:
        dtype: element type.
        rank: number of dimensions.
        aligned16: the base address is a multiple of 16 bytes.
        unit_strides: per dimension, whether the stride (in elements) is 1; such strides are
            compile-time ``1`` and are not passed.
        rows_aligned16: every stride but the innermost is a multiple of 16 bytes.
        index64: indices need 64 bits (an extent or the span reaches 2**31 elements).
    """

    dtype: DType
    rank: int
    aligned16: bool
    unit_strides: tuple
    rows_aligned16: bool
    index64: bool = False

    def key(self) -> tuple:
        """The hashable cache-key part of this spec."""
        return ("T", self.dtype.name, self.rank, self.aligned16, self.unit_strides, self.rows_aligned16,
                self.index64)

    def describe(self) -> str:
        """A short description for messages."""
        return f"{self.dtype.name} array of rank {self.rank}"

    @property
    def index_dtype(self) -> DType:
        """The dtype of extents and strides: Int64 when ``index64``, else Int32."""
        return _INDEX_DTYPES[self.index64]

    def parameters(self) -> tuple[ParamField, ...]:
        """The base pointer, then ``rank`` extents, then the strides that are not 1."""
        index = self.index_dtype
        kind, fmt = ("i64", "q") if self.index64 else ("i32", "i")
        return ((ParamField("", "ptr", "Q", True),)
                + tuple(ParamField(f".shape{k}", kind, fmt, False, index) for k in range(self.rank))
                + tuple(ParamField(f".stride{k}", kind, fmt, False, index)
                        for k, unit in enumerate(self.unit_strides) if not unit))

    def pack(self, data_ptr: int, shape, strides) -> list:
        """The ctypes values of :meth:`parameters` for an array at ``data_ptr`` with ``shape`` and
        ``strides`` (in elements)."""
        ctype = ctypes.c_int64 if self.index64 else ctypes.c_int32
        values = [ctypes.c_uint64(data_ptr)]
        values.extend(ctype(int(e)) for e in shape)
        values.extend(ctype(int(s)) for s, unit in zip(strides, self.unit_strides) if not unit)
        return values


@dataclass(frozen=True)
class ScalarSpec:
    """A run-time scalar argument of ``dtype``: one parameter."""

    dtype: DType

    def key(self) -> tuple:
        """The hashable cache-key part of this spec."""
        return ("S", self.dtype.name)

    def describe(self) -> str:
        """A short description for messages."""
        return f"{self.dtype.name} scalar"

    def parameters(self) -> tuple[ParamField, ...]:
        """One parameter of the scalar's kind."""
        return (ParamField("", scalar_kind(self.dtype), _SCALAR_FORMATS.get(self.dtype.name), True, self.dtype),)

    def pack(self, value, name: str) -> list:
        """``[ctypes value]`` of ``value`` for argument ``name``.

        Raises:
            LaunchError: the dtype cannot be passed from the host (16-bit and 8-bit floats), or an
                integer ``value`` does not fit in it.
        """
        dtype = self.dtype
        fmt = _SCALAR_FORMATS.get(dtype.name)
        if fmt is None:
            raise LaunchError(f"argument '{name}': {dtype.name} scalars cannot be passed from the host; pass a "
                              f"Float32 and convert it in the kernel")
        if dtype.is_int:
            v = int(value)
            lo, hi = (-(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1)) if dtype.is_signed else (0, 2 ** dtype.bits)
            if not lo <= v < hi:
                raise LaunchError(f"argument '{name}': {v} does not fit in {dtype.name}")
            return [_CTYPES[fmt](v)]
        return [_CTYPES[fmt](value)]


@dataclass(frozen=True)
class ConstSpec:
    """A compile-time argument (``Constexpr``): no parameter."""

    value: object

    def key(self) -> tuple:
        """The hashable cache-key part of this spec."""
        return ("C", constant_key(self.value))

    def describe(self) -> str:
        """A short description for messages."""
        return f"compile-time {self.value!r}"

    def parameters(self) -> tuple[ParamField, ...]:
        """None: the value is folded into the code."""
        return ()


@dataclass(frozen=True)
class TensorMapSpec:
    """A TMA descriptor argument, passed by value as a 128-byte grid constant.

    Attributes:
        dtype: element type; box_shape: the box, outermost first; rank: tensor rank;
        swizzle: ``"none"``, ``"32B"``, ``"64B"`` or ``"128B"``; element_strides: outermost
        first, ``None`` when all 1.
    """

    dtype: DType
    box_shape: tuple
    rank: int
    swizzle: str
    element_strides: tuple | None = None   # outermost first; None when all 1

    def key(self) -> tuple:
        """The hashable cache-key part of this spec."""
        base = ("M", self.dtype.name, self.box_shape, self.rank, self.swizzle)
        return base if self.element_strides is None else base + (self.element_strides,)

    def describe(self) -> str:
        """A short description for messages."""
        return f"TensorMap of {self.dtype.name}, box {self.box_shape}"

    def parameters(self) -> tuple[ParamField, ...]:
        """One 128-byte descriptor, which the launch passes by reference to its own bytes."""
        return (ParamField("", "tensormap", BY_REFERENCE, True),)


# TMA descriptor rules (cuTensorMapEncodeTiled, CUDA Driver API 12.x/13.x) that a compile spec
# can check without an array; tsjit.runtime.tensormap checks the rest.
TMA_SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
TMA_MAX_BOX_DIM = 256
TMA_MAX_ELEMENT_STRIDE = 8
TMA_ALIGN = 16   # bytes: global strides, base address, innermost box row


class Refusal:
    """Raises the error of one broken TMA rule: ``"<subject>: '<field>' <problem>.\n  <fix>"``.

    ``subject`` names what is checked (``"TensorMap of the (64, 64) Float32 array (...)"``,
    ``"tensormap_spec(Float32, box_shape=(32, 300))"``); ``error`` is the class raised
    (:class:`~tsjit.errors.LaunchError` for a TensorMap, a usage error for a compile spec).
    """

    def __init__(self, subject: str, error: type = LaunchError):
        self.subject = subject
        self.error = error

    def __call__(self, field: str, problem: str, fix: str):
        raise self.error(f"{self.subject}: '{field}' {problem}.\n  {fix}")


def round_up(value: int, multiple: int) -> int:
    """``value`` rounded up to a multiple of ``multiple``."""
    return -(-value // multiple) * multiple


def tma_smem_footprint(tile_shape, itemsize: int, swizzle: str) -> int:
    """Bytes of shared memory one TMA tiled copy of a full box spans at its destination.

    Args:
        tile_shape: the packed tile, outermost first (``ceil(box / element_stride)`` per dimension).
        itemsize: bytes per element.
        swizzle: ``"none"``, ``"32B"``, ``"64B"`` or ``"128B"``.

    Returns:
        The product of the tile times ``itemsize`` (the ``expect_tx`` count), except under a
        swizzle whose span is wider than the innermost row: then every row starts at a multiple
        of the span and the copy spans ``rows * span`` bytes.  Measured on the H200 2026-12-01
        (tests/gpu/test_interpret_tensor_gpu.py: a 64B-swizzled box of 16-byte rows overwrote the
        mbarrier placed right after its ``box_bytes``).
    """
    rows = math.prod(tile_shape[:-1])
    inner = tile_shape[-1] * itemsize
    span = TMA_SWIZZLE_BYTES.get(swizzle, 0)
    return rows * max(inner, span)


def check_tma_box(box, itemsize: int, swizzle: str, interleave: str, refuse: Refusal) -> None:
    """The ``cuTensorMapEncodeTiled`` box rules (CUDA Driver API 12.x/13.x): every extent of
    ``box`` (outermost first) in 1..256; without interleave the innermost box row
    (``box[-1] * itemsize`` bytes) a multiple of 16 bytes and, with a swizzle, at most its span;
    ``interleave="32B"`` needs ``swizzle="32B"``.  A broken rule calls ``refuse`` (raises)."""
    rank = len(box)
    for axis, extent in enumerate(box):
        if not 1 <= extent <= TMA_MAX_BOX_DIM:
            refuse(f"box_shape[{axis}]", f"is {extent}; TMA boxes have 1 to {TMA_MAX_BOX_DIM} elements per "
                   f"dimension", f"Use box_shape[{axis}] <= {TMA_MAX_BOX_DIM} and issue several copies.")
    if interleave != "none":
        if interleave == "32B" and swizzle != "32B":
            refuse("swizzle", f"is {swizzle!r}, but interleave='32B' needs swizzle='32B'", "Pass swizzle='32B'.")
        return
    inner = box[-1] * itemsize
    elements_per_16 = TMA_ALIGN // math.gcd(TMA_ALIGN, itemsize)
    if inner % TMA_ALIGN:
        refuse(f"box_shape[{rank - 1}]", f"(innermost) is {box[-1]}: box rows of {box[-1]} x {itemsize} = "
               f"{inner} bytes, not a multiple of 16", f"Use a multiple of {elements_per_16} elements, e.g. "
               f"box_shape[{rank - 1}]={round_up(box[-1], elements_per_16)}.")
    span = TMA_SWIZZLE_BYTES[swizzle]
    if span and inner > span:
        wider = [name for name, nbytes in TMA_SWIZZLE_BYTES.items() if nbytes >= inner]
        refuse(f"box_shape[{rank - 1}]", f"(innermost) is {box[-1]}: box rows of {inner} bytes exceed the "
               f"{span}-byte span of swizzle={swizzle!r}",
               f"Use box_shape[{rank - 1}] <= {span // itemsize}" + (f", or swizzle={wider[0]!r}." if wider
                                                                     else " and issue several copies."))


def check_tma_element_strides(steps, refuse: Refusal) -> None:
    """Element strides (outermost first) each in 1..8, the innermost 1 (tsjit's rule: without
    interleave the driver ignores it).  A broken rule calls ``refuse`` (raises)."""
    rank = len(steps)
    for axis, step in enumerate(steps):
        if not 1 <= step <= TMA_MAX_ELEMENT_STRIDE:
            refuse(f"element_strides[{axis}]", f"is {step}; TMA steps 1 to {TMA_MAX_ELEMENT_STRIDE} elements",
                   f"Use element_strides[{axis}] in 1..{TMA_MAX_ELEMENT_STRIDE}.")
    if steps[-1] != 1:
        refuse(f"element_strides[{rank - 1}]", f"(innermost) is {steps[-1]}; tsjit supports only 1 there (without "
               f"interleave the driver ignores it and copies dense rows)",
               "Pass 1 and subsample the innermost dimension after the copy.")


def tensormap_spec(dtype: DType, box_shape, *, rank: int | None = None, swizzle: str = "none",
                   element_strides=None) -> TensorMapSpec:
    """A stand-in for a :class:`tsjit.TensorMap` argument when compiling without a GPU
    (``tsjit.compile(kernel, tsjit.tensormap_spec(tsjit.Float32, (64, 64)), ...)``).

    ``box_shape`` and ``element_strides`` are outermost first.  The box obeys the same rules
    as :class:`tsjit.TensorMap` (:func:`check_tma_box`, :func:`check_tma_element_strides`),
    so a box the GPU would refuse is refused at compile time.

    Raises:
        UsageValueError: starting ``"tensormap_spec(<dtype>, box_shape=...)"``, naming the field
            (``swizzle``, ``box_shape[i]``, ``element_strides[i]``), the value and what to change.
        UsageTypeError: ``dtype`` is not a tsjit dtype, or a shape entry is not an int.
    """
    if not isinstance(dtype, DType):
        raise UsageTypeError(f"tensormap_spec: dtype is {dtype!r}; pass a tsjit dtype such as tsjit.Float32")
    try:
        box = tuple(operator.index(b) for b in box_shape)
        given_steps = None if element_strides is None else tuple(operator.index(e) for e in element_strides)
    except TypeError:
        raise UsageTypeError(f"tensormap_spec: box_shape={box_shape!r}, element_strides={element_strides!r}; "
                             f"pass tuples of ints, outermost first") from None
    refuse = Refusal(f"tensormap_spec({dtype.name}, box_shape={box})", UsageValueError)
    if swizzle not in TMA_SWIZZLE_BYTES:
        refuse("swizzle", f"is {swizzle!r}", f"Pass one of {list(TMA_SWIZZLE_BYTES)}.")
    if not box:
        refuse("box_shape", "is empty", "TMA copies boxes of 1 to 5 dimensions: give one extent per dimension.")
    check_tma_box(box, dtype.itemsize, swizzle, "none", refuse)
    if given_steps is not None:
        if len(given_steps) != len(box):
            refuse("element_strides", f"has {len(given_steps)} entries {given_steps}",
                   f"Give {len(box)}, one per box dimension.")
        check_tma_element_strides(given_steps, refuse)
    steps = None if given_steps is None or set(given_steps) == {1} else given_steps
    return TensorMapSpec(dtype, box, rank or len(box), swizzle, steps)


def constant_key(value) -> str:
    """A stable string for a compile-time value in cache keys (dtypes by name, tuples recursively).

    Raises:
        UsageTypeError: the value has no stable representation (e.g. an arbitrary object).
    """
    if isinstance(value, DType):
        return f"dtype:{value.name}"
    if isinstance(value, (bool, int, float, str, type(None))):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}(" + ",".join(constant_key(v) for v in value) + ")"
    if hasattr(value, "__tsjit_key__"):
        return value.__tsjit_key__()
    if isinstance(value, type) or callable(value):
        mod = getattr(value, "__module__", "?")
        return f"obj:{mod}.{getattr(value, '__qualname__', repr(value))}"
    raise UsageTypeError(f"a {type(value).__name__} object cannot be a compile-time kernel argument; pass an int, "
                         f"float, bool, str, dtype, tuple of those, or a function/class")
