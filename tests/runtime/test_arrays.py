"""tsjit.runtime.arrays: specs, the argument adapter, bfloat16 conversion, device arrays."""
from fractions import Fraction

import numpy as np
import pytest

import tsjit

from tsjit.errors import LaunchError, TsjitError
from tsjit.lang import dtypes
from tsjit.runtime import arrays
from tsjit.runtime.arrays import (ArraySpec, DeviceArray, bfloat16_bits_to_float32, describe_array_argument,
                                  float_to_bfloat16_bits, spec, spec_from_object)


# ------------------------------------------------------------------ dtypes, specs

@pytest.mark.parametrize("value, expected", [
    (dtypes.Float32, dtypes.Float32), ("Float32", dtypes.Float32), ("float32", dtypes.Float32),
    (np.float16, dtypes.Float16), ("bfloat16", dtypes.BFloat16), ("torch.bfloat16", dtypes.BFloat16),
    ("torch.int64", dtypes.Int64), ("half", dtypes.Float16), (np.dtype("uint8"), dtypes.Uint8),
    ("bool", dtypes.Boolean),
])
def test_resolve_dtype_accepts_tsjit_numpy_and_torch_names(value, expected):
    assert arrays.resolve_dtype(value) is expected


def test_resolve_dtype_rejects_unknown_names_naming_the_field():
    with pytest.raises(TsjitError, match="dtype 'complex64'"):
        arrays.resolve_dtype("complex64")


def test_spec_defaults_to_c_contiguous_16_byte_aligned():
    s = spec((4, 8, 16), dtypes.BFloat16)
    assert s == ArraySpec((4, 8, 16), dtypes.BFloat16, (128, 16, 1), 16)


def test_spec_with_strides_and_alignment():
    s = spec((3, 5), "float32", strides=(1, 3), align=128)
    assert s.strides == (1, 3) and s.align == 128 and s.dtype is dtypes.Float32


@pytest.mark.parametrize("kwargs, field", [
    ({"shape": (2, -1), "dtype": dtypes.Int32}, "shape"),
    ({"shape": "abc", "dtype": dtypes.Int32}, "shape"),
    ({"shape": (2, 3), "dtype": "complex128"}, "dtype"),
    ({"shape": (2, 3), "dtype": dtypes.Int32, "strides": (1,)}, "strides"),
    ({"shape": (2, 3), "dtype": dtypes.Int32, "align": 24}, "align"),
])
def test_spec_rejects_bad_fields(kwargs, field):
    with pytest.raises(TsjitError, match=field):
        spec(**kwargs)


def test_numpy_array_stands_for_a_spec():
    s = spec_from_object(np.zeros((6, 10), dtype=np.float16))
    assert s == ArraySpec((6, 10), dtypes.Float16, (10, 1), 16)


def test_spec_passes_through_and_non_arrays_are_rejected():
    s = spec(7, dtypes.Int8)
    assert spec_from_object(s) is s
    with pytest.raises(TsjitError, match="'x'"):
        spec_from_object(3.5, name="'x'")


def test_spec_from_a_device_object_caps_alignment_at_16():
    assert spec_from_object(FakeCai((4,), "<f4", address=0x10000)).align == 16
    assert spec_from_object(FakeCai((4,), "<f4", address=0x10004)).align == 4


# --------------------------------------------------------------- argument adapter

class FakeCai:
    """A cupy/numba-like object exposing __cuda_array_interface__ v3."""

    def __init__(self, shape, typestr, strides=None, address=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (address, False), "version": 3}


class FakeTorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class FakeTorchTensor:
    """Duck-typed like torch.Tensor; its __cuda_array_interface__ refuses bfloat16 as torch's does."""

    def __init__(self, shape, strides, dtype_name, is_cuda=True, address=0x7F0000001000):
        self.shape, self._strides, self.dtype = shape, strides, FakeTorchDtype(dtype_name)
        self.is_cuda, self._address = is_cuda, address

    def data_ptr(self):
        return self._address

    def stride(self):
        return self._strides

    @property
    def __cuda_array_interface__(self):
        raise TypeError("Got unsupported ScalarType BFloat16")


class FakeCudaDlpack:
    """Reports a CUDA device but hands out a numpy capsule: exercises the capsule parsing."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0)


def test_host_numpy_array_is_described_as_host():
    host = np.zeros((3, 4), dtype=np.float32)
    arg = describe_array_argument(host)
    assert arg.device_kind == "host"
    assert arg.shape == (3, 4) and arg.strides == (4, 1) and arg.dtype is dtypes.Float32
    assert arg.data_ptr == host.ctypes.data


def test_cuda_array_interface_contiguous():
    arg = describe_array_argument(FakeCai((2, 3), "<f2", address=0x7F0000000100))
    assert (arg.device_kind, arg.shape, arg.strides, arg.dtype) == ("cuda", (2, 3), (3, 1), dtypes.Float16)
    assert arg.data_ptr == 0x7F0000000100 and arg.alignment == 256 and arg.is_c_contiguous


def test_cuda_array_interface_byte_strides_become_element_strides():
    arg = describe_array_argument(FakeCai((4, 5), "<i4", strides=(4, 32)))
    assert arg.strides == (1, 8) and not arg.is_c_contiguous


def test_cuda_array_interface_odd_byte_strides_are_rejected_naming_the_argument():
    with pytest.raises(LaunchError, match="argument 'x'.*strides"):
        describe_array_argument(FakeCai((4,), "<f4", strides=(6,)), name="argument 'x'")


def test_cuda_array_interface_unsupported_typestr_is_rejected():
    with pytest.raises(LaunchError, match="typestr"):
        describe_array_argument(FakeCai((4,), "<c8"))


def test_torch_like_bfloat16_tensor_is_read_by_duck_typing():
    arg = describe_array_argument(FakeTorchTensor((8, 16), (16, 1), "bfloat16"))
    assert (arg.device_kind, arg.dtype, arg.shape, arg.strides) == ("cuda", dtypes.BFloat16, (8, 16), (16, 1))
    assert arg.data_ptr == 0x7F0000001000


def test_torch_like_cpu_tensor_is_host():
    assert describe_array_argument(FakeTorchTensor((2,), (1,), "float32", is_cuda=False)).device_kind == "host"


def test_dlpack_capsule_on_a_cuda_device_is_parsed():
    host = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]
    arg = describe_array_argument(FakeCudaDlpack(host))
    assert (arg.device_kind, arg.dtype, arg.shape, arg.strides) == ("cuda", dtypes.Int16, (4, 3), (6, 2))
    assert arg.data_ptr == host.ctypes.data


@pytest.mark.parametrize("value", [3, 2.5, [1, 2, 3], "text", None])
def test_non_arrays_are_not_described(value):
    assert describe_array_argument(value) is None


def test_wrapped_device_array_exports_cuda_array_interface_without_a_gpu():
    array = DeviceArray((4, 8), dtypes.BFloat16, data_ptr=0x7F0000002000)
    interface = array.__cuda_array_interface__
    assert interface["shape"] == (4, 8) and interface["typestr"] == "<u2"
    assert interface["data"] == (0x7F0000002000, False) and interface["version"] == 3
    assert interface["strides"] is None
    assert describe_array_argument(array).dtype is dtypes.BFloat16
    assert array.nbytes == 64 and array.span_bytes == 64


def test_strided_device_array_reports_byte_strides_and_span():
    array = DeviceArray((4, 3), dtypes.Float32, strides=(1, 8), data_ptr=0x7F0000003000)
    assert array.__cuda_array_interface__["strides"] == (4, 32)
    assert array.span_bytes == (3 + 2 * 8 + 1) * 4


# ----------------------------------------------------------------------- bfloat16

def exact_bf16(bits: int) -> Fraction:
    return Fraction(float(bfloat16_bits_to_float32(np.array([bits], dtype=np.uint16))[0]))


def assert_nearest_even(value: float, bits: int) -> None:
    """``bits`` is the bfloat16 nearest to ``value``, ties to an even mantissa."""
    if bits & 0x7FFF == 0x7F80:  # infinity: value must be at least max + half an ulp
        limit = exact_bf16(0x7F7F) + (exact_bf16(0x7F7F) - exact_bf16(0x7F7E)) / 2
        assert abs(Fraction(value)) >= limit, (value, hex(bits))
        return
    target, chosen = Fraction(value), exact_bf16(bits)
    error = abs(target - chosen)
    for neighbour in (bits - 1, bits + 1):
        if neighbour & 0x7FFF in (0x7F80, 0xFFFF) or neighbour < 0 or neighbour & 0x8000 != bits & 0x8000:
            continue
        other = abs(target - exact_bf16(neighbour))
        assert error <= other, (value, hex(bits), hex(neighbour))
        if error == other:
            assert bits % 2 == 0, (value, hex(bits))


def test_float64_to_bfloat16_is_nearest_even_on_random_values():
    rng = np.random.default_rng()
    values = rng.standard_normal(1500) * np.exp2(rng.integers(-140, 129, 1500))
    for value, bits in zip(values, float_to_bfloat16_bits(values)):
        assert_nearest_even(float(value), int(bits))


def test_float32_to_bfloat16_is_nearest_even_on_random_values():
    rng = np.random.default_rng()
    values = (rng.standard_normal(1500) * np.exp2(rng.integers(-130, 120, 1500))).astype(np.float32)
    for value, bits in zip(values, float_to_bfloat16_bits(values)):
        assert_nearest_even(float(value), int(bits))


@pytest.mark.parametrize("value, expected", [
    (1.0 + 2.0 ** -8, 0x3F80),                  # tie between 0x3F80 and 0x3F81: even is down
    (1.0 + 3 * 2.0 ** -8, 0x3F82),              # tie between 0x3F81 and 0x3F82: even is up
    (-(1.0 + 2.0 ** -8), 0xBF80),
    (1.0 + 2.0 ** -8 + 2.0 ** -40, 0x3F81),     # float64 just above a tie: no double rounding
    (1.0 + 2.0 ** -8 - 2.0 ** -40, 0x3F80),
    (3.3895313892515355e38, 0x7F7F),            # bfloat16 max
    (1e39, 0x7F80), (-1e39, 0xFF80), (np.inf, 0x7F80), (-np.inf, 0xFF80),
    (0.0, 0x0000), (-0.0, 0x8000), (1e-50, 0x0000), (-1e-50, 0x8000),
    (2.0 ** -133, 0x0001),                       # smallest bfloat16 subnormal
])
def test_bfloat16_rounding_cases(value, expected):
    assert int(float_to_bfloat16_bits(np.array([value]))[0]) == expected
    with np.errstate(over="ignore"):
        single = np.array([value]).astype(np.float32)
    if float(single[0]) == value:  # exactly a float32 too: the float32 path must agree
        assert int(float_to_bfloat16_bits(single)[0]) == expected


def test_nan_stays_nan():
    bits = float_to_bfloat16_bits(np.array([np.nan, -np.nan]))
    assert np.isnan(bfloat16_bits_to_float32(bits)).all()


def test_every_bfloat16_value_roundtrips():
    patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    decoded = bfloat16_bits_to_float32(patterns)
    numbers = ~np.isnan(decoded)
    assert np.array_equal(float_to_bfloat16_bits(decoded[numbers]), patterns[numbers])
    assert np.array_equal(float_to_bfloat16_bits(decoded[numbers].astype(np.float64)), patterns[numbers])


def test_host_array_for_conversions():
    bits = np.array([0x3F80, 0x4000], dtype=np.uint16)
    assert arrays.host_array_for(bits, dtypes.BFloat16) is not None
    assert np.array_equal(arrays.host_array_for(bits, dtypes.BFloat16), bits)
    assert np.array_equal(arrays.host_array_for(np.array([1.0, 2.0]), dtypes.BFloat16), bits)
    assert arrays.host_array_for(np.arange(3.0), dtypes.Float32).dtype == np.float32
    with pytest.raises(TsjitError, match="Int32"):
        arrays.host_array_for(np.arange(3.0), dtypes.Int32)


def test_device_allocation_without_a_gpu_raises_launch_error():
    from tsjit.runtime import driver

    if driver.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(LaunchError, match="driver"):
        arrays.to_device(np.zeros(4, dtype=np.float32))


# ------------------------------------------- device arrays (GPU, or host memory under the interpreter)

@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int64, np.uint16, np.bool_, np.float64])
def test_to_device_numpy_roundtrip(dtype):
    rng = np.random.default_rng()
    host = (rng.standard_normal((37, 19)) * 50).astype(dtype)
    assert np.array_equal(arrays.to_device(host).numpy(), host)


@pytest.mark.gpu_or_interpret
def test_bfloat16_upload_rounds_and_download_returns_bits():
    values = np.random.default_rng().standard_normal(1000)
    device = arrays.to_device(values, dtype=dtypes.BFloat16)
    assert device.dtype is dtypes.BFloat16
    assert np.array_equal(device.numpy(), float_to_bfloat16_bits(values))


@pytest.mark.gpu_or_interpret
def test_fill_bytes_copy_from_and_zeros():
    device = arrays.empty((64,), dtypes.Float32).fill_bytes(0xFF)
    assert np.isnan(device.numpy()).all()
    host = np.random.default_rng().standard_normal(64).astype(np.float32)
    assert np.array_equal(device.copy_from(host).numpy(), host)
    assert not arrays.zeros((5, 7), dtypes.Int32).numpy().any()
    with pytest.raises(LaunchError, match="shape"):
        device.copy_from(np.zeros(63, dtype=np.float32))


@pytest.mark.gpu_or_interpret
def test_strided_view_downloads_its_elements():
    base = arrays.to_device(np.arange(48, dtype=np.int32))
    view = DeviceArray((4, 6), dtypes.Int32, strides=(12, 2), data_ptr=base.data_ptr, owner=base)
    assert np.array_equal(view.numpy(), np.arange(48, dtype=np.int32).reshape(4, 12)[:, ::2])


@pytest.mark.gpu(reason="needs torch CUDA tensors (torch.as_tensor(device='cuda'), __cuda_array_interface__ both ways)")
def test_torch_interop_both_ways():
    torch = pytest.importorskip("torch")
    host = np.random.default_rng().standard_normal((8, 16)).astype(np.float32)
    device = arrays.to_device(host)
    wrapped = torch.as_tensor(device, device="cuda")
    assert wrapped.data_ptr() == device.data_ptr
    assert np.array_equal(wrapped.cpu().numpy(), host)
    tensor = torch.ones((4, 32), dtype=torch.bfloat16, device="cuda")[:, ::2]
    arg = describe_array_argument(tensor)
    assert (arg.dtype, arg.shape, arg.strides, arg.data_ptr) == (dtypes.BFloat16, (4, 16), (32, 2),
                                                                 tensor.data_ptr())


def test_bfloat16_decoder_named_by_numpy_docstring_is_public():
    """DeviceArray.numpy() of BFloat16 returns bits and names tsjit.bfloat16_bits_to_float32 (newcomer
    report 6, item 14): the name is on the package face, in __all__ and help(tsjit)."""
    import tsjit
    from tsjit.runtime import arrays
    values = np.random.default_rng().standard_normal(64).astype(np.float32)
    bits = tsjit.float_to_bfloat16_bits(values)
    decoded = tsjit.bfloat16_bits_to_float32(bits)
    assert bits.dtype == np.uint16 and decoded.dtype == np.float32
    assert np.abs(decoded.astype(np.float64) - values).max() <= np.abs(values).max() * 2.0 ** -8
    assert tsjit.bfloat16_bits_to_float32 is arrays.bfloat16_bits_to_float32
    assert {"bfloat16_bits_to_float32", "float_to_bfloat16_bits"} <= set(tsjit.__all__)
    assert "tsjit.bfloat16_bits_to_float32" in arrays.DeviceArray.numpy.__doc__
    assert "bfloat16_bits_to_float32" in tsjit.__doc__


class _CpuTensor:
    """A CPU torch tensor as to_device reads it (duck-typed; CI has no torch): its bits live in ``bits``."""

    def __init__(self, bits, dtype, is_cuda=False):
        self.bits, self.dtype, self.is_cuda = np.ascontiguousarray(bits), dtype, is_cuda
        self.shape = self.bits.shape

    def stride(self):
        return tuple(s // self.bits.itemsize for s in self.bits.strides)

    def data_ptr(self):
        return self.bits.ctypes.data

    def detach(self):
        return self

    def contiguous(self):
        return self

    def numel(self):
        return self.bits.size

    def element_size(self):
        return self.bits.itemsize

    def __array__(self, *args, **kwargs):   # what torch raises for a dtype numpy lacks
        raise TypeError(f"Got unsupported ScalarType {self.dtype}")


@pytest.mark.gpu_or_interpret
@pytest.mark.parametrize("torch_dtype, tsjit_dtype, bits_dtype", [
    ("torch.bfloat16", dtypes.BFloat16, np.uint16), ("torch.float8_e4m3fn", dtypes.Float8E4M3, np.uint8),
    ("torch.float8_e5m2", dtypes.Float8E5M2, np.uint8)])
def test_to_device_copies_a_cpu_torch_tensor_without_a_numpy_dtype_bit_for_bit(torch_dtype, tsjit_dtype, bits_dtype):
    bits = np.random.default_rng().integers(0, np.iinfo(bits_dtype).max, (6, 10)).astype(bits_dtype)
    device = arrays.to_device(_CpuTensor(bits, torch_dtype))
    assert device.dtype is tsjit_dtype and device.shape == (6, 10)
    assert np.array_equal(device.numpy(), bits)


def test_to_device_of_a_bfloat16_tensor_to_another_dtype_says_to_convert_in_torch():
    with pytest.raises(TsjitError, match=r"torch.bfloat16 tensor cannot become Float32.*x.to\(torch.float32\)"):
        arrays.to_device(_CpuTensor(np.zeros(4, np.uint16), "torch.bfloat16"), dtype=dtypes.Float32)


def test_to_device_of_a_cuda_torch_tensor_says_it_is_already_on_the_gpu():
    with pytest.raises(LaunchError, match="CUDA torch tensor, already on the GPU; pass it .* as it is"):
        arrays.to_device(_CpuTensor(np.zeros(4, np.uint16), "torch.bfloat16", is_cuda=True))


@pytest.mark.gpu_or_interpret
def test_to_device_of_a_real_cpu_bfloat16_tensor_keeps_its_bits():
    torch = pytest.importorskip("torch")
    tensor = torch.randn(5, 8, dtype=torch.bfloat16)[:, ::2]
    assert np.array_equal(arrays.to_device(tensor).numpy(), tensor.contiguous().view(torch.int16).numpy().view(np.uint16))


def test_numpy_refuses_to_read_a_device_array_in_place(monkeypatch):
    """np.asarray(x) made a 0-d object array (np.allclose(x, ref) then compared an object); as for torch / CuPy
    device memory, numpy is told to use x.numpy()."""
    monkeypatch.setenv("TSJIT_INTERPRET", "1")           # device arrays in host memory: no GPU needed
    x = tsjit.to_device(np.ones(4, np.float32))
    for convert in (np.asarray, lambda a: np.allclose(a, 1.0)):
        with pytest.raises(TypeError, match=r"is in device memory: numpy cannot read it in place; copy it with "
                                            r"x.numpy\(\)"):
            convert(x)
    assert np.array_equal(x.numpy(), np.ones(4))
