"""Blackwell 5th-generation tensor cores (``tcgen05``): tensor memory allocation, UMMA
(``tcgen05.mma`` / ``.ws`` / block-scaled), ``tcgen05.commit`` to mbarriers, ``tcgen05.cp`` and
the tcgen05 fences.  Public as ``tsjit.tcgen05``; loads and stores between TMEM and registers
(``tcgen05.ld/st``) and the accumulator views are :mod:`tsjit.lang.tmem`, re-exported here.

Tensor memory (TMEM, PTX ISA 9.1 §9.7.16.1) is 128 lanes x 512 columns of 32-bit cells per
CTA.  An address is 32 bits: lane in bits 31-16, column in bits 15-0 (§9.7.16.1.1).  One warp
allocates columns with :func:`alloc`, which writes the base address into shared memory
(§9.7.16.1.2, §9.7.16.7.1); the kernel reads it from there after a CTA barrier::

    slot = tsjit.shared_array(tsjit.Uint32, (1,))
    if tsjit.warp_idx() == 0:
        tsjit.tcgen05.alloc(slot, 256)                 # the whole warp
        tsjit.tcgen05.relinquish_alloc_permit()
    tsjit.tcgen05.fence_before_thread_sync(); tsjit.syncthreads(); tsjit.tcgen05.fence_after_thread_sync()
    tmem = slot[0]                                     # Uint32 TMEM address (lane 0, column base)
    ...
    if tsjit.warp_idx() == 0:
        tsjit.tcgen05.dealloc(tmem, 256)

One thread issues an MMA (single-thread semantics, §9.7.16.10.9.1): ``D(TMEM) = A x B (+ D)``
with A and B in shared memory (64-bit descriptors, :func:`make_smem_descriptor`) or A in TMEM.
The MMA runs asynchronously; :func:`commit` makes an mbarrier arrive once every MMA the thread
issued before it has finished reading its operands and writing D (§9.7.16.12.1).  That arrival
is how a TS pipeline frees an A/B stage (TmaUmma) or hands the accumulator to an epilogue
(UmmaAsync).

Targets: ``sm_100a`` and ``sm_100f`` (PTX 8.6 / 8.8).  Every builtin raises a
:class:`~tsjit.errors.CompilationError` naming the operand on misuse before any IR is emitted.
Shape and type rules are :func:`tsjit.lang.umma_descriptors.check_shape` (Table 39).
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang import umma_descriptors as ud
from tsjit.lang.dtypes import DType
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.tmem import (TCGEN05_TARGETS, TMEM_COLUMNS, TMEM_LANES, AccumulatorView, accumulator, available,
                             fence_after_thread_sync, fence_before_thread_sync, ld, record_cta_group,
                             require_tcgen05_target, st, tmem_address, tmem_pointer, wait_ld, wait_st)
from tsjit.lang.values import Value, cast_to, constant
from tsjit.lang.wgmma_descriptors import advance_descriptor

#: tsjit dtype name -> PTX element type of an MMA operand (FP4/FP6 have no tsjit dtype: pass the string).
OPERAND_TYPES = {"BFloat16": "bf16", "Float16": "f16", "Float32": "tf32", "Float8E4M3": "e4m3",
                 "Float8E5M2": "e5m2", "Int8": "s8", "Uint8": "u8"}
_KIND_OF_TYPE = {"bf16": "f16", "f16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4",
                 "e2m3": "f8f6f4", "e3m2": "f8f6f4", "e2m1": "f8f6f4", "s8": "i8", "u8": "i8"}
_D_TYPES = {"Float32": "f32", "Float16": "f16", "Int32": "s32"}
MAJORS = ("K", "MN")


# -- tensor memory allocation (§9.7.16.7.1) --------------------------------------------------------
def _cta_group(cta_group, what: str) -> int:
    if isinstance(cta_group, bool) or cta_group not in (1, 2):
        raise CompilationError(f"tsjit.tcgen05.{what}: cta_group must be 1 or 2, got {cta_group!r}")
    record_cta_group(cta_group, what)
    return cta_group


def _columns(num_columns, what: str) -> int:
    if isinstance(num_columns, Value) or isinstance(num_columns, bool) or not isinstance(num_columns, int) or \
            num_columns < 32 or num_columns > TMEM_COLUMNS or num_columns & (num_columns - 1):
        raise CompilationError(f"tsjit.tcgen05.{what}: num_columns must be a compile-time power of 2 from 32 to "
                               f"{TMEM_COLUMNS} (PTX ISA §9.7.16.7.1), got {num_columns!r}")
    return num_columns


def _address_slot(slot, what: str) -> Pointer:
    if isinstance(slot, Tensor):
        slot = slot.ptr
    if not isinstance(slot, Pointer) or slot.address_space != emit.SHARED or slot.dtype.bits != 32 or \
            slot.dtype.is_float:
        raise CompilationError(f"tsjit.tcgen05.{what}: slot must be a shared-memory 32-bit integer location "
                               f"(tsjit.shared_array(tsjit.Uint32, (1,))) that receives the TMEM address, got {slot!r}")
    return slot


def alloc(slot, num_columns: int, *, cta_group: int = 1) -> None:
    """``tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32 [slot], num_columns``: allocate
    ``num_columns`` TMEM columns (all 128 lanes) and write their base address to ``slot``.

    Executed by **all threads of one warp** (``.sync.aligned``); it blocks until the columns are
    free.  With ``cta_group=2`` one warp of each CTA of a pair allocates in both.

    Args:
        slot: a shared-memory ``Uint32``/``Int32`` location (a one-element shared array).
        num_columns: a power of 2 from 32 to 512.
        cta_group: 1, or 2 for a CTA pair.

    Raises:
        CompilationError: not a 32-bit shared slot, an illegal column count, or a target without tcgen05.

    Source: PTX ISA 9.1 §9.7.16.7.1 "tcgen05.alloc, tcgen05.dealloc, tcgen05.relinquish_alloc_permit".
    """
    require_tcgen05_target("alloc")
    group = _cta_group(cta_group, "alloc")
    pointer = _address_slot(slot, "alloc")
    columns = _columns(num_columns, "alloc")
    emit.current().intrinsic(f"llvm.nvvm.tcgen05.alloc.shared.cg{group}", [pointer.ir, ir.Constant(emit.I32, columns)])


def dealloc(address, num_columns: int, *, cta_group: int = 1) -> None:
    """``tcgen05.dealloc.cta_group::N.sync.aligned.b32 taddr, num_columns``: free columns that
    :func:`alloc` returned.  All threads of one warp; every allocation must be freed before the
    kernel exits (PTX ISA 9.1 §9.7.16.7.1).

    Args:
        address: the TMEM address :func:`alloc` wrote (``Uint32``/``Int32`` Value).
        num_columns: the count given to :func:`alloc`.

    Raises:
        CompilationError: as :func:`alloc`.
    """
    require_tcgen05_target("dealloc")
    group = _cta_group(cta_group, "dealloc")
    columns = _columns(num_columns, "dealloc")
    emit.current().intrinsic(f"llvm.nvvm.tcgen05.dealloc.cg{group}",
                             [tmem_pointer(address, "dealloc"), ir.Constant(emit.I32, columns)])


def relinquish_alloc_permit(*, cta_group: int = 1) -> None:
    """``tcgen05.relinquish_alloc_permit.cta_group::N.sync.aligned``: this CTA will allocate no more
    TMEM, so other CTAs on the SM may (PTX ISA 9.1 §9.7.16.7.1).  All threads of one warp."""
    require_tcgen05_target("relinquish_alloc_permit")
    group = _cta_group(cta_group, "relinquish_alloc_permit")
    emit.current().intrinsic(f"llvm.nvvm.tcgen05.relinq.alloc.permit.cg{group}", [])


# -- shared-memory matrix descriptors (§9.7.16.4.1) ------------------------------------------------
class SmemDescriptor(Value):
    """A tcgen05 shared-memory matrix descriptor (Uint64 :class:`Value`) that remembers how it was
    made (``element_dtype``, ``major``, ``swizzle``, ``leading_byte_offset``, ``stride_byte_offset``)
    so :func:`mma` can check it and derive the transpose bits.  After a run-time join it is a plain
    Uint64 Value; :func:`mma` then needs ``a_dtype`` / ``a_major`` explicitly."""

    __slots__ = ("element_dtype", "major", "swizzle", "leading_byte_offset", "stride_byte_offset")

    def __init__(self, ir_value, element_dtype, major: str, swizzle: str, lbo: int, sbo: int):
        super().__init__(ir_value, dt.Uint64)
        self.element_dtype = element_dtype
        self.major = major
        self.swizzle = swizzle
        self.leading_byte_offset = lbo
        self.stride_byte_offset = sbo

    def __repr__(self) -> str:
        return f"SmemDescriptor[{self.element_dtype}, {self.major}-major, swizzle {self.swizzle}]"

    def advance(self, nbytes) -> "SmemDescriptor":
        """This descriptor with its start address moved by ``nbytes`` (compile-time multiple of 16, or
        an Int32 Value): one 64-bit add of ``nbytes >> 4``, the same arithmetic as a wgmma
        descriptor's (:func:`tsjit.lang.wgmma.advance_descriptor`)."""
        moved = advance_descriptor(Value(self.ir, dt.Uint64), nbytes)
        if moved.ir is self.ir:
            return self
        return SmemDescriptor(moved.ir, self.element_dtype, self.major, self.swizzle, self.leading_byte_offset,
                              self.stride_byte_offset)

    def k_step(self, k: int, *, element_bytes: int | None = None) -> "SmemDescriptor":
        """The descriptor of the ``k``-th MMA of this tile along K (each MMA reads 32 bytes of K):
        K-major swizzled ``+32 k`` bytes inside the swizzle row; MN-major ``+k (32 / itemsize / 8) SBO``.

        Raises:
            CompilationError: ``k`` leaves the swizzled row of a K-major tile, or no swizzle.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise CompilationError(f"k_step needs a compile-time int >= 0, got {k!r}")
        span = ud.SWIZZLE_CODES[self.swizzle][1]
        if self.major == "K":
            if not span:
                return self.advance(2 * k * self.leading_byte_offset)
            if k >= span // 32:
                raise CompilationError(f"k_step({k}) leaves the {span}-byte swizzled row of a K-major tile "
                                       f"({span // 32} MMAs of 32 bytes); make one descriptor per K tile")
            return self.advance(32 * k)
        itemsize = element_bytes or getattr(self.element_dtype, "itemsize", 1)
        return self.advance(k * (32 // itemsize // 8) * self.stride_byte_offset)


def make_smem_descriptor(tile, *, major: str = "K", swizzle: str = "128B", leading_byte_offset: int | None = None,
                         stride_byte_offset: int | None = None, base_offset: int = 0,
                         element_type: str | None = None) -> SmemDescriptor:
    """The tcgen05 shared-memory descriptor of ``tile`` (PTX ISA 9.1 §9.7.16.4.1).

    Args:
        tile: a shared-memory :class:`Tensor` view or shared :class:`Pointer`; with a swizzle it
            must start on the pattern (1024 bytes for 128B), as TMA writes swizzled boxes.
        major: ``"K"`` (K contiguous) or ``"MN"``.
        swizzle: ``"128B"``, ``"64B"``, ``"32B"``, ``"128B_base32B"`` or ``"none"`` (as the TMA box).
        leading_byte_offset, stride_byte_offset: LBO / SBO in bytes; defaults for swizzled K-major
            tiles 16 ("assumed 1") and ``8 x span``; MN-major LBO defaults to one (K, span) block.
        base_offset: the 3-bit matrix base offset.
        element_type: a PTX type name (``"e2m1"``) for sub-byte data stored in byte arrays.

    Returns:
        A :class:`SmemDescriptor`: ``((address >> 4) & 0x3FFF) | constant bits``.

    Raises:
        CompilationError: not shared memory, misaligned, rows that do not fill the swizzle span,
            or a field out of range.
    """
    require_tcgen05_target("make_smem_descriptor")
    ptr = tile.ptr if isinstance(tile, Tensor) else tile
    if not isinstance(ptr, Pointer) or ptr.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.tcgen05.make_smem_descriptor: tile must be a shared-memory array view, "
                               f"got {tile!r}")
    if major not in MAJORS:
        raise CompilationError(f"tsjit.tcgen05.make_smem_descriptor: major must be 'K' or 'MN', got {major!r}")
    if swizzle not in ud.SWIZZLE_CODES:
        raise CompilationError(f"tsjit.tcgen05.make_smem_descriptor: swizzle must be one of "
                               f"{list(ud.SWIZZLE_CODES)}, got {swizzle!r}")
    span = ud.SWIZZLE_CODES[swizzle][1]
    needed = 8 * span if span and base_offset == 0 else 16
    if ptr.alignment < needed:
        raise CompilationError(f"tsjit.tcgen05.make_smem_descriptor: a {swizzle}-swizzled tile must start on a "
                               f"{needed}-byte boundary, but this one is only known to be {ptr.alignment}-byte "
                               f"aligned; allocate it with align=1024 and index whole tiles, or pass base_offset=")
    shape = tile.shape if isinstance(tile, Tensor) else None
    static = shape is not None and all(isinstance(s, int) for s in shape)
    row_bytes = shape[-1] * ptr.dtype.itemsize if static and shape else None
    lbo, sbo = leading_byte_offset, stride_byte_offset
    if not span:
        if lbo is None or sbo is None:
            raise CompilationError("tsjit.tcgen05.make_smem_descriptor: without swizzle give leading_byte_offset= "
                                   "and stride_byte_offset= (byte distances of the 8x16-byte core matrices along K "
                                   "and M/N; PTX ISA §9.7.16.3.3)")
    else:
        if row_bytes is not None and row_bytes != span:
            raise CompilationError(
                f"tsjit.tcgen05.make_smem_descriptor: a {swizzle}-swizzled tile has rows of exactly {span} bytes (as "
                f"a TMA box with that swizzle writes them); this tile's rows are {row_bytes} bytes")
        sbo = 8 * span if sbo is None else sbo
        if lbo is None:
            if major == "K":
                lbo = 16
            elif static and len(shape) >= 3:
                lbo = tile.strides[-3] * ptr.dtype.itemsize
            elif static and len(shape) == 2:
                lbo = shape[0] * span
            else:
                raise CompilationError("tsjit.tcgen05.make_smem_descriptor: an MN-major tile needs "
                                       "leading_byte_offset= (bytes between its span-wide column blocks)")
    upper = ud.smem_descriptor_bits(leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle=swizzle,
                                    base_offset=base_offset)
    b = emit.current().builder
    address = Value(b.ptrtoint(ptr.ir, emit.I64), dt.Uint64)
    encoded = ((address >> 4) & 0x3FFF) | constant(upper, dt.Uint64)
    element = element_type if element_type is not None else ptr.dtype
    return SmemDescriptor(encoded.ir, element, major, swizzle, lbo, sbo)


# -- MMA (§9.7.16.10.9) ---------------------------------------------------------------------------------
def _ptx_type(dtype, what: str) -> str:
    if isinstance(dtype, DType) and dtype.name in OPERAND_TYPES:
        return OPERAND_TYPES[dtype.name]
    if isinstance(dtype, str) and dtype in _KIND_OF_TYPE:
        return dtype
    raise CompilationError(f"tsjit.tcgen05.mma: {what} must be a tcgen05 operand type (tsjit.BFloat16, Float16, "
                           f"Float32 (TF32), Float8E4M3, Float8E5M2, Int8, Uint8, or 'e2m3', 'e3m2', 'e2m1'), "
                           f"got {dtype!r}")


def _operand(x, explicit_dtype, explicit_major, name: str, allow_tmem: bool):
    """(ir value, PTX type, transpose bit, from_tmem) of an A/B operand."""
    if allow_tmem and isinstance(x, Value) and x.dtype.bits == 32 and x.dtype.is_int:
        if explicit_dtype is None:
            raise CompilationError(f"tsjit.tcgen05.mma: operand {name} comes from tensor memory; give {name}_dtype=")
        if explicit_major not in (None, "K"):
            raise CompilationError(f"tsjit.tcgen05.mma: operand {name} in tensor memory is K-major")
        return tmem_pointer(x, "mma"), _ptx_type(explicit_dtype, f"{name}_dtype"), 0, True
    if not isinstance(x, Value) or not x.dtype.is_int or x.dtype.bits != 64:
        tmem = " or a TMEM address (Uint32)" if allow_tmem else ""
        raise CompilationError(f"tsjit.tcgen05.mma: operand {name} must be a shared-memory descriptor "
                               f"(tsjit.tcgen05.make_smem_descriptor){tmem}, got {x!r}")
    meta = x if isinstance(x, SmemDescriptor) else None
    if explicit_dtype is None:
        if meta is None:
            raise CompilationError(f"tsjit.tcgen05.mma: give {name}_dtype= (operand {name}'s descriptor lost its "
                                   f"element type at a run-time join)")
        explicit_dtype = meta.element_dtype
    ptx = _ptx_type(explicit_dtype, f"{name}_dtype")
    if meta is not None:
        made = meta.element_dtype if isinstance(meta.element_dtype, str) else OPERAND_TYPES.get(
            meta.element_dtype.name)
        if made is not None and made != ptx and not (ptx == "tf32" and made == "tf32"):
            raise CompilationError(f"tsjit.tcgen05.mma: {name}_dtype is {ptx} but operand {name}'s descriptor was "
                                   f"made from a {made} tile")
    major = explicit_major if explicit_major is not None else (meta.major if meta is not None else "K")
    if major not in MAJORS:
        raise CompilationError(f"tsjit.tcgen05.mma: {name}_major must be 'K' or 'MN', got {major!r}")
    if meta is not None and explicit_major is not None and explicit_major != meta.major:
        raise CompilationError(f"tsjit.tcgen05.mma: {name}_major={explicit_major!r} but operand {name}'s descriptor "
                               f"is {meta.major}-major")
    return x.ir, ptx, int(major == "MN"), False


def _predicate(value, what: str) -> ir.Value:
    if isinstance(value, Value):
        if value.dtype.is_float:
            raise CompilationError(f"tsjit.tcgen05.mma: {what} must be a Boolean or integer, not a float")
        return cast_to(value, dt.Boolean).ir
    if isinstance(value, (bool, int)) and value in (0, 1):
        return ir.Constant(emit.I1, int(value))
    raise CompilationError(f"tsjit.tcgen05.mma: {what} must be True/False or a run-time Boolean, got {value!r}")


def mma(d, a, b, *, m: int, n: int, k: int | None = None, a_dtype=None, b_dtype=None, d_dtype: DType | None = None,
        accumulate=True, cta_group: int = 1, a_major: str | None = None, b_major: str | None = None,
        negate_a: bool = False, negate_b: bool = False, kind: str | None = None) -> int:
    """Issue ``tcgen05.mma.cta_group::G.kind::K [d], a, b, idesc, enable_input_d``:
    ``D = A x B + D`` (``D = A x B`` where ``accumulate`` is false), asynchronously.

    One thread issues it (single-thread semantics); :func:`commit` then signals an mbarrier when
    the MMA has finished.  With ``cta_group=2`` the even CTA of a pair issues one MMA over both CTAs'
    shared memory (descriptors at the same offsets) into both CTAs' TMEM.

    Args:
        d: TMEM address of D (Uint32 Value: lane 0, the accumulator's first column).
        a: A (M x K): a shared-memory descriptor (:func:`make_smem_descriptor`) or a TMEM address.
        b: B (K x N): a shared-memory descriptor.
        m: M of the MMA (64 or 128; 128 or 256 for a pair).  Per CTA the accumulator has
            ``m / cta_group`` rows (TMEM lanes) and ``n`` 32-bit columns (Float32/Int32 D).
        n: N (see :func:`tsjit.lang.umma_descriptors.check_shape`).
        k: must be the kind's K: 16 (f16/bf16), 8 (tf32), 32 (FP8/FP6/FP4, i8).
        a_dtype, b_dtype: operand types (default from the descriptors).
        d_dtype: ``tsjit.Float32`` (default for float kinds), ``Float16`` (f16/f8f6f4) or ``Int32``
            (i8, its default).
        accumulate: enable-input-d: True, False, or a run-time Boolean (False on the first K step).
        cta_group: 1 or 2.
        a_major, b_major: ``"K"``/``"MN"`` (default from the descriptors).
        negate_a, negate_b: negate an operand (not i8).
        kind: ``"f16"``, ``"tf32"``, ``"f8f6f4"``, ``"i8"``; default from ``a_dtype``.

    Returns:
        The 32-bit instruction descriptor used (an int, for tests and printouts).

    Raises:
        CompilationError: naming the operand: an illegal M/N/K for the kind and CTA group, operand
            types the kind lacks, a descriptor that disagrees with the arguments, or no tcgen05.

    Source: PTX ISA 9.1 §9.7.16.10.9.1 "tcgen05.mma"; shapes §9.7.16.2.1 Table 39; descriptor
    §9.7.16.4.2 Table 42.
    """
    return _issue_mma(d, a, b, m=m, n=n, k=k, a_dtype=a_dtype, b_dtype=b_dtype, d_dtype=d_dtype,
                      accumulate=accumulate, cta_group=cta_group, a_major=a_major, b_major=b_major,
                      negate_a=negate_a, negate_b=negate_b, kind=kind, ws=False)


def mma_ws(d, a, b, *, m: int, n: int, k: int | None = None, a_dtype=None, b_dtype=None,
           d_dtype: DType | None = None, accumulate=True, a_major: str | None = None, b_major: str | None = None,
           kind: str | None = None) -> int:
    """Issue the weight-stationary ``tcgen05.mma.ws.cta_group::1.kind::K [d], a, b, idesc,
    enable_input_d`` (PTX ISA 9.1 §9.7.16.10.9.3): M in {32, 64, 128}, N in {64, 128, 256},
    ``cta_group::1`` only.  Arguments and errors as :func:`mma`; returns the instruction descriptor."""
    return _issue_mma(d, a, b, m=m, n=n, k=k, a_dtype=a_dtype, b_dtype=b_dtype, d_dtype=d_dtype,
                      accumulate=accumulate, cta_group=1, a_major=a_major, b_major=b_major, negate_a=False,
                      negate_b=False, kind=kind, ws=True)


def _issue_mma(d, a, b, *, m, n, k, a_dtype, b_dtype, d_dtype, accumulate, cta_group, a_major, b_major,
               negate_a, negate_b, kind, ws) -> int:
    what = "tsjit.tcgen05.mma_ws" if ws else "tsjit.tcgen05.mma"
    require_tcgen05_target("mma_ws" if ws else "mma")
    group = _cta_group(cta_group, "mma")
    d_ptr = tmem_pointer(d, "mma (operand d)")
    a_ir, a_type, trans_a, a_tmem = _operand(a, a_dtype, a_major, "a", allow_tmem=True)
    b_ir, b_type, trans_b, _ = _operand(b, b_dtype if b_dtype is not None else (None if isinstance(b, SmemDescriptor)
                                                                                 else a_type), b_major, "b", False)
    inferred = _KIND_OF_TYPE[a_type]
    kind = inferred if kind is None else kind
    if kind not in ud.KINDS:
        raise CompilationError(f"{what}: kind must be one of {list(ud.KINDS)} (block-scaled kinds: "
                               f"tsjit.tcgen05.mma_block_scaled), got {kind!r}")
    if _KIND_OF_TYPE[a_type] != kind or _KIND_OF_TYPE[b_type] != kind:
        raise CompilationError(f"{what}: kind::{kind} does not multiply {a_type} (a_dtype) by {b_type} (b_dtype)")
    shape = ud.check_shape(kind, m, n, k, cta_group=group, weight_stationary=ws, what=what)
    target = emit.current().target
    if kind == "i8" and target.name != "sm_100a":
        raise CompilationError(f"{what}: kind::i8 exists on sm_100a only (PTX ISA 9.1 §9.7.16.10.9.1, target notes: "
                               f"no family-specific form); this kernel is being compiled for {target.name}")
    if d_dtype is None:
        d_dtype = dt.Int32 if kind == "i8" else dt.Float32
    d_name = d_dtype.name if isinstance(d_dtype, DType) else None
    if d_name not in _D_TYPES:
        raise CompilationError(f"{what}: d_dtype must be tsjit.Float32, Float16 or Int32, got {d_dtype!r}")
    idesc = ud.instruction_descriptor(shape, a_type, b_type, _D_TYPES[d_name], transpose_a=trans_a,
                                      transpose_b=trans_b, negate_a=int(bool(negate_a)),
                                      negate_b=int(bool(negate_b)), what=what)
    enable = _predicate(accumulate, "accumulate")
    km = emit.current()
    if not ws:
        form = "tensor" if a_tmem else "shared"
        km.intrinsic(f"llvm.nvvm.tcgen05.mma.{form}",
                     [d_ptr, a_ir, b_ir, ir.Constant(emit.I32, idesc), enable, ir.Constant(emit.I32, ud.KINDS[kind]),
                      ir.Constant(emit.I32, group), ir.Constant(emit.I32, 0)])
        return idesc
    a_operand = "[$1]" if a_tmem else "$1"
    a_constraint = "r" if a_tmem else "l"
    args = [_as_i32(d_ptr), _as_i32(a_ir) if a_tmem else a_ir, b_ir, ir.Constant(emit.I32, idesc),
            km.builder.zext(enable, emit.I32)]
    asm = (f"{{ .reg .pred p; setp.ne.b32 p, $4, 0; tcgen05.mma.ws.cta_group::1.kind::{kind} "
           f"[$0], {a_operand}, $2, $3, p; }}")
    km.inline_asm(ir.VoidType(), asm, f"r,{a_constraint},l,r,r", args, side_effect=True)
    return idesc


def _as_i32(tmem_ptr):
    return emit.current().builder.ptrtoint(tmem_ptr, emit.I32)


#: (kind, scale type) -> (.scale_vec qualifier, its .blockN alias): family (``f``) targets accept only
#: the alias (ptxas 13: "'.scale_vec::4X' not supported on .target 'sm_100f'"; Table 57).
_SCALE_VEC = {("mxf8f6f4", "ue8m0"): ("scale_vec::1X", "block32"), ("mxf4nvf4", "ue8m0"): ("scale_vec::2X", "block32"),
              ("mxf4nvf4", "ue4m3"): ("scale_vec::4X", "block16")}


def mma_block_scaled(d, a, b, scale_a, scale_b, *, m: int, n: int, kind: str, a_dtype, b_dtype, scale_type: str,
                     accumulate=True, cta_group: int = 1, scale_a_id: int = 0, scale_b_id: int = 0) -> int:
    """Issue a block-scaled ``tcgen05.mma.cta_group::G.kind::{mxf8f6f4|mxf4nvf4}.block_scale.scale_vec::NX
    [d], a, b, idesc, [scale_a], [scale_b], enable_input_d`` (PTX ISA 9.1 §9.7.16.10.9.1, block
    scaling §9.7.16.10.7).  No Blackwell GPU here runs it; the CPU interpreter models ``cta_group=1``
    (:mod:`tsjit.interpret.tcgen05_scaled`, with the scale-matrix layout it assumes).

    Args:
        d, a, b: as :func:`mma` (A and B shared-memory descriptors, K-major).
        scale_a, scale_b: TMEM addresses of the scale factors (copied in with :func:`cp`; they must be
            duplicated to all four 32-lane quarters, §9.7.16.10.7: ``shape="32x128b", multicast="warpx4"``).
        kind: ``"mxf8f6f4"`` (MX FP8/FP6/FP4, UE8M0 scales per 32 elements, ``scale_vec::1X``) or
            ``"mxf4nvf4"`` (FP4 E2M1: UE8M0 scales per 32 -> ``scale_vec::2X``, or NVFP4's UE4M3
            scales per 16 -> ``scale_vec::4X``).
        a_dtype, b_dtype: PTX element types (``"e2m1"``, ``"e4m3"``, ...).
        scale_type: ``"ue8m0"`` or ``"ue4m3"``.
        m, n: M 128 (256 for a pair), N as for :func:`mma`; K is 32 (mxf8f6f4) or 64 (mxf4nvf4).

    Returns:
        The instruction descriptor used.

    Raises:
        CompilationError: naming the operand outside Tables 39, 43, 44 or 57.
    """
    what = "tsjit.tcgen05.mma_block_scaled"
    require_tcgen05_target("mma_block_scaled")
    group = _cta_group(cta_group, "mma_block_scaled")
    shape = ud.check_shape(kind, m, n, cta_group=group, what=what)
    a_type = _ptx_type(a_dtype, "a_dtype")
    b_type = _ptx_type(b_dtype, "b_dtype")
    if (kind, scale_type) not in _SCALE_VEC:
        raise CompilationError(f"{what}: scale_type {scale_type!r} does not scale kind::{kind} (Table 57: mxf8f6f4 "
                               f"takes ue8m0; mxf4nvf4 takes ue8m0 or ue4m3)")
    target = emit.current().target
    if kind == "mxf4nvf4" and target.ptx_version < (8, 7):
        raise CompilationError(f"{what}: kind::mxf4nvf4 (and scale_vec::4X) needs PTX ISA 8.7 (PTX ISA 9.1 "
                               f"§9.7.16.10.9.1, PTX ISA notes); {target.name} emits PTX {target.ptx_version_text}: "
                               f"build for sm_100f (PTX 8.8)")
    idesc = ud.block_scaled_instruction_descriptor(shape, a_type, b_type, scale_type=scale_type,
                                                   scale_a_id=scale_a_id, scale_b_id=scale_b_id, what=what)
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Value) or x.dtype.bits != 64 or not x.dtype.is_int:
            raise CompilationError(f"{what}: operand {name} must be a shared-memory descriptor, got {x!r}")
    km = emit.current()
    vector = _SCALE_VEC[(kind, scale_type)][1 if target.name.endswith("f") else 0]
    args = [_as_i32(tmem_pointer(d, "mma_block_scaled (operand d)")), a.ir, b.ir, ir.Constant(emit.I32, idesc),
            _as_i32(tmem_pointer(scale_a, "mma_block_scaled (operand scale_a)")),
            _as_i32(tmem_pointer(scale_b, "mma_block_scaled (operand scale_b)")),
            km.builder.zext(_predicate(accumulate, "accumulate"), emit.I32)]
    asm = (f"{{ .reg .pred p; setp.ne.b32 p, $6, 0; tcgen05.mma.cta_group::{group}.kind::{kind}.block_scale."
           f"{vector} [$0], $1, $2, $3, [$4], [$5], p; }}")
    km.inline_asm(ir.VoidType(), asm, "r,l,l,r,r,r,r", args, side_effect=True)
    return idesc


# -- commit (§9.7.16.12.1) -------------------------------------------------------------------------------
def commit(barrier, *, cta_group: int = 1, multicast_mask=None) -> None:
    """``tcgen05.commit.cta_group::G.mbarrier::arrive::one[.multicast::cluster].shared::cluster.b64
    [barrier](, mask)``: one arrival on ``barrier`` once every asynchronous tcgen05 operation this
    thread issued before it (MMAs, ``cp``) has completed.

    Args:
        barrier: the mbarrier (shared ``Int64`` pointer) to arrive on; with a mask, the barrier at the
            same offset in each CTA named by the mask.
        cta_group: 1 or 2 (the MMAs' CTA group).
        multicast_mask: None, or a 16-bit CTA mask (compile-time int or Int16/Int32 Value) of cluster
            ranks whose barrier receives the arrival (both CTAs of a pair: ``0b11 << pair_base``).

    Raises:
        CompilationError: ``barrier`` is not an 8-byte shared mbarrier, a mask outside 16 bits, or no tcgen05.

    Source: PTX ISA 9.1 §9.7.16.12.1 "tcgen05.commit".
    """
    require_tcgen05_target("commit")
    group = _cta_group(cta_group, "commit")
    if not isinstance(barrier, Pointer) or barrier.address_space != emit.SHARED or barrier.dtype.bits != 64:
        raise CompilationError(f"tsjit.tcgen05.commit: barrier must be an mbarrier (a shared-memory Int64 pointer), "
                               f"got {barrier!r}")
    km = emit.current()
    if multicast_mask is None:
        km.intrinsic(f"llvm.nvvm.tcgen05.commit.shared.cg{group}", [barrier.ir])
        return
    if isinstance(multicast_mask, Value):
        if not multicast_mask.dtype.is_int:
            raise CompilationError("tsjit.tcgen05.commit: multicast_mask must be an integer")
        mask = cast_to(multicast_mask, dt.Int16).ir
    else:
        if isinstance(multicast_mask, bool) or not isinstance(multicast_mask, int) or \
                not 0 < multicast_mask < (1 << 16):
            raise CompilationError(f"tsjit.tcgen05.commit: multicast_mask must be a non-zero 16-bit CTA mask, got "
                                   f"{multicast_mask!r}")
        mask = ir.Constant(emit.I16, multicast_mask)
    km.intrinsic(f"llvm.nvvm.tcgen05.commit.mc.shared.cg{group}", [barrier.ir, mask])


# -- shared memory -> tensor memory copy (§9.7.16.9.2) -----------------------------------------------------
_CP_SHAPES = {"128x256b": (None,), "4x256b": (None,), "128x128b": (None,), "64x128b": ("warpx2::02_13", "warpx2::01_23"),
              "32x128b": ("warpx4",)}


def cp(address, source, *, shape: str = "128x256b", multicast: str | None = None, cta_group: int = 1) -> None:
    """``tcgen05.cp.cta_group::G.<shape>[.<multicast>] [taddr], s_desc``: copy a matrix from shared
    memory (described by ``source``, a shared-memory descriptor) into TMEM at ``address``,
    asynchronously; a later :func:`commit` signals its completion (scale factors for block-scaled
    MMAs, A operands in TMEM).  One thread issues it.

    Args:
        address: TMEM destination (Uint32).
        source: a shared-memory descriptor (:func:`make_smem_descriptor`).
        shape: ``"128x256b"``, ``"4x256b"``, ``"128x128b"``, ``"64x128b"`` (needs multicast
            ``"warpx2::02_13"`` or ``"warpx2::01_23"``) or ``"32x128b"`` (needs ``"warpx4"``).
        cta_group: 1 or 2.

    Raises:
        CompilationError: an unknown shape, a multicast the shape does not take, or no tcgen05.

    Source: PTX ISA 9.1 §9.7.16.9.2 "tcgen05.cp".
    """
    require_tcgen05_target("cp")
    group = _cta_group(cta_group, "cp")
    if shape not in _CP_SHAPES:
        raise CompilationError(f"tsjit.tcgen05.cp: shape must be one of {list(_CP_SHAPES)}, got {shape!r}")
    if multicast not in _CP_SHAPES[shape]:
        allowed = [m for m in _CP_SHAPES[shape] if m] or ["None"]
        raise CompilationError(f"tsjit.tcgen05.cp: shape {shape} takes multicast {allowed}, got {multicast!r}")
    if not isinstance(source, Value) or source.dtype.bits != 64 or not source.dtype.is_int:
        raise CompilationError(f"tsjit.tcgen05.cp: source must be a shared-memory descriptor "
                               f"(tsjit.tcgen05.make_smem_descriptor), got {source!r}")
    suffix = f".{multicast}" if multicast else ""
    km = emit.current()
    km.inline_asm(ir.VoidType(), f"tcgen05.cp.cta_group::{group}.{shape}{suffix} [$0], $1;", "r,l",
                  [_as_i32(tmem_pointer(address, "cp")), source.ir], side_effect=True)


__all__ = ["alloc", "dealloc", "relinquish_alloc_permit", "SmemDescriptor", "make_smem_descriptor", "mma", "mma_ws",
           "mma_block_scaled", "commit", "cp", "ld", "st", "wait_ld", "wait_st", "fence_before_thread_sync",
           "fence_after_thread_sync", "tmem_address", "AccumulatorView", "accumulator", "TMEM_LANES", "TMEM_COLUMNS",
           "TCGEN05_TARGETS", "available",
           "OPERAND_TYPES"]
