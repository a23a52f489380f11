"""The staging copies of tsjit.ops.matmul (tsjit/ops/staging.py): the 16-byte vector copy into rows
padded to 16 or 128 bytes and the element-by-element fallback move every element, leave the padding
alone and take the path their layouts allow (on the GPU, or the CPU interpreter)."""
import numpy as np
import pytest

from tsjit.lang import dtypes
from tsjit.ops import staging
from tsjit.runtime import arrays
from tsjit.runtime.arrays import DeviceArray


def _source(rng, batch, rows, width, cols, dtype=np.int16):
    host = rng.integers(-30000, 30000, size=(batch, rows, width)).astype(dtype)
    device = arrays.to_device(host)
    view = DeviceArray((batch, rows, cols), dtypes.Int16, strides=(rows * width, width, 1),
                       data_ptr=device.data_ptr, owner=device)
    return host[:, :, :cols], view


@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("batch, rows, width, cols, align", [(1, 5, 1000, 1000, 128), (2, 3, 72, 64, 16),
                                                              (1, 7, 24, 16, 128), (1, 1, 8, 8, 128)])
def test_vector_copy_into_padded_rows(batch, rows, width, cols, align):
    rng = np.random.default_rng()
    expected, source = _source(rng, batch, rows, width, cols)
    target = staging.staging_buffer(dtypes.Int16, batch, rows, cols, align=align)
    padded = target.strides[1]
    assert padded * 2 % align == 0 and padded >= cols
    whole = DeviceArray((batch * rows * padded,), dtypes.Int16, data_ptr=target.data_ptr)
    whole.copy_from(np.full(batch * rows * padded, 0x5A5A, dtype=np.int16))     # poisoned, padding included
    assert staging.vector_copyable(source) and staging.vector_copyable(target)
    launch = staging.copy_launch(source, target)
    launch(0)
    got = whole.numpy().reshape(batch, rows, padded)
    assert np.array_equal(got[:, :, :cols], expected)
    assert (got[:, :, cols:] == 0x5A5A).all()                  # nothing past a row's end is written


@pytest.mark.gpu_or_interpret
def test_unaligned_rows_fall_back_to_the_element_copy():
    rng = np.random.default_rng()
    expected, source = _source(rng, 1, 6, 777, 777)            # 1554-byte rows: no 16-byte vectors
    assert not staging.vector_copyable(source)
    target = staging.staging_buffer(dtypes.Int16, 1, 6, 777)
    assert target.strides[1] == 784
    staging.copy_launch(source, target)(0)
    whole = DeviceArray((6 * 784,), dtypes.Int16, data_ptr=target.data_ptr).numpy().reshape(6, 784)
    assert np.array_equal(whole[None, :, :777], expected)


def test_vector_copy_compiles_for_sm90a_with_16_byte_accesses_and_no_spills():
    import tsjit
    src = tsjit.spec((1, 3000, 1000), dtypes.BFloat16, strides=(3000000, 1000, 1))
    dst = tsjit.spec((1, 3000, 1000), dtypes.BFloat16, strides=(3072000, 1024, 1))
    k = tsjit.compile(staging.copy_rows, src, dst, 3000, 1000, 3000, 8, target="sm_90a")
    assert "ld.global.v4" in k.ptx and "st.global.v4" in k.ptx
    assert k.metadata["spill_stores_bytes"] == 0 and k.metadata["spill_loads_bytes"] == 0
