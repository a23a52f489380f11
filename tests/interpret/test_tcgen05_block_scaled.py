"""The block-scaled tcgen05.mma of the CPU interpreter (tsjit/interpret/tcgen05_scaled.py, PTX ISA 9.1
§9.7.16.10.7) against a float64 reference written out here independently: element and scale formats decoded
from their bit fields (§5.2.3), E2M1 pairs low nibble first, scale row ``r`` at lane ``r % 32`` / column
``r // 32`` / byte ``sf_id + j`` of every 32-lane quarter, operands read through no-swizzle and 128B-swizzled
K-major canonical layouts (the addresses spelled out as in tests/interpret/test_tcgen05_cp.py).  Plus the
instruction descriptor round trip and the errors the ISA's rules give (scales not duplicated to every
quarter, SF ids the vector size forbids, UE4M3 with a 2X vector, FP6 operands, a scale lane other than 0)."""
import numpy as np
import pytest

from tsjit.errors import InterpretError
from tsjit.interpret import tcgen05 as tm
from tsjit.interpret import tcgen05_scaled as bs
from tsjit.lang import umma_descriptors as ud

SMEM = 64 * 1024
A_AT, B_AT = 0, 32 * 1024


def e2m1(code):
    sign = -1.0 if code & 8 else 1.0
    e, m = (code >> 1) & 3, code & 1
    return sign * (m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1))


def ue4m3(code):
    e, m = code >> 3, code & 7
    return m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


def fp8(code, exponent_bits):
    mantissa_bits = 7 - exponent_bits
    bias = 2 ** (exponent_bits - 1) - 1
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> mantissa_bits) & ((1 << exponent_bits) - 1), code & ((1 << mantissa_bits) - 1)
    if e == 0:
        return sign * m / 2 ** mantissa_bits * 2.0 ** (1 - bias)
    return sign * (1 + m / 2 ** mantissa_bits) * 2.0 ** (e - bias)


def address(r, b, swizzle, sbo):
    if swizzle == "none":
        return (r % 8) * 16 + (r // 8) * sbo + (b // 16) * 4096 + b % 16
    a = (r % 8) * 128 + (r // 8) * 1024 + b
    return a ^ (((a >> 7) & 7) << 4)


def smem_desc(start, swizzle, sbo):
    lbo = 4096 if swizzle == "none" else 16
    return (start >> 4) | ud.smem_descriptor_bits(leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle=swizzle)


def place(smem, start, data, swizzle, sbo):
    """Write the (rows, bytes) byte matrix ``data`` at ``start`` in the canonical K-major layout."""
    for r in range(data.shape[0]):
        for b in range(data.shape[1]):
            smem[start + address(r, b, swizzle, sbo)] = data[r, b]


def put_scales(tmem, column, codes, sf_id):
    """Scale codes (rows, chunks) into TMEM from ``column``: row r at lane r % 32 (+ 32 q), column r // 32."""
    cells = tmem.cells.view(np.uint8).reshape(128, tm.TMEM_COLUMNS, 4)
    for r in range(codes.shape[0]):
        for q in range(4):
            cells[32 * q + r % 32, column + r // 32, sf_id:sf_id + codes.shape[1]] = codes[r]


def setup(kind, scale, chunks, n, swizzle, rng, a_type="e2m1", b_type="e2m1", sfa_id=0, sfb_id=0):
    """(tmem, smem, idesc, a_desc, b_desc, float64 reference D)."""
    k = 64 if kind == "mxf4nvf4" else 32
    sbo = 1024 if swizzle == "128B" else 128
    smem = np.zeros(SMEM, np.uint8)
    values = {}
    for name, rows, ptx_type, start in (("a", 128, a_type, A_AT), ("b", n, b_type, B_AT)):
        if ptx_type == "e2m1":
            codes = rng.integers(0, 16, (rows, k))
            data = (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)
            values[name] = np.vectorize(e2m1)(codes)
        else:
            data = rng.integers(0, 256, (rows, k)).astype(np.uint8)
            data[(data & 0x7F) == 0x7F] = 0x3C                   # no NaN / inf codes
            data[(data & 0x7C) == 0x7C] = 0x3C
            values[name] = np.vectorize(lambda c: fp8(int(c), 4 if ptx_type == "e4m3" else 5))(data)
        place(smem, start, data, swizzle, sbo)
    tmem = tm.TensorMemory()
    tmem.alloc(512)
    sfa = rng.integers(40 if scale == "ue4m3" else 120, 70 if scale == "ue4m3" else 134, (128, chunks))
    sfb = rng.integers(40 if scale == "ue4m3" else 120, 70 if scale == "ue4m3" else 134, (n, chunks))
    put_scales(tmem, 256, sfa, sfa_id)
    put_scales(tmem, 264, sfb, sfb_id)
    decode = np.vectorize(ue4m3) if scale == "ue4m3" else (lambda c: 2.0 ** (c - 127.0))
    chunk = k // chunks
    a = values["a"] * np.repeat(decode(sfa), chunk, axis=1)
    b = values["b"] * np.repeat(decode(sfb), chunk, axis=1)
    shape = ud.check_shape(kind, 128, n)
    idesc = ud.block_scaled_instruction_descriptor(shape, a_type, b_type, scale_type=scale, scale_a_id=sfa_id,
                                                   scale_b_id=sfb_id)
    return tmem, smem, idesc, smem_desc(A_AT, swizzle, sbo), smem_desc(B_AT, swizzle, sbo), a @ b.T


CASES = [("mxf4nvf4", "ue4m3", "block16", 4, 128, "128B", 0, 0),
         ("mxf4nvf4", "ue4m3", "scale_vec::4X", 4, 64, "none", 0, 0),
         ("mxf4nvf4", "ue8m0", "scale_vec::2X", 2, 256, "128B", 2, 0),
         ("mxf4nvf4", "ue8m0", "block32", 2, 40, "none", 0, 2)]


@pytest.mark.parametrize("kind,scale,qualifier,chunks,n,swizzle,sfa_id,sfb_id", CASES)
def test_fp4_block_scaled_mma_is_the_scaled_float64_product(kind, scale, qualifier, chunks, n, swizzle, sfa_id,
                                                           sfb_id):
    rng = np.random.default_rng()
    tmem, smem, idesc, a_desc, b_desc, want = setup(kind, scale, chunks, n, swizzle, rng, sfa_id=sfa_id,
                                                    sfb_id=sfb_id)
    tmem.cells[:, :n] = 0x7FFFFFFF                                    # D poisoned
    bs.mma(tmem, smem, idesc, a_desc, b_desc, 0, 256, 264, False, kind=kind, qualifier=qualifier)
    got = tmem.cells[:, :n].view(np.float32).astype(np.float64)
    assert np.array_equal(got, want.astype(np.float32)), np.abs(got - want).max()
    bs.mma(tmem, smem, idesc, a_desc, b_desc, 0, 256, 264, True, kind=kind, qualifier=qualifier)
    assert np.array_equal(tmem.cells[:, :n].view(np.float32), (2 * want).astype(np.float32))


@pytest.mark.parametrize("a_type,b_type,sf_id", [("e4m3", "e5m2", 2), ("e5m2", "e4m3", 3)])
def test_mxfp8_block_scaled_mma_selects_the_scale_byte_of_its_sf_id(a_type, b_type, sf_id):
    rng = np.random.default_rng()
    tmem, smem, idesc, a_desc, b_desc, want = setup("mxf8f6f4", "ue8m0", 1, 64, "128B", rng, a_type, b_type,
                                                    sfa_id=sf_id, sfb_id=sf_id)
    bs.mma(tmem, smem, idesc, a_desc, b_desc, 0, 256, 264, False, kind="mxf8f6f4", qualifier="block32")
    assert np.allclose(tmem.cells[:, :64].view(np.float32), want, rtol=2 ** -23, atol=0)
    other = (sf_id + 1) % 4                                           # another byte holds other scales
    idesc_other = ud.block_scaled_instruction_descriptor(ud.check_shape("mxf8f6f4", 128, 64), a_type, b_type,
                                                         scale_type="ue8m0", scale_a_id=other, scale_b_id=other)
    tmem.cells.view(np.uint8).reshape(128, 512, 4)[:, 256:272, other] = 127          # 1.0
    bs.mma(tmem, smem, idesc_other, a_desc, b_desc, 0, 256, 264, False, kind="mxf8f6f4", qualifier="block32")
    assert not np.allclose(tmem.cells[:, :64].view(np.float32), want)


def test_the_descriptor_decodes_to_what_the_encoder_wrote():
    shape = ud.check_shape("mxf4nvf4", 128, 200)
    idesc = ud.block_scaled_instruction_descriptor(shape, "e2m1", "e2m1", scale_type="ue8m0", scale_a_id=2,
                                                   scale_b_id=2)
    inst = bs.instruction(idesc, "mxf4nvf4", "block32")
    assert (inst.m, inst.n, inst.k, inst.chunks, inst.scale_type, inst.sfa_id, inst.sfb_id) == \
        (128, 200, 64, 2, "ue8m0", 2, 2)


def test_scales_not_duplicated_to_every_lane_quarter_are_refused():
    rng = np.random.default_rng()
    tmem, smem, idesc, a_desc, b_desc, _ = setup("mxf4nvf4", "ue4m3", 4, 128, "128B", rng)
    tmem.cells[96 + 5, 264 + 2] ^= 1                                  # SFB row 69 differs in the last quarter
    with pytest.raises(InterpretError, match=r"scale_B: the scales of row 69 .*duplicated to all four lane quarters"):
        bs.mma(tmem, smem, idesc, a_desc, b_desc, 0, 256, 264, False, kind="mxf4nvf4", qualifier="block16")


@pytest.mark.parametrize("kind,scale,qualifier,ids,match", [
    ("mxf4nvf4", "ue4m3", "block32", (0, 0), r"ue4m3 scales with scale_vec::2X"),
    ("mxf4nvf4", "ue8m0", "block16", (2, 0), r"sfa_id = 2; scale_vec::4X takes \[0\]"),
    ("mxf8f6f4", "ue8m0", "scale_vec::2X", (0, 0), r"kind::mxf8f6f4 takes scale_vec::1X")])
def test_scale_vector_rules_of_the_isa_are_enforced(kind, scale, qualifier, ids, match):
    types = ("e2m1", "e2m1") if kind == "mxf4nvf4" else ("e4m3", "e4m3")
    idesc = ud.block_scaled_instruction_descriptor(ud.check_shape(kind, 128, 64), *types, scale_type=scale,
                                                   scale_a_id=ids[0], scale_b_id=ids[1])
    with pytest.raises(InterpretError, match=match):
        bs.instruction(idesc, kind, qualifier)


def test_fp6_operands_of_mxf8f6f4_name_the_missing_layout():
    idesc = ud.block_scaled_instruction_descriptor(ud.check_shape("mxf8f6f4", 128, 64), "e3m2", "e4m3",
                                                   scale_type="ue8m0")
    with pytest.raises(InterpretError, match="Figures 202-203"):
        bs.instruction(idesc, "mxf8f6f4", "block32")


def test_a_scale_address_off_lane_0_and_a_ue4m3_byte_with_bit_7_are_refused():
    rng = np.random.default_rng()
    tmem, smem, idesc, a_desc, b_desc, _ = setup("mxf4nvf4", "ue4m3", 4, 64, "none", rng)
    with pytest.raises(InterpretError, match="lane 32"):
        bs.mma(tmem, smem, idesc, a_desc, b_desc, 0, (32 << 16) | 256, 264, False, kind="mxf4nvf4",
               qualifier="block16")
    tmem.cells[[0, 32, 64, 96], 256] |= 0x80
    with pytest.raises(InterpretError, match="bit 7 set"):
        bs.mma(tmem, smem, idesc, a_desc, b_desc, 0, 256, 264, False, kind="mxf4nvf4", qualifier="block16")


def test_e2m1_pairs_unpack_low_nibble_first():
    assert list(bs.unpack_e2m1(np.array([[0x7A]], np.uint8))[0]) == [-1.0, 6.0]
    assert [bs.E2M1_VALUES[c] for c in range(16)] == [e2m1(c) for c in range(16)]
    assert np.isnan(bs.UE4M3_VALUES[0x7F]) and np.isnan(bs.UE8M0_VALUES[0xFF])
    assert all(bs.UE4M3_VALUES[c] == ue4m3(c) for c in range(127))
