"""TMA tiled loads and stores of the CPU interpreter (tsjit.interpret.tma) against the numpy
references that the H200 confirmed bit for bit (tests/lang/tma_box_kernels.py, run by
tests/gpu/test_tma_ranks_gpu.py), and the swizzled shared-memory image measured on the H200
(shared/reference/wgmma_sw128.md §3: chunk c of row r at c ^ (r % 8) for 128B)."""
import numpy as np
import pytest

from interpret.tensor_memory import ArrayMemory
from lang.tma_box_kernels import CASES, expected_load, expected_store, poison, random_values
from tsjit.errors import InterpretError
from tsjit.interpret import numerics
from tsjit.interpret.swizzle import swizzle_addresses
from tsjit.interpret.tma import load_box, prepare_store, store_box
from tsjit.lang import dtypes
from tsjit.runtime.tensormap import validate_tensormap

SMEM_BYTES = 96 * 1024


def bits(array):
    return np.asarray(array).view(f"u{np.asarray(array).dtype.itemsize}")


def layout_of(memory, storage, shape, dtype, box, **options):
    """A TensorMapLayout of the ``shape`` view (C order) at the start of ``storage``."""
    address = memory.add(storage, "array")
    itemsize = dtype.itemsize
    strides, step = [], itemsize
    for extent in reversed(storage.shape):
        strides.insert(0, step)
        step *= extent
    return validate_tensormap(shape, strides, dtype, address, box, **options)


def poisoned_smem():
    return np.full(SMEM_BYTES, 0xFF, np.uint8)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_load_fills_out_of_bounds_and_matches_the_hardware_reference(case):
    rng = np.random.default_rng()
    memory = ArrayMemory()
    storage = random_values(case.dtype, case.storage or case.shape, rng)
    layout = layout_of(memory, storage, case.shape, case.dtype, case.box, element_strides=case.element_strides,
                       oob_fill=case.oob_fill)
    smem = poisoned_smem()
    image = load_box(layout, case.load_at[::-1], memory, 2048)
    assert image.tx_bytes == layout.box_bytes == case.tile_elements * case.dtype.itemsize
    image.write_into(smem)
    nbytes = layout.box_bytes
    got = smem[2048:2048 + nbytes].view(storage.dtype)
    view = storage[tuple(slice(0, n) for n in case.shape)]
    want, outside = expected_load(case, view)
    np.testing.assert_array_equal(bits(got)[~outside], bits(want)[~outside])
    if case.oob_fill == "nan":
        assert (bits(got)[outside] == 0x7FF7).all()          # the H200's NaN fill of a 16-bit element
    else:
        assert (bits(got)[outside] == 0).all()
    assert (smem[:2048] == 0xFF).all() and (smem[2048 + nbytes:] == 0xFF).all()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_store_clips_in_16_byte_granules_as_the_hardware_does(case):
    rng = np.random.default_rng()
    memory = ArrayMemory()
    storage = poison(case.dtype, case.storage or case.shape).copy()
    layout = layout_of(memory, storage, case.shape, case.dtype, case.tile_shape)
    values = random_values(case.dtype, (case.tile_elements,), rng)
    smem = poisoned_smem()
    smem[1024:1024 + values.nbytes] = values.view(np.uint8)
    want = expected_store(case, storage, values)
    store_box(layout, case.store_at[::-1], memory, smem, 1024)
    np.testing.assert_array_equal(bits(storage), bits(want))


@pytest.mark.parametrize("swizzle,span", [("32B", 32), ("64B", 64), ("128B", 128)])
def test_swizzled_image_moves_chunk_c_of_row_r_to_c_xor_row_phase(swizzle, span):
    memory = ArrayMemory()
    rows, width = 64, span // 2
    source = np.arange(rows * width, dtype=np.uint16).reshape(rows, width)
    layout = layout_of(memory, source, source.shape, dtypes.BFloat16, (rows, width), swizzle=swizzle)
    smem = poisoned_smem()
    load_box(layout, (0, 0), memory, 4096).write_into(smem)
    image = smem[4096:4096 + source.nbytes].reshape(rows, span // 16, 16)
    chunks = source.view(np.uint8).reshape(rows, span // 16, 16)
    for r in range(rows):
        for c in range(span // 16):
            phase = (r * span >> 7) & (span // 16 - 1)
            np.testing.assert_array_equal(image[r, c ^ phase], chunks[r, c])
    if swizzle == "128B":     # the H200 measurement, literally: chunk c of row r at c ^ (r % 8)
        assert all((image[r, c ^ (r % 8)] == chunks[r, c]).all() for r in range(rows) for c in range(8))


def test_swizzle_follows_the_absolute_address_not_the_tile_offset():
    memory = ArrayMemory()
    source = np.arange(8 * 64, dtype=np.uint16).reshape(8, 64)
    layout = layout_of(memory, source, source.shape, dtypes.BFloat16, (8, 64), swizzle="128B")
    smem = poisoned_smem()
    load_box(layout, (0, 0), memory, 1024 + 384).write_into(smem)    # three rows into a pattern
    image = smem[1024 + 384:1024 + 384 + 1024].reshape(8, 8, 16)
    chunks = source.view(np.uint8).reshape(8, 8, 16)
    for r in range(8):
        assert all((image[r, c ^ ((r + 3) % 8)] == chunks[r, c]).all() for c in range(8))


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
def test_load_then_store_with_the_same_swizzle_is_the_identity(swizzle):
    rng = np.random.default_rng()
    memory = ArrayMemory()
    span = {"none": 128, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    source = rng.standard_normal((48, 96)).astype(np.float32)
    destination = np.full_like(source, np.nan)
    box = (16, span // 4)
    src = layout_of(memory, source, source.shape, dtypes.Float32, box, swizzle=swizzle)
    dst = layout_of(memory, destination, destination.shape, dtypes.Float32, box, swizzle=swizzle)
    smem = poisoned_smem()
    for row in range(0, 48, 16):
        for col in range(0, 96, box[1]):
            load_box(src, (col, row), memory, 0).write_into(smem)
            store_box(dst, (col, row), memory, smem, 0)
    np.testing.assert_array_equal(destination, source)


def test_a_swizzle_mismatch_between_load_and_store_scrambles_the_tile():
    rng = np.random.default_rng()
    memory = ArrayMemory()
    source = rng.standard_normal((16, 64)).astype(np.float32)
    destination = np.zeros_like(source)
    src = layout_of(memory, source, source.shape, dtypes.Float32, (16, 32), swizzle="128B")
    dst = layout_of(memory, destination, destination.shape, dtypes.Float32, (16, 32), swizzle="none")
    smem = poisoned_smem()
    load_box(src, (0, 0), memory, 0).write_into(smem)
    store_box(dst, (0, 0), memory, smem, 0)
    got = destination[:, :32]
    assert not np.array_equal(got, source[:, :32])
    np.testing.assert_array_equal(np.sort(got.ravel()), np.sort(source[:, :32].ravel()))   # a permutation


def test_nan_fill_of_float32_is_the_h200_pattern():
    """0x7FF7 in each half-word (measured on the H200, tests/gpu/test_interpret_tensor_gpu.py nan-fill-f32)."""
    memory = ArrayMemory()
    source = np.ones((4, 8), np.float32)
    layout = layout_of(memory, source, source.shape, dtypes.Float32, (4, 8), oob_fill="nan")
    smem = poisoned_smem()
    load_box(layout, (4, 2), memory, 0).write_into(smem)
    got = smem[:128].view(np.uint32).reshape(4, 8)
    assert (got[:2, :4] == np.float32(1).view(np.uint32)).all()
    assert (got[2:] == 0x7FF77FF7).all() and (got[:, 4:] == 0x7FF77FF7).all()


def test_reduce_add_store_adds_with_one_rounding_per_element():
    rng = np.random.default_rng()
    memory = ArrayMemory()
    old = numerics.encode(rng.standard_normal((8, 16)), dtypes.BFloat16)
    addend = numerics.encode(rng.standard_normal((8, 16)), dtypes.BFloat16)
    storage = old.copy()
    layout = layout_of(memory, storage, storage.shape, dtypes.BFloat16, (8, 16))
    smem = poisoned_smem()
    smem[:addend.nbytes] = addend.view(np.uint8).ravel()
    store_box(layout, (0, 0), memory, smem, 0, reduce="add")
    exact = numerics.decode(old, dtypes.BFloat16).astype(np.float64) + numerics.decode(addend, dtypes.BFloat16)
    np.testing.assert_array_equal(storage, numerics.encode(exact, dtypes.BFloat16))


def test_reduce_max_store_of_int32():
    memory = ArrayMemory()
    storage = np.arange(-32, 32, dtype=np.int32).reshape(4, 16)
    values = np.zeros((4, 16), np.int32)
    layout = layout_of(memory, storage, storage.shape, dtypes.Int32, (4, 16))
    smem = poisoned_smem()
    smem[:values.nbytes] = values.view(np.uint8).ravel()
    store_box(layout, (0, 0), memory, smem, 0, reduce="max")
    np.testing.assert_array_equal(storage, np.maximum(np.arange(-32, 32).reshape(4, 16), 0))


@pytest.fixture
def small_map():
    memory = ArrayMemory()
    source = np.zeros((32, 64), np.float32)
    return memory, layout_of(memory, source, source.shape, dtypes.Float32, (8, 16))


@pytest.mark.parametrize("coords,fragment", [((-4, 0), "must start inside"), ((0, -1), "must start inside"),
                                             ((2, 0), "multiple of 16 bytes")])
def test_store_refuses_what_the_h200_faults_on(small_map, coords, fragment):
    memory, layout = small_map
    with pytest.raises(InterpretError, match=fragment):
        store_box(layout, coords, memory, poisoned_smem(), 0)


def test_load_refuses_a_misaligned_innermost_start_but_takes_negative_coordinates(small_map):
    memory, layout = small_map
    with pytest.raises(InterpretError, match="innermost coordinate 3 starts 12 bytes"):
        load_box(layout, (3, 0), memory, 0)
    load_box(layout, (-16, -3), memory, 0)


@pytest.mark.parametrize("call", [load_box, lambda l, c, m, o: store_box(l, c, m, poisoned_smem(), o)])
def test_copies_refuse_a_shared_address_that_is_not_128_byte_aligned(small_map, call):
    memory, layout = small_map
    with pytest.raises(InterpretError, match="not 128-byte aligned"):
        call(layout, (0, 0), memory, 64)


def test_wrong_coordinate_count_is_refused(small_map):
    memory, layout = small_map
    with pytest.raises(InterpretError, match="rank 2 but 3 coordinates"):
        load_box(layout, (0, 0, 0), memory, 0)


def test_a_tensor_map_larger_than_its_allocation_is_an_error():
    memory = ArrayMemory()
    source = np.zeros((4, 16), np.float32)
    address = memory.add(source, "small")
    layout = validate_tensormap((64, 16), (64, 4), dtypes.Float32, address, (8, 16))
    with pytest.raises(InterpretError, match="leave 'small'"):
        load_box(layout, (0, 0), memory, 0)


def test_an_image_beyond_the_ctas_shared_memory_is_an_error(small_map):
    memory, layout = small_map
    image = load_box(layout, (0, 0), memory, 1024)
    with pytest.raises(InterpretError, match="only 1024 bytes"):
        image.write_into(np.zeros(1024, np.uint8))


def test_interleaved_maps_are_refused_by_name():
    memory = ArrayMemory()
    source = np.zeros((4, 8, 16), np.uint16)
    layout = layout_of(memory, source, source.shape, dtypes.BFloat16, (1, 8, 16), interleave="16B")
    with pytest.raises(InterpretError, match="interleave='16B'"):
        load_box(layout, (0, 0, 0), memory, 0)


def test_swizzle_is_an_involution():
    addresses = np.arange(0, 8192, 16)
    for swizzle in ("none", "32B", "64B", "128B"):
        np.testing.assert_array_equal(swizzle_addresses(swizzle_addresses(addresses, swizzle), swizzle), addresses)


def test_a_store_reads_shared_memory_at_issue_and_writes_global_memory_at_completion():
    memory = ArrayMemory()
    destination = np.zeros((8, 16), np.float32)
    layout = layout_of(memory, destination, destination.shape, dtypes.Float32, (8, 16), swizzle="64B")
    smem = poisoned_smem()
    smem[:512] = np.arange(128, dtype=np.float32).view(np.uint8)
    pending = prepare_store(layout, (0, 0), memory, smem, 0)
    smem[:512] = 0                                              # the buffer is reused before the wait
    assert (destination == 0).all() and pending.source == (0, 512)
    pending.write()
    tile = np.arange(128, dtype=np.float32).reshape(8, 16)
    unswizzled = np.empty_like(tile)                            # 64B: chunk c of row r (64 bytes) at c ^ (r // 2 % 4)
    for r in range(8):
        for c in range(4):
            physical = c ^ ((r * 64 >> 7) & 3)
            unswizzled[r, 4 * c:4 * c + 4] = tile[r, 4 * physical:4 * physical + 4]
    np.testing.assert_array_equal(destination, unswizzled)
