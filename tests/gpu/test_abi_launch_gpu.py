"""GPU (and the CPU interpreter): a kernel reads back every argument kind exactly as the host packed it (issue 11 §1).

``echo`` stores each run-time scalar, the extents and strides of a strided array and one element
of it, so any disagreement between the host packing (:mod:`tsjit.abi`) and the kernel's
parameters shows up as a wrong number.  Launched twice with fresh values under one argument
signature (the second launch takes the warm path: only pointers and scalars are repacked).
Outputs are poisoned before each launch.
"""
import numpy as np
import pytest

import tsjit

pytestmark = pytest.mark.gpu_or_interpret  # also under the CPU interpreter (same values)


@tsjit.kernel
def echo(ints, floats, a, flag: tsjit.Boolean, i8: tsjit.Int8, i16: tsjit.Int16, n: tsjit.Int32,
         big: tsjit.Int64, u8: tsjit.Uint8, u16: tsjit.Uint16, u32: tsjit.Uint32, u64: tsjit.Uint64,
         x: tsjit.Float32, y: tsjit.Float64):
    if tsjit.thread_idx().x == 0:
        ints[0] = flag
        ints[1] = i8
        ints[2] = i16
        ints[3] = n
        ints[4] = big
        ints[5] = u8
        ints[6] = u16
        ints[7] = u32
        ints[8] = u64
        ints[9] = a.shape[0]
        ints[10] = a.shape[1]
        ints[11] = a.shape[2]
        ints[12] = a.strides[0]
        ints[13] = a.strides[1]
        ints[14] = a.strides[2]
        floats[0] = x
        floats[1] = y
        floats[2] = a[1, 2, 3]


def _scalars(rng):
    return [bool(rng.integers(2)), int(rng.integers(-128, 128)), int(rng.integers(-2 ** 15, 2 ** 15)),
            int(rng.integers(-2 ** 31, 2 ** 31)), int(rng.integers(-2 ** 62, 2 ** 62)), int(rng.integers(0, 256)),
            int(rng.integers(0, 2 ** 16)), int(rng.integers(0, 2 ** 32)), int(rng.integers(0, 2 ** 63)) * 2 + 1,
            float(np.float32(rng.standard_normal())), float(rng.standard_normal())]


def test_every_argument_kind_arrives_as_packed():
    rng = np.random.default_rng()
    base = rng.standard_normal((4, 6, 10)).astype(np.float32)
    host = base[:, ::2, 1:9]          # strides (60, 20, 1) in elements, shape (4, 3, 8)
    device = tsjit.to_device(np.ascontiguousarray(base))
    a = tsjit.DeviceArray(host.shape, tsjit.Float32, strides=(60, 20, 1), data_ptr=device.data_ptr + 4,
                          owner=device)
    for _ in range(2):
        scalars = _scalars(rng)
        ints = tsjit.to_device(np.full(15, -7777, np.int64))
        floats = tsjit.to_device(np.full(3, np.nan))
        echo[1, 32](ints, floats, a, *scalars)
        got_ints, got_floats = ints.numpy(), floats.numpy()
        want_ints = [int(scalars[0]), *scalars[1:8], scalars[8] - (2 ** 64 if scalars[8] >= 2 ** 63 else 0), 4, 3, 8, 60, 20, 1]
        assert got_ints.tolist() == want_ints
        assert got_floats[0] == np.float32(scalars[9]) and got_floats[1] == scalars[10]
        assert got_floats[2] == host[1, 2, 3]
