"""GPU kernels that show what the hardware does where the interpreter's tensor side is not yet
confirmed on the H200, and the host side that compares the two.

* :func:`tma_image` dumps the raw shared-memory bytes one TMA load writes (every swizzle, box
  rows narrower than the swizzle span, out-of-bounds fill incl. the NaN pattern).
* :func:`wgmma_probe` fills shared memory with given bytes, runs one ``wgmma.mma_async`` with
  descriptors given by the host (relative to the 1024-aligned tile) and dumps each thread's
  accumulators in register order: every layout (K-/MN-major, each swizzle, no swizzle with its
  LBO/SBO), TF32 truncation, FP8.
* :func:`cvt_probe` stores Float32 -> BFloat16 / Float16 / Int32 conversions (NaN, overflow, ties).

``tests/gpu/test_interpret_tensor_gpu.py`` runs them against :mod:`tsjit.interpret`;
``tests/interpret/test_tensor_probe_kernels.py`` compiles them for sm_90a without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tsjit
from tsjit.interpret import numerics
from tsjit.interpret.swizzle import SWIZZLE_SPANS
from tsjit.lang import dtypes
from tsjit.lang.fragment import Fragment
from tsjit.lang.wgmma import descriptor_constant_bits

THREADS = 128
SMEM_WORDS = 12288                   # 48 KiB of operand bytes for the wgmma probe (B of n256: 32 KiB)
B_OFFSET = 16384                     # where B starts in it


@tsjit.kernel
def tma_image(src_map, out, c0, c1, TILE_WORDS: tsjit.Constexpr[int], OFFSET_WORDS: tsjit.Constexpr[int] = 0):
    """out[:TILE_WORDS] = the raw 32-bit words of the shared tile after one TMA load of the box at
    (c0, c1) (outermost first) to word OFFSET_WORDS of a 1024-aligned tile poisoned with 0xFFFFFFFF."""
    tile = tsjit.shared_array(tsjit.Uint32, TILE_WORDS, align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tid = tsjit.thread_idx().x
    if tid == 0:
        tsjit.mbarrier_init(bar.ptr, 1)
        tsjit.fence_mbarrier_init()
    for i in range(tid, TILE_WORDS, THREADS):
        tile[i] = tsjit.Uint32(0xFFFFFFFF)
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    if tid == 0:
        tsjit.mbarrier_arrive_expect_tx(bar.ptr, src_map.box_bytes)
        tsjit.tma_load(src_map, tile.ptr + OFFSET_WORDS, bar.ptr, (c0, c1))
    tsjit.mbarrier_wait(bar.ptr, 0)
    for i in range(tid, TILE_WORDS, THREADS):
        out[i] = tile[i]


@tsjit.kernel
def wgmma_probe(raw, out, desc_a, desc_b, N: tsjit.Constexpr[int], A_TYPE: tsjit.Constexpr[str],
                B_TYPE: tsjit.Constexpr[str], TRANS_A: tsjit.Constexpr[int], TRANS_B: tsjit.Constexpr[int],
                MODE: tsjit.Constexpr[str] = "probe"):
    """Shared memory = raw (SMEM_WORDS words); one m64nNk* wgmma with the descriptors desc_a / desc_b
    (their start addresses relative to the tile); out[tid * N/2 + i] = accumulator i of thread tid.
    Other MODEs chain a second wgmma (acc = 2 A B) for the interpreter's wait_group tests: "ok" waits,
    then stores; "early" stores before the wait; "newest" commits each MMA as its own group and stores after
    wait_group(1), which leaves the second in flight; "overwrite" zeroes shared memory before the wait."""
    smem = tsjit.shared_array(tsjit.Uint32, SMEM_WORDS, align=1024)
    tid = tsjit.thread_idx().x
    for i in range(tid, SMEM_WORDS, THREADS):
        smem[i] = raw[i]
    tsjit.fence_proxy_async()
    tsjit.syncthreads()
    base = tsjit.wgmma.make_descriptor(smem, major="K", swizzle="none", leading_byte_offset=16,
                                       stride_byte_offset=16)
    field = base & 0x3FFF                   # the tile's start-address field
    acc = Fragment.zeros(N // 2)
    tsjit.wgmma.fence()
    acc = tsjit.wgmma.mma_async(acc, field + desc_a, field + desc_b, n=N, a_dtype=A_TYPE, b_dtype=B_TYPE,
                                trans_a=TRANS_A, trans_b=TRANS_B)
    if tsjit.const_expr(MODE == "newest"):
        tsjit.wgmma.commit_group()          # the first MMA is group 0, the second group 1
    if tsjit.const_expr(MODE != "probe"):
        acc = tsjit.wgmma.mma_async(acc, field + desc_a, field + desc_b, n=N, a_dtype=A_TYPE, b_dtype=B_TYPE,
                                    trans_a=TRANS_A, trans_b=TRANS_B)
    tsjit.wgmma.commit_group()
    if tsjit.const_expr(MODE == "early"):
        for i in tsjit.range_constexpr(N // 2):
            out[tid * (N // 2) + i] = acc[i]
    if tsjit.const_expr(MODE == "newest"):
        tsjit.wgmma.wait_group(1)           # retires group 0 only: the second MMA is still in flight
        for i in tsjit.range_constexpr(N // 2):
            out[tid * (N // 2) + i] = acc[i]
    if tsjit.const_expr(MODE == "overwrite"):
        for i in range(tid, SMEM_WORDS, THREADS):
            smem[i] = tsjit.Uint32(0)
        tsjit.syncthreads()
    tsjit.wgmma.wait_group(0)
    acc = tsjit.wgmma.fence_operand(acc)
    if tsjit.const_expr(MODE != "early" and MODE != "newest"):
        for i in tsjit.range_constexpr(N // 2):
            out[tid * (N // 2) + i] = acc[i]


@tsjit.kernel
def cvt_probe(x, bf16, f16, i32, n):
    """bf16[i], f16[i], i32[i] = x[i] converted (PTX cvt.rn.bf16.f32, cvt.rn.f16.f32, cvt.rzi.s32.f32)."""
    i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
    if i < n:
        bf16[i] = tsjit.BFloat16(x[i])
        f16[i] = tsjit.Float16(x[i])
        i32[i] = tsjit.Int32(x[i])


# ------------------------------------------------------------------ the cases

@dataclass(frozen=True)
class TmaImageCase:
    """One TMA load whose raw shared-memory image is compared (shapes outermost first)."""

    name: str
    dtype: object
    shape: tuple
    box: tuple
    coords: tuple
    swizzle: str
    oob_fill: str = "zero"
    offset: int = 0             # bytes from the 1024-aligned tile start (a multiple of 128)


TMA_IMAGE_CASES = [
    TmaImageCase(f"{swizzle}-rows{inner}B", dtypes.BFloat16, (40, 200), (24, inner // 2), (-3, 184), swizzle)
    for swizzle, span in (("none", 256), ("32B", 32), ("64B", 64), ("128B", 128))
    for inner in (16, 32, 64, 128) if inner <= span
] + [
    TmaImageCase("nan-fill-f32", dtypes.Float32, (10, 20), (8, 16), (6, 8), "none", "nan"),
    TmaImageCase("nan-fill-f16-128B", dtypes.Float16, (10, 72), (16, 64), (-4, 32), "128B", "nan"),
    TmaImageCase("nan-fill-bf16", dtypes.BFloat16, (10, 24), (8, 16), (4, 16), "none", "nan"),
    TmaImageCase("32B-at-128", dtypes.BFloat16, (40, 200), (24, 16), (0, 64), "32B", offset=128),
    TmaImageCase("64B-at-384", dtypes.BFloat16, (40, 200), (24, 32), (0, 64), "64B", offset=384),
    TmaImageCase("64B-rows32B-at-128", dtypes.BFloat16, (40, 200), (24, 16), (0, 64), "64B", offset=128),
]


def tile_words(case: TmaImageCase) -> int:
    """32-bit words of the shared tile of ``case``: its box, each innermost row at least one swizzle span
    long (the H200 starts every row of a swizzled box at a span boundary), rounded up to whole
    1024-byte patterns."""
    row_bytes = case.box[-1] * case.dtype.itemsize
    nbytes = int(np.prod(case.box[:-1])) * max(row_bytes, SWIZZLE_SPANS[case.swizzle]) + case.offset
    return -(-nbytes // 1024) * 256


@dataclass(frozen=True)
class WgmmaCase:
    """One wgmma: types, N, majors, the swizzle and each operand's (LBO, SBO) in bytes."""

    name: str
    a_type: str
    b_type: str
    n: int
    trans_a: int
    trans_b: int
    swizzle: str
    a_offsets: tuple
    b_offsets: tuple

    def descriptors(self) -> tuple[int, int]:
        """(A, B) descriptors relative to the tile: A at byte 0, B at :data:`B_OFFSET`."""
        a = descriptor_constant_bits(leading_byte_offset=self.a_offsets[0], stride_byte_offset=self.a_offsets[1],
                                     swizzle=self.swizzle)
        b = descriptor_constant_bits(leading_byte_offset=self.b_offsets[0], stride_byte_offset=self.b_offsets[1],
                                     swizzle=self.swizzle) | (B_OFFSET >> 4)
        return a, b


WGMMA_CASES = [
    WgmmaCase("bf16-K-K-128B", "bf16", "bf16", 64, 0, 0, "128B", (16, 1024), (16, 1024)),
    WgmmaCase("bf16-K-K-64B", "bf16", "bf16", 64, 0, 0, "64B", (16, 512), (16, 512)),
    WgmmaCase("bf16-K-K-32B", "bf16", "bf16", 64, 0, 0, "32B", (16, 256), (16, 256)),
    WgmmaCase("bf16-K-K-none", "bf16", "bf16", 64, 0, 0, "none", (1024, 128), (1024, 128)),
    WgmmaCase("bf16-K-K-none-sbo256", "bf16", "bf16", 64, 0, 0, "none", (128, 256), (128, 256)),
    WgmmaCase("bf16-K-MN-128B", "bf16", "bf16", 128, 0, 1, "128B", (16, 1024), (2048, 1024)),
    WgmmaCase("bf16-MN-MN-128B", "bf16", "bf16", 128, 1, 1, "128B", (2048, 1024), (2048, 1024)),
    WgmmaCase("f16-K-MN-64B", "f16", "f16", 128, 0, 1, "64B", (16, 512), (1024, 512)),
    WgmmaCase("f16-MN-K-32B", "f16", "f16", 64, 1, 0, "32B", (512, 256), (16, 256)),
    WgmmaCase("bf16-MN-MN-none", "bf16", "bf16", 64, 1, 1, "none", (1024, 128), (1024, 128)),
    WgmmaCase("tf32-K-K-128B", "tf32", "tf32", 64, 0, 0, "128B", (16, 1024), (16, 1024)),
    WgmmaCase("e4m3-e5m2-K-K-128B", "e4m3", "e5m2", 64, 0, 0, "128B", (16, 1024), (16, 1024)),
    WgmmaCase("bf16-K-K-128B-n256", "bf16", "bf16", 256, 0, 0, "128B", (16, 1024), (16, 1024)),
]


def random_operand_bytes(case: WgmmaCase, rng) -> np.ndarray:
    """SMEM_WORDS words of valid, finite elements: A's type before B_OFFSET, B's from there on."""
    halves = []
    for ptx_type, words in ((case.a_type, B_OFFSET // 4), (case.b_type, SMEM_WORDS - B_OFFSET // 4)):
        if ptx_type == "tf32":
            half = rng.standard_normal(words).astype(np.float32).view(np.uint32)   # low 13 bits set too
        elif ptx_type in ("bf16", "f16"):
            half = numerics.encode(rng.standard_normal(2 * words), ptx_type.replace("bf16", "bfloat")
                                   .replace("f16", "half")).view(np.uint32)
        else:
            half = numerics.encode(rng.standard_normal(4 * words), ptx_type).view(np.uint32)
        halves.append(half)
    return np.concatenate(halves)
