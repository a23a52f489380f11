"""Blackwell tensor memory and ``tcgen05`` for the CPU interpreter: TMEM and its allocator,
``tcgen05.mma`` (A and B from shared memory or A from TMEM, D in TMEM), ``tcgen05.cp``, ``tcgen05.ld`` /
``tcgen05.st``, decoded as the hardware reads them.

**TMEM** (PTX ISA 9.1 §9.7.16.1) is 128 lanes x 512 columns of 32-bit cells per CTA
(:class:`TensorMemory`); an address is lane << 16 | column (§9.7.16.1.1).  ``tcgen05.alloc``
hands out ``num_columns`` columns (a power of two from 32 to 512) of all 128 lanes; the
interpreter places an allocation at the lowest free column that is a multiple of its size (the
hardware's placement is not specified; kernels read the address that alloc writes) and answers
None when no such range is free (the warp blocks until a ``dealloc``).  Every allocation must be
freed before the CTA exits (§9.7.16.7.1): :meth:`TensorMemory.check_freed`.

**MMA** (§9.7.16.10.9): ``D = A x B (+ D)`` with ``M = 128`` rows per CTA (``cta_group::1``; a pair of CTAs
with ``cta_group::2`` and ``M = 256``: :func:`mma_pair`) (lane ``r``
of the D columns holds row ``r``: Data-path Layout D, §9.7.16.10.5.4) and 32-bit D (Float32).  The
32-bit instruction descriptor and the 64-bit shared-memory descriptors are decoded with
:mod:`tsjit.lang.umma_descriptors` (the encoder's own inverse); the shared-memory operand layouts
are wgmma's canonical layouts (:func:`tsjit.interpret.wgmma.canonical_addresses`; §9.7.16.3).
Products are exact and the K products plus D are summed in float64 and rounded once to Float32.
``tcgen05.mma.ws`` with ``M = 128`` (Layout D, as the plain MMA) is modelled; block-scaled MMAs are
:mod:`tsjit.interpret.tcgen05_scaled`.  Not modelled (an :class:`~tsjit.errors.InterpretError`):
``M = 64``, ``M = 128`` pairs, ``.ws`` with ``M = 32 / 64`` (Layouts G / E: figures only), sparse MMAs,
Float16/Int32 D, the ``128B_base32B`` swizzle, a non-zero base offset and the absolute-LBO mode.

**cp** (§9.7.16.9.2): ``tcgen05.cp`` of the forms tsjit emits (:data:`CP_FORMS`): source rows of 16 or
32 bytes read through the shared-memory descriptor as a K-major byte matrix (the canonical layouts
again), written into the lanes :func:`cp_lanes` gives; the decompressing forms are refused.

**ld / st** (§9.7.16.8.3): shapes ``32x32b``, ``16x64b``, ``16x128b``, ``16x256b`` (:func:`fragment_cells`); ``32x32b``: thread ``t`` of the warp accesses lane
``base_lane + t`` and register ``j`` is column ``base_column + j``; warp ``w`` may access only
lanes ``32 (w % 4) .. 32 (w % 4) + 31`` (§9.7.16.8.1).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from tsjit.errors import CompilationError, InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.wgmma import ITEMSIZE, byte_ranges, canonical_addresses, gather_elements, operand_values
from tsjit.lang import umma_descriptors as ud

TMEM_LANES = 128
TMEM_COLUMNS = 512
WARP = 32
_TYPE_NAMES = {kind: {code: name for name, code in codes.items()} for kind, codes in ud.TYPE_CODES.items()}
_D_NAMES = {kind: {code: name for name, code in codes.items()} for kind, codes in ud.D_TYPE_CODES.items()}
POISON = 0x7FFFFFFF   # a Float32 NaN: TMEM cells read while an MMA that writes them is in flight


def split_address(address: int) -> tuple[int, int]:
    """(lane, column) of a 32-bit TMEM address."""
    return (int(address) >> 16) & 0xFFFF, int(address) & 0xFFFF


class TensorMemory:
    """The tensor memory of one CTA and its allocations.

    Attributes:
        cells: ``(128, 512)`` uint32, the 32-bit cells (lane, column).
        allocations: ``{base column: columns}`` of the live allocations.
    """

    def __init__(self):
        self.cells = np.zeros((TMEM_LANES, TMEM_COLUMNS), dtype=np.uint32)
        self.allocations: dict[int, int] = {}
        self.relinquished = False
        self.in_flight = []   # queued asynchronous operations (.lanes, .columns ranges) that write here

    def poison(self, values: np.ndarray, lane: int, column: int) -> np.ndarray:
        """``values`` (the cells at lanes ``lane..``, columns ``column..``) with :data:`POISON` where an
        operation in flight (an MMA or copy not yet complete) writes: what a read before its commit
        arrived may see."""
        for op in self.in_flight:
            l0, l1 = max(op.lanes[0], lane), min(op.lanes[1], lane + values.shape[0])
            c0, c1 = max(op.columns[0], column), min(op.columns[1], column + values.shape[1])
            if l0 < l1 and c0 < c1:
                values[l0 - lane:l1 - lane, c0 - column:c1 - column] = POISON
        return values

    def alloc(self, num_columns: int, peers=()) -> int | None:
        """The TMEM address (lane 0) of ``num_columns`` newly allocated columns, or None when no
        aligned free range exists now (the allocating warp waits).  With ``peers`` (the other CTA of a
        pair, ``cta_group::2``) the same columns are allocated in each of them too.

        Raises:
            InterpretError: ``num_columns`` is not a power of two in 32..512, or the CTA gave up
                its allocation permit (``relinquish_alloc_permit``) before.
        """
        if num_columns < 32 or num_columns > TMEM_COLUMNS or num_columns & (num_columns - 1):
            raise InterpretError(f"tcgen05.alloc of {num_columns} columns: the count must be a power of 2 from 32 "
                                 f"to {TMEM_COLUMNS} (PTX ISA §9.7.16.7.1)")
        if self.relinquished:
            raise InterpretError("tcgen05.alloc after tcgen05.relinquish_alloc_permit in this CTA: the CTA gave up "
                                 "its right to allocate; allocate before relinquishing")
        for base in range(0, TMEM_COLUMNS, num_columns):
            if all(b + n <= base or base + num_columns <= b
                   for tmem in (self, *peers) for b, n in tmem.allocations.items()):
                for tmem in (self, *peers):
                    tmem.allocations[base] = num_columns
                return base
        return None

    def dealloc(self, address: int, num_columns: int) -> None:
        """Free the columns :meth:`alloc` returned at ``address``.

        Raises:
            InterpretError: no live allocation starts there, or its size differs.
        """
        lane, column = split_address(address)
        if lane or self.allocations.get(column) != num_columns:
            live = ", ".join(f"{n} at column {b}" for b, n in sorted(self.allocations.items())) or "none"
            raise InterpretError(f"tcgen05.dealloc of {num_columns} columns at TMEM address 0x{int(address):08x}: no "
                                 f"allocation of that size starts there (live: {live}); pass the address and "
                                 f"count that tcgen05.alloc used")
        for op in self.in_flight:
            if op.columns[0] < column + num_columns and column < op.columns[1]:
                raise InterpretError(f"tcgen05.dealloc of {num_columns} columns at TMEM address 0x{int(address):08x}: "
                                     f"an MMA or copy issued at {op.where} still writes columns {op.columns[0]}.."
                                     f"{op.columns[1] - 1}; wait on its tcgen05.commit's mbarrier before the dealloc")
        del self.allocations[column]

    def relinquish(self) -> None:
        """``tcgen05.relinquish_alloc_permit``: no further alloc in this CTA."""
        self.relinquished = True

    def check_freed(self) -> None:
        """At CTA exit.

        Raises:
            InterpretError: listing the allocations never freed.
        """
        if self.allocations:
            live = ", ".join(f"{n} columns at column {b}" for b, n in sorted(self.allocations.items()))
            raise InterpretError(f"the CTA exits with TMEM still allocated ({live}); every tcgen05.alloc needs a "
                                 f"tcgen05.dealloc before the kernel ends (PTX ISA §9.7.16.7.1)")

    def check(self, lane: int, column: int, lanes: int, columns: int, what: str) -> None:
        """Raise unless lanes ``[lane, lane + lanes)`` x columns ``[column, column + columns)`` are
        inside one live allocation."""
        inside = any(b <= column and column + columns <= b + n for b, n in self.allocations.items())
        if not inside or lane < 0 or lane + lanes > TMEM_LANES:
            live = ", ".join(f"columns {b}..{b + n - 1}" for b, n in sorted(self.allocations.items())) or "none"
            raise InterpretError(f"{what}: TMEM lanes {lane}..{lane + lanes - 1}, columns {column}..{column + columns - 1} "
                                 f"are not inside an allocation (allocated: {live})")


#: shape -> (TMEM lanes, 32-bit columns per repetition, registers per thread per repetition).
LD_SHAPES = {"32x32b": (32, 1, 1), "16x64b": (16, 2, 1), "16x128b": (16, 4, 2), "16x256b": (16, 8, 4)}


@lru_cache(maxsize=64)
def fragment_cells(shape: str, num: int) -> tuple[np.ndarray, np.ndarray]:
    """(lanes, columns), each ``(32, registers)`` int64: the TMEM cell (relative to the instruction's
    address) that register ``r`` of thread ``t`` of the warp loads or stores in ``tcgen05.{ld,st}.<shape>.x<num>``
    (repetition ``i`` covers the atom's columns shifted by ``i`` atom widths):

    * ``32x32b``: lane ``t``, column ``r``;
    * ``16x64b`` (one register per repetition): lane ``t // 4 + 8 (t % 2)``, column ``(t // 2) % 2 + 2 r``;
    * ``16x128b`` (two): lane ``t // 4 + 8 (r % 2)``, column ``t % 4 + 4 (r // 2)``;
    * ``16x256b`` (four): lane ``t // 4 + 8 ((r // 2) % 2)``, column ``r % 2 + 2 (t % 4) + 8 (r // 4)``.

    Source: PTX ISA 9.1 §9.7.16.2.3.1 "Matrix fragments for shape .32x32b / .16x64b / .16x128b / .16x256b"
    states the lanes a warp accesses and the bits per lane (e.g. 16x64b: 16 lanes, 64 x .num bits each) and the
    register counts (§9.7.16.8.3); the thread/register-to-cell maps above are its Figures 183-186, which are
    images, not text.  They agree with CUTLASS's public CuTe layouts of the same instructions
    (``Copy_Traits<SM100_TMEM_LOAD_16dp{64,128,256}b*>``, checked in tests/interpret/test_tcgen05_shapes.py);
    not checked on a Blackwell GPU.
    """
    _lanes, _columns, per = LD_SHAPES[shape]
    t = np.arange(WARP, dtype=np.int64)[:, None]
    r = np.arange(per * num, dtype=np.int64)[None, :]
    if shape == "32x32b":
        lanes, columns = t + 0 * r, r + 0 * t
    elif shape == "16x64b":
        lanes, columns = t // 4 + 8 * (t % 2) + 0 * r, (t // 2) % 2 + 2 * r
    elif shape == "16x128b":
        lanes, columns = t // 4 + 8 * (r % 2), t % 4 + 4 * (r // 2)
    else:
        lanes, columns = t // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (t % 4) + 8 * (r // 4)
    lanes.setflags(write=False)
    columns.setflags(write=False)
    return lanes, columns


def _warp_access(tmem: TensorMemory, address: int, what: str, shape: str, num: int, warp: int) -> tuple[int, int]:
    """(lane, column) of a warp's ld/st, checked: a modelled shape, the warp's lanes, an allocation."""
    lane, column = split_address(address)
    if shape not in LD_SHAPES:
        raise InterpretError(f"{what}: the interpreter models the {list(LD_SHAPES)} shapes (PTX ISA §9.7.16.8.3)")
    lanes, columns, _per = LD_SHAPES[shape]
    quarter = 32 * (warp % 4)
    if not quarter <= lane < quarter + 32 or lane + lanes > quarter + 32:
        raise InterpretError(f"{what}: warp {warp} accesses TMEM lanes {lane}..{lane + lanes - 1}, but warp w may only "
                             f"access lanes {quarter}..{quarter + 31} (32 * (w % 4) on; PTX ISA §9.7.16.8.1)")
    tmem.check(lane, column, lanes, columns * num, what)
    return lane, column


def ld(tmem: TensorMemory, address: int, shape: str, num: int, warp: int) -> np.ndarray:
    """``tcgen05.ld.sync.aligned.<shape>.x<num>.b32`` of one warp: ``(32, registers)`` uint32, thread by
    register (:func:`fragment_cells` places them).

    Args:
        tmem: the CTA's tensor memory.
        address: the TMEM address every thread gave (lane, column).
        shape: ``"32x32b"``, ``"16x64b"``, ``"16x128b"`` or ``"16x256b"``.
        num: repetitions, a power of 2 (at most 128 registers per thread).
        warp: the warp's index in the CTA (``warp % 4`` selects its lanes).

    Raises:
        InterpretError: an unmodelled shape, lanes outside the warp's quarter, or columns outside
            an allocation.
    """
    lane, column = _warp_access(tmem, address, f"tcgen05.ld.{shape}.x{num}", shape, num, warp)
    if tmem.in_flight:
        view = tmem.poison(tmem.cells[lane:lane + 32, column:column + LD_SHAPES[shape][1] * num].copy(), lane, column)
    else:
        view = tmem.cells[lane:lane + 32, column:]
    if shape == "32x32b":
        return view[:, :num].copy()
    lanes, columns = fragment_cells(shape, num)
    return view[lanes, columns]


def st(tmem: TensorMemory, address: int, shape: str, values, warp: int) -> None:
    """``tcgen05.st.sync.aligned.<shape>.x<num>.b32`` of one warp: ``values`` ``(32, registers)`` uint32
    (thread by register) into TMEM (layout as :func:`ld`)."""
    registers = np.asarray(values, dtype=np.uint64).astype(np.uint32)
    num = registers.shape[1] // LD_SHAPES[shape][2] if shape in LD_SHAPES else registers.shape[1]
    lane, column = _warp_access(tmem, address, f"tcgen05.st.{shape}.x{num}", shape, num, warp)
    if shape == "32x32b":
        tmem.cells[lane:lane + WARP, column:column + num] = registers
        return
    lanes, columns = fragment_cells(shape, num)
    tmem.cells[lane + lanes, column + columns] = registers


def _smem_addresses(desc: int, rows: int, k: int, ptx_type: str, mn_major: int, what: str):
    """(byte addresses ``(rows, k)``, description) of the operand the tcgen05 shared-memory
    descriptor ``desc`` selects (PTX ISA §9.7.16.4.1, canonical layouts §9.7.16.3)."""
    return descriptor_addresses(desc, rows, k, ITEMSIZE[ptx_type], mn_major, f"tcgen05.mma {what}")


def descriptor_addresses(desc: int, rows: int, k: int, itemsize: int, mn_major: int, what: str):
    """(byte addresses ``(rows, k)``, description) of the ``rows x k`` matrix of ``itemsize``-byte
    elements that the tcgen05 shared-memory descriptor ``desc`` selects (PTX ISA §9.7.16.4.1,
    canonical layouts §9.7.16.3); ``what`` names the instruction and operand in errors.

    Raises:
        InterpretError: a wrong fixed version field, or an unmodelled swizzle / base offset / LBO mode.
    """
    fields = ud.decode_smem_descriptor(int(desc))
    described = (f"{what}: shared-memory descriptor 0x{int(desc) & ((1 << 64) - 1):016x} (address "
                 f"{fields['address']}, LBO {fields['leading_byte_offset']}, SBO {fields['stride_byte_offset']}, "
                 f"swizzle {fields['swizzle']!r})")
    if fields["version"] != 1:
        raise InterpretError(f"{described} has {fields['version']} in bits 46-48; the descriptor format requires "
                             f"the fixed value 0b001 (PTX ISA §9.7.16.4.1)")
    if fields["swizzle"] not in ("none", "32B", "64B", "128B"):
        raise InterpretError(f"{described}: swizzle mode {fields['swizzle']!r} is not modelled by the interpreter")
    if fields["base_offset"] or fields["lbo_absolute"]:
        raise InterpretError(f"{described}: a non-zero base offset or the absolute-LBO mode is not modelled; start "
                             f"the tile on its swizzle pattern")
    addresses = canonical_addresses(fields["address"], fields["leading_byte_offset"], fields["stride_byte_offset"],
                                    fields["swizzle"], rows, k, itemsize, bool(mn_major))
    return addresses, described


#: (shape, multicast) -> (source rows, bytes per row): the ``tcgen05.cp`` forms tsjit emits (PTX ISA 9.1
#: §9.7.16.9.2; Data Movement Shape §9.7.16.2.3).  The decompressing ``.b8x16.b6x16_p32`` /
#: ``.b8x16.b4x16_p64`` forms are not emitted by tsjit and not modelled.
CP_FORMS = {("128x256b", None): (128, 32), ("128x128b", None): (128, 16), ("4x256b", None): (4, 32),
            ("64x128b", "warpx2::02_13"): (64, 16), ("64x128b", "warpx2::01_23"): (64, 16),
            ("32x128b", "warpx4"): (32, 16)}


def cp_lanes(shape: str, multicast: str | None) -> np.ndarray:
    """``(rows, replicas)`` int64: the TMEM lanes (relative to the destination address) that source
    row ``r`` of ``tcgen05.cp.<shape>[.<multicast>]`` is written to:

    * ``128x256b`` / ``128x128b``: lane ``r``;
    * ``4x256b``: lane ``32 r`` (one row into the first lane of each warp's quarter);
    * ``64x128b.warpx2::02_13``: lanes ``r`` and ``r + 64`` (warps 0 and 2 get rows 0-31, 1 and 3 rows 32-63);
    * ``64x128b.warpx2::01_23``: lanes ``64 (r // 32) + r % 32`` and ``+ 32`` (warps 0 and 1 get rows 0-31,
      2 and 3 rows 32-63);
    * ``32x128b.warpx4``: lanes ``r + 32 j``, ``j = 0..3`` (every warp's quarter gets all 32 rows).

    Source: PTX ISA 9.1 §9.7.16.9.2 "tcgen05.cp" and §9.7.16.2.3 "Data Movement Shape": a shape is
    ``rows x bits``, the rows being TMEM lanes (so 128x*: lane ``r``); ``.64x128b`` requires
    ``.warpx2::02_13`` or ``.warpx2::01_23``, ``.32x128b`` ``.warpx4``; "the data being copied is multicasted
    into warp pairs and each warp in the warp pair receive half of the data", the pairs being warps 0 and 2,
    1 and 3 (``02_13``) or 0 and 1, 2 and 3 (``01_23``); ``.warpx4`` "multicasted into all 4 warps" (so
    32x128b: lanes ``r + 32 j``, as stated).  Which half a pair's warps hold is not spelled out: the model
    reads it as "both warps of a pair hold the same 32 rows", so each 64-lane half of TMEM gets all 64 rows
    for ``02_13`` (CUTLASS calls that copy ``SM100_UTCCP_2x64dp128bitlw0213``, "2 x 64 data-path lanes, broadcast
    like 4x32dp", and a public kernel uses it to "broadcast each 64-row chunk into its two TMEM datapath
    halves").  ``4x256b``'s lanes (the first of each quarter) are not stated in the text either (CUTLASS:
    ``SM100_UTCCP_4dp256bit``).  None of this is checked on a Blackwell GPU.

    Raises:
        InterpretError: a form outside :data:`CP_FORMS`.
    """
    if (shape, multicast) not in CP_FORMS:
        named = f"{shape}.{multicast}" if multicast else shape
        raise InterpretError(f"tcgen05.cp.{named}: the interpreter models "
                             f"{[f'{s}.{m}' if m else s for s, m in CP_FORMS]} (PTX ISA §9.7.16.9.2)")
    r = np.arange(CP_FORMS[(shape, multicast)][0], dtype=np.int64)[:, None]
    if shape == "4x256b":
        return 32 * r
    if multicast == "warpx2::02_13":
        return r + np.array([[0, 64]])
    if multicast == "warpx2::01_23":
        return 64 * (r // 32) + r % 32 + np.array([[0, 32]])
    if multicast == "warpx4":
        return r + 32 * np.arange(4)[None, :]
    return r


def cp_footprint(shape: str, multicast: str | None, address: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """((first lane, end lane), (first column, end column)) of the TMEM cells ``tcgen05.cp`` writes."""
    lane, column = split_address(address)
    lanes = cp_lanes(shape, multicast)
    return (lane, lane + int(lanes.max()) + 1), (column, column + CP_FORMS[(shape, multicast)][1] // 4)


def cp_source(desc: int, shape: str, multicast: str | None) -> tuple[np.ndarray, str]:
    """(byte addresses ``(rows, bytes per row)``, description) of the source matrix of a ``tcgen05.cp``:
    a K-major matrix of bytes in the canonical layout that ``desc`` describes (§9.7.16.4.1, §9.7.16.3),
    one source row per row, 16 or 32 bytes.

    Raises:
        InterpretError: as :func:`descriptor_addresses`, or an unmodelled form.
    """
    rows, row_bytes = CP_FORMS.get((shape, multicast), (None, None))
    if rows is None:
        cp_lanes(shape, multicast)
    named = f"{shape}.{multicast}" if multicast else shape
    return descriptor_addresses(desc, rows, row_bytes, 1, 0, f"tcgen05.cp.{named} source")


def cp(tmem: TensorMemory, smem: np.ndarray, desc: int, address: int, shape: str, multicast: str | None) -> None:
    """Perform one ``tcgen05.cp.cta_group::1.<shape>[.<multicast>] [address], desc`` now: copy the
    source matrix (:func:`cp_source`) into TMEM.  Source row ``r`` goes to the lanes :func:`cp_lanes`
    gives (relative to ``address``'s lane), its bytes little-endian into consecutive 32-bit columns
    from ``address``'s column (bytes ``4c .. 4c + 3`` into column ``c``, the lowest-addressed byte in
    bits 0-7: the packing the interpreter's A-in-TMEM operand uses).

    Raises:
        InterpretError: an unmodelled form or descriptor, a source outside shared memory, or
            destination cells outside a live TMEM allocation.
    """
    addresses, described = cp_source(desc, shape, multicast)
    raw = gather_elements(smem, addresses, 1, described)
    words = np.ascontiguousarray(raw).view("<u4")                               # (rows, columns)
    (lane0, lane1), (column0, column1) = cp_footprint(shape, multicast, address)
    named = f"{shape}.{multicast}" if multicast else shape
    tmem.check(lane0, column0, lane1 - lane0, column1 - column0, f"tcgen05.cp.{named} destination")
    lanes = lane0 + cp_lanes(shape, multicast)
    for replica in range(lanes.shape[1]):
        tmem.cells[lanes[:, replica], column0:column1] = words


def _smem_operand(smem: np.ndarray, desc: int, rows: int, k: int, ptx_type: str, mn_major: int,
                  what: str) -> np.ndarray:
    """The ``rows x k`` float64 operand that the tcgen05 shared-memory descriptor ``desc`` selects."""
    addresses, described = _smem_addresses(desc, rows, k, ptx_type, mn_major, what)
    return operand_values(gather_elements(smem, addresses, ITEMSIZE[ptx_type], described), ptx_type)


def _tmem_operand(tmem: TensorMemory, address: int, rows: int, k: int, ptx_type: str) -> np.ndarray:
    """A (rows x k) from TMEM: lane = row, elements packed little-end first into 32-bit columns."""
    lane, column = split_address(address)
    itemsize = ITEMSIZE[ptx_type]
    columns = k * itemsize // 4
    tmem.check(lane, column, rows, columns, "tcgen05.mma operand A in TMEM")
    raw = np.ascontiguousarray(tmem.cells[lane:lane + rows, column:column + columns]).view(f"<u{itemsize}")
    return operand_values(raw, ptx_type)


def mma(tmem: TensorMemory, smem: np.ndarray, idesc: int, a, b_desc: int, d_address: int, accumulate: bool, *,
        kind: str, a_in_tmem: bool = False, cta_group: int = 1) -> None:
    """One ``tcgen05.mma.cta_group::1.kind::<kind>`` (issued by one thread): ``D = A x B (+ D)`` into TMEM.

    Args:
        tmem: the CTA's tensor memory (D, and A when ``a_in_tmem``).
        smem: the CTA's uint8 shared-memory window.
        idesc: the 32-bit instruction descriptor.
        a: A's shared-memory descriptor, or its TMEM address with ``a_in_tmem``.
        b_desc: B's shared-memory descriptor.
        d_address: D's TMEM address (lane 0).
        accumulate: the enable-input-d predicate (False: ``D = A x B``).
        kind: ``"f16"``, ``"tf32"`` or ``"f8f6f4"``.
        cta_group: 1 (2 is not modelled).

    Raises:
        InterpretError: an unmodelled form (module docstring), types the kind lacks, operands or D
            outside shared memory / TMEM allocations.
    """
    if cta_group != 1:
        raise InterpretError("tcgen05.mma: a cta_group::2 MMA spans a CTA pair; use mma_pair")
    mma_pair([tmem], [smem], idesc, a, b_desc, d_address, accumulate, kind=kind, a_in_tmem=a_in_tmem)


def mma_pair(tmems, smems, idesc: int, a, b_desc: int, d_address: int, accumulate: bool, *, kind: str,
             a_in_tmem: bool = False, ws: bool = False) -> None:
    """One ``tcgen05.mma.cta_group::G`` over the ``G`` CTAs of ``tmems`` / ``smems`` (one CTA, or the
    even and the odd CTA of a pair, in that order).

    With ``cta_group::2`` (M = 256; PTX ISA 9.1 §9.7.16.10.9, the pair's data path) CTA ``c`` holds rows
    ``128 c .. 128 c + 127`` of A (its own shared memory at A's descriptor, or its TMEM) and rows
    ``N/2 c .. N/2 c + N/2 - 1`` of B (N x K) at B's descriptor, and gets rows ``128 c ..`` of D in its
    TMEM at ``d_address`` (lane r = row 128 c + r, all N columns): ``D_c = A_c [B_0; B_1]^T (+ D_c)``.
    The descriptors and the D address are the same numbers in both CTAs.

    Raises:
        InterpretError: as :func:`mma` (M = 128 pairs are not modelled).
    """
    group = len(tmems)
    fields, a_type, b_type = _instruction(idesc, kind, group, ws)
    m, n, k = fields["m"] // group, fields["n"], ud.KIND_K[kind]
    lane, column = split_address(d_address)
    operands_a = []
    for tmem, smem in zip(tmems, smems):
        if a_in_tmem:
            operands_a.append(_tmem_operand(tmem, a, m, k, a_type))
        else:
            operands_a.append(_smem_operand(smem, a, m, k, a_type, fields["transpose_a"], "operand A"))
        tmem.check(lane, column, m, n, "tcgen05.mma: D")
    operand_b = np.concatenate([_smem_operand(smem, b_desc, n // group, k, b_type, fields["transpose_b"],
                                              "operand B") for smem in smems])
    sign = (-1.0) ** (fields["negate_a"] + fields["negate_b"])
    for tmem, operand_a in zip(tmems, operands_a):
        product = sign * (operand_a @ operand_b.T)
        if accumulate:
            product = product + tmem.cells[lane:lane + m, column:column + n].view(np.float32).astype(np.float64)
        tmem.cells[lane:lane + m, column:column + n] = numerics.to_float32(product).view(np.uint32)


def operand_ranges(idesc: int, a, b_desc: int, *, kind: str, a_in_tmem: bool = False,
                   cta_group: int = 1, ws: bool = False) -> list[tuple[int, int]]:
    """The shared-memory byte ranges ``[start, end)`` one :func:`mma` reads (A's unless it is in
    TMEM, then B's), for the race checker; with ``cta_group=2`` those it reads in each CTA of the pair."""
    fields, a_type, b_type = _instruction(idesc, kind, cta_group, ws)
    m, n, k = fields["m"] // cta_group, fields["n"] // cta_group, ud.KIND_K[kind]
    ranges = [] if a_in_tmem else byte_ranges(_smem_addresses(a, m, k, a_type, fields["transpose_a"], "operand A")[0])
    return ranges + byte_ranges(_smem_addresses(b_desc, n, k, b_type, fields["transpose_b"], "operand B")[0])


def mma_shape(idesc: int, kind: str, cta_group: int = 1, ws: bool = False) -> tuple[int, int]:
    """(M, N) of the D tile one :func:`mma` (``ws``: ``tcgen05.mma.ws``) writes in each CTA's TMEM (lanes x
    columns).

    Raises:
        InterpretError: as :func:`mma` for an unmodelled or illegal instruction descriptor.
    """
    fields = _instruction(idesc, kind, cta_group, ws)[0]
    return fields["m"] // cta_group, fields["n"]


def _instruction(idesc: int, kind: str, cta_group: int, ws: bool = False):
    """(fields, A type, B type) of a modelled instruction descriptor (module docstring); ``ws``: of a
    ``tcgen05.mma.ws`` (§9.7.16.10.9.3), whose M = 128 D uses Layout D like the plain M = 128 MMA (the
    table of §9.7.16.10.5: M 128, cta_group::1, ".ws mode: Either"); its M = 32 / 64 Layouts G / E are
    given only as figures (217-218, 213-214) and are not modelled.  The B-reuse shift (bits 30-31) and the
    collector-buffer qualifiers change no result.

    Raises:
        InterpretError: an unmodelled form, an illegal shape, or types the kind lacks.
    """
    fields = ud.decode_instruction_descriptor(int(idesc))
    what = f"tcgen05.mma{'.ws' if ws else ''}.kind::{kind} (instruction descriptor 0x{int(idesc) & 0xFFFFFFFF:08x})"
    if cta_group not in (1, 2) or kind not in ("f16", "tf32", "f8f6f4") or fields["sparse"]:
        raise InterpretError(f"{what}: the interpreter models dense MMAs of kinds f16, tf32 and f8f6f4 only")
    m, n = fields["m"], fields["n"]
    try:
        ud.check_shape(kind, m, n, cta_group=cta_group, weight_stationary=ws)
    except CompilationError as error:
        raise InterpretError(f"{what}: {error}") from None
    if m != 128 * cta_group:
        layout = (f"; the .ws data-path Layout {'G' if m == 32 else 'E'} for M = {m} is given only as a figure "
                  f"in the PTX ISA (§9.7.16.10.5)") if ws else ""
        raise InterpretError(f"{what}: M = {m} is not modelled by the interpreter with cta_group::{cta_group} "
                             f"(M = 128 per CTA only: 128, or 256 for a pair){layout}")
    a_type = _TYPE_NAMES[kind].get(fields["a_type"])
    b_type = _TYPE_NAMES[kind].get(fields["b_type"])
    d_type = _D_NAMES[kind].get(fields["d_type"])
    if a_type not in ITEMSIZE or b_type not in ITEMSIZE or d_type != "f32":
        raise InterpretError(f"{what}: A {a_type!r} x B {b_type!r} -> D {d_type!r} is not modelled (bf16, f16, tf32, "
                             f"e4m3, e5m2 operands and a Float32 D)")
    return fields, a_type, b_type


__all__ = ["CP_FORMS", "cp_lanes", "cp_footprint", "cp_source", "cp", "descriptor_addresses", "LD_SHAPES", "fragment_cells", "TensorMemory", "split_address", "ld", "st", "mma", "mma_pair", "mma_shape", "operand_ranges", "POISON", "TMEM_LANES", "TMEM_COLUMNS"]
