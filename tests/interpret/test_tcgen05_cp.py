"""tcgen05.cp (shared memory -> TMEM, PTX ISA 9.1 §9.7.16.9.2) in the CPU interpreter: every form tsjit
emits, against a destination layout and a canonical-layout source walk written out here independently
(row r of the source: bytes ``(r % 8) * 16 + (r // 8) * SBO + (b // 16) * LBO + b % 16`` without swizzle,
``(r % 8) * 128 + (r // 8) * SBO + b`` XOR-swizzled for 128B; lanes per the shape and multicast), run as a
kernel (one thread issues, commit, mbarrier wait, tcgen05.ld), plus its asynchrony and its errors."""
import numpy as np
import pytest

import tsjit
from tsjit import tcgen05
from tsjit.errors import InterpretError
from tsjit.interpret import tcgen05 as model
from tsjit.lang import umma_descriptors as ud

SMEM_BYTES = 128 * 128
FORMS = [("128x256b", None), ("128x128b", None), ("4x256b", None), ("64x128b", "warpx2::02_13"),
         ("64x128b", "warpx2::01_23"), ("32x128b", "warpx4")]
LBO, SBO = 2048, 256          # no swizzle: K halves 2 KiB apart, 8-row groups 256 bytes apart (gaps between)


def expected_tmem(image: np.ndarray, shape: str, multicast, swizzle: str) -> np.ndarray:
    """(128, 8) uint32: TMEM lanes 0-127, columns 0-7 after the copy into lane 0, column 0 (0 elsewhere)."""
    rows, bits = (int(x) for x in shape.replace("b", "").split("x"))
    row_bytes = bits // 8
    out = np.zeros((128, 8), np.uint32)
    for r in range(rows):
        data = []
        for b in range(row_bytes):
            if swizzle == "none":
                address = (r % 8) * 16 + (r // 8) * SBO + (b // 16) * LBO + b % 16
            else:
                address = (r % 8) * 128 + (r // 8) * 1024 + b
                address ^= ((address >> 7) & 7) << 4
            data.append(int(image[address]))
        words = [data[4 * c] | data[4 * c + 1] << 8 | data[4 * c + 2] << 16 | data[4 * c + 3] << 24
                 for c in range(row_bytes // 4)]
        if shape == "4x256b":
            lanes = [32 * r]
        elif multicast == "warpx2::02_13":        # warps 0 and 2 receive rows 0-31, warps 1 and 3 rows 32-63
            lanes = [r, r + 64]
        elif multicast == "warpx2::01_23":        # warps 0 and 1 receive rows 0-31, warps 2 and 3 rows 32-63
            lanes = [r % 32 + (64 if r >= 32 else 0), r % 32 + (64 if r >= 32 else 0) + 32]
        elif multicast == "warpx4":               # every warp receives the 32 rows
            lanes = [r, r + 32, r + 64, r + 96]
        else:
            lanes = [r]
        for lane in lanes:
            out[lane, :len(words)] = words
    return out


@tsjit.kernel
def cp_tile(src, out, SHAPE: tsjit.Constexpr[str], MULTICAST: tsjit.Constexpr[object] = None,
            SWIZZLE: tsjit.Constexpr[str] = "none", EARLY: tsjit.Constexpr[bool] = False):
    """out (128, 8) Uint32 = TMEM lanes 0-127, columns 0-7 after one tcgen05.cp of the shared-memory image
    ``src`` (16 KiB of bytes); EARLY: read TMEM before waiting on the commit's barrier (a planted bug)."""
    tile = tsjit.shared_array(tsjit.Uint8, (128, 128), align=1024)
    bars = tsjit.shared_array(tsjit.Int64, 1, align=8)
    slot = tsjit.shared_array(tsjit.Uint32, (1,), align=4)
    tid = tsjit.thread_idx().x
    warp = tsjit.warp_idx()
    for i in range(tid, 128 * 128, 128):
        tile[i // 128, i % 128] = src[i]
    tsjit.fence_proxy_async()
    if tid == 0:
        tsjit.mbarrier_init(bars.ptr, 1)
        tsjit.fence_mbarrier_init()
    if warp == 0:
        tcgen05.alloc(slot, 32)
        tcgen05.relinquish_alloc_permit()
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    tcgen05.fence_after_thread_sync()
    tmem = slot[0]
    if tid == 0:
        if tsjit.const_expr(SWIZZLE == "none"):
            desc = tcgen05.make_smem_descriptor(tile, swizzle="none", leading_byte_offset=LBO,
                                                stride_byte_offset=SBO)
        else:
            desc = tcgen05.make_smem_descriptor(tile, swizzle=SWIZZLE)
        tcgen05.cp(tmem, desc, shape=SHAPE, multicast=MULTICAST)
        tcgen05.commit(bars.ptr)
    if tsjit.const_expr(not EARLY):
        tsjit.mbarrier_wait(bars.ptr, 0)
    tcgen05.fence_after_thread_sync()
    quarter = 32 * (warp % 4)
    values = tcgen05.ld(tcgen05.tmem_address(tmem, lane=quarter, column=0), num=8, dtype=tsjit.Uint32)
    tcgen05.wait_ld()
    for j in tsjit.range_constexpr(8):
        out[quarter + tsjit.lane_idx(), j] = values[j]
    if tsjit.const_expr(EARLY):
        tsjit.mbarrier_wait(bars.ptr, 0)
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    if warp == 0:
        tcgen05.dealloc(tmem, 32)


@pytest.fixture
def blackwell_interpreter(monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")


def run(shape, multicast, swizzle="none", early=False):
    image = np.random.default_rng().integers(1, 256, SMEM_BYTES, dtype=np.uint8)
    out = tsjit.empty((128, 8), tsjit.Uint32).fill_bytes(0xA5)
    cp_tile[(1,), (128,)](image, out, SHAPE=shape, MULTICAST=multicast, SWIZZLE=swizzle, EARLY=early)
    return out.numpy(), expected_tmem(image, shape, multicast, swizzle), image


@pytest.mark.parametrize("shape,multicast", FORMS)
def test_cp_puts_each_source_row_in_its_lanes(blackwell_interpreter, shape, multicast):
    got, want, _ = run(shape, multicast)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,multicast", [("128x256b", None), ("32x128b", "warpx4")])
def test_cp_reads_a_128b_swizzled_source(blackwell_interpreter, shape, multicast):
    got, want, image = run(shape, multicast, swizzle="128B")
    np.testing.assert_array_equal(got, want)
    unswizzled = image.reshape(128, 128)[:, :32]           # the rows as stored, bytes not XOR-moved
    assert (got[:32, :4].view(np.uint8).reshape(32, 16) != unswizzled[:32, :16]).any()


def test_tmem_read_before_the_commit_arrives_is_poison(blackwell_interpreter):
    """Warp 0 (the issuer's) reads after the issue, before the commit's arrival: poison; the other warps
    read before or after the issue, never the copied data."""
    got, want, _ = run("128x128b", None, early=True)
    assert (got[:32, :4] == model.POISON).all()
    assert not (got[:, :4] == want[:, :4]).all(axis=1).any()


def _smem_image():
    return np.random.default_rng().integers(0, 256, SMEM_BYTES, dtype=np.uint8)


def _descriptor(address=0):
    return ud.smem_descriptor_bits(leading_byte_offset=LBO, stride_byte_offset=SBO, swizzle="none") | (address >> 4)


@pytest.mark.parametrize("shape,multicast", FORMS)
def test_cp_model_at_an_offset_address(shape, multicast):
    """The model function alone: a column offset of the destination shifts the whole image."""
    image = _smem_image()
    tmem = model.TensorMemory()
    base = tmem.alloc(64)
    model.cp(tmem, image, _descriptor(), base | 12, shape, multicast)
    np.testing.assert_array_equal(tmem.cells[:, 12:20], expected_tmem(image, shape, multicast, "none"))
    assert not tmem.cells[:, :12].any() and not tmem.cells[:, 20:].any()


def test_cp_4x256b_at_a_lane_offset():
    image = _smem_image()
    tmem = model.TensorMemory()
    base = tmem.alloc(32)
    model.cp(tmem, image, _descriptor(), base | (5 << 16), "4x256b", None)
    want = expected_tmem(image, "4x256b", None, "none")
    np.testing.assert_array_equal(tmem.cells[5:, :8], want[:123])


def test_cp_outside_the_allocation_is_an_error():
    tmem = model.TensorMemory()
    base = tmem.alloc(32)
    with pytest.raises(InterpretError, match="tcgen05.cp.128x256b destination: TMEM lanes 0..127, columns 28..35"):
        model.cp(tmem, _smem_image(), _descriptor(), base | 28, "128x256b", None)
    with pytest.raises(InterpretError, match="lanes 1..128"):
        model.cp(tmem, _smem_image(), _descriptor(), base | (1 << 16), "128x128b", None)


def test_a_source_outside_shared_memory_is_an_error():
    tmem = model.TensorMemory()
    base = tmem.alloc(32)
    with pytest.raises(InterpretError, match="tcgen05.cp.128x256b source.*reads shared-memory bytes up to"):
        model.cp(tmem, np.zeros(4096, np.uint8), _descriptor(), base, "128x256b", None)


@pytest.mark.parametrize("shape,multicast", [("128x256b", "warpx4"), ("64x128b", None), ("16x256b", None)])
def test_forms_tsjit_does_not_emit_are_refused_by_name(shape, multicast):
    tmem = model.TensorMemory()
    base = tmem.alloc(32)
    with pytest.raises(InterpretError, match=f"tcgen05.cp.{shape}"):
        model.cp(tmem, _smem_image(), _descriptor(), base, shape, multicast)


@tsjit.kernel
def pair_cp(src, out):
    """out (2, 128, 8) Uint32: each CTA's TMEM after one tcgen05.cp.cta_group::2.32x128b.warpx4 issued by CTA 0
    of a 2-CTA cluster; CTA c's shared memory holds ``src[c]``."""
    tile = tsjit.shared_array(tsjit.Uint8, (128, 128), align=1024)
    bars = tsjit.shared_array(tsjit.Int64, 1, align=8)
    slot = tsjit.shared_array(tsjit.Uint32, (1,), align=4)
    tid = tsjit.thread_idx().x
    warp = tsjit.warp_idx()
    rank = tsjit.cluster_ctarank()
    for i in range(tid, 128 * 128, 128):
        tile[i // 128, i % 128] = src[rank, i]
    tsjit.fence_proxy_async()
    if tid == 0:
        tsjit.mbarrier_init(bars.ptr, 1)
        tsjit.fence_mbarrier_init()
    if warp == 0:
        tcgen05.alloc(slot, 32, cta_group=2)
        tcgen05.relinquish_alloc_permit(cta_group=2)
    tcgen05.fence_before_thread_sync()
    tsjit.syncthreads()
    tcgen05.fence_after_thread_sync()
    tmem = slot[0]
    tsjit.cluster_sync()
    if rank == 0:
        if tid == 0:
            desc = tcgen05.make_smem_descriptor(tile, swizzle="none", leading_byte_offset=LBO, stride_byte_offset=SBO)
            tcgen05.cp(tmem, desc, shape="32x128b", multicast="warpx4", cta_group=2)
            tcgen05.commit(bars.ptr, cta_group=2, multicast_mask=0b11)
    tsjit.mbarrier_wait(bars.ptr, 0)
    tcgen05.fence_after_thread_sync()
    quarter = 32 * (warp % 4)
    values = tcgen05.ld(tcgen05.tmem_address(tmem, lane=quarter, column=0), num=8, dtype=tsjit.Uint32)
    tcgen05.wait_ld()
    for j in tsjit.range_constexpr(8):
        out[rank, quarter + tsjit.lane_idx(), j] = values[j]
    tcgen05.fence_before_thread_sync()
    tsjit.cluster_sync()
    if warp == 0:
        tcgen05.dealloc(tmem, 32, cta_group=2)


def test_a_pair_copy_fills_each_ctas_tmem_from_its_own_shared_memory(blackwell_interpreter):
    images = np.random.default_rng().integers(1, 256, (2, SMEM_BYTES), dtype=np.uint8)
    out = tsjit.empty((2, 128, 8), tsjit.Uint32).fill_bytes(0xA5)
    pair_cp[(2,), (128,)](images, out, cluster=(2, 1, 1))
    for rank in range(2):
        np.testing.assert_array_equal(out.numpy()[rank], expected_tmem(images[rank], "32x128b", "warpx4", "none"))
