"""tcgen05 and TMEM of the CPU interpreter (tsjit.interpret.tcgen05): the allocator's rules, UMMA from
TMA-written 128B-swizzled tiles with descriptors encoded by tsjit.lang.umma_descriptors (the
compiler's encoder), D read back with tcgen05.ld 32x32b per warp quarter, against float64 numpy;
A from TMEM; a planted wrong swizzle gives wrong numbers."""
import numpy as np
import pytest

from interpret.tensor_memory import ArrayMemory
from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.tcgen05 import TensorMemory, ld, mma, operand_ranges, st
from tsjit.interpret.tma import load_box
from tsjit.lang import dtypes
from tsjit.lang import umma_descriptors as ud
from tsjit.runtime.tensormap import validate_tensormap

BF16 = dtypes.BFloat16
A_AT, B_AT = 0, 16384


def bf16(rng, shape):
    return numerics.encode(rng.standard_normal(shape), BF16)


def values(bits):
    return numerics.decode(bits, BF16).astype(np.float64)


def fill(smem, memory, array, box, at, coords_list, swizzle="128B"):
    address = memory.add(array, "operand")
    layout = validate_tensormap(array.shape, (array.shape[1] * 2, 2), BF16, address, box, swizzle=swizzle)
    for offset, coords in zip(at, coords_list):
        load_box(layout, coords, memory, offset).write_into(smem)


def smem_desc(address, *, lbo=16, sbo=1024, swizzle="128B"):
    return ud.smem_descriptor_bits(leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle=swizzle) | (address >> 4)


def read_d(tmem, base, n):
    """D (128 x n) Float32 through tcgen05.ld.32x32b by the four warps of a warpgroup."""
    rows = [ld(tmem, (32 * w) << 16 | base, "32x32b", n, warp=4 + w) for w in range(4)]
    return np.concatenate(rows).view(np.float32).astype(np.float64)


def run_k_tile(tmem, smem, base, n, *, transpose_b=0, b_step=32, swizzle="128B", a_in_tmem=None):
    idesc = ud.instruction_descriptor(ud.check_shape("f16", 128, n), "bf16", "bf16", "f32", transpose_b=transpose_b)
    b_lbo = 8192 if transpose_b else 16
    for k in range(4):
        a = smem_desc(A_AT + 32 * k, swizzle=swizzle) if a_in_tmem is None else a_in_tmem + 8 * k
        mma(tmem, smem, idesc, a, smem_desc(B_AT + k * b_step, lbo=b_lbo, swizzle=swizzle), base, k > 0,
            kind="f16", a_in_tmem=a_in_tmem is not None)


@pytest.fixture
def operands():
    rng = np.random.default_rng()
    a, b = bf16(rng, (128, 64)), bf16(rng, (256, 64))
    smem, memory = np.full(65536, 0xFF, np.uint8), ArrayMemory()
    fill(smem, memory, a, (128, 64), [A_AT], [(0, 0)])
    fill(smem, memory, b, (256, 64), [B_AT], [(0, 0)])
    return a, b, smem


def relative_error(got, want):
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def test_umma_of_k_major_tiles_into_tmem_is_a_at_b(operands):
    a, b, smem = operands
    tmem = TensorMemory()
    base = tmem.alloc(256)
    run_k_tile(tmem, smem, base, 256)
    assert relative_error(read_d(tmem, base, 256), values(a) @ values(b).T) < 1e-6


def test_umma_with_mn_major_b_boxes():
    rng = np.random.default_rng()
    a, b = bf16(rng, (128, 64)), bf16(rng, (64, 128))                  # B (K, N): 64-column boxes
    smem, memory = np.full(65536, 0xFF, np.uint8), ArrayMemory()
    fill(smem, memory, a, (128, 64), [A_AT], [(0, 0)])
    fill(smem, memory, b, (64, 64), [B_AT, B_AT + 8192], [(0, 0), (64, 0)])
    tmem = TensorMemory()
    base = tmem.alloc(128)
    run_k_tile(tmem, smem, base, 128, transpose_b=1, b_step=2048)
    assert relative_error(read_d(tmem, base, 128), values(a) @ values(b)) < 1e-6


def test_umma_with_a_in_tmem(operands):
    a, b, smem = operands
    tmem = TensorMemory()
    d_base, a_base = tmem.alloc(256), tmem.alloc(32)
    packed = a.reshape(128, 32, 2).astype(np.uint32)
    words = packed[..., 0] | (packed[..., 1] << 16)                    # 2 bf16 per 32-bit column
    for w in range(4):
        st(tmem, (32 * w) << 16 | a_base, "32x32b", words[32 * w:32 * w + 32], warp=w)
    run_k_tile(tmem, smem, d_base, 256, a_in_tmem=a_base)
    assert relative_error(read_d(tmem, d_base, 256), values(a) @ values(b).T) < 1e-6


def test_a_wrong_swizzle_in_the_descriptor_gives_wrong_numbers(operands):
    a, b, smem = operands
    tmem = TensorMemory()
    base = tmem.alloc(256)
    run_k_tile(tmem, smem, base, 256, swizzle="64B")
    assert relative_error(read_d(tmem, base, 256), values(a) @ values(b).T) > 0.3


def test_allocator_places_aligned_ranges_and_blocks_when_full():
    tmem = TensorMemory()
    assert tmem.alloc(256) == 0 and tmem.alloc(128) == 256
    assert tmem.alloc(256) is None                                      # 128 columns left, not 256
    assert tmem.alloc(64) == 384
    tmem.dealloc(0, 256)
    assert tmem.alloc(256) == 0
    with pytest.raises(InterpretError, match="no allocation of that size starts there"):
        tmem.dealloc(256, 64)
    with pytest.raises(InterpretError, match="power of 2"):
        tmem.alloc(48)
    with pytest.raises(InterpretError, match="still allocated"):
        tmem.check_freed()
    tmem.relinquish()
    with pytest.raises(InterpretError, match="relinquish"):
        tmem.alloc(32)


def test_ld_checks_the_warps_lane_quarter_and_the_allocation():
    tmem = TensorMemory()
    base = tmem.alloc(32)
    with pytest.raises(InterpretError, match="warp 1 accesses TMEM lanes 0..31"):
        ld(tmem, base, "32x32b", 8, warp=1)
    with pytest.raises(InterpretError, match="not inside an allocation"):
        ld(tmem, base + 16, "32x32b", 32, warp=0)
    with pytest.raises(InterpretError, match="models the"):
        ld(tmem, base, "16x32bx2", 8, warp=0)
    with pytest.raises(InterpretError, match="warp 0 accesses TMEM lanes 24..39"):
        ld(tmem, base + (24 << 16), "16x64b", 8, warp=0)


def test_an_instruction_descriptor_with_m_64_is_refused_by_name():
    tmem = TensorMemory()
    base = tmem.alloc(64)
    idesc = ud.instruction_descriptor(ud.check_shape("f16", 64, 64), "bf16", "bf16", "f32")
    with pytest.raises(InterpretError, match="M = 64 is not modelled"):
        mma(tmem, np.zeros(65536, np.uint8), idesc, smem_desc(0), smem_desc(16384), base, False, kind="f16")


def test_operand_ranges_are_the_rows_k_bytes_of_a_and_b():
    idesc = ud.instruction_descriptor(ud.check_shape("f16", 128, 256), "bf16", "bf16", "f32")
    ranges = operand_ranges(idesc, smem_desc(A_AT), smem_desc(B_AT), kind="f16")
    assert sum(end - start for start, end in ranges) == (128 + 256) * 32
    assert operand_ranges(idesc, 0, smem_desc(B_AT), kind="f16", a_in_tmem=True) == [r for r in ranges if r[0] >= B_AT]
