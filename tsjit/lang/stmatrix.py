"""Storing 16-bit accumulator tiles to shared memory with ``stmatrix.sync.aligned.m8n8.x{2,4}.shared.b16``
(PTX ISA §9.7.14.5.16): the swizzled tile layout a TMA store reads, shared by the Hopper epilogue
(:mod:`tsjit.lang.epilogue`, wgmma register fragments) and the Blackwell one
(:meth:`tsjit.lang.tmem.AccumulatorView.store_shared`, TMEM read with ``tcgen05.ld.16x256b``).

A tile of ``rows x n`` 2-byte elements with a swizzle of span ``S`` bytes is ``(n / W, rows, W)`` boxes of
``W = S / 2`` columns, each 16-byte chunk ``c`` of row ``r`` at chunk ``c ^ (((r * S) >> 7) & (S / 16 - 1))``
(``c ^ (r % 8)`` for 128B, CuTe ``Swizzle<3,4,3>``); ``swizzle="none"`` is ``(rows, n)`` row-major.
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.dtypes import DType
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.values import Value, as_value, cast_to

SWIZZLE_SPANS = {"none": 0, "128B": 128, "64B": 64, "32B": 32}
_PACKED_TYPES = ("BFloat16", "Float16")
TILE_ROWS = 64                      # rows of one warpgroup's wgmma accumulator tile



def pack_pair(low, high, dtype: DType) -> Value:
    """Two values rounded to ``dtype`` (BFloat16 or Float16, round-to-nearest-even) and packed into
    one Int32, ``low`` in bits 0-15 (PTX ``cvt.rn.bf16x2.f32`` / ``cvt.rn.f16x2.f32``)."""
    if dtype.name not in _PACKED_TYPES:
        raise CompilationError(f"pack_pair packs BFloat16 or Float16, not {dtype.name}")
    b = emit.current().builder
    lo = cast_to(as_value(low, dt.Float32), dt.Float32)
    hi = cast_to(as_value(high, dt.Float32), dt.Float32)
    vec = ir.Constant(ir.VectorType(ir.FloatType(), 2), ir.Undefined)
    vec = b.insert_element(vec, lo.ir, ir.Constant(emit.I32, 0))
    vec = b.insert_element(vec, hi.ir, ir.Constant(emit.I32, 1))
    narrow = b.fptrunc(vec, ir.VectorType(emit.llvm_type(dtype), 2))
    return Value(b.bitcast(narrow, emit.I32), dt.Int32)


def _shared_destination(tile, what: str) -> tuple[Pointer, Tensor | None]:
    tensor = tile if isinstance(tile, Tensor) else None
    ptr = tile.ptr if isinstance(tile, Tensor) else tile
    if not isinstance(ptr, Pointer) or ptr.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.{what} needs a shared-memory tile, got {tile!r}")
    return ptr, tensor


def _check_tile_shape(tensor: Tensor | None, expected: tuple, what: str) -> None:
    if tensor is None:
        return
    if tuple(tensor.shape) != expected or not all(isinstance(s, int) for s in tensor.strides):
        raise CompilationError(f"tsjit.{what}: the tile must be a dense shared array of shape {expected}, "
                               f"got shape {tuple(tensor.shape)}")
    dense, step = [], 1
    for extent in reversed(expected):
        dense.append(step)
        step *= extent
    if tuple(tensor.strides) != tuple(reversed(dense)):
        raise CompilationError(f"tsjit.{what}: the tile of shape {expected} must be dense row-major, "
                               f"got strides {tuple(tensor.strides)}")


def check_stmatrix_tile(tile, n: int, rows: int, swizzle: str, dtype, what: str) -> tuple[Pointer, DType]:
    """Check a shared tile for :func:`store_slab_shared` of ``rows x n`` 2-byte elements and return
    ``(pointer, stored dtype)``: shape ``(n / W, rows, W)`` and ``8 x span``-byte alignment for a swizzle of
    span bytes (``W`` = span / 2), or ``(rows, n)`` and 16-byte alignment for ``swizzle="none"``.

    Raises:
        CompilationError: naming ``tsjit.<what>``: an unknown swizzle, not a shared tile, a dtype other than
            BFloat16 / Float16, ``n`` not a multiple of the box width, the wrong shape or alignment.
    """
    if swizzle not in SWIZZLE_SPANS:
        raise CompilationError(f"tsjit.{what}: swizzle must be one of {list(SWIZZLE_SPANS)}, got {swizzle!r}")
    ptr, tensor = _shared_destination(tile, what)
    dtype = dtype or ptr.dtype
    if dtype.name not in _PACKED_TYPES or ptr.dtype.bits != 16:
        raise CompilationError(f"tsjit.{what} stores BFloat16 or Float16 (stmatrix moves 16-bit elements); the "
                               f"tile holds {ptr.dtype.name} and dtype is {dtype.name}")
    span = SWIZZLE_SPANS[swizzle]
    if span:
        width = span // 2                                  # elements per swizzle row
        if n % width:
            raise CompilationError(f"tsjit.{what}: N={n} is not a multiple of the {swizzle} box width ({width} "
                                   f"columns)")
        _check_tile_shape(tensor, (n // width, rows, width), what)
        if ptr.alignment < 8 * span:
            raise CompilationError(f"tsjit.{what}: a {swizzle}-swizzled tile must be {8 * span}-byte aligned; it "
                                   f"is only known to be {ptr.alignment}-byte aligned")
    else:
        _check_tile_shape(tensor, (rows, n), what)
        if ptr.alignment < 16:
            raise CompilationError(f"tsjit.{what}: the tile must be 16-byte aligned")
    return ptr, dtype


def store_slab_shared(values, ptr: Pointer, slab_row, lane, n: int, swizzle: str, dtype: DType, *,
                      rows: int = TILE_ROWS, first_group: int = 0) -> None:
    """``stmatrix`` one warp's 16-row slab of accumulator values into a ``rows x n`` shared tile in the
    layout of :func:`store_fragment_shared` (checked by :func:`check_stmatrix_tile`).

    ``values`` are in the wgmma accumulator order of one warp (four per 8-column group ``g``: row
    ``slab_row + lane / 4`` columns ``8 g + 2 (lane % 4)`` and ``+1``, then the same columns 8 rows down;
    PTX ISA §9.7.15.5.1.1.1), for groups ``first_group ..``: ``tcgen05.ld.16x256b`` gives this order too
    (§9.7.16.2.3.1).  ``slab_row`` / ``lane`` are Int32 Values (or ints); ``first_group`` must be even.
    """
    if first_group % 2 or len(values) % 4:
        raise CompilationError(f"store_slab_shared: a slab starts at an even 8-column group and has four values "
                               f"per group, got group {first_group} and {len(values)} values")
    km = emit.current()
    b = km.builder
    groups = len(values) // 4
    for g in range(0, groups, 2):
        count = 4 if g + 1 < groups else 2
        # register r of stmatrix = matrix r: rows +8*(r % 2), columns 8 * (group + r // 2)
        registers = [pack_pair(values[4 * g + 2 * r], values[4 * g + 2 * r + 1], dtype).ir for r in range(count)]
        offset = stmatrix_tile_offset(slab_row, lane, first_group + g, n, swizzle, rows)
        target = b.gep(ptr.ir, [offset.ir], source_etype=emit.I8, inbounds=True)
        km.intrinsic(f"llvm.nvvm.stmatrix.sync.aligned.m8n8.x{count}.b16.p3", [target] + registers)


def stmatrix_row_offset(local_tid, group: int, n: int, swizzle: str):
    """Byte offset, from the tile's start, of the 16-byte matrix row that thread ``local_tid``
    (0..127, Int32 Value or int) addresses in the ``stmatrix.x4`` storing 8-column groups
    ``group`` and ``group + 1`` (``group`` even) of a 64 x ``n`` 2-byte tile in the layout of
    :func:`store_fragment_shared`: :func:`stmatrix_tile_offset` of warp ``local_tid / 32``'s slab
    (rows ``16 (local_tid / 32)`` on).
    """
    return stmatrix_tile_offset((local_tid >> 5) << 4, local_tid & 31, group, n, swizzle)


def stmatrix_tile_offset(slab_row, lane, group: int, n: int, swizzle: str, rows: int = TILE_ROWS):
    """Byte offset, from the tile's start, of the 16-byte matrix row that ``lane`` (0..31) addresses in the
    ``stmatrix.x4`` storing 8-column groups ``group`` and ``group + 1`` (``group`` even) of the 16-row slab
    starting at row ``slab_row`` of a ``rows x n`` 2-byte tile in the layout of :func:`store_fragment_shared`
    (``rows`` per TMA box).  Ints give ints.

    Lane ``l`` addresses matrix ``l // 8``, row ``l % 8``: tile row ``slab_row + 8 ((l // 8) % 2) + l % 8``,
    columns ``8 (group + l // 16)`` and on.  With a swizzle of span ``S`` bytes the row's 16-byte chunk ``c``
    sits at ``c ^ (((row * S) >> 7) & (S / 16 - 1))`` (``c ^ (row % 8)`` for 128B, CuTe ``Swizzle<3,4,3>``),
    in box ``column // (S / 2)``.
    """
    span = SWIZZLE_SPANS[swizzle]
    matrix = lane >> 3                                    # which 8x8 matrix this lane addresses
    row = slab_row + ((matrix & 1) << 3) + (lane & 7)
    half = matrix >> 1                                    # 0: first 8 columns, 1: next 8
    col0 = 8 * group
    if not span:
        return row * (n * 2) + (half << 4) + col0 * 2
    width = span // 2
    box, inner = divmod(col0, width)
    phase = ((row * span) >> 7) & (span // 16 - 1)       # the swizzle XOR of this row's chunks
    chunk = ((half + inner // 8) ^ phase) << 4
    return row * span + chunk + box * (rows * span)


__all__ = ["SWIZZLE_SPANS", "TILE_ROWS", "pack_pair", "check_stmatrix_tile", "store_slab_shared",
           "stmatrix_row_offset", "stmatrix_tile_offset"]
