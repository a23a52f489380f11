"""tsjit.epilogue: accumulator fragment -> shared memory (stmatrix, TMA-store swizzled layout) and ->
global memory with bounds masks.  The stmatrix addressing is checked against a host model of the
instruction and of the TMA swizzle (the same function builds the addresses in kernels)."""
import re

import numpy as np
import pytest

import tsjit
from tsjit.lang.epilogue import SWIZZLE_SPANS, stmatrix_row_offset
from tsjit.lang.fragment import accumulator_coords

from .compiling import build, ptx_ops

OUT32 = np.zeros(1 << 15, np.float32)


def stored_layout(n: int, swizzle: str) -> np.ndarray:
    """Simulate every stmatrix of store_fragment_shared: slot (2-byte unit) -> row * n + col."""
    memory = np.full(64 * n, -1, np.int64)
    groups = n // 8
    for warp in range(4):
        for group in range(0, groups, 2):
            count = 4 if group + 1 < groups else 2
            for lane in range(32):
                tid = 32 * warp + lane
                for r in range(count):            # register r of lane: row lane // 4 of matrix r
                    for e in range(2):            # low / high half: columns 2 * (lane % 4) + e
                        i = 4 * group + 2 * r + e
                        row, col = accumulator_coords(i, tid)
                        row_address = stmatrix_row_offset(32 * warp + 8 * r + lane // 4, group, n, swizzle)
                        slot = (row_address + 4 * (lane % 4) + 2 * e) // 2
                        assert memory[slot] == -1, "two elements stored to one place"
                        memory[slot] = row * n + col
    return memory


def tma_box_offset(row: int, col: int, n: int, swizzle: str) -> int:
    """Byte offset of element (row, col) in the (n / W, 64, W) tile of TMA boxes with ``swizzle``
    (128B: 16-byte chunk c of row r at c ^ (r % 8), wgmma_sw128.md §3; Swizzle<B,4,3> in general)."""
    span = SWIZZLE_SPANS[swizzle]
    if not span:
        return (row * n + col) * 2
    box, inner = divmod(col, span // 2)
    logical = row * span + inner * 2
    return box * 64 * span + (logical ^ (((logical >> 7) & (span // 16 - 1)) << 4))


@pytest.mark.parametrize("n,swizzle", [(256, "128B"), (64, "128B"), (128, "64B"), (32, "32B"), (256, "none"),
                                       (24, "none"), (8, "none")])
def test_stmatrix_addresses_put_every_accumulator_where_the_tma_box_expects_it(n, swizzle):
    memory = stored_layout(n, swizzle)
    for row in range(64):
        for col in range(n):
            assert memory[tma_box_offset(row, col, n, swizzle) // 2] == row * n + col


@tsjit.kernel
def to_shared(out, bias, N: tsjit.Constexpr[int], SWIZZLE: tsjit.Constexpr[str], FN: tsjit.Constexpr[bool]):
    acc = tsjit.Fragment([bias[tsjit.thread_idx().x + i] for i in tsjit.range_constexpr(N // 2)])
    if tsjit.const_expr(SWIZZLE == "none"):
        tile = tsjit.shared_array(tsjit.BFloat16, (64, N), align=1024)
    else:
        width = tsjit.epilogue.SWIZZLE_SPANS[SWIZZLE] // 2
        tile = tsjit.shared_array(tsjit.BFloat16, (N // width, 64, width), align=1024)
    if tsjit.const_expr(FN):
        tsjit.epilogue.store_fragment_shared(acc, tile, swizzle=SWIZZLE,
                                             fn=lambda v, r, c: tsjit.math.max(v + bias[c], 0.0))
    else:
        tsjit.epilogue.store_fragment_shared(acc, tile, swizzle=SWIZZLE)
    tsjit.syncthreads()
    out[tsjit.thread_idx().x] = tile.ptr[tsjit.thread_idx().x]


def test_shared_epilogue_is_one_stmatrix_x4_per_16_columns_of_packed_bf16():
    compiled = build(to_shared, OUT32, OUT32, 256, "128B", False)
    assert ptx_ops(compiled.ptx, "stmatrix") == ["stmatrix.sync.aligned.m8n8.x4.shared.b16"] * 16
    assert "cvt.rn.bf16x2.f32" in compiled.ptx
    assert compiled.metadata["spill_stores_bytes"] == 0


def test_n_with_an_odd_number_of_8_column_groups_ends_with_stmatrix_x2():
    compiled = build(to_shared, OUT32, OUT32, 24, "none", False)
    assert ptx_ops(compiled.ptx, "stmatrix") == ["stmatrix.sync.aligned.m8n8.x4.shared.b16",
                                                 "stmatrix.sync.aligned.m8n8.x2.shared.b16"]


def test_elementwise_function_is_compiled_into_the_epilogue():
    compiled = build(to_shared, OUT32, OUT32, 64, "128B", True)
    assert re.search(r"\bmax\.f32\b", compiled.ptx)
    assert len(ptx_ops(compiled.ptx, "ld.global")) >= 1


@tsjit.kernel
def wrong_tile(out, SHAPE: tsjit.Constexpr[tuple], DTYPE: tsjit.Constexpr[object]):
    acc = tsjit.Fragment.zeros(32)
    tile = tsjit.shared_array(DTYPE, SHAPE, align=1024)
    tsjit.epilogue.store_fragment_shared(acc, tile)
    out[0] = 1.0


def test_shared_tile_of_the_wrong_shape_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"dense shared array of shape \(1, 64, 64\)"):
        build(wrong_tile, OUT32, (64, 64), tsjit.BFloat16)


def test_shared_tile_of_32_bit_elements_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"stores BFloat16 or Float16"):
        build(wrong_tile, OUT32, (1, 64, 64), tsjit.Float32)


@tsjit.kernel
def to_global(c, row0, col0, M, N):
    acc = tsjit.Fragment.full(32, 2.0)
    tsjit.epilogue.store_fragment_global(acc, c, row0, col0, M, N, fn=lambda v, r, col: v * 3.0)


def test_global_epilogue_stores_column_pairs_as_vectors_when_rows_are_aligned():
    c = tsjit.spec((256, 512), tsjit.BFloat16)
    compiled = build(to_global, c, np.int32(0), np.int32(0), np.int32(256), np.int32(512))
    stores = ptx_ops(compiled.ptx, "st.global")
    assert "st.global.b32" in stores or "st.global.v2.b16" in stores   # a bf16 pair in one access
    assert "st.global.b16" in stores                                    # the odd last column
    assert re.search(r"setp\.\w+\.s32", compiled.ptx)                   # bounds masks


def test_global_epilogue_falls_back_to_element_stores_for_unaligned_rows():
    c = tsjit.spec((257, 511), tsjit.BFloat16)                          # 1022-byte rows
    compiled = build(to_global, c, np.int32(0), np.int32(0), np.int32(257), np.int32(511))
    stores = set(ptx_ops(compiled.ptx, "st.global"))
    assert stores == {"st.global.b16"}


@tsjit.func
def scaled_relu(value, row, col):
    return tsjit.math.max(value * 0.5, 0.0)


@tsjit.kernel
def to_global_with_device_function(c):
    acc = tsjit.Fragment([c[0, i] + 0.0 for i in tsjit.range_constexpr(8)])
    tsjit.epilogue.store_fragment_global(acc, c, 0, 0, fn=scaled_relu)


def test_elementwise_function_may_be_a_device_function():
    compiled = build(to_global_with_device_function, tsjit.spec((64, 16), tsjit.Float32))
    assert re.search(r"\bmax\.f32\b", compiled.ptx)
    assert "st.global.v2.b32" in ptx_ops(compiled.ptx, "st.global") or \
        "st.global.v2.f32" in ptx_ops(compiled.ptx, "st.global")
