"""tcgen05.ld / tcgen05.st shapes 16x64b, 16x128b, 16x256b with .xN repetitions (issue 13): the cells each
thread's registers address, against layouts written out here for the PTX ISA 9.1 figures "Matrix fragments
for tcgen05.ld / st" (§9.7.16.2.3.1, Figures 184-186: the text states only the lanes and bits per lane, the
thread-to-cell map is in the images), and, independently, against CUTLASS's public CuTe layouts of the same
instructions (``Copy_Traits<SM100_TMEM_LOAD_16dp{64,128,256}b{1,2,4}x>::DstLayout`` in
include/cute/atom/copy_traits_sm100.hpp, evaluated here as (thread, bit) -> TMEM bit offset); plus a UMMA kernel
(tensor_tcgen05_kernels.umma_tile) that reads its accumulator with each shape."""
import numpy as np
import pytest

import tsjit
from interpret.tensor_tcgen05_kernels import umma_tile
from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.tcgen05 import TensorMemory, ld, st

BF16 = tsjit.BFloat16


def expected_cells(shape: str, num: int):
    """{(thread, register): (lane, column)} per the PTX ISA figures, one repetition at a time.

    16x256b: the m16n8 accumulator image: thread 4 g + q holds rows g and g + 8, columns 2 q, 2 q + 1 of
    each 8-column block, registers in the order (g, 2q) (g, 2q+1) (g+8, 2q) (g+8, 2q+1).
    16x128b: rows g and g + 8, column q of each 4-column block.
    16x64b: each 2-column block: row 0 of it is held by threads 0 and 2, row 8 by threads 1 and 3,
    row 1 by threads 4 and 6, ...: thread t holds row t // 4 + 8 * (t odd), column (t // 2) % 2."""
    cells = {}
    for t in range(32):
        g, q = divmod(t, 4)
        for i in range(num):
            if shape == "16x256b":
                for j, (row, col) in enumerate([(g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q), (g + 8, 2 * q + 1)]):
                    cells[(t, 4 * i + j)] = (row, 8 * i + col)
            elif shape == "16x128b":
                cells[(t, 2 * i)] = (g, 4 * i + q)
                cells[(t, 2 * i + 1)] = (g + 8, 4 * i + q)
            elif shape == "16x64b":
                cells[(t, i)] = (g + (8 if t % 2 else 0), 2 * i + (t // 2) % 2)
            else:
                cells[(t, i)] = (t, i)
    return cells


CASES = [(shape, num) for shape in ("16x64b", "16x128b", "16x256b", "32x32b") for num in (1, 2, 4, 8)]


#: (shape, num) -> CuTe DstLayout (shape, stride) over (thread, value bit) -> logical bit id, whose ValID is
#: (bits per TMEM lane, 16 lanes) : (1, DP): bit id x is lane x // bits, bit x % bits of that lane's row.
CUTE_DST = {
    ("16x64b", 1): (((2, 2, 8), 32), ((512, 32, 64), 1)),
    ("16x64b", 2): (((2, 2, 8), (32, 2)), ((1024, 32, 128), (1, 64))),
    ("16x64b", 4): (((2, 2, 8), (32, 4)), ((2048, 32, 256), (1, 64))),
    ("16x128b", 1): (((4, 8), (32, 2)), ((32, 128), (1, 1024))),
    ("16x128b", 2): (((4, 8), (32, 2, 2)), ((32, 256), (1, 2048, 128))),
    ("16x128b", 4): (((4, 8), (32, 2, 4)), ((32, 512), (1, 4096, 128))),
    ("16x256b", 1): (((4, 8), (64, 2)), ((64, 256), (1, 2048))),
    ("16x256b", 2): (((4, 8), (64, 2, 2)), ((64, 512), (1, 4096, 256))),
    ("16x256b", 4): (((4, 8), (64, 2, 4)), ((64, 1024), (1, 8192, 256))),
}


def _cute(shape, stride, index: int) -> int:
    """A CuTe layout at a 1-D index (colexicographic: the first mode fastest)."""
    if isinstance(shape, int):
        return index * stride
    offset = 0
    for sub_shape, sub_stride in zip(shape, stride):
        size = int(np.prod(sub_shape)) if not isinstance(sub_shape, int) else sub_shape
        offset += _cute(sub_shape, sub_stride, index % size)
        index //= size
    return offset


@pytest.mark.parametrize("shape,num", sorted(CUTE_DST))
def test_the_fragments_agree_with_cutlass_cute_layouts_of_the_same_instructions(shape, num):
    from tsjit.interpret.tcgen05 import LD_SHAPES, fragment_cells
    (thr_shape, val_shape), (thr_stride, val_stride) = CUTE_DST[(shape, num)]
    lane_bits = 32 * LD_SHAPES[shape][1] * num
    lanes, columns = fragment_cells(shape, num)
    for t in range(32):
        for r in range(lanes.shape[1]):
            bit = _cute(thr_shape, thr_stride, t) + _cute(val_shape, val_stride, 32 * r)
            assert (lanes[t, r], columns[t, r]) == (bit // lane_bits, (bit % lane_bits) // 32), (t, r)


@pytest.mark.parametrize("shape,num", CASES)
def test_ld_reads_the_cells_of_the_ptx_fragment(shape, num):
    tmem = TensorMemory()
    base = tmem.alloc(128)
    tmem.cells[:] = np.arange(128)[:, None] * 1000 + np.arange(512)[None, :]
    lane0, col0 = (32 if shape == "32x32b" else 48), 8   # warp 1's quarter (the upper half for 16 lanes)
    got = ld(tmem, base | (lane0 << 16) | col0, shape, num, warp=1)
    want = np.zeros_like(got)
    for (t, r), (row, col) in expected_cells(shape, num).items():
        want[t, r] = (lane0 + row) * 1000 + col0 + col
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,num", CASES)
def test_st_writes_the_cells_ld_reads_and_no_others(shape, num):
    tmem = TensorMemory()
    base = tmem.alloc(128)
    cells = expected_cells(shape, num)
    registers = max(r for _, r in cells) + 1
    values = np.random.default_rng().integers(1, 2**32, (32, registers), dtype=np.uint64).astype(np.uint32)
    lane0 = 0 if shape == "32x32b" else 16
    st(tmem, base | (lane0 << 16) | 4, shape, values, warp=0)
    want = np.zeros((128, 512), np.uint32)
    for (t, r), (row, col) in cells.items():
        want[lane0 + row, 4 + col] = values[t, r]
    np.testing.assert_array_equal(tmem.cells, want)
    np.testing.assert_array_equal(ld(tmem, base | (lane0 << 16) | 4, shape, num, warp=0), values)


def test_a_16_lane_shape_must_stay_in_the_warps_quarter():
    tmem = TensorMemory()
    base = tmem.alloc(32)
    ld(tmem, base | (80 << 16), "16x256b", 1, warp=2)
    with pytest.raises(InterpretError, match="warp 2 accesses TMEM lanes 88..103"):
        ld(tmem, base | (88 << 16), "16x256b", 1, warp=2)


@pytest.mark.parametrize("shape,num", [("16x64b", 4), ("16x128b", 2), ("16x256b", 1), ("16x256b", 8)])
def test_an_accumulator_read_with_each_shape_is_a_at_b(shape, num, monkeypatch):
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    monkeypatch.setenv("TSJIT_TARGET", "sm_100a")
    rng = np.random.default_rng()
    a = numerics.encode(rng.standard_normal((128, 64)), BF16)
    b = numerics.encode(rng.standard_normal((64, 64)), BF16)
    a_map = tsjit.TensorMap(tsjit.to_device(a, BF16), (128, 64), swizzle="128B")
    b_map = tsjit.TensorMap(tsjit.to_device(b, BF16), (64, 64), swizzle="128B")
    out = tsjit.empty((128, 64), tsjit.Float32).fill_bytes(0xFF)
    umma_tile[(1,), (128,)](a_map, b_map, out, N=64, SHAPE=shape, NUM=num)
    want = numerics.decode(a, BF16).astype(np.float64) @ numerics.decode(b, BF16).astype(np.float64).T
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
