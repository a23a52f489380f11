"""Checked wrapper over ``cuda.bindings.driver`` (the CUDA driver API).

Every ``cuda.bindings.driver`` call returns ``(CUresult, *values)`` and never raises;
:func:`check` turns a non-zero ``CUresult`` into a :class:`~tsjit.errors.LaunchError`
carrying the result's name and ``cuGetErrorString`` text, and unwraps the values.

Initialization is lazy and happens once: ``cuInit(0)``, the primary context of device 0,
its properties; each thread makes that context current once (a thread-local flag).
Without libcuda, importing works, :func:`gpu_available` is ``False``, and anything that
needs the driver raises ``LaunchError``.

Loaded code: :func:`load_module` (``CUmodule``), :class:`Function` (``CUfunction``) with its
:func:`function_attributes` and :func:`set_max_dynamic_smem`.  Launch configurations and the
launch call are :mod:`tsjit.runtime.launch_config`; streams are :mod:`tsjit.runtime.streams`.

Sources: CUDA Driver API reference; calls verified on an H200 (reference/toolchain.md §4).
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass

from tsjit import env
from tsjit.errors import LaunchError, hide_from_pytest

__tracebackhide__ = hide_from_pytest  # pytest shows a TsjitError without tsjit's frames

_lock = threading.Lock()


class _ThreadState(threading.local):
    ready = False    # device 0's primary context is current on this thread


_tls = _ThreadState()
_cu = None                      # the cuda.bindings.driver module, once imported
_context = None                 # CUcontext: primary context of device 0
_properties: "DeviceProperties | None" = None
_available: bool | None = None
_init_failure: str | None = None  # sticky message when the driver cannot be initialized


def check(result, what: str = "CUDA driver call"):
    """Unwrap a ``(CUresult, *values)`` tuple: ``None``, the single value, or a tuple of values.

    Raises:
        LaunchError: the ``CUresult`` is not ``CUDA_SUCCESS``; the message names ``what``,
            the result (``CUDA_ERROR_OUT_OF_MEMORY (2)``) and the driver's description.
    """
    if result[0]:
        raise LaunchError(with_notes(f"{what} failed: {describe_result(result[0])}"))
    n = len(result)
    return None if n == 1 else result[1] if n == 2 else tuple(result[1:])


_error_notes: list = []  # callables giving text that explains a failed call (tsjit.runtime.hang_report)


def add_error_note(note) -> None:
    """Register ``note()`` (returns text or ``None``, never raises): its text leads the message of
    every ``LaunchError`` for a failed driver call, e.g. the hang report of a trapped debug kernel."""
    _error_notes.append(note)


def with_notes(message: str) -> str:
    """``message`` led by the registered error notes' texts (:func:`add_error_note`), if any."""
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


def finalize_quietly(owner, function_name: str, handle) -> None:
    """Call the driver's ``function_name(handle)`` when ``owner`` is garbage-collected (never raises;
    not at exit: the process ends)."""
    weakref.finalize(owner, _call_quietly, function_name, handle).atexit = False


def import_bindings():
    """The ``cuda.bindings.driver`` module, imported without initializing the driver (it imports
    without libcuda; ``cuInit`` needs it)."""
    from cuda.bindings import driver  # lazily: cuda-bindings is heavy and `import tsjit` needs no GPU
    return driver


def no_gpu_hint(kernel_name: str = "kernel") -> str:
    """How to run without a GPU, for the messages of a launch or copy that needs one: the CPU interpreter."""
    return (f"without a GPU, run on the CPU interpreter: {kernel_name}.interpret[grid, block](...) runs one launch "
            f"there (numpy arrays are used in place, no tsjit.to_device needed), TSJIT_INTERPRET=1 runs every "
            f"launch and tsjit.to_device / tsjit.empty there")


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
            cu = import_bindings()
            result = cu.cuInit(0)
        except Exception as exc:  # ImportError, DynamicLibNotFoundError, ...
            _init_failure = (f"the CUDA driver is not available ({type(exc).__name__}: {exc}); "
                             f"running kernels needs an NVIDIA GPU and driver (compiling does not); {no_gpu_hint()}")
            raise LaunchError(_init_failure) from None
        _cu = cu
        if result[0]:
            _init_failure = f"cuInit failed: {describe_result(result[0])}; no usable NVIDIA GPU; {no_gpu_hint()}"
            raise LaunchError(_init_failure)
        if check(cu.cuDeviceGetCount(), "cuDeviceGetCount") < 1:
            _init_failure = f"the CUDA driver found no GPU (cuDeviceGetCount returned 0); {no_gpu_hint()}"
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


def interpreted() -> bool:
    """``TSJIT_INTERPRET=1`` without a GPU: launches run synchronously on the CPU interpreter, so streams
    and synchronization are no-ops and the device is an H200 by its limits."""
    return env.interpret() and not gpu_available()


_interpreted = interpreted


def device_properties() -> DeviceProperties:
    """Properties of device 0 (see :class:`DeviceProperties`); ``LaunchError`` without a GPU, except
    under ``TSJIT_INTERPRET=1``: there the H200's limits (132 SMs), with the capability of the
    interpreter's target (``TSJIT_TARGET``, default sm_90a), so launchers that size a grid run unchanged."""
    if interpreted():
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


def loaded_bindings():
    """The ``cuda.bindings.driver`` module if the driver was initialized in this process, else ``None``
    (never initializes anything)."""
    return _cu


def synchronize() -> None:
    """Wait for all work on device 0 (``cuCtxSynchronize``); raises ``LaunchError`` when an
    earlier asynchronous launch faulted (that is where kernel faults surface).  A no-op under
    ``TSJIT_INTERPRET=1`` without a GPU (interpreted launches are synchronous)."""
    if interpreted():
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
        finalize_quietly(self, "cuModuleUnload", handle)

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
