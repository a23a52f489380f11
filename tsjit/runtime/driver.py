"""Checked wrapper over ``cuda.bindings.driver`` (the CUDA driver API).

Every ``cuda.bindings.driver`` call returns ``(CUresult, *values)`` and never raises;
:func:`check` turns a non-zero ``CUresult`` into a :class:`~tsjit.errors.LaunchError`
carrying the result's name and ``cuGetErrorString`` text, and unwraps the values.

Initialization is lazy and happens once: ``cuInit(0)``, the primary context of device 0,
its properties; each thread makes that context current once (a thread-local flag).
Without libcuda, importing works, :func:`gpu_available` is ``False``, and anything that
needs the driver raises ``LaunchError``.

:func:`launch` (= :func:`prepare_launch` + :func:`launch_prepared`) validates a
configuration once per ``(grid, block, smem_bytes, cluster, pdl)`` and function, caches a
``CUlaunchConfig`` per stream (with the cluster-dimension / programmatic-stream-
serialization attributes when asked for), then makes one ``cuLaunchKernelEx`` call.  On
H200 hosts (cuda-bindings 13.3, Python 3.12) that call with a cached config was 0.2-0.6 µs
cheaper than ``cuLaunchKernel`` (median 3.8 vs 4.0 µs; 5.4 vs 6.0 µs on a busier host).

Sources: CUDA Driver API reference; calls verified on an H200 (reference/toolchain.md §4).
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from operator import index as _as_int

from tsjit import env
from tsjit.errors import LaunchError, hide_from_pytest

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames

_lock = threading.Lock()


class _ThreadState(threading.local):
    ready = False    # device 0's primary context is current on this thread
    stream = None    # the innermost use_stream() of this thread


_tls = _ThreadState()
#: The thread-local state: ``thread_state.stream`` is this thread's innermost :func:`use_stream` stream
#: (a :class:`Stream`) or ``None``; read by the warm launch path (:func:`tsjit.runtime.launch.hot_caller`).
thread_state = _tls
_cu = None                      # the cuda.bindings.driver module, once imported
_context = None                 # CUcontext: primary context of device 0
_properties: "DeviceProperties | None" = None
_available: bool | None = None
_PREPARED_CACHE_LIMIT = 256     # launch configurations remembered per Function
_init_failure: str | None = None  # sticky message when the driver cannot be initialized


def check(result, what: str = "CUDA driver call"):
    """Unwrap a ``(CUresult, *values)`` tuple: ``None``, the single value, or a tuple of values.

    Raises:
        LaunchError: the ``CUresult`` is not ``CUDA_SUCCESS``; the message names ``what``,
            the result (``CUDA_ERROR_OUT_OF_MEMORY (2)``) and the driver's description.
    """
    if result[0]:
        raise LaunchError(_with_notes(f"{what} failed: {describe_result(result[0])}"))
    n = len(result)
    return None if n == 1 else result[1] if n == 2 else tuple(result[1:])


_error_notes: list = []  # callables giving text that explains a failed call (tsjit.runtime.hang_report)


def add_error_note(note) -> None:
    """Register ``note()`` (returns text or ``None``, never raises): its text leads the message of
    every ``LaunchError`` for a failed driver call, e.g. the hang report of a trapped debug kernel."""
    _error_notes.append(note)


def _with_notes(message: str) -> str:
    notes = [text for text in (note() for note in _error_notes) if text]
    return "\n".join(notes + [f"  (the driver: {message})"]) if notes else message


def describe_result(err) -> str:
    """``"NAME (code): description"`` for a ``CUresult`` (never raises)."""
    name, text = getattr(err, "name", None) or f"CUresult {int(err)}", ""
    with contextlib.suppress(Exception):  # the description is best effort
        res, raw = _cu.cuGetErrorString(err)
        if not res and raw:
            text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    return f"{name} ({int(err)}): {text}" if text else f"{name} ({int(err)})"


@dataclass(frozen=True)
class DeviceProperties:
    """Facts about device 0, read once with ``cuDeviceGetAttribute`` (H200 values in brackets).

    ``name`` ["NVIDIA H200"]; ``capability`` (major, minor) [(9, 0)]; ``sm_count`` [132];
    ``max_dynamic_smem_optin``: bytes of shared memory per block a kernel may opt in to
    [232448]; ``max_smem_per_block`` without opt-in [49152]; ``max_threads_per_block``
    [1024]; ``max_block_dims`` [(1024, 1024, 64)]; ``max_grid_dims`` [(2**31-1, 65535,
    65535)]; ``total_memory`` in bytes; ``driver_version`` [13000 for CUDA 13.0].
    """

    name: str
    capability: tuple[int, int]
    sm_count: int
    max_dynamic_smem_optin: int
    max_smem_per_block: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    total_memory: int = 0
    driver_version: int = 0

    @property
    def arch(self) -> str:  # "sm_90" for capability (9, 0)
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def default_target(self) -> str:
        """The arch-specific target tsjit compiles for: ``"sm_90a"`` on (9, 0), ``"sm_100a"`` on (10, 0)."""
        return self.arch + ("a" if self.capability[0] >= 9 else "")


def _call_quietly(function_name: str, *args) -> None:
    """Call a driver function from a finalizer: never raises (the driver may be gone)."""
    with contextlib.suppress(Exception):
        if _cu is not None:
            getattr(_cu, function_name)(*args)


def _finalize_quietly(owner, function_name: str, handle) -> None:
    """Release ``handle`` when ``owner`` is garbage-collected; not at exit (the process ends)."""
    weakref.finalize(owner, _call_quietly, function_name, handle).atexit = False


def _import_bindings():  # cuda.bindings.driver imports without libcuda; cuInit needs it
    from cuda.bindings import driver  # lazily: cuda-bindings is heavy and `import tsjit` needs no GPU
    return driver


def _initialize() -> None:
    global _cu, _context, _properties, _init_failure
    if _properties is not None:
        return
    with _lock:
        if _properties is not None:
            return
        if _init_failure is not None:
            raise LaunchError(_init_failure)
        try:
            cu = _import_bindings()
            result = cu.cuInit(0)
        except Exception as exc:  # ImportError, DynamicLibNotFoundError, ...
            _init_failure = (f"the CUDA driver is not available ({type(exc).__name__}: {exc}); "
                             "running kernels needs an NVIDIA GPU and driver (compiling does not); without one, "
                             "TSJIT_INTERPRET=1 runs every launch on the CPU interpreter")
            raise LaunchError(_init_failure) from None
        _cu = cu
        if result[0]:
            _init_failure = f"cuInit failed: {describe_result(result[0])}; no usable NVIDIA GPU"
            raise LaunchError(_init_failure)
        if check(cu.cuDeviceGetCount(), "cuDeviceGetCount") < 1:
            _init_failure = "the CUDA driver found no GPU (cuDeviceGetCount returned 0)"
            raise LaunchError(_init_failure)
        device = check(cu.cuDeviceGet(0), "cuDeviceGet(0)")
        _context = check(cu.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _properties = _read_properties(cu, device)


def _read_properties(cu, device) -> DeviceProperties:
    attr = cu.CUdevice_attribute

    def get(name: str) -> int:
        return int(check(cu.cuDeviceGetAttribute(getattr(attr, "CU_DEVICE_ATTRIBUTE_" + name), device),
                         f"cuDeviceGetAttribute({name})"))

    raw_name = check(cu.cuDeviceGetName(256, device), "cuDeviceGetName")
    name = raw_name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw_name, bytes) else str(raw_name)
    return DeviceProperties(
        name, (get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")), get("MULTIPROCESSOR_COUNT"),
        get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), get("MAX_SHARED_MEMORY_PER_BLOCK"), get("MAX_THREADS_PER_BLOCK"),
        (get("MAX_BLOCK_DIM_X"), get("MAX_BLOCK_DIM_Y"), get("MAX_BLOCK_DIM_Z")),
        (get("MAX_GRID_DIM_X"), get("MAX_GRID_DIM_Y"), get("MAX_GRID_DIM_Z")),
        int(check(cu.cuDeviceTotalMem(device), "cuDeviceTotalMem")),
        int(check(cu.cuDriverGetVersion(), "cuDriverGetVersion")))


def ensure_context() -> None:
    """Initialize the driver (once) and make device 0's primary context current on this
    thread. Raises :class:`LaunchError` without a driver or GPU."""
    if _tls.ready:
        return
    _initialize()
    check(_cu.cuCtxSetCurrent(_context), "cuCtxSetCurrent")
    _tls.ready = True


def gpu_available() -> bool:
    """Whether an NVIDIA GPU and driver can be used. Never raises; the answer is cached."""
    global _available
    if _available is None:
        try:
            ensure_context()
            _available = True
        except Exception:
            _available = False
    return _available


def _interpreted() -> bool:
    """``TSJIT_INTERPRET=1`` without a GPU: launches run synchronously on the CPU interpreter, so streams
    and synchronization are no-ops and the device is an H200 by its limits."""
    return env.interpret() and not gpu_available()


def device_properties() -> DeviceProperties:
    """Properties of device 0 (see :class:`DeviceProperties`); ``LaunchError`` without a GPU, except
    under ``TSJIT_INTERPRET=1``: there the H200's limits (132 SMs), with the capability of the
    interpreter's target (``TSJIT_TARGET``, default sm_90a), so launchers that size a grid run unchanged."""
    if _interpreted():
        digits = "".join(c for c in (env.target() or "sm_90a")[3:] if c.isdigit())     # "sm_100a" -> "100"
        major, minor = int(digits[:-1]), int(digits[-1])
        return DeviceProperties("CPU interpreter (H200 limits)", (major, minor), 132, 232448, 49152, 1024,
                                (1024, 1024, 64), (2 ** 31 - 1, 65535, 65535))
    ensure_context()
    return _properties


def bindings():
    """The ``cuda.bindings.driver`` module with the context current on this thread, for the
    runtime modules that call the driver directly; ``LaunchError`` without a GPU."""
    ensure_context()
    return _cu


def synchronize() -> None:
    """Wait for all work on device 0 (``cuCtxSynchronize``); raises ``LaunchError`` when an
    earlier asynchronous launch faulted (that is where kernel faults surface).  A no-op under
    ``TSJIT_INTERPRET=1`` without a GPU (interpreted launches are synchronous)."""
    if _interpreted():
        return
    ensure_context()
    check(_cu.cuCtxSynchronize(), "cuCtxSynchronize")


@dataclass(frozen=True)
class FunctionAttributes:
    """What the loaded cubin says about one kernel (``cuFuncGetAttribute``): ``num_regs`` per
    thread; ``local_bytes`` per thread (non-zero: spills or stack); ``static_smem_bytes`` and
    ``const_bytes`` per block; ``max_threads_per_block`` this kernel allows (registers, launch
    bounds); ``max_dynamic_smem_bytes``, the dynamic shared-memory limit; ``ptx_version`` and
    ``binary_version`` (e.g. 80 and 90)."""

    num_regs: int
    local_bytes: int
    static_smem_bytes: int
    const_bytes: int
    max_threads_per_block: int
    max_dynamic_smem_bytes: int
    ptx_version: int
    binary_version: int


class Module:
    """A loaded cubin (``CUmodule``). Unloaded when garbage-collected (not at exit)."""

    def __init__(self, handle, image_bytes: int):
        self.handle, self.image_bytes = handle, image_bytes
        self._functions: dict[str, Function] = {}
        _finalize_quietly(self, "cuModuleUnload", handle)

    def get_function(self, name: str) -> "Function":
        """The kernel ``name`` (cached ``cuModuleGetFunction``); ``LaunchError`` if absent."""
        if name not in self._functions:
            handle = check(bindings().cuModuleGetFunction(self.handle, name.encode()),
                           f"cuModuleGetFunction(kernel {name!r})")
            self._functions[name] = Function(handle, name, self)
        return self._functions[name]


class Function:
    """One kernel of a :class:`Module` (``CUfunction``) plus its cached launch configurations."""

    def __init__(self, handle, name: str, module: Module):
        self.handle, self.name, self.module = handle, name, module
        self.max_dynamic_smem: int | None = None  # what we set; None = driver default
        self._attributes: FunctionAttributes | None = None
        self._prepared: dict = {}

    def __repr__(self) -> str:
        return f"<tsjit Function {self.name!r}>"


def load_module(image: bytes) -> Module:
    """Load cubin/fatbin bytes, or PTX text (NUL-terminated here; the driver JIT-compiles
    it), into device 0's context.  Raises ``LaunchError`` without a GPU or when the driver
    rejects the image (``CUDA_ERROR_INVALID_IMAGE``, ``CUDA_ERROR_NO_BINARY_FOR_GPU``)."""
    ensure_context()
    data = bytes(image)
    if not data.startswith(b"\x7fELF") and b".version" in data[:4096] and not data.endswith(b"\0"):
        data += b"\0"
    handle = check(_cu.cuModuleLoadData(data), f"cuModuleLoadData ({len(data)} bytes)")
    return Module(handle, len(data))


def get_function(module: Module, name: str) -> Function:
    """``module.get_function(name)``: the kernel ``name`` (cached ``cuModuleGetFunction``)."""
    return module.get_function(name)


def function_attributes(fn: Function) -> FunctionAttributes:
    """Registers, local (spill) bytes, static smem and limits of ``fn``; read once, cached.

    ``max_dynamic_smem_bytes`` is the limit at that first read; :attr:`Function.max_dynamic_smem`
    tracks later :func:`set_max_dynamic_smem` calls.
    """
    if fn._attributes is None:
        ensure_context()
        attribute = _cu.CUfunction_attribute

        def get(name: str) -> int:
            return int(check(_cu.cuFuncGetAttribute(getattr(attribute, "CU_FUNC_ATTRIBUTE_" + name), fn.handle),
                             f"cuFuncGetAttribute({name}) of kernel {fn.name!r}"))

        fn._attributes = FunctionAttributes(
            get("NUM_REGS"), get("LOCAL_SIZE_BYTES"), get("SHARED_SIZE_BYTES"), get("CONST_SIZE_BYTES"),
            get("MAX_THREADS_PER_BLOCK"), get("MAX_DYNAMIC_SHARED_SIZE_BYTES"), get("PTX_VERSION"),
            get("BINARY_VERSION"))
    return fn._attributes


def set_max_dynamic_smem(fn: Function, nbytes: int) -> None:
    """Allow ``fn`` up to ``nbytes`` of dynamic shared memory per block (needed above 48 KiB;
    ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``).  :func:`launch` calls it by itself.

    Raises:
        LaunchError: ``nbytes`` plus the kernel's static shared memory exceeds the device's
            opt-in limit (232448 bytes on an H200), or the driver refuses.
    """
    ensure_context()
    static = function_attributes(fn).static_smem_bytes
    limit = _properties.max_dynamic_smem_optin - static
    if not 0 <= nbytes <= limit:
        raise LaunchError(f"launch field 'smem_bytes' of kernel {fn.name!r} must be in 0..{limit} "
                          f"(device opt-in limit {_properties.max_dynamic_smem_optin} minus "
                          f"{static} bytes of static shared memory); got {nbytes}")
    attr = _cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(_cu.cuFuncSetAttribute(fn.handle, attr, nbytes),
          f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) of kernel {fn.name!r}")
    fn.max_dynamic_smem = nbytes


@dataclass(frozen=True)
class LaunchConfig:  # a validated launch configuration; dimension tuples are (x, y, z)

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    cluster: tuple[int, int, int] | None
    pdl: bool


MAX_PORTABLE_CLUSTER_SIZE = 8  # CUDA C++ Programming Guide, "Thread Block Clusters"


def _dims(value, field: str, limits=None) -> tuple[int, int, int]:
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    dims = ()
    if 1 <= len(items) <= 3:
        try:
            dims = tuple([_as_int(v) for v in items] + [1] * (3 - len(items)))
        except TypeError:
            dims = ()
    if not dims:
        raise LaunchError(f"launch field '{field}' must be an int or a tuple of 1-3 ints; got {value!r}")
    for axis, (extent, limit) in enumerate(zip(dims, limits or ())):
        if not 1 <= extent <= limit:
            raise LaunchError(f"launch field '{field}[{axis}]' must be in 1..{limit}; got {extent} "
                              f"({field}={dims})")
    return dims


def validate_launch_config(grid, block, *, smem_bytes: int = 0, cluster=None, pdl: bool = False,
                           properties: DeviceProperties, static_smem_bytes: int = 0,
                           kernel_max_threads: int | None = None) -> LaunchConfig:
    """Check a launch configuration against device limits, without calling the driver.

    Args:
        grid: CTAs per grid, an int or ``(x[, y[, z]])``; each in ``1..max_grid_dims[i]``.
        block: threads per CTA, likewise; each within ``max_block_dims[i]``, the product at
            most ``max_threads_per_block`` (and ``kernel_max_threads`` when given).
        smem_bytes: dynamic shared memory per CTA, bytes; at most the opt-in limit minus
            ``static_smem_bytes``.
        cluster: CTAs per cluster or ``None``; each divides the grid's dimension, the
            product at most 8 (portable cluster size); needs sm_90.
        pdl: programmatic dependent launch (``griddepcontrol``); needs sm_90.
        properties: the device's limits.

    Raises:
        LaunchError: naming the field (``grid[1]``, ``block``, ``smem_bytes``,
            ``cluster[0]``, ...), the allowed range and the value given.
    """
    g = _dims(grid, "grid", properties.max_grid_dims)
    b = _dims(block, "block", properties.max_block_dims)
    threads = b[0] * b[1] * b[2]
    for limit, who in ((properties.max_threads_per_block, "the device"),
                       (kernel_max_threads, "this kernel (register use, launch bounds)")):
        if limit is not None and threads > limit:
            raise LaunchError(f"launch field 'block' has {threads} threads per CTA; {who} allows at most "
                              f"{limit} (block={b})")
    smem_limit = properties.max_dynamic_smem_optin - static_smem_bytes
    if not hasattr(smem_bytes, "__index__") or not 0 <= smem_bytes <= smem_limit:
        raise LaunchError(f"launch field 'smem_bytes' must be an int in 0..{smem_limit} (opt-in limit "
                          f"{properties.max_dynamic_smem_optin} - {static_smem_bytes} static); got {smem_bytes!r}")
    c = None
    if cluster is not None:
        c = _dims(cluster, "cluster")
        for axis in range(3):
            if c[axis] < 1 or g[axis] % c[axis]:
                raise LaunchError(f"launch field 'cluster[{axis}]' must be >= 1 and divide grid[{axis}]="
                                  f"{g[axis]}; got {c[axis]} (cluster={c}, grid={g})")
        size = c[0] * c[1] * c[2]
        if size > MAX_PORTABLE_CLUSTER_SIZE:
            raise LaunchError(f"launch field 'cluster' has {size} CTAs per cluster; at most "
                              f"{MAX_PORTABLE_CLUSTER_SIZE} (portable cluster size) are allowed (cluster={c})")
    for field, used in (("cluster", c is not None), ("pdl", pdl)):
        if used and properties.capability < (9, 0):
            raise LaunchError(f"launch field '{field}' needs compute capability 9.0+; got {properties.capability}")
    return LaunchConfig(g, b, _as_int(smem_bytes), c, bool(pdl))


class PreparedLaunch:
    """A validated :class:`LaunchConfig` of one kernel and its ``CUlaunchConfig`` per stream
    (built once each and never mutated, so launches from several threads need no lock)."""

    __slots__ = ("config", "default", "by_stream")

    def __init__(self, config: LaunchConfig):
        self.config, self.by_stream = config, {}
        self.default = self.for_stream(0)  # the legacy default stream

    def for_stream(self, stream):
        value = stream if stream.__class__ is int else int(stream)
        cfg = self.by_stream.get(value)
        if cfg is None:
            cfg, config = _cu.CUlaunchConfig(), self.config
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = config.grid
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = config.block
            cfg.sharedMemBytes, cfg.hStream = config.smem_bytes, _cu.CUstream(value)
            ids, launch_attrs = _cu.CUlaunchAttributeID, []
            if config.cluster is not None:
                launch_attrs.append(_cu.CUlaunchAttribute())
                launch_attrs[-1].id = ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                dim = launch_attrs[-1].value.clusterDim
                dim.x, dim.y, dim.z = config.cluster
            if config.pdl:
                launch_attrs.append(_cu.CUlaunchAttribute())
                launch_attrs[-1].id = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                launch_attrs[-1].value.programmaticStreamSerializationAllowed = 1
            cfg.attrs, cfg.numAttrs = launch_attrs, len(launch_attrs)
            if len(self.by_stream) >= 64:
                self.by_stream.clear()
            self.by_stream[value] = cfg
        return cfg


def launch(fn: Function, grid, block, params, *, smem_bytes: int = 0, stream=None,
           cluster=None, pdl: bool = False) -> None:
    """Launch ``fn`` asynchronously on ``stream``.

    Args:
        fn: a :class:`Function`; grid, block, smem_bytes, cluster, pdl: see
            :func:`validate_launch_config` (a larger ``smem_bytes`` raises the kernel's limit).
        params: ``kernelParams``: the int address of a ``void*[N]`` whose entry ``i`` points
            at argument ``i``'s bytes (a TMA descriptor's entry is ``TensorMap.address()``),
            or a buffer-protocol object holding that array (ctypes array), or ``None``.
            The driver copies the arguments before returning; buffers may be reused.
        stream: ``None`` (:func:`current_stream`), a :class:`Stream`, an int handle, or a
            torch/cupy/cuda.core stream.

    Raises:
        LaunchError: invalid configuration (checked once per distinct configuration), no GPU,
            or the driver refused.  Faults inside the kernel surface at the next sync.
    """
    prepared = prepare_launch(fn, grid, block, smem_bytes, cluster, pdl)
    if stream is None:
        stream = _tls.stream
    launch_prepared(fn, prepared, params, 0 if stream is None else stream_handle(stream))


def prepare_launch(fn: Function, grid, block, smem_bytes: int = 0, cluster=None,
                   pdl: bool = False) -> PreparedLaunch:
    """Validate a launch configuration once (cached on ``fn``; a larger ``smem_bytes`` raises
    the kernel's dynamic shared-memory limit) for :func:`launch_prepared`.  Raises like
    :func:`launch`."""
    key = (grid, block, smem_bytes, cluster, pdl)
    try:
        return fn._prepared[key]
    except (KeyError, TypeError):  # first use of this configuration, or unhashable (a list)
        pass
    attrs = function_attributes(fn)
    config = validate_launch_config(grid, block, smem_bytes=smem_bytes, cluster=cluster, pdl=pdl,
                                    properties=_properties, static_smem_bytes=attrs.static_smem_bytes,
                                    kernel_max_threads=attrs.max_threads_per_block)
    limit = attrs.max_dynamic_smem_bytes if fn.max_dynamic_smem is None else fn.max_dynamic_smem
    if config.smem_bytes > limit:
        set_max_dynamic_smem(fn, config.smem_bytes)
    prepared = PreparedLaunch(config)
    with contextlib.suppress(TypeError):  # an unhashable configuration is validated every time
        if len(fn._prepared) >= _PREPARED_CACHE_LIMIT:
            fn._prepared.clear()
        fn._prepared[key] = prepared
    return prepared


def launch_prepared(fn: Function, prepared: PreparedLaunch, params, stream=0) -> None:
    """The hot path of ``kernel[grid, block](...)``: one ``cuLaunchKernelEx`` with the cached
    config for ``stream`` (an int handle or ``CUstream``; 0 is the legacy default stream).
    ``params`` as in :func:`launch`.  Raises ``LaunchError`` if the driver refuses."""
    if not _tls.ready:
        ensure_context()
    cfg = prepared.default if stream.__class__ is int and stream == 0 else prepared.for_stream(stream)
    err = _cu.cuLaunchKernelEx(cfg, fn.handle, params, 0)[0]
    if err:
        raise LaunchError(_with_notes(f"launch of kernel {fn.name!r} ({prepared.config}) failed: "
                                      f"{describe_result(err)}"))


class Stream:
    """A CUDA stream. ``Stream(0)`` is the legacy default stream, ``Stream.per_thread()`` the
    per-thread default stream; ``Stream.create()`` owns (and destroys) a new one."""

    def __init__(self, handle: int, *, owned: bool = False):
        self.value = int(handle)
        self._handle = None
        if owned:
            _finalize_quietly(self, "cuStreamDestroy", handle)

    @property
    def handle(self):
        """The ``CUstream`` object passed to the driver."""
        if self._handle is None:
            self._handle = _import_bindings().CUstream(self.value)
        return self._handle

    @classmethod
    def create(cls, *, non_blocking: bool = True) -> "Stream":
        """A new stream; ``non_blocking`` ones do not synchronize with the legacy stream.  Under
        ``TSJIT_INTERPRET=1`` without a GPU, a stand-in handle (interpreted launches ignore streams)."""
        if _interpreted():
            return cls(0x7F00)
        ensure_context()
        flags = _cu.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else _cu.CUstream_flags.CU_STREAM_DEFAULT
        raw = check(_cu.cuStreamCreate(flags), "cuStreamCreate")
        stream = cls(int(raw), owned=True)
        stream._handle = raw
        return stream

    @classmethod
    def per_thread(cls) -> "Stream":
        """The calling thread's per-thread default stream (``CU_STREAM_PER_THREAD``)."""
        return cls(2)

    def synchronize(self) -> None:
        """Wait for all work queued on this stream (``cuStreamSynchronize``; a no-op under the interpreter)."""
        if _interpreted():
            return
        check(bindings().cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def __int__(self) -> int:
        return self.value

    def __cuda_stream__(self) -> tuple[int, int]:  # the cuda.core stream protocol
        return (0, self.value)

    def __repr__(self) -> str:
        return f"<tsjit Stream 0x{self.value:x}>"


_LEGACY_STREAM = Stream(0)  # handle 0


def current_stream() -> Stream:
    """The stream launches use by default: this thread's :func:`use_stream`, else the legacy one."""
    return _tls.stream or _LEGACY_STREAM


@contextlib.contextmanager
def use_stream(stream: Stream):
    """``with use_stream(s):`` makes ``s`` this thread's :func:`current_stream`."""
    previous, _tls.stream = _tls.stream, (
        stream if isinstance(stream, Stream) else Stream(_stream_value(stream)))
    try:
        yield _tls.stream
    finally:
        _tls.stream = previous


def _stream_value(stream) -> int:
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    if hasattr(stream, "__cuda_stream__"):  # cuda.core protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    try:
        return int(stream)  # int, CUstream
    except (TypeError, ValueError):
        raise LaunchError(f"launch field 'stream' must be a tsjit Stream, an int handle or a CUDA stream "
                          f"object (torch/cupy/cuda.core); got {type(stream).__name__}") from None


def stream_value(stream) -> int:
    """The raw handle of ``stream`` (the forms of :func:`launch`): ``None`` is this thread's
    :func:`use_stream` stream, else 0 (the legacy default stream).  Raises ``LaunchError`` for
    an object that is no stream."""
    if stream is None:
        current = _tls.stream
        return 0 if current is None else current.value
    if stream.__class__ is int:
        return stream
    if type(stream) is Stream:
        return stream.value
    return _stream_value(stream)


_STREAM_HANDLES: dict = {}


def stream_handle(stream):
    """The ``CUstream`` for ``stream`` (see :func:`launch` for the accepted forms; the object is
    reused per raw handle)."""
    if _cu is not None and isinstance(stream, _cu.CUstream):
        return stream
    value = stream_value(stream)
    cached = _STREAM_HANDLES.get(value)
    if cached is None:
        if len(_STREAM_HANDLES) > 64:
            _STREAM_HANDLES.clear()
        cached = _STREAM_HANDLES[value] = _import_bindings().CUstream(value)
    return cached
