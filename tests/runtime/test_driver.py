"""tsjit.runtime.driver: checked driver calls, launch validation, streams; GPU round trips."""
import ctypes

import numpy as np
import pytest

from tsjit.errors import LaunchError
from tsjit.lang import dtypes
from tsjit.runtime import driver, launch_config, streams
from tsjit.runtime.events import Event
from tsjit.runtime.driver import DeviceProperties
from tsjit.runtime.launch_config import validate_launch_config

H200 = DeviceProperties(name="NVIDIA H200", capability=(9, 0), sm_count=132, max_dynamic_smem_optin=232448,
                        max_smem_per_block=49152, max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
                        max_grid_dims=(2 ** 31 - 1, 65535, 65535))


def needs_no_gpu():
    if driver.gpu_available():
        pytest.skip("a GPU is present; this checks the no-GPU behaviour")


# ------------------------------------------------------------------- no GPU

def test_gpu_available_never_raises_and_is_stable():
    first = driver.gpu_available()
    assert isinstance(first, bool) and driver.gpu_available() is first


def test_without_gpu_every_driver_use_raises_launch_error():
    needs_no_gpu()
    function = driver.Function(handle=None, name="k", module=None)  # stands for a loaded kernel
    for call in (lambda: launch_config.launch(function, 1, 32, None), lambda: driver.load_module(b"\x7fELF"),
                 driver.device_properties, driver.synchronize, lambda: Event(),
                 lambda: streams.Stream.create()):
        with pytest.raises(LaunchError, match="CUDA driver is not available.*TSJIT_INTERPRET=1 runs every launch"):
            call()


def test_without_gpu_to_device_names_the_cpu_interpreter():
    import tsjit
    needs_no_gpu()
    with pytest.raises(LaunchError, match=r"kernel\.interpret\[grid, block\]\(\.\.\.\) runs one launch.*"
                                          r"TSJIT_INTERPRET=1 runs every launch and tsjit\.to_device"):
        tsjit.to_device(np.zeros(4, np.float32))


@pytest.mark.parametrize("gpu", [False, True])
def test_numpy_arguments_without_gpu_suggest_the_interpreter(monkeypatch, gpu):
    """A launch with numpy arrays says tsjit.to_device, and with no GPU (where to_device fails too) the
    CPU interpreter by the kernel's name (newcomer 7 #15)."""
    import tsjit

    @tsjit.kernel
    def copy_rows(x, out):
        out[tsjit.thread_idx().x] = x[tsjit.thread_idx().x]

    monkeypatch.setattr(driver, "gpu_available", lambda: gpu)
    with pytest.raises(LaunchError, match=r"argument 'x' is a host numpy array.*tsjit\.to_device\(x\)") as info:
        copy_rows[(1,), (32,)](np.zeros(32, np.float32), np.zeros(32, np.float32))
    assert ("copy_rows.interpret[grid, block](...)" in str(info.value)) is not gpu
    assert ("TSJIT_INTERPRET=1" in str(info.value)) is not gpu


def test_synchronize_and_streams_are_no_ops_under_the_interpreter(monkeypatch):
    """One script runs on the GPU and under TSJIT_INTERPRET=1 (newcomer report, issue 10 §3)."""
    import tsjit
    needs_no_gpu()
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    tsjit.synchronize()
    stream = tsjit.Stream.create()
    stream.synchronize()
    tsjit.Stream.per_thread().synchronize()
    x = tsjit.to_device(np.arange(4, dtype=np.float32))
    tsjit.synchronize()
    assert np.array_equal(x.numpy(), np.arange(4, dtype=np.float32))


def test_check_unwraps_values_and_names_failures():
    from cuda.bindings import driver as cu

    assert driver.check((cu.CUresult.CUDA_SUCCESS,)) is None
    assert driver.check((cu.CUresult.CUDA_SUCCESS, 7)) == 7
    assert driver.check((cu.CUresult.CUDA_SUCCESS, 7, 8)) == (7, 8)
    with pytest.raises(LaunchError, match=r"cuMemAlloc\(64 bytes\) failed: CUDA_ERROR_OUT_OF_MEMORY \(2\)"):
        driver.check((cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0), "cuMemAlloc(64 bytes)")


# --------------------------------------------------------------- validation

def test_valid_configuration_is_normalized():
    config = validate_launch_config(132, (128, 2), smem_bytes=200 * 1024, cluster=2, pdl=True, properties=H200)
    assert config.grid == (132, 1, 1) and config.block == (128, 2, 1)
    assert config.cluster == (2, 1, 1) and config.pdl and config.smem_bytes == 204800


@pytest.mark.parametrize("kwargs, field", [
    ({"grid": 0}, "grid[0]"),
    ({"grid": (4, 65536)}, "grid[1]"),
    ({"grid": (1, 1, 1, 1)}, "grid"),
    ({"grid": 2.5}, "grid"),
    ({"block": 0}, "block[0]"),
    ({"block": (1, 1, 65)}, "block[2]"),
    ({"block": (1025,)}, "block[0]"),
    ({"block": (64, 32)}, "block"),
    ({"smem_bytes": 232449}, "smem_bytes"),
    ({"smem_bytes": -1}, "smem_bytes"),
    ({"grid": 6, "cluster": 4}, "cluster[0]"),
    ({"grid": (4, 3), "cluster": (2, 2)}, "cluster[1]"),
    ({"grid": 32, "cluster": 16}, "cluster"),
])
def test_invalid_configuration_names_the_field(kwargs, field):
    args = {"grid": 8, "block": 128, **kwargs}
    grid, block = args.pop("grid"), args.pop("block")
    with pytest.raises(LaunchError) as info:
        validate_launch_config(grid, block, properties=H200, **args)
    assert f"'{field}'" in str(info.value), str(info.value)


def test_expected_and_given_values_are_in_the_message():
    with pytest.raises(LaunchError) as info:
        validate_launch_config((4, 70000), 128, properties=H200)
    assert "1..65535" in str(info.value) and "70000" in str(info.value)


def test_kernel_thread_limit_and_static_smem_are_respected():
    with pytest.raises(LaunchError, match="this kernel .* allows at most 256"):
        validate_launch_config(1, 512, properties=H200, kernel_max_threads=256)
    with pytest.raises(LaunchError, match="smem_bytes"):
        validate_launch_config(1, 32, smem_bytes=232448, static_smem_bytes=16, properties=H200)


def test_clusters_and_pdl_need_sm_90():
    ampere = DeviceProperties(**{**H200.__dict__, "capability": (8, 0)})
    with pytest.raises(LaunchError, match="'cluster'"):
        validate_launch_config(4, 32, cluster=2, properties=ampere)
    with pytest.raises(LaunchError, match="'pdl'"):
        validate_launch_config(4, 32, pdl=True, properties=ampere)


def test_properties_name_the_target():
    assert H200.arch == "sm_90" and H200.default_target == "sm_90a"


# ------------------------------------------------------------------ streams

class FakeTorchStream:
    cuda_stream = 0x1234


def test_stream_handles_from_foreign_objects():
    assert int(streams.stream_handle(FakeTorchStream())) == 0x1234
    assert int(streams.stream_handle(77)) == 77
    assert int(streams.stream_handle(streams.Stream.per_thread())) == 2
    with pytest.raises(LaunchError, match="'stream'"):
        streams.stream_handle("default")


def test_use_stream_sets_the_current_stream_for_this_thread():
    assert int(streams.current_stream()) == 0
    with streams.use_stream(streams.Stream(99)):
        assert int(streams.current_stream()) == 99
        assert int(streams.stream_handle(None)) == 99
    assert int(streams.current_stream()) == 0


# ---------------------------------------------------------------------- GPU

KERNELS_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry add_one(.param .u64 data, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<5>; .reg .f32 %f<3>;
  griddepcontrol.wait;
  ld.param.u64 %rd1, [data];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
.visible .entry cluster_rank(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r2;
  ret;
}
.visible .entry smem_touch(.param .u64 out, .param .u32 offset)
{
  .reg .b32 %r<4>; .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  ld.param.u32 %r1, [offset];
  mov.u32 %r2, smem;
  add.u32 %r2, %r2, %r1;
  st.shared.u32 [%r2], 7;
  ld.shared.u32 %r3, [%r2];
  st.global.u32 [%rd2], %r3;
  ret;
}
"""


@pytest.fixture(scope="module")
def module():
    return driver.load_module(KERNELS_PTX.encode())


def pack(*values):
    keep = list(values)
    return (ctypes.c_void_p * len(keep))(*[ctypes.addressof(v) for v in keep]), keep


@pytest.mark.gpu(reason="reads a real device's attributes (cuDeviceGetAttribute); the interpreter has no device")
def test_device_properties_of_a_hopper_gpu():
    properties = driver.device_properties()
    assert properties.capability >= (9, 0)
    assert properties.max_threads_per_block == 1024 and properties.max_dynamic_smem_optin > 200 * 1024


@pytest.mark.gpu(reason="tests the driver's cuMemAlloc/cuMemcpy/cuMemsetD8 themselves (the interpreter's host-memory "
                        "arrays: tests/runtime/test_arrays.py)")
def test_alloc_copy_memset_roundtrip():
    from tsjit.runtime import arrays

    host = np.random.default_rng().standard_normal(1000).astype(np.float32)
    device = arrays.to_device(host)
    assert np.array_equal(device.numpy(), host)
    device.fill_bytes(0)
    assert not device.numpy().any()


@pytest.mark.gpu(reason="launches hand-written PTX through cuModuleLoadData/cuLaunchKernelEx and reads "
                        "cuFuncGetAttribute; the interpreter runs kernels' Python source, not PTX")
def test_plain_launch_and_function_attributes(module):
    from tsjit.runtime import arrays

    kernel = module.get_function("add_one")
    assert driver.get_function(module, "add_one") is kernel
    host = np.random.default_rng().standard_normal(1000).astype(np.float32)
    data = arrays.to_device(host)
    params, _keep = pack(ctypes.c_uint64(data.data_ptr), ctypes.c_uint32(1000))
    launch_config.launch(kernel, 8, 128, ctypes.addressof(params))
    launch_config.launch(kernel, (8,), (128, 1), params)
    driver.synchronize()
    assert np.array_equal(data.numpy(), (host + np.float32(1)) + np.float32(1))
    attributes = driver.function_attributes(kernel)
    assert attributes.num_regs > 0 and attributes.local_bytes == 0 and attributes.binary_version >= 90


@pytest.mark.gpu(reason="tests the driver's cluster launch attribute on hand-written PTX (cuLaunchKernelEx); the "
                        "interpreter runs Python source, not PTX")
def test_cluster_launch_sets_cluster_ranks(module):
    from tsjit.runtime import arrays

    out = arrays.empty((8,), dtypes.Int32).fill_bytes(0xFF)
    params, _keep = pack(ctypes.c_uint64(out.data_ptr))
    launch_config.launch(module.get_function("cluster_rank"), 8, 32, params, cluster=(2, 1, 1))
    driver.synchronize()
    assert out.numpy().tolist() == [0, 1] * 4


@pytest.mark.gpu(reason="tests the driver's PDL launch attribute on a CUDA stream (cuLaunchKernelEx, hand-written PTX)")
def test_pdl_launches_stay_ordered_on_a_stream(module):
    from tsjit.runtime import arrays

    stream = streams.Stream.create()
    host = np.random.default_rng().standard_normal(4096).astype(np.float32)
    data = arrays.to_device(host)
    params, _keep = pack(ctypes.c_uint64(data.data_ptr), ctypes.c_uint32(4096))
    for _ in range(3):
        launch_config.launch(module.get_function("add_one"), 32, 128, params, stream=stream, pdl=True)
    stream.synchronize()
    assert np.array_equal(data.numpy(), ((host + np.float32(1)) + np.float32(1)) + np.float32(1))


@pytest.mark.gpu(reason="tests the driver's dynamic shared-memory opt-in (cuFuncSetAttribute) and the device's limit")
def test_large_dynamic_smem_is_opted_in_automatically(module):
    from tsjit.runtime import arrays

    kernel = module.get_function("smem_touch")
    out = arrays.zeros((1,), dtypes.Uint32)
    params, _keep = pack(ctypes.c_uint64(out.data_ptr), ctypes.c_uint32(150 * 1024))
    launch_config.launch(kernel, 1, 1, params, smem_bytes=200 * 1024)
    driver.synchronize()
    assert out.numpy().tolist() == [7] and kernel.max_dynamic_smem == 200 * 1024
    with pytest.raises(LaunchError, match="'smem_bytes'"):
        launch_config.launch(kernel, 1, 1, params, smem_bytes=driver.device_properties().max_dynamic_smem_optin + 1)


@pytest.mark.gpu(reason="real timing: CUDA events (cuEventElapsedTime)")
def test_events_time_work_on_a_stream(module):
    from tsjit.runtime import arrays

    data = arrays.zeros((1 << 20,), dtypes.Float32)
    params, _keep = pack(ctypes.c_uint64(data.data_ptr), ctypes.c_uint32(1 << 20))
    start, end = Event(), Event()
    start.record()
    launch_config.launch(module.get_function("add_one"), 4096, 256, params)
    end.record()
    assert start.elapsed_ms(end) > 0


@pytest.mark.gpu(reason="tests the driver's own errors (cuModuleGetFunction, cuModuleLoadData on a bad image)")
def test_missing_kernel_and_bad_image_raise_launch_error(module):
    with pytest.raises(LaunchError, match="no_such_kernel"):
        module.get_function("no_such_kernel")
    with pytest.raises(LaunchError, match="cuModuleLoadData"):
        driver.load_module(b"\x7fELF not really a cubin")
