"""Tensor memory (TMEM) addresses, ``tcgen05.ld`` / ``tcgen05.st`` between TMEM and registers, the
tcgen05 waits and fences, and the accumulator view an epilogue reads a UMMA result through.
Public through ``tsjit.tcgen05`` (:mod:`tsjit.lang.tcgen05`).

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA (PTX ISA 9.1 §9.7.16.1).  A TMEM
address is 32 bits, lane in bits 31-16 and column in bits 15-0 (§9.7.16.1.1); in LLVM it is a
``ptr addrspace(6)``.  Warp ``w`` of a warpgroup may access only lanes ``32 (w % 4) ..
32 (w % 4) + 31`` (§9.7.16.8.1, access restrictions).

``tcgen05.ld.sync.aligned.<shape>.x<N>.b32`` (§9.7.16.8.3) is a warp-collective load: every
thread of the warp passes the same base address and receives ``per x N`` registers, where
``per`` is 1 for ``32x32b`` and ``16x64b``, 2 for ``16x128b``, 4 for ``16x256b``; ``N`` is a power
of 2 up to 128 registers in all.  With ``32x32b`` thread ``t`` of the warp reads lane
``base_lane + t`` and registers ``0..N-1`` are columns ``base_column .. + N - 1``.  The load is
asynchronous: :func:`wait_ld` must come before the registers are read (§9.7.16.8.5).

The accumulator of an ``M = 128`` (``cta_group::1``) or ``M = 256`` (``cta_group::2``, 128 rows per
CTA) UMMA with 32-bit D is stored row ``r`` -> lane ``r``, column ``c`` -> column ``base + c``
(Data-path Layouts D and A, §9.7.16.10.5.4 / §9.7.16.10.5.1).  :class:`AccumulatorView` reads it
with ``32x32b`` loads, so thread ``t`` of warp ``w`` (``w % 4 = q``) holds row ``32 q + t`` and
consecutive columns: the registers of one thread are one row segment, ready for a vector store.
:meth:`AccumulatorView.store_shared` reads it with ``16x256b`` loads instead, whose registers are in
the order ``stmatrix`` stores, to stage the tile in shared memory for a TMA store (the layout of
:mod:`tsjit.lang.stmatrix`, shared with the Hopper epilogue).
"""
from __future__ import annotations

import weakref

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang import dtypes as dt
from tsjit.lang.builtins import lane_idx, warp_idx
from tsjit.lang.dtypes import DType
from tsjit.lang.stmatrix import check_stmatrix_tile, store_slab_shared
from tsjit.lang.fragment import Fragment
from tsjit.lang.memory import Tensor, convert_for_store
from tsjit.lang.values import Value, as_value, cast_to, integer_operand

TCGEN05_TARGETS = ("sm_100a", "sm_100f")
TMEM_LANES = 128
TMEM_COLUMNS = 512
TMEM = 6                                   # LLVM NVPTX address space of tensor memory

#: shape -> registers per thread per repetition (.x1).
LD_SHAPES = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4}
REPETITIONS = (1, 2, 4, 8, 16, 32, 64, 128)


def available() -> bool:
    """True when the kernel being compiled targets tcgen05 hardware (sm_100a / sm_100f): a compile-time
    Python bool, so ``if tsjit.const_expr(tsjit.tcgen05.available()):`` picks the Blackwell code path
    and folds the other away (the same source then builds wgmma code for sm_90a)."""
    return emit.current().target.name in TCGEN05_TARGETS


def require_tcgen05_target(what: str, family: str = "tcgen05") -> None:
    """Raise unless the kernel is being compiled for a Blackwell target (tcgen05, cluster launch control).

    Raises:
        CompilationError: naming ``tsjit.<family>.<what>``, the target, and the Hopper alternative.
    """
    target = emit.current().target
    if target.name not in TCGEN05_TARGETS:
        hopper = "tsjit.wgmma" if family == "tcgen05" else "a static persistent WorkQueue"
        raise CompilationError(f"tsjit.{family}.{what} needs sm_100a or sm_100f (Blackwell, PTX ISA §9.7.16 / "
                               f"§9.7.13.17); this kernel is being compiled for {target.name} (on sm_90a use "
                               f"{hopper})")


_CTA_GROUPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # kernel module -> (group, first user)


def record_cta_group(group: int, what: str) -> None:
    """Note that ``tsjit.tcgen05.<what>`` uses ``.cta_group::<group>`` in the kernel being compiled.

    Raises:
        CompilationError: an earlier tcgen05 instruction of this kernel used the other CTA group ("All
            tcgen05 instructions within a kernel must specify the same value for the .cta_group
            qualifier", PTX ISA 9.1 §9.7.16.10.9.1).
    """
    km = emit.current()
    first = _CTA_GROUPS.setdefault(km, (group, what))
    if first[0] != group:
        raise CompilationError(f"tsjit.tcgen05.{what}: cta_group={group}, but tsjit.tcgen05.{first[1]} earlier in "
                               f"this kernel used cta_group={first[0]}; every tcgen05 instruction of a kernel "
                               f"must use the same CTA group (PTX ISA 9.1 §9.7.16.10.9.1)")


def tmem_pointer(address, what: str) -> ir.Value:
    """``address`` (a 32-bit integer Value: a TMEM address) as an LLVM ``ptr addrspace(6)``.

    Raises:
        CompilationError: ``address`` is not a 32-bit integer Value or int.
    """
    if isinstance(address, Value):
        if not address.dtype.is_int or address.dtype.bits != 32:
            raise CompilationError(f"tsjit.tcgen05.{what}: a TMEM address is a 32-bit integer (the value "
                                   f"tcgen05.alloc wrote), got {address.dtype.name}")
        value = address.ir
    elif isinstance(address, int) and not isinstance(address, bool) and 0 <= address < (1 << 32):
        value = ir.Constant(emit.I32, address)
    else:
        raise CompilationError(f"tsjit.tcgen05.{what}: a TMEM address is a 32-bit integer, got {address!r}")
    return emit.current().builder.inttoptr(value, emit.pointer_type(TMEM))


def tmem_address(base, *, lane=0, column=0) -> Value:
    """``base`` moved by ``lane`` lanes and ``column`` columns: ``base + (lane << 16) + column``
    (PTX ISA 9.1 §9.7.16.1.1), a Uint32 Value.  ``lane`` and ``column`` are ints or Int32 Values."""
    if not isinstance(base, Value) or not base.dtype.is_int or base.dtype.bits != 32:
        raise CompilationError(f"tsjit.tcgen05.tmem_address: base must be a 32-bit TMEM address, got {base!r}")
    if isinstance(lane, int) and not 0 <= lane < TMEM_LANES:
        raise CompilationError(f"tsjit.tcgen05.tmem_address: lane must be in 0..{TMEM_LANES - 1}, got {lane}")
    if isinstance(column, int) and not 0 <= column < TMEM_COLUMNS:
        raise CompilationError(f"tsjit.tcgen05.tmem_address: column must be in 0..{TMEM_COLUMNS - 1}, got {column}")
    result = cast_to(base, dt.Uint32)
    if not (isinstance(lane, int) and lane == 0):
        result = result + (integer_operand(lane, dt.Uint32, "tsjit.tcgen05.tmem_address: lane") << 16)
    if not (isinstance(column, int) and column == 0):
        result = result + integer_operand(column, dt.Uint32, "tsjit.tcgen05.tmem_address: column")
    return result


def _shape(shape, num, what: str) -> int:
    if shape not in LD_SHAPES:
        raise CompilationError(f"tsjit.tcgen05.{what}: shape must be one of {list(LD_SHAPES)}, got {shape!r}")
    if isinstance(num, bool) or num not in REPETITIONS:
        raise CompilationError(f"tsjit.tcgen05.{what}: num (the .x repetition) must be one of {list(REPETITIONS)}, "
                               f"got {num!r}")
    count = LD_SHAPES[shape] * num
    if count > 128:
        raise CompilationError(f"tsjit.tcgen05.{what}: shape {shape} with num={num} would need {count} registers "
                               f"per thread; at most 128 (use num={128 // LD_SHAPES[shape]} or fewer)")
    return count


def _register_dtype(dtype, what: str) -> DType:
    if not isinstance(dtype, DType) or dtype.bits != 32 or dtype.is_bool:
        raise CompilationError(f"tsjit.tcgen05.{what}: TMEM cells are 32 bits; dtype must be Float32, Int32 or "
                               f"Uint32, got {dtype!r}")
    return dtype


def ld(address, *, shape: str = "32x32b", num: int = 1, dtype: DType = dt.Float32, pack: bool = False) -> Fragment:
    """``tcgen05.ld.sync.aligned.<shape>.x<num>[.pack::16b].b32``: warp-collective load from TMEM.

    Every thread of the warp executes it with the same ``address`` (lane base of the warp's
    subpartition + column).  Call :func:`wait_ld` before reading the result.

    Args:
        address: TMEM address (Uint32).
        shape: ``"32x32b"``, ``"16x64b"``, ``"16x128b"`` or ``"16x256b"``.
        num: repetitions, a power of 2 with ``per x num <= 128`` registers.
        dtype: how the 32-bit registers are read: Float32 (default), Int32 or Uint32.
        pack: ``.pack::16b``: two adjacent 16-bit columns into one register.

    Returns:
        A :class:`Fragment` of ``per x num`` elements of ``dtype``.

    Raises:
        CompilationError: unknown shape, illegal repetition, a non-32-bit dtype, or no tcgen05.

    Source: PTX ISA 9.1 §9.7.16.8.3 "tcgen05.ld".
    """
    require_tcgen05_target("ld")
    count = _shape(shape, num, "ld")
    dtype = _register_dtype(dtype, "ld")
    km = emit.current()
    b = km.builder
    raw = km.intrinsic(f"llvm.nvvm.tcgen05.ld.{shape}.x{num}", [tmem_pointer(address, "ld"), ir.Constant(emit.I1,
                                                                                                         int(pack))])
    values = [raw] if count == 1 else [b.extract_element(raw, ir.Constant(emit.I32, i)) for i in range(count)]
    if dtype.is_float:
        values = [b.bitcast(v, emit.llvm_type(dtype)) for v in values]
    return Fragment([Value(v, dtype) for v in values], dtype)


def st(address, values, *, shape: str = "32x32b", num: int | None = None, unpack: bool = False) -> None:
    """``tcgen05.st.sync.aligned.<shape>.x<num>[.unpack::16b].b32``: warp-collective store of each
    thread's registers to TMEM (the mirror of :func:`ld`; PTX ISA 9.1 §9.7.16.8.4).  Call
    :func:`wait_st` before an MMA or another thread reads the cells.

    Args:
        address: TMEM address (Uint32).
        values: a :class:`Fragment` of 32-bit values (``per x num`` of them).
        shape, num: as :func:`ld` (``num`` defaults to ``len(values) / per``).

    Raises:
        CompilationError: a fragment size that does not match the shape, non-32-bit values, or no tcgen05.
    """
    require_tcgen05_target("st")
    if not isinstance(values, Fragment):
        raise CompilationError(f"tsjit.tcgen05.st: values must be a tsjit.Fragment of 32-bit values, got "
                               f"{type(values).__name__}")
    _register_dtype(values.dtype, "st")
    if shape not in LD_SHAPES:
        raise CompilationError(f"tsjit.tcgen05.st: shape must be one of {list(LD_SHAPES)}, got {shape!r}")
    if num is None:
        num = len(values) // LD_SHAPES[shape]
    count = _shape(shape, num, "st")
    if len(values) != count:
        raise CompilationError(f"tsjit.tcgen05.st: {shape}.x{num} stores {count} registers per thread, but values "
                               f"has {len(values)}")
    km = emit.current()
    b = km.builder
    items = [v.ir if v.dtype.is_int else b.bitcast(v.ir, emit.I32) for v in values]
    if count == 1:
        packed = items[0]
    else:
        packed = ir.Constant(ir.VectorType(emit.I32, count), None)
        for i, item in enumerate(items):
            packed = b.insert_element(packed, item, ir.Constant(emit.I32, i))
    km.intrinsic(f"llvm.nvvm.tcgen05.st.{shape}.x{num}", [tmem_pointer(address, "st"), packed,
                                                          ir.Constant(emit.I1, int(unpack))])


def wait_ld() -> None:
    """``tcgen05.wait::ld.sync.aligned``: wait until this thread's prior ``tcgen05.ld`` have completed
    (PTX ISA 9.1 §9.7.16.8.5)."""
    require_tcgen05_target("wait_ld")
    emit.current().intrinsic("llvm.nvvm.tcgen05.wait.ld", [])


def wait_st() -> None:
    """``tcgen05.wait::st.sync.aligned``: wait until this thread's prior ``tcgen05.st`` have completed
    (PTX ISA 9.1 §9.7.16.8.5)."""
    require_tcgen05_target("wait_st")
    emit.current().intrinsic("llvm.nvvm.tcgen05.wait.st", [])


def fence_before_thread_sync() -> None:
    """``tcgen05.fence::before_thread_sync``: order this thread's prior asynchronous tcgen05 operations
    before a following thread synchronization (barrier, mbarrier arrive); PTX ISA 9.1 §9.7.16.11.1."""
    require_tcgen05_target("fence_before_thread_sync")
    emit.current().intrinsic("llvm.nvvm.tcgen05.fence.before.thread.sync", [])


def fence_after_thread_sync() -> None:
    """``tcgen05.fence::after_thread_sync``: order tcgen05 operations after a preceding thread
    synchronization (e.g. reading TMEM after waiting on the MMA's commit barrier); PTX ISA 9.1
    §9.7.16.11.1."""
    require_tcgen05_target("fence_after_thread_sync")
    emit.current().intrinsic("llvm.nvvm.tcgen05.fence.after.thread.sync", [])


class AccumulatorView:
    """The 32-bit UMMA accumulator ``D`` (``rows x columns``) in TMEM, read by the four warps of
    one warpgroup (Layouts D / A: row -> lane, column -> column).

    Args:
        base: TMEM address of ``D[0, 0]`` (the ``d`` given to :func:`tsjit.tcgen05.mma`).
        columns: N of the accumulator.
        rows: rows in this CTA: 128 (an ``M = 128`` MMA, or one CTA's half of an ``M = 256`` pair).
        dtype: Float32 (default) or Int32.

    Raises:
        CompilationError: rows other than 128 (``M = 64`` uses half the lanes, Layout F: not
            supported by this view), columns outside 1..512.
    """

    def __init__(self, base, *, columns: int, rows: int = 128, dtype: DType = dt.Float32):
        require_tcgen05_target("accumulator")
        if rows != 128:
            raise CompilationError(f"tsjit.tcgen05.accumulator: rows must be 128 (an M = 128 MMA or one CTA of an "
                                   f"M = 256 pair); the M = 64 layout (Layout F) is not supported, got rows={rows!r}")
        if isinstance(columns, bool) or not isinstance(columns, int) or not 1 <= columns <= TMEM_COLUMNS:
            raise CompilationError(f"tsjit.tcgen05.accumulator: columns must be in 1..{TMEM_COLUMNS}, got {columns!r}")
        if not isinstance(base, Value) or not base.dtype.is_int or base.dtype.bits != 32:
            raise CompilationError(f"tsjit.tcgen05.accumulator: base must be a 32-bit TMEM address, got {base!r}")
        self.base = base
        self.columns = columns
        self.rows = rows
        self.dtype = _register_dtype(dtype, "accumulator")

    def __repr__(self) -> str:
        return f"AccumulatorView[{self.rows}x{self.columns} {self.dtype.name}]"

    def row(self) -> Value:
        """The row (Int32) the calling thread holds: ``32 (warp % 4) + lane``."""
        return cast_to((warp_idx() & 3) * 32 + lane_idx(), dt.Int32)

    def load(self, column: int, count: int) -> Fragment:
        """Columns ``column .. column + count - 1`` of the calling thread's row (a ``32x32b.x<count>``
        load at the warp's lane base), waited for (``tcgen05.wait::ld``).  Every thread of the
        warpgroup calls it with the same compile-time ``column`` / ``count``.

        Raises:
            CompilationError: the range leaves the accumulator, or ``count`` is not a power of 2 <= 128.
        """
        if isinstance(column, bool) or not isinstance(column, int) or column < 0 or \
                isinstance(count, bool) or not isinstance(count, int) or column + count > self.columns:
            raise CompilationError(f"tsjit.tcgen05.accumulator.load: columns {column}..{column}+{count} leave the "
                                   f"{self.columns}-column accumulator (compile-time ints needed)")
        lane_base = (warp_idx() & 3) * 32
        address = tmem_address(self.base, lane=cast_to(lane_base, dt.Int32), column=column)
        fragment = ld(address, shape="32x32b", num=count, dtype=self.dtype)
        wait_ld()
        return fragment

    def store_global(self, out: Tensor, row0, col0, M=None, N=None, *, chunk: int = 32, fn=None) -> None:
        """Write the accumulator to ``out[row0 + r, col0 + c]`` where in bounds (``< M``, ``< N``,
        default ``out.shape``), converting to ``out``'s dtype; ``fn(value, row, col)`` is applied
        first (tile coordinates).  Every thread of the warpgroup calls it; it loads ``chunk`` columns
        at a time (a power of 2).

        Raises:
            CompilationError: ``out`` is not a rank-2 global tensor, or a bad ``chunk``.
        """
        if not isinstance(out, Tensor) or out.rank != 2 or out.ptr.address_space != emit.GLOBAL:
            raise CompilationError(f"tsjit.tcgen05.accumulator.store_global needs a rank-2 global tensor, got {out!r}")
        if chunk not in REPETITIONS:
            raise CompilationError(f"tsjit.tcgen05.accumulator.store_global: chunk must be a power of 2 up to 128, "
                                   f"got {chunk!r}")
        index = out.index_dtype
        what = "tsjit.tcgen05.accumulator.store_global: "
        rows = integer_operand(out.shape[0] if M is None else M, index, what + "M")
        cols = integer_operand(out.shape[1] if N is None else N, index, what + "N")
        row = self.row()
        grow = integer_operand(row0, index, what + "row0") + cast_to(row, index)
        col0 = integer_operand(col0, index, what + "col0")
        b = emit.current().builder
        start = 0
        while start < self.columns:
            width = min(chunk, self.columns - start)
            width = 1 << (width.bit_length() - 1)          # a power of 2 (the .x repetition)
            values = self.load(start, width)
            for i, value in enumerate(values):
                if fn is not None:
                    value = fn(value, row, start + i)
                gcol = col0 + (start + i)
                with b.if_then(((grow < rows) & (gcol < cols)).ir):
                    out.element_pointer((grow, gcol)).store(convert_for_store(value, out.dtype))
            start += width

    def store_shared(self, tile, *, dtype: DType | None = None, swizzle: str = "128B", fn=None,
                     chunk: int = 32) -> None:
        """Write the ``128 x N`` accumulator to a shared tile with ``stmatrix``, in the layout the Hopper
        epilogue writes (:func:`tsjit.epilogue.store_fragment_shared`) with 128 rows per box: shape
        ``(N / W, 128, W)`` for ``swizzle`` of span ``S`` bytes (``W = S / 2``: 64 BFloat16 for 128B), ready
        for :func:`tsjit.epilogue.tma_store_tile` with a store TensorMap of box ``(128, W)`` and the same
        swizzle; or ``(128, N)`` row-major for ``swizzle="none"``.  Every thread of the warpgroup calls it
        with the same arguments; then ``fence_proxy_async``, a barrier of the 128 threads, and one thread
        issues the TMA stores.

        Each warp reads its 32 lanes as two 16-lane slabs with ``tcgen05.ld.16x256b`` (``chunk`` columns,
        ``chunk / 8`` repetitions, per load): register ``r`` of thread ``t`` holds lane ``t / 4 + 8 ((r / 2)
        % 2)``, column ``8 (r / 4) + 2 (t % 4) + r % 2`` (PTX ISA 9.1 §9.7.16.2.3.1, shape .16x256b), the
        wgmma m64nNk accumulator order of one warp (§9.7.15.5.1.1.1) that ``stmatrix.m8n8.x4`` stores
        (§9.7.14.5.16), so no register shuffle is needed.

        Args:
            tile: the shared tile above, BFloat16 or Float16.
            dtype: stored type (default: the tile's), rounded to nearest even.
            swizzle: ``"128B"``, ``"64B"``, ``"32B"`` or ``"none"``.
            fn: optional ``fn(value, row, col)`` applied to each Float32 value first (tile coordinates).
            chunk: columns per ``tcgen05.ld``: 16, 32, 64 or 128 (4 x chunk / 8 registers live).

        Raises:
            CompilationError: an Int32 accumulator, N not a multiple of 16 (or of the box width), a bad
                ``chunk``, or a tile of the wrong shape, dtype or alignment.
        """
        what = "tcgen05.accumulator.store_shared"
        if self.dtype is not dt.Float32:
            raise CompilationError(f"tsjit.{what} converts a Float32 accumulator to 16-bit floats; this one is "
                                   f"{self.dtype.name} (use store_global)")
        if self.columns % 16:
            raise CompilationError(f"tsjit.{what}: stmatrix stores 16 columns at a time; the accumulator has "
                                   f"{self.columns} columns (a multiple of 16 is needed)")
        if chunk not in (16, 32, 64, 128):
            raise CompilationError(f"tsjit.{what}: chunk must be 16, 32, 64 or 128 columns, got {chunk!r}")
        n = self.columns
        ptr, dtype = check_stmatrix_tile(tile, n, self.rows, swizzle, dtype, what)
        lane = cast_to(lane_idx(), dt.Int32)
        quarter = cast_to((warp_idx() & 3) * 32, dt.Int32)
        for half in range(2):
            slab = quarter + 16 * half
            start = 0
            while start < n:
                width = min(chunk, n - start)
                width = 1 << (width.bit_length() - 1)      # a power of 2 (>= 16: n, start are multiples of 16)
                address = tmem_address(self.base, lane=slab, column=start)
                values = list(ld(address, shape="16x256b", num=width // 8, dtype=self.dtype))
                wait_ld()
                if fn is not None:
                    for r, value in enumerate(values):
                        row = slab + (lane >> 2) + 8 * ((r // 2) % 2)
                        col = ((lane & 3) << 1) + (start + 8 * (r // 4) + r % 2)
                        values[r] = as_value(fn(value, row, col), dt.Float32)
                store_slab_shared(values, ptr, slab, lane, n, swizzle, dtype, rows=self.rows, first_group=start // 8)
                start += width


def accumulator(base, *, columns: int, rows: int = 128, dtype: DType = dt.Float32) -> AccumulatorView:
    """An :class:`AccumulatorView` of the UMMA accumulator at TMEM address ``base``."""
    return AccumulatorView(base, columns=columns, rows=rows, dtype=dtype)
