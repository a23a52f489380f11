"""Hopper warpgroup MMA (``wgmma``): shared-memory matrix descriptors, ``mma_async`` and its
fence / commit / wait.  Public as ``tsjit.wgmma``.

A *warpgroup* is four consecutive warps (128 threads, the first warp's index a multiple of 4).
``wgmma.mma_async`` computes ``D = A @ B + D`` (or ``D = A @ B`` when ``scale_d`` is 0) for a
``64 x N`` tile ``D`` held in registers (a :class:`~tsjit.lang.fragment.Fragment` of ``N/2``
Float32 per thread), ``A`` (64 x K) in shared memory or registers and ``B`` (K x N) in shared
memory.  Shared-memory operands are passed as 64-bit *matrix descriptors*.  The MMA runs
asynchronously: a kernel issues

    tsjit.wgmma.fence()                       # order earlier register accesses (required)
    acc = tsjit.wgmma.mma_async(acc, a_desc, b_desc, n=256, a_dtype=tsjit.BFloat16)
    ...                                       # more MMAs into the same accumulators
    tsjit.wgmma.commit_group()                # close a wgmma-group
    tsjit.wgmma.wait_group(0)                 # wait until at most 0 groups are pending
    acc = tsjit.wgmma.fence_operand(acc)      # keep reads of acc below the wait

and may read ``acc`` (or overwrite the shared-memory operands) only after the wait.  All 128
threads of the warpgroup must execute these instructions convergently (``.sync.aligned``).
Without :func:`fence_operand` LLVM may schedule a conversion or store of an accumulator above
the ``wait_group`` (it sees no data dependence), and ptxas then serializes every wgmma of the
kernel (warning C7514).

Matrix descriptor (PTX ISA §9.7.15.5.1.2.2 "Matrix Descriptor Format"), 64 bits:

====== ===================================================================================
bits   field
====== ===================================================================================
13-0   start address: ``(shared-window address & 0x3FFFF) >> 4``
29-16  leading dimension byte offset (LBO) >> 4
45-32  stride dimension byte offset (SBO) >> 4
51-49  matrix base offset (0 when the tile starts on a swizzle-pattern boundary)
63-62  swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
====== ===================================================================================

LBO / SBO (§9.7.15.5.1.2.1.1-2, per 16-byte "normalized" element; *S* is the swizzle span in
bytes, the width of one row of the pattern):

* **K-major** (the K dimension contiguous; ``imm-trans = 0``), swizzled: LBO is "not used,
  assumed to be 1" (encoded 1); SBO = offset between consecutive 8-row groups = ``8 * S``
  when rows are ``S`` bytes apart (1024 for 128B).  A tile row holds exactly ``S`` bytes of K
  (64 BFloat16 for 128B: one TMA box row with ``swizzle="128B"``).
* **MN-major** (M or N contiguous; ``imm-trans = 1``, BFloat16/Float16 only), swizzled: LBO =
  offset between consecutive ``S``-byte column blocks of M/N; SBO = offset between 8-row
  groups of K = ``8 * S``.
* No swizzle: the tile is made of 8 x 16-byte core matrices; LBO and SBO must be given.

K-step advance inside a tile (K-major 128B verified on the H200, ``wgmma_sw128.md`` §4): each
MMA consumes 32 bytes of K per row, so descriptor ``k`` is the base descriptor plus ``32 * k``
bytes (+2 in the encoded start address) for K-major swizzled layouts; for MN-major layouts it
is ``(K / 8) * SBO`` bytes per step.  :meth:`MatrixDescriptor.k_step` computes it.

Targets: ``sm_90a`` only (``wgmma`` does not exist on sm_100a; LLVM has no ``mma_async``
intrinsic, so it is emitted as inline PTX).  Source: PTX ISA 8.x §9.7.15 "Asynchronous
Warpgroup Level Matrix Multiply-Accumulate Instructions" (§9.7.15.5.2 ``wgmma.mma_async``,
§9.7.15.6 ``wgmma.fence`` / ``commit_group`` / ``wait_group``).
"""
from __future__ import annotations

import weakref

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType
from tsjit.lang.fragment import Fragment, accumulator_coords
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang import warpgroup
from tsjit.lang.values import Value, as_value, cast_to, constant

WGMMA_TARGETS = ("sm_90a",)

#: swizzle name -> (descriptor mode, bits 63-62; span in bytes of one pattern row)
SWIZZLE_MODES = {"none": (0, 0), "128B": (1, 128), "64B": (2, 64), "32B": (3, 32)}
MAJORS = ("K", "MN")
_FIELD_LIMIT = 1 << 14          # LBO / SBO / start address are 14-bit fields of (bytes >> 4)

#: PTX operand type per dtype (Float32 operands are read as TF32).
OPERAND_TYPES = {"BFloat16": "bf16", "Float16": "f16", "Float32": "tf32", "Float8E4M3": "e4m3",
                 "Float8E5M2": "e5m2"}
_TYPE_NAMES = {"bf16", "f16", "tf32", "e4m3", "e5m2"}
#: K of one MMA per PTX operand type: 32 bytes of K per row for every type.
MMA_K = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
LEGAL_N = tuple(range(8, 257, 8))
_TRANSPOSABLE = ("bf16", "f16")


def _require_wgmma_target(what: str) -> None:
    warpgroup.require_whole_warpgroups(f"tsjit.wgmma.{what}")
    target = emit.current().target
    if target.name not in WGMMA_TARGETS:
        raise CompilationError(
            f"tsjit.wgmma.{what} needs sm_90a (Hopper wgmma; PTX ISA §9.7.15); this kernel is being compiled "
            f"for {target.name}, which has no wgmma (on sm_100a use tcgen05)")


# -- descriptors -------------------------------------------------------------------------------
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


# -- mma_async ---------------------------------------------------------------------------------
def _operand_type(dtype, what: str) -> str:
    if isinstance(dtype, DType) and dtype.name in OPERAND_TYPES:
        return OPERAND_TYPES[dtype.name]
    if isinstance(dtype, str) and dtype in _TYPE_NAMES:
        return dtype
    raise CompilationError(
        f"tsjit.wgmma.mma_async: {what} must be tsjit.BFloat16, Float16, Float32 (read as TF32), Float8E4M3 or "
        f"Float8E5M2, got {dtype!r}")


def _compile_time_flag(value, what: str, allowed) -> int:
    if isinstance(value, Value):
        raise CompilationError(f"tsjit.wgmma.mma_async: {what} must be a compile-time value in {allowed}")
    value = int(value) if isinstance(value, bool) else value
    if value not in allowed:
        raise CompilationError(f"tsjit.wgmma.mma_async: {what} must be one of {allowed}, got {value!r}")
    return value


def _descriptor_operand(desc, what: str):
    if isinstance(desc, Fragment) or not isinstance(desc, Value) or not desc.dtype.is_int or desc.dtype.bits != 64:
        raise CompilationError(f"tsjit.wgmma.mma_async: {what} must be a 64-bit matrix descriptor "
                               f"(tsjit.wgmma.make_descriptor), got {desc!r}")
    return desc


def _resolve_operand(desc, explicit_dtype, explicit_trans, what: str):
    """(PTX type, transpose flag) of a shared-memory operand from its descriptor and the arguments."""
    meta = desc if isinstance(desc, MatrixDescriptor) else None
    if explicit_dtype is None:
        if meta is None:
            raise CompilationError(f"tsjit.wgmma.mma_async: give {what}_dtype= (the {what.upper()} descriptor "
                                   f"carries no element type after a run-time join)")
        explicit_dtype = meta.element_dtype
    ptx_type = _operand_type(explicit_dtype, f"{what}_dtype")
    if meta is not None and OPERAND_TYPES.get(meta.element_dtype.name) != ptx_type:
        raise CompilationError(
            f"tsjit.wgmma.mma_async: {what}_dtype is {ptx_type} but the {what.upper()} descriptor was made from a "
            f"{meta.element_dtype.name} tile")
    major_trans = None if meta is None else int(meta.major == "MN")
    if explicit_trans is None:
        trans = major_trans or 0
    else:
        trans = _compile_time_flag(explicit_trans, f"trans_{what}", (0, 1))
        if major_trans is not None and trans != major_trans:
            raise CompilationError(
                f"tsjit.wgmma.mma_async: trans_{what}={trans} but the {what.upper()} descriptor is {meta.major}-major "
                f"(trans_{what} must be {major_trans})")
    return ptx_type, trans


def _scale_d_operand(scale_d) -> ir.Value:
    if isinstance(scale_d, Value):
        if scale_d.dtype.is_float:
            raise CompilationError("tsjit.wgmma.mma_async: scale_d must be a Boolean or integer, not a float")
        if scale_d.dtype.bits == 32:
            return scale_d.ir
        return cast_to(cast_to(scale_d, dt.Boolean), dt.Int32).ir       # non-zero accumulates
    if isinstance(scale_d, bool):
        scale_d = int(scale_d)
    if scale_d not in (0, 1):
        raise CompilationError(f"tsjit.wgmma.mma_async: scale_d must be 0, 1 or a run-time Boolean, got {scale_d!r}")
    return ir.Constant(emit.I32, scale_d)


def mma_async(acc: Fragment, a, b, *, n: int | None = None, m: int = 64, k: int | None = None, a_dtype=None,
              b_dtype=None, acc_dtype: DType = dt.Float32, scale_d=1, scale_a: int = 1, scale_b: int = 1,
              trans_a=None, trans_b=None) -> Fragment:
    """Issue ``wgmma.mma_async.sync.aligned.m64n{N}k{K}.f32.{atype}.{btype}`` and return the new
    accumulator fragment (PTX ISA §9.7.15.5.2).

    ``D = A @ B + D`` (``D = A @ B`` where ``scale_d`` is 0) on the warpgroup's 64 x N tile.  The
    result must not be read until :func:`commit_group` + :func:`wait_group` say the MMA is done;
    call :func:`fence` before the first ``mma_async`` after touching ``acc`` (or its shared
    operands) in any other way.

    Args:
        acc: the Float32 accumulator :class:`Fragment`, ``N / 2`` elements per thread (layout in
            :mod:`tsjit.lang.fragment`); e.g. ``Fragment.zeros(128)`` for N = 256.
        a: A (64 x K): a matrix descriptor (:func:`make_descriptor`), or a :class:`Fragment` of
            four 32-bit registers per thread (packed BFloat16/Float16 pairs, TF32, or four FP8;
            PTX ISA §9.7.15.5.1.1, Figure 148) — then ``a_dtype`` is required.
        b: B (K x N): a matrix descriptor.
        n: N, a multiple of 8 in 8..256 (default ``2 * len(acc)``).
        m: must be 64.
        k: K of one MMA; default and only legal value: 16 for BFloat16/Float16, 8 for TF32,
            32 for FP8.
        a_dtype, b_dtype: ``tsjit.BFloat16`` / ``Float16`` (A and B equal), ``Float32`` (read as TF32;
            both), ``Float8E4M3`` / ``Float8E5M2`` (any mix); default from the descriptors.
        acc_dtype: ``tsjit.Float32`` (Float16 accumulators are not supported yet).
        scale_d: 1 (accumulate), 0 (overwrite), or a run-time Boolean/integer (non-zero accumulates).
        scale_a, scale_b: +1 or -1 (negate A / B).
        trans_a, trans_b: 0 (K-major) or 1 (M/N-major; BFloat16/Float16 shared-memory operands
            only); default from the descriptors' ``major``.

    Returns:
        A new Float32 :class:`Fragment` of ``N / 2`` elements.

    Raises:
        CompilationError: the target is not sm_90a, N / K / M illegal, a dtype combination the
            instruction lacks, ``len(acc) != N / 2``, a register A that is not four 32-bit values,
            a transpose on TF32/FP8 or on register A, or a descriptor that disagrees with the
            arguments.
    """
    _require_wgmma_target("mma_async")
    if m != 64:
        raise CompilationError(f"tsjit.wgmma.mma_async: M must be 64 (one warpgroup), got m={m!r}")
    if not isinstance(acc, Fragment):
        raise CompilationError(f"tsjit.wgmma.mma_async: acc must be a tsjit.Fragment of Float32 accumulators, "
                               f"got {type(acc).__name__}")
    if acc_dtype is not dt.Float32:
        raise CompilationError(f"tsjit.wgmma.mma_async: acc_dtype must be tsjit.Float32 (Float16 accumulators are "
                               f"not supported), got {acc_dtype!r}")
    if acc.dtype is not dt.Float32:
        raise CompilationError(f"tsjit.wgmma.mma_async: acc holds {acc.dtype.name}; Float32 accumulators are "
                               f"needed (tsjit.Fragment.zeros(N // 2))")
    if n is None:
        n = 2 * len(acc)
    if isinstance(n, bool) or n not in LEGAL_N:
        raise CompilationError(f"tsjit.wgmma.mma_async: N must be a multiple of 8 from 8 to 256, got n={n!r}")
    if len(acc) != n // 2:
        raise CompilationError(
            f"tsjit.wgmma.mma_async: an m64n{n} Float32 accumulator has {n // 2} registers per thread, but acc "
            f"has {len(acc)}")

    registers_a = isinstance(a, Fragment)
    if registers_a:
        if a_dtype is None:
            raise CompilationError("tsjit.wgmma.mma_async: give a_dtype= when A comes from registers")
        a_type = _operand_type(a_dtype, "a_dtype")
        if len(a) != 4 or a.dtype.bits != 32 or a.dtype.is_bool:
            raise CompilationError(
                f"tsjit.wgmma.mma_async: A from registers is four 32-bit registers per thread (packed "
                f"{a_type} elements), got {a!r}")
        if trans_a not in (None, 0, False):
            raise CompilationError("tsjit.wgmma.mma_async: A from registers cannot be transposed (trans_a=0)")
        ta = 0
    else:
        a = _descriptor_operand(a, "A")
        a_type, ta = _resolve_operand(a, a_dtype, trans_a, "a")
    b = _descriptor_operand(b, "B")
    if b_dtype is None and not isinstance(b, MatrixDescriptor):
        b_dtype = a_type                                        # B's type defaults to A's
    b_type, tb = _resolve_operand(b, b_dtype, trans_b, "b")
    fp8 = ("e4m3", "e5m2")
    if not (a_type == b_type or (a_type in fp8 and b_type in fp8)):
        raise CompilationError(f"tsjit.wgmma.mma_async: no wgmma multiplies {a_type} by {b_type}; A and B must "
                               f"both be bf16, both f16, both tf32, or both FP8 (e4m3/e5m2)")
    kk = MMA_K[a_type]
    if k is not None and k != kk:
        raise CompilationError(f"tsjit.wgmma.mma_async: K is {kk} for {a_type} operands, got k={k!r}")
    if a_type not in _TRANSPOSABLE and (ta or tb):
        raise CompilationError(f"tsjit.wgmma.mma_async: {a_type} operands must be K-major (trans_a=trans_b=0); "
                               f"only bf16/f16 operands can be transposed")
    sa = _compile_time_flag(scale_a, "scale_a", (1, -1))
    sb = _compile_time_flag(scale_b, "scale_b", (1, -1))
    scale = _scale_d_operand(scale_d)

    km = emit.current()
    b_ir = km.builder
    count = n // 2
    outputs = ", ".join(f"${i}" for i in range(count))
    args, constraints = [], []
    if registers_a:
        a_regs = []
        for v in a:
            a_regs.append(v.ir if v.dtype.is_int else b_ir.bitcast(v.ir, emit.I32))
        args += a_regs
        constraints += ["r"] * 4
        a_operand = "{" + ", ".join(f"${count + i}" for i in range(4)) + "}"
        next_index = count + 4
    else:
        args.append(a.ir)
        constraints.append("l")
        a_operand = f"${count}"
        next_index = count + 1
    args.append(b.ir)
    constraints.append("l")
    b_operand = f"${next_index}"
    args.append(scale)
    constraints.append("r")
    scale_operand = f"${next_index + 1}"
    immediates = f"{sa}, {sb}"
    if a_type in _TRANSPOSABLE:
        immediates += f", {tb}" if registers_a else f", {ta}, {tb}"
    shape = f"m64n{n}k{kk}"
    asm = (f"{{ .reg .pred p; setp.ne.b32 p, {scale_operand}, 0; "
           f"wgmma.mma_async.sync.aligned.{shape}.f32.{a_type}.{b_type} "
           f"{{{outputs}}}, {a_operand}, {b_operand}, p, {immediates}; }}")
    args += [v.ir for v in acc]
    constraint_text = ",".join(["=f"] * count + constraints + [str(i) for i in range(count)])
    result = km.inline_asm(_register_struct(ir.FloatType(), count), asm, constraint_text, args, side_effect=True)
    out = Fragment([Value(b_ir.extract_value(result, i), dt.Float32) for i in range(count)], dt.Float32)
    out.in_flight = InFlight(km, f"m64n{n}k{kk}")
    return out


#: KernelModule -> how many ``wgmma.wait_group`` the frontend has emitted into it so far
_WAITS_EMITTED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class InFlight:
    """The mark of a :class:`Fragment` returned by :func:`mma_async`: in flight until the kernel
    emits a :func:`wait_group` after it (in the order the frontend emits code, which is program
    order within a loop body or branch).  A fragment carried through a loop phi or a branch join is
    a new fragment without the mark (the interpreter still sees a read of an in-flight register)."""

    __slots__ = ("km", "waits", "location", "shape")

    def __init__(self, km, shape: str):
        self.km = km
        self.waits = _WAITS_EMITTED.get(km, 0)
        self.location = km.statement_location()
        self.shape = shape

    def check(self, what: str) -> None:
        """Raise CompilationError when no ``wait_group`` was emitted since the MMA (``what``: the
        access, "reads" or "overwrites")."""
        if emit.current() is not self.km or _WAITS_EMITTED.get(self.km, 0) != self.waits:
            return
        where = f" at {self.location}" if self.location is not None else ""
        raise CompilationError(
            f"this expression {what} accumulator registers of the wgmma.mma_async.{self.shape} issued{where} before a "
            f"tsjit.wgmma.wait_group retires it: the MMA runs asynchronously and may still be writing "
            f"those registers (PTX ISA §9.7.15.7 wgmma.wait_group: accessing them before the wait "
            f"is undefined).\n  Call tsjit.wgmma.commit_group() and tsjit.wgmma.wait_group(N) first "
            f"(N: the groups that may stay in flight; 0 retires all), then `acc = "
            f"tsjit.wgmma.fence_operand(acc)`, and read the accumulators after it.")


def _register_struct(element, count: int):
    """The struct type of an inline asm's ``count`` register outputs, as one named type
    (``%"tsjit.f32x128"``): every ``extractvalue`` of a literal ``{float, float, ...}`` spells out all its
    members, 640 lines of ~900 bytes in a Hopper GEMM's IR; the PTX is the same."""
    kind = "f32" if isinstance(element, ir.FloatType) else f"i{element.width}"
    name = f"tsjit.{kind}x{count}"
    struct = ir.global_context.get_identified_type(name)
    if struct.is_opaque:
        struct.set_body(*([element] * count))
    return struct


# -- fence / commit / wait ---------------------------------------------------------------------
def fence() -> None:
    """``wgmma.fence.sync.aligned``: order this warpgroup's earlier register and shared-memory
    accesses before the following ``mma_async`` (required before the first MMA and whenever the
    accumulators were touched by other instructions; PTX ISA §9.7.15.6.1)."""
    _require_wgmma_target("fence")
    emit.current().intrinsic("llvm.nvvm.wgmma.fence.sync.aligned", [])


def commit_group() -> None:
    """``wgmma.commit_group.sync.aligned``: close the pending ``mma_async`` operations into one
    wgmma-group (PTX ISA §9.7.15.6.2)."""
    _require_wgmma_target("commit_group")
    emit.current().intrinsic("llvm.nvvm.wgmma.commit_group.sync.aligned", [])


def wait_group(pending: int = 0) -> None:
    """``wgmma.wait_group.sync.aligned N``: wait until at most ``pending`` (compile-time 0..7)
    wgmma-groups of this thread are incomplete; their accumulators may then be read and their
    shared-memory operands overwritten (PTX ISA §9.7.15.6.3)."""
    _require_wgmma_target("wait_group")
    if isinstance(pending, bool) or not isinstance(pending, int) or not 0 <= pending <= 7:
        raise CompilationError(f"tsjit.wgmma.wait_group needs a compile-time count in 0..7, got {pending!r}")
    km = emit.current()
    km.intrinsic("llvm.nvvm.wgmma.wait_group.sync.aligned", [ir.Constant(emit.I64, pending)])
    _WAITS_EMITTED[km] = _WAITS_EMITTED.get(km, 0) + 1


def fence_operand(fragment: Fragment) -> Fragment:
    """``fragment`` passed through an empty inline asm that reads and rewrites every register
    (CUTLASS's ``warpgroup_fence_operand``).  It emits no instruction; it keeps the compiler from
    moving uses of the accumulators across :func:`wait_group` (LLVM sees no data dependence
    between the wait and the registers, and an early read makes ptxas serialize the wgmma
    pipeline: "wgmma.mma_async instructions are serialized due to non wgmma instructions reading
    accumulator registers").  Use it right after the ``wait_group`` that completes the MMAs:
    ``acc = tsjit.wgmma.fence_operand(acc)``.
    """
    if not isinstance(fragment, Fragment):
        raise CompilationError(f"tsjit.wgmma.fence_operand needs a Fragment, got {type(fragment).__name__}")
    km = emit.current()
    b = km.builder
    items = [v.ir for v in fragment]
    kinds = {v.type for v in items}
    if len(kinds) != 1 or not isinstance(next(iter(kinds)), (ir.FloatType, ir.IntType)) or \
            getattr(next(iter(kinds)), "width", 32) != 32:
        raise CompilationError(f"tsjit.wgmma.fence_operand works on 32-bit registers, got {fragment!r}")
    code = "f" if isinstance(items[0].type, ir.FloatType) else "r"
    count = len(items)
    constraints = ",".join([f"={code}"] * count + [str(i) for i in range(count)])
    result = km.inline_asm(_register_struct(items[0].type, count), "", constraints, items, side_effect=True)
    out = Fragment([Value(b.extract_value(result, i), fragment.dtype) for i in range(count)], fragment.dtype)
    in_flight = fragment.__dict__.get("in_flight")
    if in_flight is not None:
        out.in_flight = in_flight          # a fence before the wait keeps the registers in flight
    return out


__all__ = ["MatrixDescriptor", "make_descriptor", "advance_descriptor", "descriptor_constant_bits", "mma_async",
           "fence", "commit_group", "wait_group", "fence_operand", "accumulator_coords", "Fragment", "SWIZZLE_MODES", "LEGAL_N",
           "MMA_K", "OPERAND_TYPES"]
