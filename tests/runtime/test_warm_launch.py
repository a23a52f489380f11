"""The warm launch path without a GPU: ``kernel[grid, block](...)`` packs each call's fresh
pointers and scalars into the plan's parameter block and makes one ``cuLaunchKernelEx`` with the
prepared configuration of the right stream.  The driver is faked: the fake records, at the
moment of each call, the stream and the bytes the kernel parameters point at."""
import ctypes
import struct
import types

import pytest

import tsjit
from tsjit.runtime import launch_config
from tsjit.runtime import kernel as K
from tsjit.runtime import launch as L
from tsjit.runtime import launcher as launcher_module
from tsjit.runtime.arrays import DeviceArray


@tsjit.kernel
def axpy(x, out, alpha: tsjit.Float32, n: tsjit.Int32):
    i = tsjit.thread_idx().x
    if i < n:
        out[i] = alpha * x[i]


def _fake_array(ptr, n=64):
    a = object.__new__(DeviceArray)
    a.dtype, a.shape, a.strides, a.data_ptr, a.owner = tsjit.Float32, (n,), (1,), ptr, None
    return a


@pytest.fixture
def fake_driver(monkeypatch):
    calls = []

    class Prepared:
        def __init__(self, config):
            self.config = config
            self.configs = {}

        def for_stream(self, stream):
            cfg = self.configs.setdefault(stream, ctypes.c_uint64(stream))
            return types.SimpleNamespace(getPtr=lambda: ctypes.addressof(cfg))

    def prepare(plan, config):
        plan.function = types.SimpleNamespace(handle=7, name="axpy")
        prepared = Prepared(config)
        try:
            plan.prepared[config] = prepared
        except TypeError:   # as the real one: an unhashable configuration is prepared every time
            pass
        return prepared

    def slow_launch(fn, prepared, params, stream=0):
        calls.append(("slow", stream, params))

    def launch_ex(address, handle, params, extra):
        stream = ctypes.c_uint64.from_address(address).value
        calls.append(("hot", stream, params))
        return 0

    monkeypatch.setattr(axpy, "_launchers", {})   # launchers and plans of earlier tests hold their fakes
    monkeypatch.setattr(axpy, "_plans", {})
    monkeypatch.setattr(K, "_launch_target", lambda: "sm_90a")
    monkeypatch.setattr(K, "_prepare", prepare)
    monkeypatch.setattr(launch_config, "launch_prepared", slow_launch)
    monkeypatch.setattr(L, "_RAW_LAUNCH_EX", [launch_ex])
    monkeypatch.setattr(launcher_module, "raw_cu_launch_kernel_ex", lambda: launch_ex)
    return calls


def _params(params):
    """The 8-byte words the kernel parameters (the void*[] at ``params``) point at."""
    count = len(next(iter(axpy._plans.values())).pointer_array)
    pointers = (ctypes.c_void_p * count).from_address(params)
    return [ctypes.c_uint64.from_address(p).value for p in pointers if p]


def test_second_call_takes_the_hot_path_with_fresh_values(fake_driver):
    launch = axpy[(1,), (64,)]
    launch(_fake_array(0x1000), _fake_array(0x2000), 1.5, 10)
    assert fake_driver[-1][0] == "slow"
    launch(_fake_array(0x3000), _fake_array(0x4000), 2.5, 20)
    kind, stream, params = fake_driver[-1]
    assert kind == "hot" and stream == 0
    values = _params(params)
    assert 0x3000 in values and 0x4000 in values and 0x1000 not in values
    assert struct.pack("<f", 2.5) in b"".join(struct.pack("<Q", v) for v in values)
    assert 20 in [v & 0xFFFFFFFF for v in values]


def test_hot_path_honours_use_stream_and_explicit_handles(fake_driver):
    launch = axpy[(1,), (64,)]
    args = (_fake_array(0x1000), _fake_array(0x2000), 1.0, 1)
    launch(*args)
    with tsjit.use_stream(tsjit.Stream(0x77)):
        launch(*args)
    assert fake_driver[-1][:2] == ("hot", 0x77)
    launch(*args, stream=0x99)
    assert fake_driver[-1][:2] == ("hot", 0x99)
    launch(*args, stream=tsjit.Stream(0x55))
    assert fake_driver[-1][:2] == ("hot", 0x55)
    launch(*args)
    assert fake_driver[-1][:2] == ("hot", 0)


def test_keywords_callable_grids_and_list_grids_take_the_full_path(fake_driver):
    args = (_fake_array(0x1000), _fake_array(0x2000), 1.0, 1)
    for _ in range(2):
        axpy[lambda a: (1,), (64,)](*args)
        assert fake_driver[-1][0] == "slow"
    for _ in range(2):
        axpy[[1], (64,)](*args)
    axpy[(1,), (64,)](args[0], args[1], alpha=1.0, n=1)
    assert fake_driver[-1][0] == "slow"


def test_a_new_signature_is_a_new_plan(fake_driver):
    launch = axpy[(1,), (64,)]
    launch(_fake_array(0x1000), _fake_array(0x2000), 1.0, 1)
    launch(_fake_array(0x1000, 32), _fake_array(0x2000, 32), 1.0, 1)   # another shape: first call again
    assert fake_driver[-1][0] == "slow"
    launch(_fake_array(0x1000, 32), _fake_array(0x2000, 32), 1.0, 1)
    assert fake_driver[-1][0] == "hot"


def test_hot_path_defers_to_tsjit_interpret_set_after_warm_up(fake_driver, monkeypatch):
    launch = axpy[(1,), (64,)]
    args = (_fake_array(0x1000), _fake_array(0x2000), 1.0, 1)
    launch(*args)
    launch(*args)
    assert fake_driver[-1][0] == "hot"
    seen = []
    monkeypatch.setattr(axpy, "_interpret", lambda *a, **k: seen.append(a))
    monkeypatch.setenv("TSJIT_INTERPRET", "1")
    count = len(fake_driver)
    launch(*args)
    assert seen and len(fake_driver) == count   # the interpreter ran it, not the driver
    monkeypatch.setenv("TSJIT_INTERPRET", "0")
    launch(*args)
    assert fake_driver[-1][0] == "hot"


class Tensor:   # recognized as a torch tensor type by module and name, as torch.Tensor is
    def __init__(self, ptr, shape=(8,), dtype="float32"):
        self.ptr, self.shape, self.dtype = ptr, shape, dtype

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return (1,)

    def get_device(self):
        return 0


Tensor.__module__ = "torch"


@pytest.mark.parametrize("kinds, args", [
    ([None, None, None, None], (_fake_array(0x1000), 5, 2.5, True)),
    ([None, None], (_fake_array(0x1008), 2 ** 40)),                      # unaligned pointer, 64-bit int
    ([tsjit.Float32, tsjit.Int32, tsjit.Int64], (3, 1.5, False)),        # annotated scalars, any Python scalar
    ([L._CONSTEXPR, None, L._CONSTEXPR], (128, Tensor(0x5000), "tma")),  # constexprs around a torch tensor
    ([L._CONSTEXPR], ((1, 2),)),
    ([], ()),
])
def test_the_generated_warm_launch_computes_argument_signature(kinds, args):
    sig, dyn = L.argument_signature(args, kinds)   # the reference (it also registers the torch type)
    assert sig is not None
    packed = []

    class Hot:
        thread = __import__("threading").get_ident()
        tensormap_slots = []
        env_state = tsjit.env.code_state()
        addresses = {0: 1234}
        handle, params, buffer = 7, 8, None

        def pack_into(self, buffer, offset, *values):
            packed.append(values)

        def launch_ex(self, address, handle, params, extra):
            assert (address, handle, params) == (1234, 7, 8)
            return 0

    call = L.hot_caller(kinds)
    assert call({sig: Hot()}, args, 0) is True
    assert packed == [tuple(dyn)]
    assert call({}, args, 0) is False   # not warm: the caller takes the general path


@pytest.mark.parametrize("kinds, args", [
    ([None, None, None, None], (_fake_array(0x1000), 5, 2.5, True)),
    ([L._CONSTEXPR, None, L._CONSTEXPR], (128, Tensor(0x5000), "tma")),
    ([], ()),
])
def test_the_generated_launcher_call_launches_warm_signatures_and_hands_the_rest_to_general(kinds, args):
    """launch.hot_method: the same signature and packing as hot_caller, in the launcher's own __call__;
    everything else (not warm, keywords, overrides, a wrong argument count, TSJIT_INTERPRET) goes to
    ``general`` with the call's arguments unchanged."""
    sig, dyn = L.argument_signature(args, kinds)
    packed, launched, general = [], [], []
    interpret = [False]

    class Hot:
        thread = __import__("threading").get_ident()
        tensormap_slots = []
        env_state = tsjit.env.code_state()
        addresses = {0: 1234, 77: 4321}
        handle, params, buffer = 7, 8, None

        def pack_into(self, buffer, offset, *values):
            packed.append(values)

        def launch_ex(self, address, handle, params, extra):
            launched.append((address, handle, params, extra))
            return 0

    class FakeLauncher:
        __call__ = L.hot_method(kinds, lambda: interpret[0])
        fast = True
        hot = {sig: Hot()}

        def general(self, *call):
            general.append(call)
            return "general"

    launcher = FakeLauncher()
    assert launcher(*args) is None and launcher(*args, stream=77) is None
    assert packed == [tuple(dyn)] * 2 and launched == [(1234, 7, 8, None), (4321, 7, 8, None)] and not general
    declined = [((*args, 0), {}), (args, {"cluster": (2, 1, 1)}), (args, {"pdl": True}), (args, {"check_launch": False}),
                (args, {"extra": 1})]
    for call_args, keywords in declined:
        assert launcher(*call_args, **keywords) == "general"
    interpret[0] = True
    assert launcher(*args) == "general"
    interpret[0] = False
    launcher.hot = {}
    assert launcher(*args, stream=5) == "general"   # not warm
    assert general[-1] == (args, 5, None, False, True, {}) and general[1][2] == (2, 1, 1)
    assert len(general) == len(declined) + 2 and len(launched) == 2


def test_the_generated_warm_launch_declines_what_it_does_not_handle():
    call = L.hot_caller([L._CONSTEXPR, None])
    hots = {}
    assert call(hots, ([1, 2], 3), 0) is False          # an unhashable constexpr
    assert call(hots, (1, object()), 0) is False        # an argument of no known type
    assert L.hot_caller([tsjit.Float32])({}, (_fake_array(0x1000),), 0) is False


def test_a_code_affecting_variable_set_after_warm_up_gives_the_other_build(fake_driver, monkeypatch):
    """TSJIT_DEBUG=1 set between two launches of one signature: the next launch leaves the warm record
    and the plan of the release build behind and launches the debug build (then warm again); unset,
    the release build comes back.  Neither an in-memory compile nor a warm record outlives the
    environment it was made under (tsjit.env.code_state)."""
    monkeypatch.delenv("TSJIT_DEBUG", raising=False)
    launch = axpy[(1,), (64,)]
    args = (_fake_array(0x1000), _fake_array(0x2000), 1.0, 1)
    launch(*args)
    launch(*args)
    assert fake_driver[-1][0] == "hot"
    release = next(iter(axpy._plans.values())).compiled
    monkeypatch.setenv("TSJIT_DEBUG", "1")
    launch(*args)
    assert fake_driver[-1][0] == "slow"
    debug = next(iter(axpy._plans.values())).compiled
    assert debug is not release and debug.metadata["key"] != release.metadata["key"]
    assert tsjit.compile(axpy, *args, target="sm_90a") is debug
    launch(*args)
    assert fake_driver[-1][0] == "hot"
    monkeypatch.delenv("TSJIT_DEBUG")
    launch(*args)
    assert fake_driver[-1][0] == "slow" and next(iter(axpy._plans.values())).compiled is release


def test_the_in_memory_compile_follows_the_assembler_setting(monkeypatch):
    """TSJIT_ASSEMBLER changed in one process: tsjit.compile returns the other assembler's cubin, not
    the memo of the first (a stale in-memory entry is a wrong answer)."""
    from tsjit.backend import assemble
    tools = []
    for tool in ("ptxas", "nvjitlink", "ptxas"):
        monkeypatch.setenv("TSJIT_ASSEMBLER", tool)
        try:
            assemble.select_tool()
        except Exception:   # this machine lacks one of the assemblers
            pytest.skip(f"needs both ptxas and nvJitLink ({tool} not found)")
        compiled = tsjit.compile(axpy, _fake_array(0x1000), _fake_array(0x2000), 1.0, 1, target="sm_90a")
        tools.append(compiled.metadata["tool"])
    assert tools == ["ptxas", "nvjitlink", "ptxas"]
