"""Hopper warpgroup MMA (``wgmma.mma_async``) for the CPU interpreter: the shared-memory matrix
descriptors, the operand layouts and fragments, decoded exactly as the hardware reads them.

One call of :func:`mma` is one ``wgmma.mma_async.sync.aligned.m64nNkK.f32.<atype>.<btype>`` of a
whole warpgroup (128 threads): ``D = scale_a*A @ scale_b*B (+ D)`` on a 64 x N tile.  A wrong
descriptor (start address, LBO, SBO, swizzle mode) or a wrong swizzle in the tile that TMA wrote
makes this function read the same wrong bytes the tensor core would, so the interpreted kernel
gets the same wrong numbers.

**Matrix descriptor** (PTX ISA §9.7.15.5.1.2.2 "Matrix Descriptor Format"), 64 bits: start address
bits 13-0 (``addr >> 4``), leading dimension byte offset (LBO) bits 29-16 (``>> 4``), stride
dimension byte offset (SBO) bits 45-32 (``>> 4``), matrix base offset bits 51-49, swizzle mode
bits 63-62 (0 none, 1 128B, 2 64B, 3 32B).  :func:`decode_descriptor`.

**Operand layouts** (§9.7.15.5.1.2 "Shared Memory Matrix Layout"; canonical layouts in units of
16-byte chunks, ``S`` the swizzle span in bytes, element ``(r, k)`` of a 64 x K (A) or N x K (B)
operand, ``b`` its itemsize):

* K-major (``imm-trans = 0``), swizzled: row ``r`` of 8-row group ``r // 8`` at
  ``start + (r % 8) * S + (r // 8) * SBO``, K contiguous in it (``+ k * b``); LBO unused.
* K-major, no swizzle: 8 x 16-byte core matrices, ``start + (r % 8) * 16 + (r // 8) * SBO +
  (k*b // 16) * LBO + k*b % 16``.
* MN-major (``imm-trans = 1``, bf16/f16 only), swizzled: ``S`` bytes of M/N contiguous per K row,
  ``start + (r*b % S) + (r*b // S) * LBO + (k % 8) * S + (k // 8) * SBO``.
* MN-major, no swizzle: ``start + (r*b % 16) + (r*b // 16) * SBO + (k % 8) * 16 + (k // 8) * LBO``.

The computed address is then swizzled with its own bits (:mod:`tsjit.interpret.swizzle`), which
is why a tile must start on the pattern (1024 bytes for 128B) when the base offset is 0; a
non-zero base offset is not modelled (an error).

**Fragments** (§9.7.15.5.1.1): the Float32 accumulator register ``i`` of warpgroup thread ``t``
(warp ``w = t // 32``, lane ``l``) is element ``(16w + l//4 + 8*((i%4)//2), 8*(i//4) + 2*(l%4) +
i%2)`` (Figure 149, as :func:`tsjit.lang.fragment.accumulator_coords`).  A from registers: four
32-bit registers per thread (:func:`register_a_coords`).

**Numerics**: bf16/f16/FP8 products are exact; the K products of one MMA and the accumulator are
summed in float64 and rounded once to Float32 (round to nearest even).  The hardware's internal
summation order and width are not specified by PTX; results agree to a few Float32 ulps.  TF32
operands are Float32 bit patterns of which the low 13 mantissa bits are ignored (truncated).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.swizzle import CHUNK_BYTES, SWIZZLE_SPANS, swizzle_addresses
from tsjit.lang import dtypes as dt

WARPGROUP_THREADS = 128
MODE_SWIZZLES = {0: "none", 1: "128B", 2: "64B", 3: "32B"}    # descriptor bits 63-62
ITEMSIZE = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}
MMA_K = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
TRANSPOSABLE = ("bf16", "f16")
FP8 = ("e4m3", "e5m2")
ELEMENT_DTYPES = {"bf16": dt.BFloat16, "f16": dt.Float16, "e4m3": dt.Float8E4M3, "e5m2": dt.Float8E5M2}
TF32_MASK = np.uint32(0xFFFF_E000)


@dataclass(frozen=True)
class MatrixDescriptor:
    """A decoded wgmma matrix descriptor (byte units).

    Attributes:
        start: start address (byte offset in the CTA's shared memory).
        leading_byte_offset, stride_byte_offset: LBO / SBO in bytes.
        base_offset: the 3-bit matrix base offset.
        swizzle: ``"none"``, ``"32B"``, ``"64B"`` or ``"128B"``.
    """

    start: int
    leading_byte_offset: int
    stride_byte_offset: int
    base_offset: int
    swizzle: str


def decode_descriptor(bits: int) -> MatrixDescriptor:
    """The fields of a 64-bit wgmma matrix descriptor (PTX ISA §9.7.15.5.1.2.2)."""
    bits = int(bits) & ((1 << 64) - 1)
    return MatrixDescriptor(start=(bits & 0x3FFF) << 4, leading_byte_offset=((bits >> 16) & 0x3FFF) << 4,
                            stride_byte_offset=((bits >> 32) & 0x3FFF) << 4, base_offset=(bits >> 49) & 7,
                            swizzle=MODE_SWIZZLES[bits >> 62])


def _describe(bits: int) -> str:
    d = decode_descriptor(bits)
    return (f"descriptor 0x{int(bits) & ((1 << 64) - 1):016x} (start {d.start}, LBO {d.leading_byte_offset}, "
            f"SBO {d.stride_byte_offset}, base offset {d.base_offset}, swizzle {d.swizzle})")


@lru_cache(maxsize=1024)
def operand_addresses(bits: int, rows: int, k: int, itemsize: int, mn_major: bool) -> np.ndarray:
    """Shared-memory byte addresses ``(rows, k)`` of the elements of an operand described by
    descriptor ``bits`` (rows = M for A, N for B), after the swizzle (module docstring).

    Raises:
        InterpretError: a non-zero matrix base offset (not modelled).
    """
    d = decode_descriptor(bits)
    if d.base_offset:
        raise InterpretError(f"wgmma {_describe(bits)}: a non-zero matrix base offset is not modelled by the "
                             f"interpreter; start the tile on its swizzle pattern (1024 bytes for 128B) and use 0")
    return canonical_addresses(d.start, d.leading_byte_offset, d.stride_byte_offset, d.swizzle, rows, k, itemsize,
                               mn_major)


def canonical_addresses(start: int, lbo: int, sbo: int, swizzle: str, rows: int, k: int, itemsize: int,
                        mn_major: bool) -> np.ndarray:
    """Byte addresses ``(rows, k)`` (read-only int64) of a ``rows x k`` MMA operand in the canonical
    shared-memory layout (K-major or MN-major, ``swizzle``, LBO / SBO in bytes) starting at ``start``,
    after the swizzle: the layouts of the module docstring, shared by wgmma and tcgen05.mma
    (PTX ISA §9.7.15.5.1.2, §9.7.16.3)."""
    span = SWIZZLE_SPANS[swizzle]
    r = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    if not mn_major:
        kb = kk * itemsize
        if span:
            address = start + (r % 8) * span + (r // 8) * sbo + kb
        else:
            address = start + (r % 8) * 16 + (r // 8) * sbo + (kb // 16) * lbo + kb % 16
    else:
        rb = r * itemsize
        if span:
            address = start + rb % span + (rb // span) * lbo + (kk % 8) * span + (kk // 8) * sbo
        else:
            address = start + rb % 16 + (rb // 16) * sbo + (kk % 8) * 16 + (kk // 8) * lbo
    physical = swizzle_addresses(address, swizzle)
    physical.setflags(write=False)
    return physical


def gather_elements(smem: np.ndarray, addresses: np.ndarray, itemsize: int, described: str) -> np.ndarray:
    """The raw elements (unsigned ints of ``itemsize`` bytes) at byte ``addresses`` of ``smem``.

    Raises:
        InterpretError: starting with ``described`` (the operand and its descriptor), when an
            element lies outside shared memory.
    """
    high = int(addresses.max()) + itemsize
    if high > smem.size or int(addresses.min()) < 0:
        raise InterpretError(f"{described} reads shared-memory bytes up to {high}, but the CTA has {smem.size}; "
                             f"check the tile's address, LBO and SBO")
    raw = smem[(addresses[..., None] + np.arange(itemsize)).reshape(addresses.shape[:-1] + (-1,))]
    return np.ascontiguousarray(raw).view(f"<u{itemsize}")


def operand_values(raw: np.ndarray, ptx_type: str) -> np.ndarray:
    """float64 values of raw operand elements of ``ptx_type`` (TF32: the low 13 bits ignored)."""
    if ptx_type == "tf32":
        return (raw.astype(np.uint32) & TF32_MASK).view(np.float32).astype(np.float64)
    return numerics.decode(raw, ELEMENT_DTYPES[ptx_type]).astype(np.float64)


@lru_cache(maxsize=64)
def accumulator_coords(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each ``(128, n // 2)``: the element of the 64 x ``n`` tile that Float32
    accumulator register ``i`` of warpgroup thread ``t`` holds (PTX ISA Figure 149)."""
    t = np.arange(WARPGROUP_THREADS)[:, None]
    i = np.arange(n // 2)[None, :]
    warp, lane = t // 32, t % 32
    rows = 16 * warp + lane // 4 + 8 * ((i % 4) // 2)
    cols = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows.copy(), cols.copy()


@lru_cache(maxsize=8)
def register_a_coords(ptx_type: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each ``(128, 4, e)`` with ``e = 4 / itemsize`` elements per 32-bit register
    (element 0 in the low bits): where element ``j`` of A register ``r`` of thread ``t`` sits in the
    64 x K tile (PTX ISA §9.7.15.5.1.1, "Register fragment layout for matrix A": the
    ``mma.m16n8kK`` A layout per warp, warp ``w`` holding rows ``16w .. 16w + 15``)."""
    per_register = 4 // ITEMSIZE[ptx_type]
    t = np.arange(WARPGROUP_THREADS)[:, None, None]
    reg = np.arange(4)[None, :, None]
    j = np.arange(per_register)[None, None, :]
    lane = t % 32
    group, quad = lane // 4, lane % 4
    rows = 16 * (t // 32) + group + 8 * (reg % 2)
    k_half = MMA_K[ptx_type] // 2
    cols = (reg // 2) * k_half + quad * per_register + j
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows.copy(), cols.copy()


def register_a_tile(a_regs: np.ndarray, ptx_type: str) -> np.ndarray:
    """The 64 x K A tile (float64) held by the warpgroup's registers ``a_regs`` ``(128, 4)`` uint32."""
    regs = np.asarray(a_regs, dtype=np.uint64).astype(np.uint32)
    itemsize = ITEMSIZE[ptx_type]
    if regs.shape != (WARPGROUP_THREADS, 4):
        raise InterpretError(f"wgmma: A from registers is (128 threads, 4 registers), got shape {regs.shape}")
    raw = regs.view(f"<u{itemsize}").reshape(WARPGROUP_THREADS, 4, 4 // itemsize)
    rows, cols = register_a_coords(ptx_type)
    tile = np.empty((64, MMA_K[ptx_type]), dtype=np.float64)
    tile[rows, cols] = operand_values(raw, ptx_type)
    return tile


def _check_shape(m: int, n: int, k: int, a_type: str, b_type: str, d_type: str, trans_a: int, trans_b: int,
                 registers_a: bool) -> None:
    if a_type not in ITEMSIZE or b_type not in ITEMSIZE:
        raise InterpretError(f"wgmma: operand types {a_type}/{b_type} are not modelled; one of {list(ITEMSIZE)}")
    if not (a_type == b_type or (a_type in FP8 and b_type in FP8)):
        raise InterpretError(f"wgmma: no wgmma multiplies {a_type} by {b_type}")
    if d_type != "f32":
        raise InterpretError(f"wgmma: the interpreter models Float32 accumulators only, got .{d_type}")
    if m != 64 or n % 8 or not 8 <= n <= 256 or k != MMA_K[a_type]:
        raise InterpretError(f"wgmma: m{m}n{n}k{k} is not a wgmma shape for .{a_type} (m64, n in 8..256 step 8, "
                             f"k {MMA_K[a_type]})")
    if a_type not in TRANSPOSABLE and (trans_a or trans_b):
        raise InterpretError(f"wgmma: .{a_type} operands must be K-major (imm-trans-a = imm-trans-b = 0)")
    if registers_a and trans_a:
        raise InterpretError("wgmma: A from registers has no transpose (imm-trans-a)")


def operand_tile(smem: np.ndarray, bits: int, rows: int, k: int, ptx_type: str, mn_major: bool,
                 what: str) -> np.ndarray:
    """The ``rows x k`` operand (float64) that descriptor ``bits`` selects in ``smem``."""
    itemsize = ITEMSIZE[ptx_type]
    addresses = operand_addresses(int(bits), rows, k, itemsize, bool(mn_major))
    return operand_values(gather_elements(smem, addresses, itemsize, f"wgmma {what}: {_describe(bits)}"), ptx_type)


def mma(m: int, n: int, k: int, a_type: str, b_type: str, d_type: str, a_desc, a_regs, b_desc, smem: np.ndarray,
        acc: np.ndarray, scale_d: bool, scale_a: int, scale_b: int, trans_a: int, trans_b: int) -> np.ndarray:
    """One warpgroup's ``wgmma.mma_async.sync.aligned.m{m}n{n}k{k}.{d_type}.{a_type}.{b_type}``.

    Args:
        m, n, k: the shape (m64, n a multiple of 8 in 8..256, k 16 / 8 / 32 for bf16-f16 / tf32 / FP8).
        a_type, b_type: PTX operand types ``"bf16"``, ``"f16"``, ``"tf32"``, ``"e4m3"``, ``"e5m2"``.
        d_type: ``"f32"``.
        a_desc: A's 64-bit descriptor (int), or None when A comes from ``a_regs``.
        a_regs: ``(128, 4)`` uint32, each thread's A registers (PTX operand order), or None.
        b_desc: B's descriptor.
        smem: the CTA's uint8 shared-memory window.
        acc: ``(128, n // 2)`` float32, thread ``tid % 128`` by accumulator register.
        scale_d: False: ``D = A @ B``; True: ``D = A @ B + acc``.
        scale_a, scale_b: +1 or -1 (imm-scale-a / imm-scale-b).
        trans_a, trans_b: 0 K-major, 1 M/N-major (imm-trans-a / imm-trans-b).

    Returns:
        The new accumulators, ``(128, n // 2)`` float32.

    Raises:
        InterpretError: an illegal shape or type combination, a transpose the type lacks, a
            descriptor that reads outside shared memory or has a non-zero base offset, or
            accumulators of the wrong shape.

    Source: PTX ISA §9.7.15.5.2 "wgmma.mma_async".
    """
    registers_a = a_desc is None
    _check_shape(m, n, k, a_type, b_type, d_type, trans_a, trans_b, registers_a)
    if scale_a not in (1, -1) or scale_b not in (1, -1):
        raise InterpretError(f"wgmma: imm-scale-a / imm-scale-b must be 1 or -1, got {scale_a} / {scale_b}")
    acc = np.asarray(acc, dtype=np.float32)
    if acc.shape != (WARPGROUP_THREADS, n // 2):
        raise InterpretError(f"wgmma: an m64n{n} Float32 accumulator is (128 threads, {n // 2} registers), got "
                             f"{acc.shape}")
    if registers_a:
        a = register_a_tile(a_regs, a_type)
    else:
        a = operand_tile(smem, a_desc, m, k, a_type, trans_a, "operand A")
    b = operand_tile(smem, b_desc, n, k, b_type, trans_b, "operand B")           # (n, k)
    product = (scale_a * scale_b) * (a @ b.T)                                    # (64, n) float64
    rows, cols = accumulator_coords(n)
    result = product[rows, cols]
    if scale_d:
        result = result + acc.astype(np.float64)
    return numerics.to_float32(result)


def byte_ranges(addresses: np.ndarray) -> list[tuple[int, int]]:
    """Merged ``[start, end)`` byte ranges (16-byte granular) covering the elements at ``addresses``."""
    chunks = np.unique(addresses // CHUNK_BYTES)
    breaks = np.nonzero(np.diff(chunks) != 1)[0]
    starts = np.concatenate(([chunks[0]], chunks[breaks + 1]))
    ends = np.concatenate((chunks[breaks], [chunks[-1]])) + 1
    return [(int(s) * CHUNK_BYTES, int(e) * CHUNK_BYTES) for s, e in zip(starts, ends)]


def operand_ranges(m: int, n: int, k: int, a_type: str, b_type: str, a_desc, b_desc, trans_a: int,
                   trans_b: int) -> list[tuple[int, int]]:
    """The shared-memory byte ranges ``[start, end)`` one :func:`mma` reads (A's, when it comes from
    shared memory, then B's; 16-byte granular), for the race detector: async-proxy reads in
    flight until the ``wgmma.wait_group`` that retires the MMA."""
    ranges = []
    if a_desc is not None:
        ranges += byte_ranges(operand_addresses(int(a_desc), m, k, ITEMSIZE[a_type], bool(trans_a)))
    ranges += byte_ranges(operand_addresses(int(b_desc), n, k, ITEMSIZE[b_type], bool(trans_b)))
    return ranges


__all__ = ["MatrixDescriptor", "decode_descriptor", "operand_addresses", "canonical_addresses", "operand_tile", "accumulator_coords",
           "register_a_coords", "register_a_tile", "mma", "operand_ranges", "gather_elements", "operand_values", "byte_ranges"]
