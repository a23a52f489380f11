"""Hopper wgmma shared-memory matrix descriptors: :func:`make_descriptor`, :func:`advance_descriptor`,
:func:`descriptor_constant_bits` and :class:`MatrixDescriptor` (its K-step advance).  Public through
:mod:`tsjit.lang.wgmma` (``tsjit.wgmma``), whose module docstring gives the 64-bit format and the LBO / SBO
rules per major and swizzle.  Source: PTX ISA 8.x §9.7.15.5.1.2 "Matrix Descriptor" (§9.7.15.5.1.2.2
"Matrix Descriptor Format")."""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.values import Value, as_value, cast_to, constant

#: swizzle name -> (descriptor mode, bits 63-62; span in bytes of one pattern row)
SWIZZLE_MODES = {"none": (0, 0), "128B": (1, 128), "64B": (2, 64), "32B": (3, 32)}
MAJORS = ("K", "MN")
_FIELD_LIMIT = 1 << 14          # LBO / SBO / start address are 14-bit fields of (bytes >> 4)


def descriptor_constant_bits(*, leading_byte_offset: int, stride_byte_offset: int, swizzle: str,
                             base_offset: int = 0) -> int:
    """Bits 14-63 of a wgmma matrix descriptor (everything but the start address), as an int.

    Args:
        leading_byte_offset, stride_byte_offset: LBO / SBO in bytes (multiples of 16, < 2**18).
        swizzle: ``"128B"``, ``"64B"``, ``"32B"`` or ``"none"``.
        base_offset: the 3-bit matrix base offset (0..7).

    ``descriptor_constant_bits(leading_byte_offset=16, stride_byte_offset=1024, swizzle="128B")``
    is ``0x4000004000010000``, the K-major 128B value verified on the H200.

    Raises:
        CompilationError: a field out of range.
    """
    if swizzle not in SWIZZLE_MODES:
        raise CompilationError(f"swizzle must be one of {list(SWIZZLE_MODES)}, got {swizzle!r}")
    fields = {}
    for name, value in (("leading_byte_offset", leading_byte_offset), ("stride_byte_offset", stride_byte_offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value % 16 or \
                value >> 4 >= _FIELD_LIMIT:
            raise CompilationError(f"wgmma descriptor {name} must be a compile-time multiple of 16 bytes below "
                                   f"{_FIELD_LIMIT * 16}, got {value!r}")
        fields[name] = value >> 4
    if isinstance(base_offset, bool) or not isinstance(base_offset, int) or not 0 <= base_offset < 8:
        raise CompilationError(f"wgmma descriptor base_offset must be in 0..7, got {base_offset!r}")
    mode = SWIZZLE_MODES[swizzle][0]
    return (mode << 62) | (base_offset << 49) | (fields["stride_byte_offset"] << 32) | \
        (fields["leading_byte_offset"] << 16)


class MatrixDescriptor(Value):
    """A wgmma shared-memory matrix descriptor (a Uint64 :class:`Value`) that remembers how it was
    made, so :func:`mma_async` can check it against the instruction.

    Attributes:
        element_dtype: dtype of the tile's elements.
        major: ``"K"`` or ``"MN"``.
        swizzle: ``"128B"``, ``"64B"``, ``"32B"`` or ``"none"``.
        leading_byte_offset, stride_byte_offset: LBO / SBO in bytes.

    A descriptor that passes through a run-time ``if``/loop join comes out as a plain Uint64
    Value (the metadata is compile-time only); :func:`mma_async` then needs ``a_dtype`` /
    ``trans_*`` explicitly.
    """

    __slots__ = ("element_dtype", "major", "swizzle", "leading_byte_offset", "stride_byte_offset")

    def __init__(self, ir_value, element_dtype: DType, major: str, swizzle: str, leading_byte_offset: int,
                 stride_byte_offset: int):
        super().__init__(ir_value, dt.Uint64)
        self.element_dtype = element_dtype
        self.major = major
        self.swizzle = swizzle
        self.leading_byte_offset = leading_byte_offset
        self.stride_byte_offset = stride_byte_offset

    def __repr__(self) -> str:
        return f"MatrixDescriptor[{self.element_dtype.name}, {self.major}-major, swizzle {self.swizzle}]"

    def advance(self, nbytes) -> "MatrixDescriptor":
        """This descriptor with the start address moved by ``nbytes`` (see :func:`advance_descriptor`)."""
        moved = advance_descriptor(self, nbytes)
        return MatrixDescriptor(moved.ir, self.element_dtype, self.major, self.swizzle, self.leading_byte_offset,
                                self.stride_byte_offset)

    def k_step_bytes(self) -> int:
        """Bytes the start address moves per MMA K-step (one ``mma_async`` consumes 32 bytes of K)."""
        k_bytes = 32
        if self.major == "K":
            if self.swizzle == "none":
                return (k_bytes // 16) * self.leading_byte_offset   # two core matrices along K
            return k_bytes
        if self.swizzle == "none":
            raise CompilationError("k_step for an MN-major descriptor without swizzle is not defined here; "
                                   "advance it with tsjit.wgmma.advance_descriptor(desc, nbytes)")
        k_rows = k_bytes // self.element_dtype.itemsize           # K rows of one MMA
        return (k_rows // 8) * self.stride_byte_offset

    def k_step(self, k: int) -> "MatrixDescriptor":
        """The descriptor of the ``k``-th MMA K-step inside this tile (``k`` a compile-time int).

        K-major swizzled: ``+32 * k`` bytes (``k < span / 32``: 4 steps in a 128-byte row);
        MN-major swizzled: ``+k * (K / 8) * SBO`` bytes; K-major no-swizzle: ``+2 * k * LBO`` bytes.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise CompilationError(f"k_step needs a compile-time int >= 0, got {k!r}")
        span = SWIZZLE_MODES[self.swizzle][1]
        if self.major == "K" and span and k >= span // 32:
            raise CompilationError(
                f"k_step({k}) leaves the {span}-byte swizzled row of a K-major tile ({span // 32} K-steps of 32 "
                f"bytes); make one descriptor per K tile")
        return self if k == 0 else self.advance(k * self.k_step_bytes())


def _shared_tile(tile, what: str) -> Pointer:
    if isinstance(tile, Tensor):
        tile = tile.ptr
    if not isinstance(tile, Pointer) or tile.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.wgmma.{what} needs a shared-memory tile (a tsjit.shared_array view or a "
                               f"shared Pointer), got {tile!r}")
    return tile


def _default_offsets(tile, ptr: Pointer, major: str, swizzle: str, lbo, sbo):
    """LBO / SBO defaults for swizzled layouts (see the module docstring); checks the tile shape."""
    span = SWIZZLE_MODES[swizzle][1]
    itemsize = ptr.dtype.itemsize
    shape = tile.shape if isinstance(tile, Tensor) else None
    static = shape is not None and all(isinstance(s, int) for s in shape)
    if swizzle == "none":
        if lbo is None or sbo is None:
            raise CompilationError(
                "a wgmma descriptor without swizzle needs leading_byte_offset= and stride_byte_offset= (the byte "
                "distances between 8x16-byte core matrices along K and along M/N; PTX ISA §9.7.15.5.1.2.1)")
        return lbo, sbo
    if static and len(shape) >= 2 and shape[-1] * itemsize != span:
        raise CompilationError(
            f"a {swizzle}-swizzled {major}-major wgmma tile must have rows of exactly {span} bytes "
            f"({span // itemsize} x {ptr.dtype.name}), as a TMA box with swizzle={swizzle!r} writes them; this "
            f"tile's rows are {shape[-1]} x {itemsize} = {shape[-1] * itemsize} bytes")
    if sbo is None:
        sbo = 8 * span
    if lbo is None:
        if major == "K":
            lbo = 16                      # "not used, assumed to be 1" (encoded 1)
        elif static and len(shape) >= 3:
            lbo = tile.strides[-3] * itemsize
        elif static and len(shape) == 2:
            lbo = shape[0] * span         # the next column block follows this one
        else:
            raise CompilationError(
                "an MN-major swizzled wgmma descriptor needs leading_byte_offset= (bytes between consecutive "
                f"{span}-byte column blocks of M/N) unless the tile is a (blocks, K, {span // itemsize}) or "
                f"(K, {span // itemsize}) shared array")
    return lbo, sbo


def make_descriptor(tile, *, major: str = "K", swizzle: str = "128B", leading_byte_offset: int | None = None,
                    stride_byte_offset: int | None = None, base_offset: int = 0) -> MatrixDescriptor:
    """The wgmma matrix descriptor of a shared-memory tile (PTX ISA §9.7.15.5.1.2.2).

    Args:
        tile: a shared-memory :class:`Tensor` view (``tiles[stage]``) or shared :class:`Pointer`;
            its address is the start address.  With a swizzle and ``base_offset=0`` it must be
            aligned to the pattern (1024 bytes for 128B, 512 for 64B, 256 for 32B), as TMA writes
            swizzled boxes; 16 bytes without swizzle.
        major: ``"K"`` (K contiguous: A as (M, K) or B as (N, K) row-major) or ``"MN"``.
        swizzle: ``"128B"``, ``"64B"``, ``"32B"`` or ``"none"``; must match the TMA descriptor
            that filled the tile.
        leading_byte_offset, stride_byte_offset: LBO / SBO in bytes; defaults for swizzled
            layouts are in the module docstring (K-major 128B: 16 -> "assumed 1", and 1024).
        base_offset: the matrix base offset field (0..7), for tiles not aligned to the pattern.

    Returns:
        A :class:`MatrixDescriptor` (Uint64): ``((addr >> 4) & 0x3FFF) | constant bits``.

    Raises:
        CompilationError: not a shared-memory tile, unknown major/swizzle, misaligned tile, rows
            that do not match the swizzle span, or LBO/SBO out of range.
    """
    ptr = _shared_tile(tile, "make_descriptor")
    if major not in MAJORS:
        raise CompilationError(f"tsjit.wgmma.make_descriptor: major must be 'K' or 'MN', got {major!r}")
    if swizzle not in SWIZZLE_MODES:
        raise CompilationError(f"tsjit.wgmma.make_descriptor: swizzle must be one of {list(SWIZZLE_MODES)}, "
                               f"got {swizzle!r}")
    span = SWIZZLE_MODES[swizzle][1]
    needed = 8 * span if (span and base_offset == 0) else 16
    if ptr.alignment < needed:
        raise CompilationError(
            f"tsjit.wgmma.make_descriptor: a {swizzle}-swizzled wgmma tile must start on a {needed}-byte boundary "
            f"(where the swizzle pattern starts, PTX ISA §9.7.15.5.1.2.2), but this tile is only known to be "
            f"{ptr.alignment}-byte aligned; allocate it with tsjit.shared_array(..., align=1024) and index whole "
            f"tiles, or pass base_offset=")
    lbo, sbo = _default_offsets(tile, ptr, major, swizzle, leading_byte_offset, stride_byte_offset)
    upper = descriptor_constant_bits(leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle=swizzle,
                                     base_offset=base_offset)
    b = emit.current().builder
    address = Value(b.ptrtoint(ptr.ir, emit.I64), dt.Uint64)      # shared-window address
    encoded = (address >> 4) & (_FIELD_LIMIT - 1)
    desc = encoded | constant(upper, dt.Uint64)
    return MatrixDescriptor(desc.ir, ptr.dtype, major, swizzle, lbo, sbo)


def advance_descriptor(desc, nbytes):
    """``desc`` with its start address moved by ``nbytes`` (a multiple of 16; Int Value or int).

    A 64-bit add of ``nbytes >> 4`` to the descriptor; the caller keeps the address inside
    shared memory (the 14-bit field does not carry into LBO for addresses below 256 KiB).  A
    :class:`MatrixDescriptor` stays one.

    Raises:
        CompilationError: ``nbytes`` is a compile-time value that is not a multiple of 16.
    """
    if not isinstance(desc, Value) or not desc.dtype.is_int or desc.dtype.bits != 64:
        raise CompilationError(f"tsjit.wgmma.advance_descriptor needs a 64-bit descriptor, got {desc!r}")
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        if nbytes % 16:
            raise CompilationError(f"a wgmma descriptor moves in units of 16 bytes; {nbytes} is not a multiple of 16")
        if nbytes == 0:
            return desc
        moved = Value(emit.current().builder.add(desc.ir, ir.Constant(emit.I64, (nbytes >> 4) % (1 << 64))),
                      desc.dtype)
    else:
        step = cast_to(as_value(nbytes, dt.Int32), dt.Int64) >> 4
        moved = Value(emit.current().builder.add(desc.ir, step.ir), desc.dtype)
    if isinstance(desc, MatrixDescriptor):
        return MatrixDescriptor(moved.ir, desc.element_dtype, desc.major, desc.swizzle, desc.leading_byte_offset,
                                desc.stride_byte_offset)
    return moved
