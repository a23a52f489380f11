"""tsjit.runtime.tensormap: every cuTensorMapEncodeTiled rule, checked before the driver, with
messages that describe the array and say what to change; the driver-call values built without a GPU."""
import numpy as np
import pytest

from tsjit.errors import LaunchError
from tsjit.lang import dtypes
from tsjit.runtime.tensormap import (L2_PROMOTIONS, OOB_FILLS, SWIZZLES, INTERLEAVES, TENSOR_MAP_DATA_TYPES,
                                     encode_arguments, validate_tensormap)

BASE = 0x7F0000000000


def layout(**overrides):
    """A valid 2-D bf16 (256 x 512) row-major tensor with a (64, 64) box, then ``overrides``."""
    args = dict(shape=(256, 512), strides_bytes=(1024, 2), dtype=dtypes.BFloat16, base_ptr=BASE,
                box_shape=(64, 64))
    args.update(overrides)
    return validate_tensormap(**args)


def refusal(field: str, **overrides) -> str:
    """The message of the LaunchError ``layout(**overrides)`` raises; asserts it names ``field``."""
    with pytest.raises(LaunchError) as info:
        layout(**overrides)
    message = str(info.value)
    assert f"'{field}'" in message, message
    return message


def contiguous(shape, itemsize):
    """Byte strides of a C-contiguous array."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(strides[::-1])


# ------------------------------------------------------------------ accepted layouts

def test_valid_layout_is_converted_innermost_first():
    result = layout(element_strides=(2, 1))
    assert result.global_dims == (512, 256)
    assert result.global_strides == (1024,)
    assert result.box_dims == (64, 64)
    assert result.element_strides == (1, 2)
    assert result.box_bytes == 64 * 32 * 2


def test_three_dimensional_strides_are_reversed_without_the_innermost():
    result = layout(shape=(4, 8, 64), strides_bytes=(8 * 64 * 4, 64 * 4, 4), dtype=dtypes.Float32,
                    box_shape=(2, 8, 32))
    assert result.global_dims == (64, 8, 4) and result.global_strides == (256, 2048)


BOXES = {1: (64,), 2: (8, 16), 3: (2, 4, 8), 4: (2, 2, 3, 4), 5: (2, 2, 2, 3, 4)}


@pytest.mark.parametrize("rank", sorted(BOXES))
def test_every_rank_from_1_to_5_is_accepted_and_encodable(rank):
    shape = (3, 5, 7, 9, 64)[5 - rank:]
    strides = contiguous(shape[:-1] + (64,), 4)
    result = layout(shape=shape, strides_bytes=strides, dtype=dtypes.Float32, box_shape=BOXES[rank])
    args = encode_arguments(result)
    assert args.rank == rank and args.global_dims == shape[::-1] and args.box_dims == BOXES[rank][::-1]
    assert args.global_strides == (strides[-2::-1] if rank > 1 else (256,))
    assert all(s % 16 == 0 and 0 < s < 2 ** 40 for s in args.global_strides)


@pytest.mark.parametrize("shape, dtype, stride", [((100,), dtypes.Float32, 400), ((33,), dtypes.Float16, 80),
                                                  ((64,), dtypes.Float32, 256), ((7,), dtypes.Uint8, 16)])
def test_rank_1_passes_one_valid_unused_stride_not_a_null_array(shape, dtype, stride):
    # cuTensorMapEncodeTiled answers CUDA_ERROR_INVALID_VALUE to a NULL globalStrides even for rank 1
    # (NVIDIA CCCL #1567, nvbug 4575531); cuda-bindings turns an empty list into NULL.
    result = layout(shape=shape, strides_bytes=(dtype.itemsize,), dtype=dtype, box_shape=(16,))
    assert result.global_strides == ()
    assert encode_arguments(result).global_strides == (stride,)


def test_the_issue_9_rank_1_float32_descriptor_validates():
    args = encode_arguments(layout(shape=(1000,), strides_bytes=(4,), dtype=dtypes.Float32, box_shape=(64,)))
    assert (args.data_type, args.rank, args.global_dims, args.box_dims, args.element_strides) == \
        ("FLOAT32", 1, (1000,), (64,), (1,))
    assert len(args.global_strides) == 1


def test_encode_arguments_name_real_driver_enum_members():
    cu = pytest.importorskip("cuda.bindings.driver")
    for name in TENSOR_MAP_DATA_TYPES.values():
        getattr(cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + name)
    for table, enum, prefix in ((SWIZZLES, cu.CUtensorMapSwizzle, "SWIZZLE_"),
                                (L2_PROMOTIONS, cu.CUtensorMapL2promotion, "L2_PROMOTION_"),
                                (OOB_FILLS, cu.CUtensorMapFloatOOBfill, "FLOAT_OOB_FILL_"),
                                (INTERLEAVES, cu.CUtensorMapInterleave, "INTERLEAVE_")):
        for member in table.values():
            getattr(enum, "CU_TENSOR_MAP_" + prefix + member)


def test_encode_arguments_carry_the_options():
    args = encode_arguments(layout(swizzle="128B", l2_promotion="256B", oob_fill="nan"))
    assert (args.swizzle, args.l2_promotion, args.oob_fill, args.interleave) == \
        ("128B", "L2_256B", "NAN_REQUEST_ZERO_FMA", "NONE")


def test_supported_dtypes_and_their_tma_types():
    assert encode_arguments(layout(dtype=dtypes.Float16)).data_type == "FLOAT16"
    assert encode_arguments(layout(dtype=dtypes.Int8, strides_bytes=(512, 1))).data_type == "UINT8"
    assert encode_arguments(layout(dtype=dtypes.Float8E4M3, strides_bytes=(512, 1))).data_type == "UINT8"
    assert encode_arguments(layout(dtype=dtypes.Int64, strides_bytes=(4096, 8), box_shape=(64, 16))).data_type \
        == "INT64"


def test_box_bytes_counts_the_traversed_elements():
    result = layout(box_shape=(8, 16), element_strides=(3, 1))   # ceil(8 / 3) = 3 rows of 16 bf16
    assert result.box_bytes == 3 * 16 * 2


# ------------------------------------------------------------------ refusals, one rule each

def test_every_refusal_describes_the_array():
    message = refusal("box_shape[0]", box_shape=(300, 64))
    assert message.startswith(f"TensorMap of the (256, 512) BFloat16 array (byte strides (1024, 2), at 0x{BASE:x})")
    assert "\n  " in message  # what to change, on its own line


def test_rank_0_and_rank_6_are_refused_with_what_to_do():
    assert "reshape" in refusal("rank", shape=(), strides_bytes=(), box_shape=())
    message = refusal("rank", shape=(2,) * 5 + (64,), strides_bytes=(4096, 2048, 1024, 512, 128, 2),
                      box_shape=(1,) * 5 + (64,))
    assert "is 6" in message and "1 to 5" in message and "Merge" in message


def test_interleave_needs_rank_3():
    message = refusal("rank", interleave="16B")
    assert "interleave='16B'" in message and "rank >= 3" in message


def test_entries_per_dimension_must_match_rank():
    assert "Give 2" in refusal("strides_bytes", strides_bytes=(2,))
    assert "has 1 entries (64,)" in refusal("box_shape", box_shape=(64,))
    assert "Give 2" in refusal("element_strides", element_strides=(1,))


def test_dtype_without_a_tma_type_is_refused():
    message = refusal("dtype", dtype="complex64")
    assert "complex64" in message and "Float32" in message


def test_null_base_address_is_refused():
    assert "no device memory" in refusal("base_ptr", base_ptr=0)


def test_base_address_must_be_16_byte_aligned():
    layout(base_ptr=BASE + 16)
    message = refusal("base_ptr", base_ptr=BASE + 6)
    assert "6 bytes past a 16-byte boundary" in message and "multiple of 8 elements" in message
    assert f"0x{BASE + 6:x}" in message


INTERLEAVED = dict(shape=(4, 8, 16), strides_bytes=(256, 32, 2), box_shape=(1, 8, 16), interleave="32B",
                   swizzle="32B")


def test_base_address_must_be_32_byte_aligned_with_32b_interleave():
    layout(**INTERLEAVED)
    message = refusal("base_ptr", **{**INTERLEAVED, "base_ptr": BASE + 16})
    assert "16 bytes past a 32-byte boundary" in message and "interleave='32B'" in message


def test_global_extents_are_1_to_2_pow_32():
    layout(shape=(2 ** 32, 512), strides_bytes=(1024, 2))
    assert "at least one element" in refusal("shape[0]", shape=(0, 512))
    assert "Split dimension 0" in refusal("shape[0]", shape=(2 ** 32 + 1, 512))


def test_rows_not_a_multiple_of_16_bytes_say_how_to_pad():
    message = refusal("strides_bytes[0]", shape=(100, 33), strides_bytes=(66, 2), dtype=dtypes.Float16,
                      box_shape=(16, 16))
    assert "(100, 33) Float16 array (byte strides (66, 2)" in message
    assert "rows of 66 bytes" in message and "multiple of 16" in message
    assert "allocate (100, 40) and pass the (100, 33) view" in message and "x[:, :33]" in message
    assert "(40, 1)" in message


def test_padding_advice_names_the_dimension_to_pad_in_rank_3():
    message = refusal("strides_bytes[1]", shape=(4, 5, 7), strides_bytes=contiguous((4, 5, 7), 4),
                      dtype=dtypes.Float32, box_shape=(1, 1, 4))
    assert "rows of 28 bytes" in message
    assert "allocate (4, 5, 8) and pass the (4, 5, 7) view" in message and "x[:, :, :7]" in message


def test_a_strided_view_gets_the_next_valid_stride():
    message = refusal("strides_bytes[0]", shape=(10, 8), strides_bytes=(40, 4), dtype=dtypes.Float32,
                      box_shape=(4, 4))
    assert "is 40" in message and "e.g. 48" in message


def test_outer_strides_are_positive_and_below_2_pow_40():
    layout(shape=(2, 512), strides_bytes=(2 ** 40 - 16, 2))
    assert "2**40" in refusal("strides_bytes[0]", strides_bytes=(2 ** 40, 2))
    assert "positive" in refusal("strides_bytes[0]", strides_bytes=(0, 2))
    assert "positive" in refusal("strides_bytes[0]", strides_bytes=(-1024, 2))


def test_the_innermost_bad_stride_is_reported_first():
    message = refusal("strides_bytes[1]", shape=(3, 5, 7), strides_bytes=(1000, 28, 4), dtype=dtypes.Float32,
                      box_shape=(1, 1, 4))
    assert "is 28" in message


def test_innermost_stride_must_be_the_element_size():
    message = refusal("strides_bytes[1]", strides_bytes=(2, 512))   # a transposed view
    assert "innermost" in message and "C-contiguous" in message and "is 512" in message


def test_outer_strides_are_multiples_of_32_with_32b_interleave():
    message = refusal("strides_bytes[0]", **{**INTERLEAVED, "strides_bytes": (272, 32, 2)})
    assert "multiple of 32" in message and "interleave='32B'" in message


def test_box_extents_are_1_to_256():
    layout(box_shape=(256, 64))
    assert "1 to 256" in refusal("box_shape[0]", box_shape=(257, 64))
    assert "is 0" in refusal("box_shape[0]", box_shape=(0, 64))


def test_innermost_box_row_is_a_multiple_of_16_bytes():
    layout(box_shape=(64, 8))  # 8 x 2 bytes = 16
    message = refusal("box_shape[1]", box_shape=(64, 12))
    assert "12 x 2 = 24 bytes" in message and "multiple of 8 elements" in message and "box_shape[1]=16" in message


def test_float64_box_rows_need_an_even_count():
    message = refusal("box_shape[0]", shape=(100,), strides_bytes=(8,), dtype=dtypes.Float64, box_shape=(3,))
    assert "multiple of 2 elements" in message and "box_shape[0]=4" in message


@pytest.mark.parametrize("swizzle, widest, wider", [("32B", 16, "'64B'"), ("64B", 32, "'128B'"),
                                                    ("128B", 64, "several copies")])
def test_swizzle_bounds_the_innermost_box_row(swizzle, widest, wider):
    layout(swizzle=swizzle, box_shape=(64, widest))
    message = refusal("box_shape[1]", swizzle=swizzle, box_shape=(64, widest * 2))
    assert f"{widest * 4} bytes" in message and f"{widest * 2}-byte span" in message
    assert f"box_shape[1] <= {widest}" in message and wider in message


def test_32b_interleave_needs_32b_swizzle():
    message = refusal("swizzle", **{**INTERLEAVED, "swizzle": "128B"})
    assert "swizzle='32B'" in message


def test_element_strides_are_1_to_8_and_the_innermost_is_1():
    layout(element_strides=(8, 1))
    assert "1 to 8" in refusal("element_strides[0]", element_strides=(9, 1))
    assert "is 0" in refusal("element_strides[0]", element_strides=(0, 1))
    assert "innermost" in refusal("element_strides[1]", element_strides=(1, 2))


@pytest.mark.parametrize("dtype", [dtypes.Float16, dtypes.BFloat16, dtypes.Float32, dtypes.Float64])
def test_nan_fill_is_accepted_for_float_tma_types(dtype):
    itemsize = dtype.itemsize
    layout(oob_fill="nan", dtype=dtype, strides_bytes=(512 * itemsize, itemsize), box_shape=(64, 16))


@pytest.mark.parametrize("dtype, tma_type", [(dtypes.Int16, "UINT16"), (dtypes.Int32, "INT32"),
                                             (dtypes.Float8E4M3, "UINT8"), (dtypes.Boolean, "UINT8")])
def test_nan_fill_is_refused_for_other_types(dtype, tma_type):
    itemsize = dtype.itemsize
    message = refusal("oob_fill", oob_fill="nan", dtype=dtype, strides_bytes=(512 * itemsize, itemsize),
                      box_shape=(64, 16))
    assert f"{dtype.name} as {tma_type}" in message and "oob_fill='zero'" in message


@pytest.mark.parametrize("field, value", [("swizzle", "256B"), ("l2_promotion", "32B"), ("oob_fill", "one"),
                                          ("interleave", "8B")])
def test_option_names_are_checked(field, value):
    message = refusal(field, **{field: value})
    assert repr(value) in message and "Pass one of" in message


def test_tensor_map_of_a_host_array_is_rejected_before_the_driver(monkeypatch):
    """With a GPU present (stood in for here) and TSJIT_INTERPRET unset; without a GPU a host array
    gets an interpreter descriptor (tests/interpret/test_interpret_host_tensormap.py)."""
    from tsjit.runtime import driver
    from tsjit.runtime.tensormap import TensorMap

    monkeypatch.delenv("TSJIT_INTERPRET", raising=False)
    monkeypatch.setattr(driver, "gpu_available", lambda: True)
    with pytest.raises(LaunchError, match="(?s)'array'.*to_device"):
        TensorMap(np.zeros((64, 64), dtype=np.float32), (16, 16))


# ------------------------------------------------------------------------- GPU

TMA_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry tma_tile(.param .align 128 .b8 tmap[128], .param .u64 out, .param .u32 col,
                         .param .u32 row, .param .u32 count, .param .u32 nbytes)
{
  .reg .pred %p<3>; .reg .b32 %r<16>; .reg .b64 %rd<10>; .reg .f32 %f<2>;
  mov.u64 %rd1, tmap;
  cvta.param.u64 %rd2, %rd1;
  ld.param.u64 %rd3, [out];
  cvta.to.global.u64 %rd3, %rd3;
  ld.param.u32 %r1, [col];
  ld.param.u32 %r2, [row];
  ld.param.u32 %r3, [count];
  ld.param.u32 %r4, [nbytes];
  mov.u32 %r5, smem;
  add.u32 %r6, %r5, 1024;
  mov.u32 %r7, %tid.x;
  setp.eq.u32 %p1, %r7, 0;
  @%p1 mbarrier.init.shared.b64 [%r5], 1;
  @%p1 fence.mbarrier_init.release.cluster;
  bar.sync 0;
  @%p1 mbarrier.arrive.expect_tx.shared.b64 %rd4, [%r5], %r4;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd2, {%r1, %r2}], [%r5];
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p2, [%r5], 0;
  @!%p2 bra WAIT;
  mov.u32 %r8, %ntid.x;
LOOP:
  setp.ge.u32 %p2, %r7, %r3;
  @%p2 bra DONE;
  shl.b32 %r9, %r7, 2;
  add.u32 %r10, %r6, %r9;
  ld.shared.f32 %f1, [%r10];
  mul.wide.u32 %rd5, %r7, 4;
  add.s64 %rd6, %rd3, %rd5;
  st.global.f32 [%rd6], %f1;
  add.u32 %r7, %r7, %r8;
  bra LOOP;
DONE:
  ret;
}
"""


@pytest.mark.gpu(reason="needs a GPU and libcuda.so: runs the driver's cuTensorMapEncodeTiled descriptor bytes in "
                        "hand-written PTX (cuModuleLoadData); the interpreter's TensorMap is a layout handle, not "
                        "the driver's encoding")
def test_descriptor_loads_the_right_tile_on_the_gpu():
    import ctypes

    from tsjit.runtime import arrays, driver, launch_config
    from tsjit.runtime.tensormap import TensorMap

    host = np.random.default_rng().standard_normal((64, 96)).astype(np.float32)
    source = arrays.to_device(host)
    tensor_map = TensorMap(source, (16, 32), l2_promotion="128B")
    assert len(tensor_map.descriptor_bytes) == 128 and tensor_map.box_bytes == 16 * 32 * 4
    assert bytes(tensor_map.parameter()) == tensor_map.descriptor_bytes
    assert tensor_map.spec().key() == ("M", "Float32", (16, 32), 2, "none")
    out = arrays.empty((16, 32), dtypes.Float32).fill_bytes(0xFF)
    kernel = driver.load_module(TMA_PTX.encode()).get_function("tma_tile")
    values = [ctypes.c_uint64(out.data_ptr), ctypes.c_uint32(32), ctypes.c_uint32(16), ctypes.c_uint32(16 * 32),
              ctypes.c_uint32(tensor_map.box_bytes)]
    params = (ctypes.c_void_p * 6)(tensor_map.address(), *[ctypes.addressof(v) for v in values])
    launch_config.launch(kernel, 1, 128, params, smem_bytes=1024 + tensor_map.box_bytes)
    driver.synchronize()
    assert np.array_equal(out.numpy(), host[16:32, 32:64])


# ------------------------------------------------------------------ tensormap_spec: the same box rules at compile time

@pytest.mark.parametrize("dtype, box, swizzle, field", [
    (dtypes.Float32, (32, 300), "none", "box_shape[1]"),        # extent over 256
    (dtypes.Float32, (300, 32), "none", "box_shape[0]"),
    (dtypes.Float32, (32, 3), "none", "box_shape[1]"),          # a 12-byte row
    (dtypes.BFloat16, (64, 128), "128B", "box_shape[1]"),       # 256-byte row > the 128-byte swizzle span
    (dtypes.Float32, (64, 64), "16B", "swizzle"),
])
def test_tensormap_spec_refuses_what_a_tensormap_refuses(dtype, box, swizzle, field):
    import tsjit
    from tsjit.errors import UsageValueError
    rows, cols = 512, 512
    with pytest.raises(LaunchError) as on_gpu:
        validate_tensormap((rows, cols), (cols * dtype.itemsize, dtype.itemsize), dtype, BASE, box, swizzle=swizzle)
    with pytest.raises(UsageValueError) as at_compile:
        tsjit.tensormap_spec(dtype, box, swizzle=swizzle)
    message = str(at_compile.value)
    assert message.startswith(f"tensormap_spec({dtype.name}, box_shape={box}): '{field}'"), message
    # the same rule, word for word, after the subject
    assert message.split(": ", 1)[1] == str(on_gpu.value).split(": ", 1)[1]


def test_tensormap_spec_refuses_bad_element_strides_and_accepts_valid_boxes():
    import tsjit
    from tsjit.errors import UsageValueError
    with pytest.raises(UsageValueError, match=r"'element_strides\[1\]' \(innermost\) is 2"):
        tsjit.tensormap_spec(dtypes.Float32, (8, 8), element_strides=(1, 2))
    with pytest.raises(UsageValueError, match="'element_strides' has 1 entries"):
        tsjit.tensormap_spec(dtypes.Float32, (8, 8), element_strides=(1,))
    spec = tsjit.tensormap_spec(dtypes.BFloat16, (256, 64), swizzle="128B", element_strides=(2, 1))
    assert (spec.box_shape, spec.element_strides, spec.rank) == ((256, 64), (2, 1), 2)
    assert tsjit.tensormap_spec(dtypes.Float32, (4,)).element_strides is None
