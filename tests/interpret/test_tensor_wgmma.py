"""wgmma of the CPU interpreter (tsjit.interpret.wgmma): shared-memory tiles written by the
interpreter's TMA with each swizzle, descriptors built with tsjit.lang.wgmma's host helper
(descriptor_constant_bits, the bits verified on the H200), compared with float64 numpy; planted
descriptor and swizzle errors give wrong numbers."""
import numpy as np
import pytest

from interpret.tensor_memory import ArrayMemory
from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.tma import load_box
from tsjit.interpret.wgmma import accumulator_coords, decode_descriptor, mma, operand_ranges, register_a_coords
from tsjit.lang import dtypes
from tsjit.lang.fragment import accumulator_coords as compiler_accumulator_coords
from tsjit.lang.wgmma import MMA_K, OPERAND_TYPES, SWIZZLE_MODES, descriptor_constant_bits

SMEM_BYTES = 128 * 1024
A_AT, B_AT = 1024, 1024 + 16384


def bf16(rng, shape):
    return numerics.encode(rng.standard_normal(shape), dtypes.BFloat16)


def values(bits, dtype=dtypes.BFloat16):
    return numerics.decode(bits, dtype).astype(np.float64)


def tma_fill(smem, memory, array, dtype, box, swizzle, at, coords_list):
    """TMA-load boxes of ``array`` into ``smem`` at ``at[i]`` (coords innermost first)."""
    address = memory.add(array, "operand")
    from tsjit.runtime.tensormap import validate_tensormap
    itemsize = dtype.itemsize
    strides = [array.shape[1] * itemsize, itemsize]
    layout = validate_tensormap(array.shape, strides, dtype, address, box, swizzle=swizzle)
    for offset, coords in zip(at, coords_list):
        load_box(layout, coords, memory, offset).write_into(smem)
    assert address


def descriptor(address, *, lbo, sbo, swizzle):
    return descriptor_constant_bits(leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle=swizzle) | \
        ((address >> 4) & 0x3FFF)


def run_k_tile(smem, a_desc, b_desc, n, ptx_type, *, trans_b=0, k_steps=4, a_step=32, b_step=32, acc=None):
    acc = np.zeros((128, n // 2), np.float32) if acc is None else acc
    k = MMA_K[ptx_type]
    for step in range(k_steps):
        acc = mma(64, n, k, ptx_type, ptx_type, "f32", a_desc + step * (a_step >> 4), None,
                  b_desc + step * (b_step >> 4), smem, acc, True, 1, 1, 0, trans_b)
    return acc


def tile_of(acc, n):
    rows, cols = accumulator_coords(n)
    tile = np.full((64, n), np.nan)
    tile[rows, cols] = acc
    return tile


def assert_close(got, want):
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert error < 1e-6, error


@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B"])
def test_k_major_swizzled_tiles_from_tma_multiply_like_numpy(swizzle):
    rng = np.random.default_rng()
    span = SWIZZLE_MODES[swizzle][1]
    width = span // 2                                   # bf16 per swizzled row: one K tile
    a, b = bf16(rng, (64, width)), bf16(rng, (256, width))
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    tma_fill(smem, memory, a, dtypes.BFloat16, (64, width), swizzle, [A_AT], [(0, 0)])
    tma_fill(smem, memory, b, dtypes.BFloat16, (256, width), swizzle, [B_AT], [(0, 0)])
    a_desc = descriptor(A_AT, lbo=16, sbo=8 * span, swizzle=swizzle)
    b_desc = descriptor(B_AT, lbo=16, sbo=8 * span, swizzle=swizzle)
    acc = run_k_tile(smem, a_desc, b_desc, 256, "bf16", k_steps=span // 32)
    assert_close(tile_of(acc, 256), values(a) @ values(b).T)


def test_the_h200_descriptor_constant_decodes_to_its_fields():
    d = decode_descriptor(0x4000004000010000 | (0x400 >> 4))
    assert (d.start, d.leading_byte_offset, d.stride_byte_offset, d.base_offset, d.swizzle) == \
        (0x400, 16, 1024, 0, "128B")


def test_mn_major_b_in_64_column_boxes_reads_with_the_transpose_bit():
    """The GEMM's B_MAJOR='MN' layout: (N/64 boxes, K, 64) with LBO = one box, SBO = 8 K rows."""
    rng = np.random.default_rng()
    a, b = bf16(rng, (64, 64)), bf16(rng, (64, 256))          # A (M, K), B (K, N)
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    tma_fill(smem, memory, a, dtypes.BFloat16, (64, 64), "128B", [A_AT], [(0, 0)])
    tma_fill(smem, memory, b, dtypes.BFloat16, (64, 64), "128B", [B_AT + 8192 * j for j in range(4)],
             [(64 * j, 0) for j in range(4)])
    a_desc = descriptor(A_AT, lbo=16, sbo=1024, swizzle="128B")
    b_desc = descriptor(B_AT, lbo=8192, sbo=1024, swizzle="128B")
    acc = run_k_tile(smem, a_desc, b_desc, 256, "bf16", trans_b=1, b_step=2 * 1024)
    assert_close(tile_of(acc, 256), values(a) @ values(b))


def test_k_major_without_swizzle_reads_8x16_byte_core_matrices():
    rng = np.random.default_rng()
    a, b = bf16(rng, (64, 16)), bf16(rng, (64, 16))
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    # 16-byte-wide boxes: each (64, 8) box is eight contiguous core matrices (SBO 128), K halves 1024 apart (LBO)
    tma_fill(smem, memory, a, dtypes.BFloat16, (64, 8), "none", [A_AT, A_AT + 1024], [(0, 0), (8, 0)])
    tma_fill(smem, memory, b, dtypes.BFloat16, (64, 8), "none", [B_AT, B_AT + 1024], [(0, 0), (8, 0)])
    a_desc = descriptor(A_AT, lbo=1024, sbo=128, swizzle="none")
    b_desc = descriptor(B_AT, lbo=1024, sbo=128, swizzle="none")
    acc = run_k_tile(smem, a_desc, b_desc, 64, "bf16", k_steps=1)
    assert_close(tile_of(acc, 64), values(a) @ values(b).T)


@pytest.mark.parametrize("dtype", [dtypes.Float16, dtypes.Float32, dtypes.Float8E4M3, dtypes.Float8E5M2])
def test_f16_tf32_and_fp8_operands(dtype):
    rng = np.random.default_rng()
    ptx_type = OPERAND_TYPES[dtype.name]
    width = 128 // dtype.itemsize
    if dtype is dtypes.Float32:
        a = rng.standard_normal((64, width)).astype(np.float32)
        b = rng.standard_normal((128, width)).astype(np.float32)
        truncate = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        a_values, b_values = truncate(a), truncate(b)
    else:
        a = numerics.encode(rng.standard_normal((64, width)), dtype)
        b = numerics.encode(rng.standard_normal((128, width)), dtype)
        a_values, b_values = values(a, dtype), values(b, dtype)
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    tma_fill(smem, memory, a, dtype, (64, width), "128B", [A_AT], [(0, 0)])
    tma_fill(smem, memory, b, dtype, (128, width), "128B", [B_AT], [(0, 0)])
    acc = run_k_tile(smem, descriptor(A_AT, lbo=16, sbo=1024, swizzle="128B"),
                     descriptor(B_AT, lbo=16, sbo=1024, swizzle="128B"), 128, ptx_type)
    assert_close(tile_of(acc, 128), a_values @ b_values.T)


def test_scale_d_scale_a_and_scale_b():
    rng = np.random.default_rng()
    a, b = bf16(rng, (64, 64)), bf16(rng, (64, 64))
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    tma_fill(smem, memory, a, dtypes.BFloat16, (64, 64), "128B", [A_AT], [(0, 0)])
    tma_fill(smem, memory, b, dtypes.BFloat16, (64, 64), "128B", [B_AT], [(0, 0)])
    a_desc, b_desc = descriptor(A_AT, lbo=16, sbo=1024, swizzle="128B"), descriptor(B_AT, lbo=16, sbo=1024,
                                                                                     swizzle="128B")
    acc = rng.standard_normal((128, 32)).astype(np.float32)
    product = tile_of(mma(64, 64, 16, "bf16", "bf16", "f32", a_desc, None, b_desc, smem, acc, False, 1, 1, 0, 0), 64)
    want = values(a)[:, :16] @ values(b)[:, :16].T
    assert_close(product, want)
    negated = mma(64, 64, 16, "bf16", "bf16", "f32", a_desc, None, b_desc, smem, acc, True, -1, 1, 0, 0)
    assert_close(tile_of(negated, 64), tile_of(acc, 64) - want)
    both = mma(64, 64, 16, "bf16", "bf16", "f32", a_desc, None, b_desc, smem, acc, True, -1, -1, 0, 0)
    assert_close(tile_of(both, 64), tile_of(acc, 64) + want)


def test_register_a_fragment_equals_the_shared_memory_operand():
    rng = np.random.default_rng()
    a, b = bf16(rng, (64, 16)), bf16(rng, (64, 64))
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    tma_fill(smem, memory, b, dtypes.BFloat16, (64, 64), "128B", [B_AT], [(0, 0)])
    rows, cols = register_a_coords("bf16")                     # (128, 4, 2)
    pairs = a[rows, cols].astype(np.uint32)
    registers = pairs[..., 0] | (pairs[..., 1] << 16)
    acc = np.zeros((128, 32), np.float32)
    got = mma(64, 64, 16, "bf16", "bf16", "f32", None, registers, descriptor(B_AT, lbo=16, sbo=1024, swizzle="128B"),
              smem, acc, True, 1, 1, 0, 0)
    assert_close(tile_of(got, 64), values(a) @ values(b)[:, :16].T)
    # the layout of the first registers of thread 5 (warp 0, group 1, quad 1): PTX ISA Figure 148
    assert (rows[5, 0, 0], cols[5, 0, 0], cols[5, 0, 1]) == (1, 2, 3)
    assert (rows[5, 1, 0], rows[5, 2, 0], cols[5, 2, 0], rows[37, 0, 0]) == (9, 1, 10, 17)


def test_accumulator_layout_is_the_compilers():
    rows, cols = accumulator_coords(256)
    for tid in (0, 1, 5, 31, 32, 77, 127):
        for i in (0, 1, 2, 3, 4, 63, 127):
            assert compiler_accumulator_coords(i, tid) == (rows[tid, i], cols[tid, i])
    assert sorted(zip(rows.ravel(), cols.ravel())) == [(r, c) for r in range(64) for c in range(256)]


# ------------------------------------------------------------------ planted errors give wrong numbers

@pytest.fixture
def two_stages():
    """A 2-stage ring of 128B-swizzled K-major bf16 tiles (A 64 x 64, B 64 x 64) and its descriptors."""
    rng = np.random.default_rng()
    stage_bytes = 16384
    tiles = [(bf16(rng, (64, 64)), bf16(rng, (64, 64))) for _ in range(2)]
    smem, memory = np.full(SMEM_BYTES, 0xFF, np.uint8), ArrayMemory()
    for s, (a, b) in enumerate(tiles):
        tma_fill(smem, memory, a, dtypes.BFloat16, (64, 64), "128B", [s * stage_bytes], [(0, 0)])
        tma_fill(smem, memory, b, dtypes.BFloat16, (64, 64), "128B", [s * stage_bytes + 8192], [(0, 0)])
    return smem, tiles, stage_bytes


def stage_product(smem, stage_bytes, stage, *, sbo=1024, swizzle="128B"):
    a_desc = descriptor(stage * stage_bytes, lbo=16, sbo=sbo, swizzle=swizzle)
    b_desc = descriptor(stage * stage_bytes + 8192, lbo=16, sbo=sbo, swizzle=swizzle)
    return tile_of(run_k_tile(smem, a_desc, b_desc, 64, "bf16"), 64)


def test_descriptor_off_by_one_stage_reads_the_other_stages_tiles(two_stages):
    smem, tiles, stage_bytes = two_stages
    right = [values(a) @ values(b).T for a, b in tiles]
    assert_close(stage_product(smem, stage_bytes, 1), right[1])
    got = stage_product(smem, stage_bytes, 0)     # the kernel meant stage 1
    assert_close(got, right[0])
    assert np.linalg.norm(got - right[1]) > 0.5 * np.linalg.norm(right[1])


@pytest.mark.parametrize("planted", [dict(swizzle="64B", sbo=512), dict(swizzle="none", sbo=1024),
                                     dict(swizzle="128B", sbo=512)])
def test_a_wrong_swizzle_or_sbo_gives_wrong_numbers(two_stages, planted):
    smem, tiles, stage_bytes = two_stages
    right = values(tiles[0][0]) @ values(tiles[0][1]).T
    got = stage_product(smem, stage_bytes, 0, **planted)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - right) > 0.3 * np.linalg.norm(right)


# ------------------------------------------------------------------ ranges and errors

def test_operand_ranges_cover_exactly_the_bytes_read():
    a_desc = descriptor(A_AT, lbo=16, sbo=1024, swizzle="128B")
    b_desc = descriptor(B_AT, lbo=16, sbo=1024, swizzle="128B")
    ranges = operand_ranges(64, 256, 16, "bf16", "bf16", a_desc, b_desc, 0, 0)
    covered = sum(end - start for start, end in ranges)
    assert covered == (64 + 256) * 32                      # 32 bytes of K per row, nothing else
    assert min(s for s, _ in ranges) >= A_AT and max(e for _, e in ranges) <= B_AT + 256 * 128
    assert operand_ranges(64, 256, 16, "bf16", "bf16", None, b_desc, 0, 0) == \
        [r for r in ranges if r[0] >= B_AT]


def test_a_descriptor_past_shared_memory_is_an_error():
    smem = np.zeros(16384, np.uint8)
    b_desc = descriptor(8192, lbo=16, sbo=1024, swizzle="128B")
    with pytest.raises(InterpretError, match="SBO 1024"):
        mma(64, 256, 16, "bf16", "bf16", "f32", descriptor(0, lbo=16, sbo=1024, swizzle="128B"), None, b_desc,
            smem, np.zeros((128, 128), np.float32), True, 1, 1, 0, 0)


def test_a_non_zero_base_offset_is_refused():
    bits = descriptor(0, lbo=16, sbo=1024, swizzle="128B") | (3 << 49)
    with pytest.raises(InterpretError, match="base offset"):
        mma(64, 64, 16, "bf16", "bf16", "f32", bits, None, bits, np.zeros(65536, np.uint8),
            np.zeros((128, 32), np.float32), True, 1, 1, 0, 0)


@pytest.mark.parametrize("call,fragment", [
    (dict(k=8), "not a wgmma shape"), (dict(n=12), "not a wgmma shape"), (dict(trans_a=1, a_type="tf32",
                                                                                b_type="tf32", k=8),
                                                                           "must be K-major"),
    (dict(b_type="f16"), "multiplies bf16 by f16"), (dict(d_type="f16"), "Float32 accumulators")])
def test_illegal_instructions_are_refused(call, fragment):
    args = dict(m=64, n=64, k=16, a_type="bf16", b_type="bf16", d_type="f32", trans_a=0)
    args.update(call)
    bits = descriptor(0, lbo=16, sbo=1024, swizzle="128B")
    with pytest.raises(InterpretError, match=fragment):
        mma(args["m"], args["n"], args["k"], args["a_type"], args["b_type"], args["d_type"], bits, None, bits,
            np.zeros(65536, np.uint8), np.zeros((128, args["n"] // 2), np.float32), True, 1, 1, args["trans_a"], 0)
