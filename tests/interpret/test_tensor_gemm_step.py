"""One Hopper GEMM tile through the interpreter's tensor side, as tsjit/examples/gemm.py lays it out:
TMA loads of 128B-swizzled A and B tiles into a 2-stage ring, wgmma m64n256k16 per warpgroup with
descriptors from tsjit.lang.wgmma's host helper, the accumulator fragments converted to bf16 and
written with stmatrix at the compiler's own addresses (tsjit.lang.epilogue.stmatrix_row_offset) into
the swizzled staging tile, and TMA stores of its boxes.  C equals A @ B in float64 tolerances; a
planted wrong swizzle or stage gives wrong numbers."""
import numpy as np
import pytest

from interpret.tensor_memory import ArrayMemory
from tsjit.interpret import numerics
from tsjit.interpret.matrix import stmatrix
from tsjit.interpret.tma import load_box, store_box
from tsjit.interpret.wgmma import mma
from tsjit.lang import dtypes
from tsjit.lang.epilogue import stmatrix_row_offset
from tsjit.lang.wgmma import descriptor_constant_bits
from tsjit.runtime.tensormap import validate_tensormap

BM, BN, BK = 128, 256, 64
BF16 = dtypes.BFloat16
STAGE_BYTES = (BM + BN) * BK * 2              # 49152: a multiple of 1024
STAGING = 2 * STAGE_BYTES                     # the C staging tile: 2 warpgroups x (4 boxes, 64, 64)


def tensor_map(memory, array, box, swizzle="128B", name="array"):
    address = memory.add(array, name)
    return validate_tensormap(array.shape, (array.shape[1] * 2, 2), BF16, address, box, swizzle=swizzle)


def descriptor(address, lbo, sbo=1024):
    return descriptor_constant_bits(leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle="128B") | (address >> 4)


def store_accumulator(smem, acc, base):
    """tsjit.lang.epilogue.store_fragment_shared for one warpgroup: bf16 pairs by stmatrix.x4."""
    n = 2 * acc.shape[1]
    packed = numerics.encode(acc, BF16).astype(np.uint32)                 # (128, n / 2)
    for group in range(0, n // 8, 2):
        registers = [packed[:, 4 * group + 2 * r] | (packed[:, 4 * group + 2 * r + 1] << 16) for r in range(4)]
        registers = np.stack(registers, axis=1)                          # (128, 4)
        for warp in range(4):
            lanes = range(32 * warp, 32 * warp + 32)
            addresses = np.array([base + stmatrix_row_offset(t, group, n, "128B") for t in lanes])
            stmatrix(smem, addresses, registers[32 * warp:32 * warp + 32], 4, False)


def gemm_tile(a, b, b_major="K", *, stage_shift=0, c_swizzle="128B"):
    """C (BM, BN) of A (BM, K) @ B^T (B (BN, K), b_major "K") or A @ B (B (K, BN), "MN"), bf16."""
    k_tiles = a.shape[1] // BK
    memory = ArrayMemory()
    c = np.full((BM, BN), 0xFFFF, np.uint16)
    a_map = tensor_map(memory, a, (64, BK), name="a")
    b_map = tensor_map(memory, b, (BN, BK) if b_major == "K" else (BK, 64), name="b")
    c_map = tensor_map(memory, c, (64, 64), swizzle=c_swizzle, name="c")
    smem = np.full(STAGING + 2 * 4 * 8192, 0xFF, np.uint8)
    acc = [np.zeros((128, BN // 2), np.float32) for _ in range(2)]
    for kt in range(k_tiles):
        stage = kt % 2
        base = stage * STAGE_BYTES
        for wg in range(2):
            load_box(a_map, (kt * BK, 64 * wg), memory, base + 8192 * wg).write_into(smem)
        if b_major == "K":
            load_box(b_map, (kt * BK, 0), memory, base + 16384).write_into(smem)
        else:
            for box in range(BN // 64):
                load_box(b_map, (64 * box, kt * BK), memory, base + 16384 + 8192 * box).write_into(smem)
        read = ((stage + stage_shift) % 2) * STAGE_BYTES
        for wg in range(2):
            a_desc = descriptor(read + 8192 * wg, 16)
            b_desc = descriptor(read + 16384, 16) if b_major == "K" else descriptor(read + 16384, 8192)
            b_step = 32 if b_major == "K" else 2 * 1024
            for k in range(BK // 16):
                acc[wg] = mma(64, BN, 16, "bf16", "bf16", "f32", a_desc + 2 * k, None, b_desc + (k * b_step >> 4),
                              smem, acc[wg], True, 1, 1, 0, int(b_major == "MN"))
    for wg in range(2):
        staging = STAGING + wg * 4 * 8192
        store_accumulator(smem, acc[wg], staging)
        for box in range(BN // 64):
            store_box(c_map, (64 * box, 64 * wg), memory, smem, staging + 8192 * box)
    return numerics.decode(c, BF16).astype(np.float64)


def bf16_operand(rng, shape):
    return numerics.encode(rng.standard_normal(shape), BF16)


def relative_error(got, want):
    return np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.parametrize("b_major", ["K", "MN"])
def test_a_gemm_tile_through_tma_wgmma_stmatrix_and_tma_store_is_a_at_b(b_major):
    rng = np.random.default_rng()
    a = bf16_operand(rng, (BM, 2 * BK))
    b = bf16_operand(rng, (BN, 2 * BK) if b_major == "K" else (2 * BK, BN))
    a64, b64 = numerics.decode(a, BF16).astype(np.float64), numerics.decode(b, BF16).astype(np.float64)
    want = a64 @ (b64.T if b_major == "K" else b64)
    got = gemm_tile(a, b, b_major)
    assert not np.isnan(got).any()
    assert relative_error(got, want) < 4e-3                       # one bf16 rounding of C
    magnitude = np.abs(a64) @ (np.abs(b64).T if b_major == "K" else np.abs(b64))
    assert (np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-6 * magnitude).all()   # bf16 rounding + fp32 sums


def test_a_staging_tile_stored_without_its_swizzle_scrambles_c():
    rng = np.random.default_rng()
    a, b = bf16_operand(rng, (BM, 2 * BK)), bf16_operand(rng, (BN, 2 * BK))
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    got = gemm_tile(a, b, c_swizzle="none")
    assert relative_error(got, want) > 0.5


def test_reading_the_other_stage_uses_the_wrong_k_tile():
    rng = np.random.default_rng()
    a, b = bf16_operand(rng, (BM, 2 * BK)), bf16_operand(rng, (BN, 2 * BK))
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    got = gemm_tile(a, b, stage_shift=1)          # k-tile 0 reads stage 1: still poison (0xFF = NaN)
    assert np.isnan(got).all() or relative_error(got, want) > 0.5
