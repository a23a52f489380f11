"""TMA builtins for tensor maps of every rank: the PTX forms of loads (unicast and multicast) and stores
for 1-D to 5-D boxes, assembled by ptxas for sm_90a, and the compile-time checks of tma_load/tma_store."""
import re

import numpy as np
import pytest

import tsjit
from lang.compiling import build
from lang.tma_box_kernels import CASES, box_roundtrip, expected_load, multicast_box, random_values
from tsjit.lang.tma import TensorMapHandle
from tsjit.runtime.tensormap import validate_tensormap

LOAD = "cp.async.bulk.tensor.{}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.{}d.global.shared::cta.tile.bulk_group"


def tensor_map(case, box=None, steps=None):
    return tsjit.tensormap_spec(case.dtype, box or case.box, element_strides=steps)


def operands(ptx: str, opcode: str) -> list[str]:
    """The PTX lines of each ``opcode`` instruction."""
    return [line for line in ptx.splitlines() if opcode + " " in line or opcode + "\t" in line]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_box_roundtrip_compiles_to_one_load_and_one_store_of_the_rank(case):
    arrays = [tsjit.spec((case.tile_elements,), case.dtype) for _ in range(3)]
    compiled = build(box_roundtrip, tensor_map(case, steps=case.element_strides), tensor_map(case, case.tile_shape),
                     *arrays, *case.padded(case.load_at), *case.padded(case.store_at),
                     RANK=case.rank, TILE_ELEMENTS=case.tile_elements)
    loads, stores = operands(compiled.ptx, LOAD.format(case.rank)), operands(compiled.ptx, STORE.format(case.rank))
    assert len(loads) == 1 and len(stores) == 1, compiled.ptx
    coordinate_list = r"\{\s*" + r",\s*".join([r"%r\d+"] * case.rank) + r"\s*\}"
    assert re.search(r"\[%rd\d+, " + coordinate_list + r"\], \[", loads[0]), loads[0]
    assert re.search(r"\[%rd\d+, " + coordinate_list + r"\], \[", stores[0]), stores[0]
    tile_bytes = case.tile_elements * case.dtype.itemsize
    assert re.search(rf"@\"llvm\.nvvm\.mbarrier\.arrive\.expect\.tx[^(]*\(ptr addrspace\(3\) [^,]+, i32 {tile_bytes}\)",
                     compiled.llir), "the expect_tx count is the packed tile's bytes"


@pytest.mark.parametrize("rank", range(1, 6))
def test_multicast_load_of_every_rank_uses_the_cta_mask(rank):
    case = next(c for c in CASES if c.rank == rank)
    compiled = build(multicast_box, tensor_map(case, steps=case.element_strides),
                     tsjit.spec((case.tile_elements,), case.dtype), tsjit.spec((2 * case.tile_elements,), case.dtype),
                     *case.padded(case.load_at), RANK=rank, TILE_ELEMENTS=case.tile_elements)
    multicast = operands(compiled.ptx, LOAD.format(rank) + ".multicast::cluster")
    assert len(multicast) == 1 and re.search(r"\], %rs\d+;", multicast[0]), multicast


# ------------------------------------------------------------------ compile-time checks

@tsjit.kernel
def load_with(src_map, COORDS: tsjit.Constexpr[tuple], TILE: tsjit.Constexpr[int], MASK: tsjit.Constexpr[object]):
    tile = tsjit.shared_array(src_map.dtype, TILE, align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tsjit.mbarrier_init(bar.ptr, 1)
    tsjit.tma_load(src_map, tile, bar.ptr, COORDS, multicast_mask=MASK)


def compile_load(box=(8, 16), coords=(0, 0), tile=128, mask=None, swizzle="none"):
    return tsjit.compile(load_with, tsjit.tensormap_spec(tsjit.Float32, box, swizzle=swizzle), COORDS=coords,
                         TILE=tile, MASK=mask, target="sm_90a")


def test_a_valid_load_compiles():
    assert compile_load().cubin


def test_coordinate_count_must_match_the_rank():
    with pytest.raises(tsjit.CompilationError, match=r"rank 2 \(box \(8, 16\)\) but 3 coordinates"):
        compile_load(coords=(0, 0, 0))


def test_constant_coordinates_must_fit_int32():
    compile_load(coords=(-2 ** 31, 2 ** 31 - 4))
    with pytest.raises(tsjit.CompilationError, match=r"coordinate 1 is 2147483648.*signed 32-bit"):
        compile_load(coords=(0, 2 ** 31))


@tsjit.kernel
def load_at_true_division(src_map, tiles_n):
    # newcomer 7: ``t / tiles_n * bm`` (true division) where ``t // tiles_n * bm`` was meant
    tile = tsjit.shared_array(src_map.dtype, (8, 16), align=1024)
    bar = tsjit.shared_array(tsjit.Int64, 1, align=8)
    tsjit.mbarrier_init(bar.ptr, 1)
    t = tsjit.block_idx().x
    tsjit.tma_load(src_map, tile, bar.ptr, (t / tiles_n * 8, t % tiles_n * 16))


def test_a_float_coordinate_is_refused_not_truncated():
    with pytest.raises(tsjit.CompilationError, match=r"tma_load: coordinate 0 must be an integer, got Float32.*"
                                                     r"use // for integer division.*tsjit\.Int32\(x\)") as info:
        tsjit.compile(load_at_true_division, tsjit.tensormap_spec(tsjit.Float32, (8, 16)), 3, target="sm_90a")
    assert "t / tiles_n * 8" in str(info.value)   # it points at the call in the kernel's source
    with pytest.raises(tsjit.CompilationError, match=r"coordinate 1 must be an integer, got float 16\.0"):
        compile_load(coords=(0, 16.0))


@pytest.mark.parametrize("mask", [0, 2 ** 16, -1])
def test_constant_multicast_mask_must_select_a_cta_within_16_bits(mask):
    with pytest.raises(tsjit.CompilationError, match=rf"multicast_mask is {mask}.*1 \.\. 0xFFFF"):
        compile_load(mask=mask)


def test_tile_smaller_than_the_box_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"tile has 508 bytes but one box \(8, 16\) of Float32 is "
                                                     r"512 bytes.*shared_array\(Float32, \(8, 16\)\)"):
        compile_load(tile=127)


def test_a_swizzled_box_of_rows_narrower_than_the_span_needs_rows_times_the_span():
    # 8 rows of 4 Float32 (16 bytes) under the 64B swizzle span 8 x 64 bytes on the H200, not 128.
    with pytest.raises(tsjit.CompilationError, match=r"tile has 128 bytes but one box \(8, 4\) of Float32 with "
                                                     r"swizzle='64B' spans 512 bytes.*allocate 512 bytes"):
        compile_load(box=(8, 4), tile=32, swizzle="64B")
    assert compile_load(box=(8, 4), tile=128, swizzle="64B").cubin
    assert compile_load(box=(8, 16), tile=128, swizzle="64B").cubin   # span-wide rows: the box itself


def test_smem_bytes_of_host_and_device_descriptors_agree():
    spec = tsjit.tensormap_spec(tsjit.BFloat16, (64, 8), swizzle="128B")
    assert tsjit.abi.tma_smem_footprint((64, 8), 2, "128B") == 64 * 128
    assert tsjit.abi.tma_smem_footprint((64, 64), 2, "128B") == 64 * 128
    assert tsjit.abi.tma_smem_footprint((64, 8), 2, "none") == 64 * 16
    assert TensorMapHandle(None, spec).smem_bytes == 64 * 128 and TensorMapHandle(None, spec).box_bytes == 64 * 16


@tsjit.kernel
def store_with(dst_map, COORDS: tsjit.Constexpr[tuple], TILE: tsjit.Constexpr[int]):
    tile = tsjit.shared_array(dst_map.dtype, TILE, align=1024)
    tsjit.tma_store(dst_map, tile, COORDS)


def compile_store(coords, dtype=tsjit.Float32, box=(8, 16)):
    return tsjit.compile(store_with, tsjit.tensormap_spec(dtype, box), COORDS=coords, TILE=128, target="sm_90a")


def test_a_store_may_start_anywhere_inside_the_array_on_a_16_byte_boundary():
    assert compile_store((0, 0)).cubin and compile_store((7, 4)).cubin and compile_store((3, 8), tsjit.Float16).cubin


@pytest.mark.parametrize("coords,axis", [((-1, 0), 0), ((0, -4), 1)])
def test_a_store_box_that_starts_before_the_array_is_refused(coords, axis):
    # H200: a negative store coordinate is CUDA_ERROR_ILLEGAL_INSTRUCTION (UTMASTG), see tma_store
    with pytest.raises(tsjit.CompilationError, match=rf"coordinate {axis} is -\d+; a TMA store's box must start inside"):
        compile_store(coords)


def test_a_store_whose_innermost_start_is_not_16_byte_aligned_is_refused():
    with pytest.raises(tsjit.CompilationError, match=r"innermost coordinate 6 starts 24 bytes.*multiple of 16 bytes "
                                                     r"\(4 elements\): use 4 or 8"):
        compile_store((0, 6))
    with pytest.raises(tsjit.CompilationError, match=r"\(8 elements\): use 0 or 8"):
        compile_store((0, 3), tsjit.Float16)


def test_a_load_whose_innermost_start_is_not_16_byte_aligned_is_refused():
    compile_load(coords=(-3, -4))          # negative starts are fine for a load
    with pytest.raises(tsjit.CompilationError, match=r"innermost coordinate 2 starts 8 bytes.*TMA load's innermost"):
        compile_load(coords=(0, 2))


def test_expect_tx_bytes_count_the_traversed_box():
    handle_spec = tsjit.tensormap_spec(tsjit.Float32, (8, 16), element_strides=(3, 1))
    handle = TensorMapHandle(None, handle_spec)
    assert handle.tile_shape == (3, 16) and handle.box_bytes == 3 * 16 * 4
    assert handle_spec.key()[-1] == (3, 1)
    assert tsjit.tensormap_spec(tsjit.Float32, (8, 16), element_strides=(1, 1)).key() == \
        ("M", "Float32", (8, 16), 2, "none")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_gpu_case_has_valid_descriptors_that_straddle_the_edge(case):
    storage = case.storage or case.shape
    strides = [case.dtype.itemsize]
    for extent in reversed(storage[1:]):
        strides.insert(0, strides[0] * extent)
    base = 0x7F0000000000
    load = validate_tensormap(case.shape, strides, case.dtype, base, case.box, element_strides=case.element_strides,
                              oob_fill=case.oob_fill)
    store = validate_tensormap(case.shape, strides, case.dtype, base, case.tile_shape)
    assert load.box_bytes == store.box_bytes == case.tile_elements * case.dtype.itemsize
    _, outside = expected_load(case, random_values(case.dtype, case.shape, np.random.default_rng()))
    assert outside.any() and (~outside).any()


@tsjit.kernel
def reads_the_global_shape(src_map, out):
    out[0] = src_map.shape[1]          # newcomer 7, item 11: the tensor map has no global shape


def test_a_tensor_map_has_no_global_shape_and_says_what_it_has():
    with pytest.raises(tsjit.CompilationError, match=r"no attribute `shape`; a tensor map argument carries its box "
                                                     r"\(box_shape, tile_shape\).*pass the extents you need as kernel "
                                                     r"arguments"):
        tsjit.compile(reads_the_global_shape, tsjit.tensormap_spec(tsjit.Float32, (8, 16)), np.zeros(1, np.int32),
                      target="sm_90a")
