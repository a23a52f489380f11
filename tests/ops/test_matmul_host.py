"""The host side of tsjit.ops.matmul / bmm without a GPU: the driver's few entry points are
replaced by recorders (memory addresses are fake, TMA descriptors are validated but not encoded,
kernels compile for sm_90a for real), so every path from the arguments to the packed launch runs:
layouts, swap-AB, staging copies, split-K workspaces, epilogue options, bmm, the plan and launch
caches, the stream default and the argument errors.  The numbers are checked on the GPU
(tests/gpu/test_ops_matmul_gpu.py)."""
import ctypes
import functools
import itertools
import sys
import types

import numpy as np
import pytest

import tsjit
import tsjit.ops
from tsjit.ops import configs
from tsjit.runtime import arrays, driver, kernel, launch_config, tensormap

mm = sys.modules["tsjit.ops.matmul"]
matmul_plan = sys.modules["tsjit.ops.matmul_plan"]


class FakeCai:
    """A device array by ``__cuda_array_interface__`` (a fake address, no memory)."""

    _next = itertools.count(1)

    def __init__(self, shape, strides=None, typestr="<f2", offset=0):
        if strides is None:
            strides, step = [], 1
            for extent in reversed(shape):
                strides.append(step)
                step *= extent
            strides = tuple(reversed(strides))
        self.shape = tuple(shape)
        self.__cuda_array_interface__ = {"shape": tuple(shape), "strides": tuple(s * int(typestr[2:]) for s in strides),
                                         "typestr": typestr, "data": ((next(self._next) << 32) + offset, False),
                                         "version": 3}

    def t(self):
        other = FakeCai.__new__(FakeCai)
        cai = dict(self.__cuda_array_interface__)
        cai["shape"], cai["strides"] = cai["shape"][::-1], cai["strides"][::-1]
        other.__cuda_array_interface__, other.shape = cai, cai["shape"]
        return other


class Launches(list):
    """The launches a fake_gpu test made, ``(name, grid, block, params, stream)``; ``pdl``: whether each was
    launched with programmatic dependent launch."""

    def __init__(self):
        super().__init__()
        self.pdl = []


@pytest.fixture
def fake_gpu(monkeypatch):
    launches = Launches()
    addresses = itertools.count(1 << 40, 1 << 24)
    monkeypatch.setattr(driver, "device_properties", lambda: types.SimpleNamespace(
        sm_count=132, max_dynamic_smem_optin=232448, capability=(9, 0)))
    monkeypatch.setattr(driver, "gpu_available", lambda: False)
    monkeypatch.setattr(arrays, "_alloc", lambda nbytes: next(addresses))
    monkeypatch.setattr(arrays.DeviceArray, "fill_bytes", lambda self, byte: self)
    monkeypatch.setattr(kernel, "_launch_target", lambda: "sm_90a")
    descriptors = []

    class Encoded:
        def __init__(self):
            self.storage = ctypes.create_string_buffer(128)
            descriptors.append(self)

        def getPtr(self):
            return ctypes.addressof(self.storage)

    monkeypatch.setattr(tensormap, "encode_tensormap", lambda *args, **kwargs: Encoded())
    monkeypatch.setattr(kernel.CompiledKernel, "function",
                        lambda self: types.SimpleNamespace(name=self.name, handle=self.name, _prepared={}))
    monkeypatch.setattr(launch_config, "prepare_launch", lambda fn, grid, block, smem, cluster=None, pdl=False:
                        types.SimpleNamespace(grid=grid, block=block, smem=smem, config=types.SimpleNamespace(
                            grid=tuple(grid) + (1,) * (3 - len(grid)), block=tuple(block) + (1,) * (3 - len(block)),
                            smem_bytes=smem, cluster=cluster, pdl=pdl)))
    monkeypatch.setattr(launch_config, "launch_prepared", lambda fn, prepared, params, stream=0:
                        (launches.append((fn.name, prepared.grid, prepared.block, params, stream)),
                         launches.pdl.append(prepared.config.pdl)))
    monkeypatch.setattr(driver, "check", lambda result, what: None)
    monkeypatch.setattr(driver, "bindings", lambda: types.SimpleNamespace(cuCtxSynchronize=lambda: 0))
    monkeypatch.setattr(mm, "_PLANS", {})
    return launches


def _plan(a, b, **kw):
    return mm._call(a, b, kw.get("bias"), kw.get("activation"), kw.get("residual"), kw.get("alpha", 1.0),
                    kw.get("beta", 0.0), kw.get("out"), kw.get("out_dtype"), None, None, None, None,
                    kw.get("batched", False), plan_only=True)


def test_large_product_launches_the_full_tile_once(fake_gpu):
    a, b = FakeCai((4096, 4096)), FakeCai((4096, 4096))
    out = tsjit.ops.matmul(a, b)
    assert out.shape == (4096, 4096)
    (name, grid, block, params, stream), = fake_gpu
    assert name.startswith("gemm_program") and grid == (132,) and block == (384,) and params and stream == 0 and fake_gpu.pdl == [False]


def test_repeated_calls_reuse_the_packed_launch(fake_gpu):
    a, b, out = FakeCai((512, 256)), FakeCai((256, 384)), FakeCai((512, 384))
    for _ in range(3):
        tsjit.ops.matmul(a, b, out=out)
    assert len(fake_gpu) == 3 and len({launch[3] for launch in fake_gpu}) == 1
    assert mm.cache_statistics() == {"plans": 1, "launches_packed": 1}
    tsjit.ops.matmul(a, b, out=out, alpha=2.0)       # a new scalar is a new packed launch
    assert mm.cache_statistics()["launches_packed"] == 2


@pytest.mark.parametrize("view", ["nk", "kn", "a_t", "both_t", "sliced"])
def test_layouts_are_read_in_place(fake_gpu, view):
    M, N, K = 320, 512, 384
    a = {"a_t": FakeCai((K, M)).t(), "both_t": FakeCai((K, M)).t()}.get(view, FakeCai((M, K)))
    b = {"nk": FakeCai((N, K)).t(), "both_t": FakeCai((N, K)).t(),
         "sliced": FakeCai((K, 2 * N), strides=(2 * N, 1))}.get(view, FakeCai((K, N)))
    plan = _plan(a, b)
    assert not plan.x_staged and not plan.y_staged
    tsjit.ops.matmul(a, b)
    assert len(fake_gpu) == 1


def test_unaligned_rows_take_the_staging_copy(fake_gpu):
    a, b = FakeCai((300, 777)), FakeCai((777, 500))
    plan = _plan(a, b)
    assert plan.x_staged and plan.y_staged and "staging" in plan.explain()
    out = FakeCai((300, 500))
    tsjit.ops.matmul(a, b, out=out)
    names = [launch[0] for launch in fake_gpu]
    assert names[:2] == ["copy_matrix", "copy_matrix"] and names[2].startswith("gemm_program")
    packed = mm.cache_statistics()["launches_packed"]
    tsjit.ops.matmul(a, b, out=out)          # the staging buffers and packed launches are reused
    assert mm.cache_statistics()["launches_packed"] == packed and len(fake_gpu) == 6


def test_rows_off_128_bytes_are_realigned_where_the_model_says_it_pays(fake_gpu):
    """3000 x 5000 x 1000 with B (K, N) row-major (10000-byte rows of an MN-major Y, 2000-byte rows of X): Y (the
    256-row side of the tile) is first copied by 16-byte vectors into 128-byte aligned rows, in its own major; an
    aligned neighbour (K = 1024, N = 5120) and a small product are not."""
    a = FakeCai((3000, 1000))
    b = FakeCai((1000, 5000))
    plan = _plan(a, b)
    assert plan.realign == "y" and not plan.y_staged and "realign: Y" in plan.explain()
    tsjit.ops.matmul(a, b, out=FakeCai((3000, 5000)))
    names = [launch[0] for launch in fake_gpu]
    assert names[0] == "copy_rows" and names[1].startswith("gemm_program") and len(names) == 2
    assert fake_gpu.pdl == [False, False]        # plain launches (PDL behind the copy measured slower)
    # aligned rows pay for the long-K staging of a 128 x 256 tile (4 stages, 128 columns) that 2000-byte rows did not
    config = next(iter(mm._PLANS.values())).config
    assert (config.block_m, config.block_n, config.stages, config.staged_columns) == (128, 256, 4, 128)
    assert config.cluster_m == 1 and configs.choose(configs.Problem(3000, 5000, 1000))[0].stages == 3
    (storage,) = next(iter(mm._PLANS.values())).staging.values()
    assert (storage.strides[1] * 2) % 128 == 0 and storage.data_ptr % 128 == 0
    assert storage.shape == (1, 1000, 5000)
    assert _plan(FakeCai((3000, 1024)), FakeCai((1024, 5120))).realign == ""
    assert _plan(FakeCai((256, 1000)), FakeCai((1000, 1000))).realign == ""


def test_misaligned_k_major_rows_take_the_cluster_without_a_copy(fake_gpu):
    """3000 x 5000 x 1000 with B the transpose of a (5000, 1000) weight (both operands K-major, 2000-byte rows, the
    sweep's layout): one launch, the 2-CTA cluster_m2 128 x 256 tile with the 4-stage ring, no copy, and explain
    says why (:func:`tsjit.ops.realign.misaligned_choice`)."""
    a, b = FakeCai((3000, 1000)), FakeCai((5000, 1000)).t()
    plan = _plan(a, b)
    assert plan.realign == "" and not plan.staging and "misaligned rows: X and Y" in plan.explain()
    tsjit.ops.matmul(a, b, out=FakeCai((3000, 5000)))
    names = [launch[0] for launch in fake_gpu]
    assert len(names) == 1 and names[0].startswith("gemm_program")
    config = plan.config
    assert (config.block_m, config.block_n, config.stages, config.staged_columns) == (128, 256, 4, 128)
    assert (config.cluster_m, config.cluster_n) == (2, 1) and plan.grid[0] % 2 == 0
    # aligned rows keep the cost model's single-CTA tile
    aligned = _plan(FakeCai((3000, 1024)), FakeCai((5120, 1024)).t())
    assert aligned.config.cluster_m == 1 and not aligned.misaligned


def test_small_m_swaps_and_writes_the_transposed_view(fake_gpu):
    a, b = FakeCai((16, 4096)), FakeCai((4096, 4096))
    plan = _plan(a, b)
    assert plan.swapped and plan.config.block_n <= 32 and plan.config.epilogue == "direct"
    tsjit.ops.matmul(a, b)
    assert fake_gpu[-1][2] == (128 * (1 + plan.config.block_m // 64),)


def test_split_k_gets_a_workspace_per_stream(fake_gpu):
    a, b = FakeCai((512, 8192)), FakeCai((8192, 512))
    plan = _plan(a, b)
    assert plan.config.splits > 1
    tsjit.ops.matmul(a, b, stream=7)
    tsjit.ops.matmul(a, b, stream=9)
    assert [launch[4] for launch in fake_gpu] == [7, 9]
    assert {(7, False), (9, False)} <= set(matmul_plan.WORKSPACE.by_stream)   # (stream, interpreted)
    ws, counters = matmul_plan.WORKSPACE.by_stream[7, False]
    assert ws.shape[0] >= plan.workspace_floats and counters.shape[0] >= plan.counters


def test_epilogue_options_reach_the_fused_epilogue(fake_gpu):
    M, N, K = 256, 512, 128
    a, b = FakeCai((M, K)), FakeCai((K, N))
    plan = _plan(a, b, bias=FakeCai((N,), typestr="<f4"), activation="gelu_tanh", residual=FakeCai((M, N)),
                 alpha=0.5, beta=2.0, out=FakeCai((M, N), typestr="<f4"))
    fused = plan.fused
    assert (fused.alpha, fused.beta, fused.bias, fused.activation, fused.residual) == (True, True, "col", "gelu_tanh",
                                                                                      True)
    assert plan.config.epilogue == "direct"                      # fp32 output
    tsjit.ops.matmul(a, b, bias=FakeCai((M, 1)), activation="silu", out=FakeCai((M, N)))
    assert len(fake_gpu) == 1


def test_row_bias_becomes_a_column_bias_when_swapped(fake_gpu):
    a, b = FakeCai((16, 1024)), FakeCai((1024, 2048))
    plan = _plan(a, b, bias=FakeCai((2048,)))
    assert plan.swapped and plan.fused.bias == "row"


def test_bmm_uses_batched_descriptors(fake_gpu):
    a, b = FakeCai((4, 256, 128)), FakeCai((4, 128, 384))
    out = tsjit.ops.bmm(a, b)
    assert out.shape == (4, 256, 384) and len(fake_gpu) == 1
    assert _plan(a, b, batched=True).batched


@pytest.mark.parametrize("args,name", [
    (((4, 8), (9, 4)), "'b'"),
    (((4, 8, 2), (8, 4)), "'a'"),
])
def test_shape_errors_name_the_argument(fake_gpu, args, name):
    with pytest.raises(tsjit.LaunchError, match=name):
        tsjit.ops.matmul(FakeCai(args[0]), FakeCai(args[1]))


def test_dtype_and_option_errors_name_the_argument(fake_gpu):
    a, b = FakeCai((4, 8)), FakeCai((8, 6))
    with pytest.raises(tsjit.LaunchError, match="'b'"):
        tsjit.ops.matmul(a, FakeCai((8, 6), typestr="<f4"))
    with pytest.raises(tsjit.LaunchError, match="'bias'"):
        tsjit.ops.matmul(a, b, bias=FakeCai((5,)))
    with pytest.raises(tsjit.LaunchError, match="'out'"):
        tsjit.ops.matmul(a, b, out=FakeCai((4, 7)))
    with pytest.raises(tsjit.LaunchError, match="'activation'"):
        tsjit.ops.matmul(a, b, activation="tanh")
    with pytest.raises(tsjit.LaunchError, match="'beta'"):
        tsjit.ops.matmul(a, b, beta=1.0)
    with pytest.raises(tsjit.LaunchError, match="'scale_a'"):      # tensor scales dequantize fp8 only
        tsjit.ops.matmul(a, b, scale_a=FakeCai((1,), typestr="<f4"))
    with pytest.raises(tsjit.LaunchError, match="'a'"):
        tsjit.ops.matmul(object(), b)
    empty_a, empty_out = FakeCai((0, 8)), FakeCai((0, 6))
    for empty in (empty_a, empty_out):                             # torch gives empty CUDA tensors address 0
        empty.__cuda_array_interface__["data"] = (0, False)
    with pytest.raises(tsjit.LaunchError, match=r"every dimension must be >= 1; got M=0, N=6, K=8"):
        tsjit.ops.matmul(empty_a, b, out=empty_out)                # was "'out' is the memory of argument 'a'"
    for stream in ("s", object()):                                 # was int()'s ValueError / TypeError
        with pytest.raises(tsjit.LaunchError, match=r"^argument 'stream' must be a CUDA stream: a raw handle"):
            tsjit.ops.matmul(a, b, stream=stream)


@pytest.mark.parametrize("given,expected", [(np.float32, "Float32"), (np.dtype("float16"), "Float16"),
                                            ("float32", "Float32"), (tsjit.BFloat16, "BFloat16")])
def test_out_dtype_takes_numpy_dtypes(fake_gpu, given, expected):
    a, b = FakeCai((4, 8)), FakeCai((8, 6))
    assert _plan(a, b, out_dtype=given).out_dtype.name == expected
    assert tsjit.ops.matmul(a, b, out_dtype=given).dtype.name == expected
    assert tsjit.ops.bmm(FakeCai((2, 4, 8)), FakeCai((2, 8, 6)), out_dtype=given).dtype.name == expected


@pytest.mark.parametrize("given,said", [(np.float64, "numpy dtype float64"), (np.int32, "numpy dtype int32"),
                                        ("torch.int8", "torch.int8"), (3, "3 (of type int)")])
def test_out_dtype_error_says_what_was_passed_and_what_to_pass(fake_gpu, given, said):
    with pytest.raises(tsjit.LaunchError, match="'out_dtype'") as info:
        tsjit.ops.bmm(FakeCai((2, 4, 8)), FakeCai((2, 8, 6)), out_dtype=given)
    assert said in str(info.value) and "tsjit.ops.bmm:" in str(info.value)
    for choice in ("tsjit.Float32", "torch.float32", "numpy's float16 / float32"):
        assert choice in str(info.value)


def test_torch_fast_path_allocates_the_numpy_out_dtype(monkeypatch):
    """The torch fast path allocates ``out`` itself: a numpy out_dtype becomes the torch dtype of that name."""
    fake_torch = types.SimpleNamespace(bfloat16="torch.bfloat16", float16="torch.float16", float32="torch.float32")
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    assert mm._torch_dtype(np.float32, False) == "torch.float32"
    assert mm._torch_dtype(np.dtype("float16"), True) == "torch.float16"
    with pytest.raises(tsjit.LaunchError, match="tsjit.ops.bmm: argument 'out_dtype' is numpy dtype float64"):
        mm._torch_dtype(np.float64, True)


def test_explain_prints_the_choice(fake_gpu, capsys):
    text = tsjit.ops.matmul.explain(FakeCai((384, 16384)), FakeCai((16384, 384)), verbose=True)
    assert "split-K" in text and "config:" in capsys.readouterr().out


class FakeTorchTensor:
    """Enough of a CUDA torch tensor for tsjit's argument adapter (duck-typed)."""

    is_cuda = True
    dtype = "torch.bfloat16"
    _next = itertools.count(1)

    def __init__(self, shape):
        self.shape = tuple(shape)
        self._strides = (shape[1], 1)
        self._ptr = next(self._next) << 32

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return 0


def test_torch_calls_take_the_one_lookup_fast_path(fake_gpu):
    a, b, out = FakeTorchTensor((64, 256)), FakeTorchTensor((256, 512)), FakeTorchTensor((64, 512))
    tsjit.ops.matmul(a, b, out=out, stream=3)         # learns the tensor type
    tsjit.ops.matmul(a, b, out=out, stream=3)         # fills the fast-path entry
    before = dict(mm.cache_statistics())
    plans = mm._PLANS.copy()
    mm._PLANS.clear()                                  # a fast-path hit never looks at the plans
    for _ in range(3):
        assert tsjit.ops.matmul(a, b, out=out, stream=3) is out
    assert len(fake_gpu) == 5 and len({launch[3] for launch in fake_gpu}) == 1
    mm._PLANS.update(plans)
    assert mm.cache_statistics() == before
    tsjit.ops.matmul(a, b, out=FakeTorchTensor((64, 512)), stream=3)   # a new address: the full path
    assert mm.cache_statistics()["launches_packed"] == before["launches_packed"] + 1


def fake_driver_launches(monkeypatch, result=(0,)):
    """Replace libcuda's cuLaunchKernelEx (both ctypes entry points) by a recorder returning ``result[0]``,
    with one CUlaunchConfig stand-in per stream (``getPtr()``: the address of a uint64 holding the stream)
    and kernel handle 0x1234; returns the list of recorded calls (c_void_p arguments read as ints)."""
    from tsjit.runtime import launch
    calls, configs = [], {}

    def fake_cu_launch_kernel_ex(*args):
        calls.append(tuple(getattr(x, "value", x) for x in args))
        return result[0]

    def prepare(fn, grid, block, smem, cluster=None, pdl=False):
        def for_stream(stream):
            cfg = configs.setdefault(stream, ctypes.c_uint64(stream))
            return types.SimpleNamespace(getPtr=lambda: ctypes.addressof(cfg))
        return types.SimpleNamespace(grid=grid, block=block, smem=smem, for_stream=for_stream,
                                     config=types.SimpleNamespace(grid=grid, block=block, smem_bytes=smem,
                                                                  cluster=cluster, pdl=pdl))

    monkeypatch.setattr(launch, "_RAW_LAUNCH_EX", [fake_cu_launch_kernel_ex])
    monkeypatch.setattr(launch, "_HELD_LAUNCH_EX", [fake_cu_launch_kernel_ex])
    monkeypatch.setattr(launch_config, "prepare_launch", prepare)
    monkeypatch.setattr(kernel.CompiledKernel, "function",
                        lambda self: types.SimpleNamespace(name=self.name, handle=0x1234, _prepared={}))
    return calls


def test_packed_launches_call_cu_launch_kernel_ex_directly(fake_gpu, monkeypatch):
    calls = fake_driver_launches(monkeypatch)
    a, b, out = FakeCai((256, 512)), FakeCai((512, 1024)), FakeCai((256, 1024))
    tsjit.ops.matmul(a, b, out=out, stream=11)
    tsjit.ops.matmul(a, b, out=out, stream=11)
    assert not fake_gpu and len(calls) == 2
    address, handle, params, extra = calls[0]
    assert handle == 0x1234 and ctypes.c_uint64.from_address(address).value == 11
    assert params and extra is None and calls[0] == calls[1]


def test_plain_torch_call_on_the_current_stream_is_one_lookup(fake_gpu, monkeypatch):
    monkeypatch.setattr(mm, "_RAW_STREAM", [lambda device: 5])       # torch's current raw stream, faked
    monkeypatch.setattr(mm, "_FAST", {})
    a, b, out = FakeTorchTensor((64, 256)), FakeTorchTensor((256, 512)), FakeTorchTensor((64, 512))
    tsjit.ops.matmul(a, b, out=out)                                   # learns the tensor type
    tsjit.ops.matmul(a, b, out=out)                                   # fills the fast-path entry
    mm._PLANS.clear()                                                 # the inlined lookup never plans
    monkeypatch.setattr(mm, "_call", None)                            # ... nor reaches the general path
    assert tsjit.ops.matmul(a, b, out=out) is out
    assert [launch[4] for launch in fake_gpu] == [5, 5, 5] and len({launch[3] for launch in fake_gpu}) == 1


def test_plain_torch_call_is_one_direct_driver_call_and_its_errors_raise(fake_gpu, monkeypatch):
    """The fast path's entry holds the launch's direct ``cuLaunchKernelEx`` (BoundLaunch.direct: no
    Python frame of its own): a hit costs the lookup and that call, with the current stream's launch
    configuration; a nonzero driver result goes through the full launch, which raises (never silent)."""
    from tsjit.errors import LaunchError
    from tsjit.runtime import launch
    result = [0]
    calls = fake_driver_launches(monkeypatch, result)
    monkeypatch.setattr(mm, "_RAW_STREAM", [lambda device: 5])
    monkeypatch.setattr(mm, "_FAST", {})
    monkeypatch.setattr(mm, "_PLAIN", {})
    # a shape no other test packs (its launch plan must get the fake handle)
    a, b, out = FakeTorchTensor((96, 384)), FakeTorchTensor((384, 640)), FakeTorchTensor((96, 640))
    tsjit.ops.matmul(a, b, out=out)                                   # learns the tensor type
    tsjit.ops.matmul(a, b, out=out)                                   # fills the fast-path entry
    (direct, bound), = mm._FAST.values()
    assert isinstance(direct, functools.partial) and isinstance(bound, launch.BoundLaunch)
    ((key, (meta, plain_direct, plain_bound)),) = mm._PLAIN.items()   # the plain call's six-number key
    assert key == (a.data_ptr(), b.data_ptr(), out.data_ptr(), 5, 1.0, 0.0) and plain_bound is bound
    assert meta == ((96, 384), (384, 1), a.dtype, (384, 640), (640, 1), b.dtype, (96, 640), (640, 1), out.dtype)
    monkeypatch.setattr(mm, "_call", None)                            # a hit never reaches the general path
    assert tsjit.ops.matmul(a, b, out=out) is out
    assert len(calls) == 3 and calls[2] == calls[1] and not fake_gpu
    address, handle, params, extra = calls[2]
    assert handle == 0x1234 and ctypes.c_uint64.from_address(address).value == 5 and extra is None
    other = FakeTorchTensor((96, 640))                                # same address, another shape: no hit
    other._ptr, other.shape, other._strides = out._ptr, (48, 640), (640, 1)
    monkeypatch.setattr(mm, "_call", lambda *args: "general path")
    assert tsjit.ops.matmul(a, b, out=other) == "general path" and len(calls) == 3
    result[0] = 201                                                   # CUDA_ERROR_INVALID_CONTEXT
    with pytest.raises(LaunchError, match="failed"):
        tsjit.ops.matmul(a, b, out=out)
    assert len(calls) == 5                                            # the direct call, then the full one


class FakeTorchModule(types.ModuleType):
    """``torch.empty`` as the caching allocator behaves in a loop: it hands out the addresses of ``blocks`` in turn
    (a freed output's block comes back), as FakeTorchTensors."""

    bfloat16 = "torch.bfloat16"

    def __init__(self, blocks):
        super().__init__("torch")
        self.blocks, self.made = itertools.cycle(blocks), []

    def empty(self, *size, dtype=None, device=None):
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple) else size   # as torch: both forms
        tensor = FakeTorchTensor(shape)
        tensor._ptr = next(self.blocks)
        self.made.append((shape, dtype, device))
        return tensor


def _allocating_setup(monkeypatch, blocks):
    calls = fake_driver_launches(monkeypatch)
    fake_torch = FakeTorchModule(blocks)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(FakeTorchTensor, "device", "cuda:0", raising=False)
    monkeypatch.setattr(FakeTorchTensor, "element_size", lambda self: 2, raising=False)
    monkeypatch.setattr(mm, "_RAW_STREAM", [lambda device: 5])
    for table in ("_FAST", "_PLAIN", "_ALLOCATING"):
        monkeypatch.setattr(mm, table, {})
    return calls, fake_torch


def _output_address(calls, index):
    """The output address packed into the launch of recorded driver call ``index`` (its BoundLaunch's c view)."""
    params = calls[index][2]
    for entry in mm._ALLOCATING.values():
        for direct, bound in entry[5].values():
            if ctypes.addressof(bound.pointer_array) == params:
                return bound.arguments[2].data_ptr
    return None


def test_plain_allocating_torch_call_is_one_lookup_per_allocator_block(fake_gpu, monkeypatch):
    """``matmul(a, b)`` of torch tensors: after the first call per output block, a call is the lookup of a and b
    (their metadata checked), torch.empty with the entry's shape / dtype / device, and the launch packed for the
    block torch.empty returned: each output address gets its own launch, never another block's."""
    blocks = [0x7000 << 32, 0x7100 << 32]
    calls, fake_torch = _allocating_setup(monkeypatch, blocks)
    a, b = FakeTorchTensor((96, 384)), FakeTorchTensor((384, 640))
    first = [tsjit.ops.matmul(a, b) for _ in range(2)]              # packs both blocks' launches
    assert [out.data_ptr() for out in first] == blocks
    (entry,) = mm._ALLOCATING.values()
    assert sorted(entry[5]) == blocks and entry[2:5] == ((96, 640), "torch.bfloat16", "cuda:0")
    monkeypatch.setattr(mm, "_call", None)                          # hits never reach the general path
    outs = [tsjit.ops.matmul(a, b) for _ in range(4)]
    assert [out.data_ptr() for out in outs] == blocks * 2 and all(o.shape == (96, 640) for o in outs)
    assert len(calls) == 6 and not fake_gpu
    assert [_output_address(calls, i) for i in range(2, 6)] == blocks * 2   # the block's own launch
    assert fake_torch.made[-1] == ((96, 640), "torch.bfloat16", "cuda:0")


def test_allocating_lookup_misses_when_metadata_at_the_address_changes(fake_gpu, monkeypatch):
    """A stale allocating entry would be a wrong answer: the same addresses with another shape or strides
    (a view of the same memory) or another dtype take the general path; a new output block packs a new launch."""
    calls, fake_torch = _allocating_setup(monkeypatch, [0x7200 << 32])
    a, b = FakeTorchTensor((96, 384)), FakeTorchTensor((384, 640))
    tsjit.ops.matmul(a, b)
    general = []
    monkeypatch.setattr(mm, "_call", lambda *args, **kwargs: general.append(args) or "general path")
    tsjit.ops.matmul(a, b)
    assert not general
    narrower = FakeTorchTensor((384, 320))                          # b's memory as a narrower view
    narrower._ptr, narrower._strides = b._ptr, (640, 1)
    transposed = FakeTorchTensor((384, 96))
    transposed._ptr, transposed._strides, transposed.shape = a._ptr, (1, 384), (96, 384)
    halves = FakeTorchTensor((96, 384))
    halves._ptr, halves.dtype = a._ptr, "torch.float16"
    for x, y in ((a, narrower), (transposed, b), (halves, b)):
        assert tsjit.ops.matmul(x, y) == "general path"
    assert len(general) == 3 and len(calls) == 2
    assert tsjit.ops.matmul(a, b, alpha=2.0) == "general path"      # another alpha: another entry
    fake_torch.blocks = itertools.cycle([0x7300 << 32])             # a block not seen: packed by the general path
    assert tsjit.ops.matmul(a, b) == "general path" and general[-1][7].data_ptr() == 0x7300 << 32


def test_plain_device_array_call_is_one_lookup_on_tsjits_current_stream(fake_gpu, monkeypatch):
    """``matmul(a, b, out=c)`` of tsjit DeviceArrays: from the second call on, one lookup by the three addresses and
    tsjit's current stream (the arrays' metadata checked), then the direct driver call; a view of the same memory
    with other strides, or another stream (``use_stream``), is not taken for it."""
    from tsjit.runtime import streams
    calls = fake_driver_launches(monkeypatch)
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})
    a, b, out = tsjit.empty((96, 384), tsjit.BFloat16), tsjit.empty((384, 640), tsjit.BFloat16), \
        tsjit.empty((96, 640), tsjit.BFloat16)
    tsjit.ops.matmul(a, b, out=out)
    ((key, (meta, direct, bound)),) = mm._PLAIN_ARRAYS.items()
    assert key == (a.data_ptr, b.data_ptr, out.data_ptr, 0, 1.0, 0.0) and direct is not None
    general = []
    real_call = mm._call
    monkeypatch.setattr(mm, "_call", lambda *args, **kwargs: general.append(args) or real_call(*args, **kwargs))
    assert tsjit.ops.matmul(a, b, out=out) is out
    assert not general and len(calls) == 2 and calls[1] == calls[0]
    wider = arrays.DeviceArray((384, 320), tsjit.BFloat16, strides=(640, 1), data_ptr=b.data_ptr)   # b's memory
    narrow_out = arrays.DeviceArray((96, 320), tsjit.BFloat16, strides=(640, 1), data_ptr=out.data_ptr)
    tsjit.ops.matmul(a, wider, out=narrow_out)
    assert len(general) == 1 and calls[2][2] != calls[0][2]           # its own packed launch
    with streams.use_stream(streams.Stream(77)):
        tsjit.ops.matmul(a, b, out=out)
        assert len(general) == 2 and ctypes.c_uint64.from_address(calls[3][0]).value == 77
        tsjit.ops.matmul(a, b, out=out)
        assert len(general) == 2 and ctypes.c_uint64.from_address(calls[4][0]).value == 77


def test_device_array_lookup_steps_aside_under_the_interpreter(fake_gpu, monkeypatch):
    """With TSJIT_INTERPRET set (DeviceArrays may then be host memory) a warm DeviceArray entry is not used: the
    general path takes the call."""
    fake_driver_launches(monkeypatch)
    monkeypatch.setattr(mm, "_PLAIN_ARRAYS", {})
    a, b, out = tsjit.empty((96, 384), tsjit.BFloat16), tsjit.empty((384, 640), tsjit.BFloat16), \
        tsjit.empty((96, 640), tsjit.BFloat16)
    tsjit.ops.matmul(a, b, out=out)
    assert len(mm._PLAIN_ARRAYS) == 1
    monkeypatch.setattr(mm, "_call", lambda *args, **kwargs: "general path")
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    assert tsjit.ops.matmul(a, b, out=out) == "general path"


def test_packed_launches_are_forgotten_when_a_code_affecting_variable_changes(fake_gpu, monkeypatch):
    """TSJIT_DEBUG=1 set after warm-up: the next call does not reuse a launch packed for the release build
    (it takes the general path, which compiles or loads the debug build); unset again, the same holds."""
    monkeypatch.delenv("TSJIT_DEBUG", raising=False)
    a, b, out = FakeTorchTensor((64, 256)), FakeTorchTensor((256, 512)), FakeTorchTensor((64, 512))
    tsjit.ops.matmul(a, b, out=out, stream=3)
    tsjit.ops.matmul(a, b, out=out, stream=3)
    packed = mm.cache_statistics()["launches_packed"]
    tsjit.ops.matmul(a, b, out=out, stream=3)
    assert mm.cache_statistics()["launches_packed"] == packed          # warm: the fast path
    general, release_plans = [], list(mm._PLANS.values())     # kept alive: ids are not reused
    real_call = mm._call
    monkeypatch.setattr(mm, "_call", lambda *args, **kwargs: general.append(args) or real_call(*args, **kwargs))
    monkeypatch.setenv("TSJIT_DEBUG", "1")
    tsjit.ops.matmul(a, b, out=out, stream=3)
    assert len(general) == 1 and mm.cache_statistics() == {"plans": 1, "launches_packed": 1}
    assert not any(p is q for p in mm._PLANS.values() for q in release_plans)   # planned and packed again
    monkeypatch.delenv("TSJIT_DEBUG")
    tsjit.ops.matmul(a, b, out=out, stream=3)
    assert len(general) == 2


COUNTER = r"""
#include <stdint.h>
static int calls = 0, result = 0;
static uintptr_t params = 0;
int counted4(void *config, void *function, void *p, void *extra) { calls++; params = (uintptr_t)p; return result; }
int counted_calls(void) { return calls; }
uintptr_t counted_params(void) { return params; }
void counted_result(int r) { result = r; }
"""


def test_plain_torch_call_through_the_native_launch(fake_gpu, monkeypatch, tmp_path):
    """With tsjit.runtime.native_launch built (cuLaunchKernelEx replaced by a C stand-in that counts its calls and
    returns a settable result), the plain call's hit is one call of the extension's Launch with the packed
    launch's parameter block, no Python stand-in involved; a driver error goes through the full launch, which
    raises (never silent)."""
    import subprocess
    from tsjit.errors import LaunchError
    from tsjit.runtime import launch, native_launch
    compiler = native_launch._compiler()
    if compiler is None:
        pytest.skip("no C compiler on PATH")
    (tmp_path / "counter.c").write_text(COUNTER)
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", str(tmp_path / "counter.c"), "-o", str(tmp_path / "c.so")],
                   check=True)
    counter = ctypes.PyDLL(str(tmp_path / "c.so"))
    counter.counted4.restype = ctypes.c_int
    counter.counted_params.restype = ctypes.c_uint64
    counter.counted_result.argtypes = [ctypes.c_int]
    result = [0]
    calls = fake_driver_launches(monkeypatch, result)                # the full path's launches, recorded in Python
    monkeypatch.setattr(launch, "_HELD_LAUNCH_EX", [counter.counted4])
    monkeypatch.setenv("TSJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TSJIT_DISABLE_CACHE", raising=False)
    monkeypatch.setattr(native_launch, "_LOADED", [])
    monkeypatch.setattr(mm, "_RAW_STREAM", [lambda device: 5])
    monkeypatch.setattr(mm, "_FAST", {})
    monkeypatch.setattr(mm, "_PLAIN", {})
    a, b, out = FakeTorchTensor((80, 384)), FakeTorchTensor((384, 704)), FakeTorchTensor((80, 704))
    tsjit.ops.matmul(a, b, out=out)                                   # learns the tensor type
    tsjit.ops.matmul(a, b, out=out)                                   # fills the fast-path entry
    ((meta, direct, bound),) = mm._PLAIN.values()
    assert type(direct).__name__ == "Launch" and direct.owner is bound
    before, recorded = counter.counted_calls(), len(calls)
    monkeypatch.setattr(mm, "_call", None)                            # a hit never reaches the general path
    assert tsjit.ops.matmul(a, b, out=out) is out
    assert counter.counted_calls() == before + 1 and len(calls) == recorded
    assert counter.counted_params() == ctypes.addressof(bound.pointer_array)
    counter.counted_result(201)                                       # CUDA_ERROR_INVALID_CONTEXT
    result[0] = 201
    with pytest.raises(LaunchError, match="failed"):
        tsjit.ops.matmul(a, b, out=out)
    assert counter.counted_calls() == before + 2 and len(calls) == recorded + 1   # the C call, then the full one
    counter.counted_result(0)


def _view(like, shape=None, strides=None, dtype=None, offset=0):
    """A FakeTorchTensor at ``like``'s address (plus ``offset`` bytes) with other metadata."""
    view = FakeTorchTensor(shape or like.shape)
    view._ptr, view._strides = like._ptr + offset, strides or like._strides
    if dtype is not None:
        view.dtype = dtype
    return view


@pytest.mark.parametrize("change", ["a strides", "a dtype", "b shape", "out shape", "out dtype", "out offset",
                                    "stream", "alpha", "beta"])
def test_plain_out_lookup_never_reuses_a_launch_for_other_metadata(fake_gpu, monkeypatch, change):
    """The plain ``matmul(a, b, out=c)`` lookup (three addresses, stream, alpha, beta) must miss -- take the general
    path -- when anything a packed launch depends on differs at the same addresses: strides (a transposed view),
    dtype, shape, the output's alignment, the current stream, alpha or beta."""
    fake_driver_launches(monkeypatch)
    stream = [5]
    monkeypatch.setattr(mm, "_RAW_STREAM", [lambda device: stream[0]])
    for table in ("_FAST", "_PLAIN"):
        monkeypatch.setattr(mm, table, {})
    a, b, out = FakeTorchTensor((128, 128)), FakeTorchTensor((128, 256)), FakeTorchTensor((128, 256))
    tsjit.ops.matmul(a, b, out=out)
    tsjit.ops.matmul(a, b, out=out)
    general = []
    monkeypatch.setattr(mm, "_call", lambda *args: general.append(args) or "general path")
    assert tsjit.ops.matmul(a, b, out=out) is out and not general      # warm: the lookup's hit
    kwargs = {}
    if change == "a strides":
        a = _view(a, strides=(1, 128))
    elif change == "a dtype":
        a = _view(a, dtype="torch.float16")
    elif change == "b shape":
        b = _view(b, shape=(128, 128), strides=(256, 1))
    elif change == "out shape":
        out = _view(out, shape=(128, 128), strides=(256, 1))
    elif change == "out dtype":
        out = _view(out, dtype="torch.float32")
    elif change == "out offset":
        out = _view(out, offset=2)
    elif change == "stream":
        stream[0] = 6
    else:
        kwargs[change] = 0.5
    assert tsjit.ops.matmul(a, b, out=out, **kwargs) == "general path" and len(general) == 1


@pytest.mark.parametrize("change", ["bias dtype", "bias address", "activation", "stream"])
def test_general_fast_path_never_reuses_a_launch_for_other_options(fake_gpu, monkeypatch, change):
    """The general fast path (options given: a bias, an activation, an explicit stream) keys on every argument's
    metadata and address: another bias dtype or address, activation or stream misses."""
    fake_driver_launches(monkeypatch)
    monkeypatch.setattr(mm, "_FAST", {})
    a, b, out = FakeTorchTensor((128, 128)), FakeTorchTensor((128, 256)), FakeTorchTensor((128, 256))
    bias = FakeTorchTensor((1, 256))
    for _ in range(2):
        tsjit.ops.matmul(a, b, out=out, bias=bias, activation="relu", stream=7)
    packed = mm.cache_statistics()["launches_packed"]
    kwargs = dict(bias=bias, activation="relu", stream=7)
    tsjit.ops.matmul(a, b, out=out, **kwargs)
    assert mm.cache_statistics()["launches_packed"] == packed           # warm
    if change == "bias dtype":
        kwargs["bias"] = _view(bias, dtype="torch.float16")
    elif change == "bias address":
        kwargs["bias"] = FakeTorchTensor((1, 256))
    elif change == "activation":
        kwargs["activation"] = "silu"
    else:
        kwargs["stream"] = 8
    fast_before = len(mm._FAST)
    tsjit.ops.matmul(a, b, out=out, **kwargs)
    assert len(mm._FAST) == fast_before + 1                              # a new entry, not the warm one
