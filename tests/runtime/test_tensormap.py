"""tsjit.runtime.tensormap: every cuTensorMapEncodeTiled rule, checked before the driver."""
import numpy as np
import pytest

from tsjit.errors import LaunchError
from tsjit.lang import dtypes
from tsjit.runtime.tensormap import validate_tensormap

BASE = 0x7F0000000000


def layout(**overrides):
    """A valid 2-D bf16 (256 x 512) row-major tensor with a (64, 64) box, then ``overrides``."""
    args = dict(shape=(256, 512), strides_bytes=(1024, 2), dtype=dtypes.BFloat16, base_ptr=BASE,
                box_shape=(64, 64))
    args.update(overrides)
    return validate_tensormap(**args)


def assert_rejected(field: str, **overrides):
    with pytest.raises(LaunchError) as info:
        layout(**overrides)
    assert f"'{field}" in str(info.value), str(info.value)


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


def test_rank_bounds():
    layout(shape=(512,), strides_bytes=(2,), box_shape=(64,))
    layout(shape=(2,) * 4 + (64,), strides_bytes=(2048, 1024, 512, 128, 2), box_shape=(1, 1, 1, 1, 64))
    assert_rejected("rank", shape=(2,) * 5 + (64,), strides_bytes=(4096, 2048, 1024, 512, 128, 2),
                    box_shape=(1,) * 5 + (64,))
    assert_rejected("rank", shape=(), strides_bytes=(), box_shape=())


def test_entries_per_dimension_must_match_rank():
    assert_rejected("strides_bytes", strides_bytes=(2,))
    assert_rejected("box_shape", box_shape=(64,))
    assert_rejected("element_strides", element_strides=(1,))


def test_supported_and_unsupported_dtypes():
    layout(dtype=dtypes.Float16)
    layout(dtype=dtypes.Int8, strides_bytes=(512, 1))
    assert_rejected("dtype", dtype="complex64")


def test_base_address_alignment():
    layout(base_ptr=BASE + 16)
    assert_rejected("base_ptr", base_ptr=BASE + 8)


def test_base_address_needs_32_bytes_with_32b_interleave():
    interleaved = dict(shape=(4, 8, 16), strides_bytes=(256, 32, 2), box_shape=(1, 8, 16), interleave="32B",
                       swizzle="32B")
    layout(**interleaved)
    assert_rejected("base_ptr", base_ptr=BASE + 16, **interleaved)


def test_global_extent_bounds():
    layout(shape=(2 ** 20, 512))
    assert_rejected("shape[0]", shape=(0, 512))


def test_outer_strides_are_multiples_of_16_below_2_pow_40():
    layout(strides_bytes=(1040, 2))
    assert_rejected("strides_bytes[0]", strides_bytes=(1000, 2))
    assert_rejected("strides_bytes[0]", strides_bytes=(2 ** 40, 2))
    assert_rejected("strides_bytes[0]", strides_bytes=(0, 2))


def test_outer_strides_are_multiples_of_32_with_32b_interleave():
    interleaved = dict(shape=(4, 8, 16), box_shape=(1, 8, 16), interleave="32B", swizzle="32B")
    layout(strides_bytes=(256, 32, 2), **interleaved)
    assert_rejected("strides_bytes[0]", strides_bytes=(272, 32, 2), **interleaved)


def test_innermost_stride_must_be_the_element_size():
    assert_rejected("strides_bytes[1]", strides_bytes=(1024, 4))


def test_box_extent_bounds():
    layout(box_shape=(256, 64))
    assert_rejected("box_shape[0]", box_shape=(257, 64))
    assert_rejected("box_shape[0]", box_shape=(0, 64))


def test_innermost_box_row_is_a_multiple_of_16_bytes():
    layout(box_shape=(64, 8))  # 8 x 2 bytes = 16
    assert_rejected("box_shape[1]", box_shape=(64, 12))  # 24 bytes


@pytest.mark.parametrize("swizzle, widest", [("32B", 16), ("64B", 32), ("128B", 64)])
def test_swizzle_bounds_the_innermost_box_row(swizzle, widest):
    layout(swizzle=swizzle, box_shape=(64, widest))
    assert_rejected("box_shape[1]", swizzle=swizzle, box_shape=(64, widest * 2))


def test_32b_interleave_needs_32b_swizzle_and_rank_3():
    interleaved = dict(shape=(4, 8, 16), strides_bytes=(256, 32, 2), box_shape=(1, 8, 16), interleave="32B")
    assert_rejected("swizzle", swizzle="128B", **interleaved)
    assert_rejected("rank", interleave="16B")


def test_element_stride_bounds():
    layout(element_strides=(8, 1))
    assert_rejected("element_strides[0]", element_strides=(9, 1))
    assert_rejected("element_strides[1]", element_strides=(1, 0))


def test_nan_fill_only_for_floats():
    layout(oob_fill="nan")
    assert_rejected("oob_fill", oob_fill="nan", dtype=dtypes.Int16)


@pytest.mark.parametrize("field, value", [("swizzle", "256B"), ("l2_promotion", "32B"), ("oob_fill", "one"),
                                          ("interleave", "8B")])
def test_option_names_are_checked(field, value):
    assert_rejected(field, **{field: value})


def test_tensor_map_of_a_host_array_is_rejected_before_the_driver():
    from tsjit.runtime.tensormap import TensorMap

    with pytest.raises(LaunchError, match="'array'.*to_device"):
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


@pytest.mark.gpu
def test_descriptor_loads_the_right_tile_on_the_gpu():
    import ctypes

    from tsjit.runtime import arrays, driver
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
    driver.launch(kernel, 1, 128, params, smem_bytes=1024 + tensor_map.box_bytes)
    driver.synchronize()
    assert np.array_equal(out.numpy(), host[16:32, 32:64])
