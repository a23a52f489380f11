"""``tsjit.ops.matmul`` refuses an ``out`` that is one of its inputs (it would read tiles it had overwritten: a
silently wrong product), and still writes into a slice of a buffer whose other slice is the input (disjoint
memory, the fused-projection layout).  On the GPU and on the CPU interpreter."""
import numpy as np
import pytest

import tsjit
from tsjit.runtime.arrays import DeviceArray

pytestmark = pytest.mark.gpu_or_interpret


def _random(shape, rng):
    return rng.standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("aliased", ["a", "b"])
def test_out_that_is_an_input_is_refused_naming_it(aliased):
    rng = np.random.default_rng()
    a, b = tsjit.to_device(_random((64, 64), rng)), tsjit.to_device(_random((64, 64), rng))
    with pytest.raises(tsjit.LaunchError) as err:
        tsjit.ops.matmul(a, b, out=a if aliased == "a" else b)
    assert f"argument 'out' is the memory of argument '{aliased}'" in str(err.value)


def test_out_in_another_slice_of_the_inputs_buffer_is_written():
    rng = np.random.default_rng()
    host = _random((64, 96), rng)                   # columns 0-31: a (64 x 32); columns 32-95: out (64 x 64)
    buffer = tsjit.to_device(host)
    a = DeviceArray((64, 32), tsjit.Float16, strides=(96, 1), data_ptr=buffer.data_ptr, owner=buffer)
    out = DeviceArray((64, 64), tsjit.Float16, strides=(96, 1), data_ptr=buffer.data_ptr + 32 * 2, owner=buffer)
    b_host = _random((32, 64), rng)
    tsjit.ops.matmul(a, tsjit.to_device(b_host), out=out)
    expected = host[:, :32].astype(np.float64) @ b_host.astype(np.float64)
    result = buffer.numpy()
    assert np.array_equal(result[:, :32], host[:, :32]), "the input slice must be left alone"
    rounding = np.abs(expected.astype(np.float16).astype(np.float64) - expected).max()
    assert np.abs(result[:, 32:].astype(np.float64) - expected).max() <= 2 * rounding


def test_placeholders_are_kept_apart_for_the_gpu_and_the_interpreter(monkeypatch):
    """A process may launch on the GPU, then under TSJIT_INTERPRET=1: the interpreter cannot read a placeholder
    (absent bias, ...) made in GPU memory, so each mode has its own."""
    from tsjit.ops import device_buffers
    monkeypatch.setattr(device_buffers, "_DUMMY", {})
    made = []
    monkeypatch.setattr(device_buffers.tsjit, "zeros", lambda shape, dtype: made.append(shape) or object())
    for interpreted in ("0", "1", "0", "1"):
        monkeypatch.setenv("TSJIT_INTERPRET", interpreted)
        device_buffers.dummy_array(1)
    assert made == [(1,), (1,)] and set(device_buffers._DUMMY) == {(1, False), (1, True)}


@pytest.mark.parametrize("offset", [64, 32])
def test_out_overlapping_the_inputs_slice_is_refused(offset):
    """a = columns 0-127 of a buffer, out = columns offset..offset+255 of it: the 128 x 256 product's later tiles
    read columns of a that earlier tiles had overwritten (the interpreter gave errors of 376 at offset 64)."""
    rng = np.random.default_rng()
    buffer = tsjit.to_device(_random((128, 384), rng))
    a = DeviceArray((128, 128), tsjit.Float16, strides=(384, 1), data_ptr=buffer.data_ptr, owner=buffer)
    out = DeviceArray((128, 256), tsjit.Float16, strides=(384, 1), data_ptr=buffer.data_ptr + offset * 2,
                      owner=buffer)
    with pytest.raises(tsjit.LaunchError, match="argument 'out' overlaps the memory of argument 'a'"):
        tsjit.ops.matmul(a, tsjit.to_device(_random((128, 256), rng)), out=out)
