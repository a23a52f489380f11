"""The hot launch path: argument signatures and pre-packed launch plans.

A warm launch must cost little host time (it is benchmarked against triton), so per call
tsjit only:

1. walks the arguments once, building a cheap hashable *signature* (type, dtype, shape,
   strides, 16-byte alignment for arrays; type and range for scalars; the value for
   constexprs) and the list of values that change from call to call (data pointers and
   run-time scalars);
2. looks the signature up in the kernel's plan dict;
3. packs the changing values into the plan's argument buffer with one ``struct.pack_into``
   and calls ``cuLaunchKernel`` with the plan's fixed ``void*[]`` (whose entries point into
   that buffer; shapes and strides, fixed by the signature, were packed once).

A signature miss takes the full path (:mod:`.specialize`: specs, cache, compile) and
builds a plan.  Each launch configuration is checked against the kernel's launch contract
(:class:`~tsjit.abi.LaunchRequirements`) once per (plan, grid, block, smem, cluster, pdl),
before any driver call; the verdict and the driver's prepared configuration are cached in
``LaunchPlan.prepared``.
"""
from __future__ import annotations

import ctypes
import functools
import struct
import threading

from tsjit import env
from tsjit.abi import BY_REFERENCE
from tsjit.errors import GENERATED_CODE_PREFIX, LaunchError, hide_from_pytest
from tsjit.runtime import driver, launch_config, native_launch, streams
from tsjit.runtime.arrays import DeviceArray

_CONSTEXPR = object()


def argument_signature(values, kinds):
    """(signature tuple, changing values) for one call; ``None`` when an argument needs the slow path.

    ``kinds`` holds, per parameter, ``_CONSTEXPR`` for constexpr parameters, a DType annotation,
    or ``None``.
    """
    sig = []
    dyn = []
    for v, kind in zip(values, kinds):
        t = type(v)
        if kind is _CONSTEXPR:
            try:
                hash(v)
            except TypeError:
                return None, None
            sig.append((t, v))
        elif t is DeviceArray:
            p = v.data_ptr
            sig.append((t, v.dtype, v.shape, v.strides, not p & 15))
            dyn.append(p)
        elif t is int and kind is None:
            sig.append((t, -2147483648 <= v < 2147483648))
            dyn.append(v)
        elif (t is int or t is float) and kind is not None:
            sig.append((t, kind))
            dyn.append(v)
        elif t is float and kind is None:
            sig.append(t)
            dyn.append(v)
        elif t is bool:
            sig.append((t, kind))
            dyn.append(v)
        elif getattr(t, "__tsjit_tensormap__", False):
            sig.append((t, v.key()))
            dyn.append(_TensorMapSlot(v))
        elif t in _TORCH_TYPES or _is_torch_tensor_type(t):
            p = v.data_ptr()
            # torch.Size is a hashable tuple; get_device() is -1 on the host (the slow path rejects that)
            sig.append((t, v.dtype, v.shape, v.stride(), not p & 15, v.get_device()))
            dyn.append(p)
        else:
            return None, None
    return tuple(sig), dyn


_TORCH_TYPES: set = set()


def hot_caller(kinds):
    """``call(hots, args, stream) -> bool``: the warm launch, generated for one kernel's parameter
    ``kinds`` (as :func:`argument_signature` takes them).

    It computes the same signature as :func:`argument_signature` for the common argument types
    (tsjit and torch arrays, Python scalars, hashable constexprs) with one branch chain per
    parameter and no loop, looks the :class:`HotLaunch` up in ``hots`` and, when it exists and
    belongs to this thread, packs the changing values and makes the driver call.  It returns
    ``False`` without side effects for anything else (other argument types, TMA descriptors, a
    signature not yet warm, another thread), and the caller takes the general path.
    ``len(args)`` must equal ``len(kinds)``."""
    return _generate(kinds, method=False)


def hot_method(kinds, interpret_requested):
    """``__call__(self, *args, stream=None, cluster=None, pdl=False, check_launch=True, **kwargs)``: the
    launcher's call with :func:`hot_caller`'s warm launch inlined (one Python frame per launch instead
    of two), for a :class:`~tsjit.runtime.launcher.Launcher` subclass of one kernel.  ``self`` must have
    ``hot`` (the HotLaunch dict), ``fast`` and ``general(args, stream, cluster, pdl, check_launch,
    kwargs)``, which takes every call the warm launch does not (keywords, cluster / PDL overrides, a
    wrong argument count, ``TSJIT_INTERPRET``, and everything ``hot_caller`` declines);
    ``interpret_requested`` is :func:`tsjit.env.interpret_requested`."""
    return _generate(kinds, method=True, interpret_requested=interpret_requested)


def _generate(kinds, method: bool, interpret_requested=None):
    lines, keys, dyn, names = [], [], [], {"DeviceArray": DeviceArray, "TORCH": _TORCH_TYPES, "type": type,
                                           "get_ident": threading.get_ident, "stream_value": streams.stream_value,
                                           "thread_state": streams.thread_state,
                                           "interpret_requested": interpret_requested,
                                           "code_state": env.code_state,
                                           "__tracebackhide__": hide_from_pytest}
    decline = "return self.general(args, stream, cluster, pdl, check_launch, kwargs)" if method else "return False"
    for i, kind in enumerate(kinds):
        a, t, k, p = f"a{i}", f"t{i}", f"k{i}", f"p{i}"
        lines.append(f"    {t} = type({a})")
        keys.append(k)
        if kind is _CONSTEXPR:
            lines.append(f"    {k} = ({t}, {a})")
            continue
        dyn.append(p)
        if kind is None:
            lines += [f"    if {t} is DeviceArray:",
                      f"        {p} = {a}.data_ptr",
                      f"        {k} = ({t}, {a}.dtype, {a}.shape, {a}.strides, not {p} & 15)",
                      f"    elif {t} is int:",
                      f"        {p}, {k} = {a}, ({t}, -2147483648 <= {a} < 2147483648)",
                      f"    elif {t} is float:",
                      f"        {p}, {k} = {a}, {t}",
                      f"    elif {t} in TORCH:",
                      f"        {p} = {a}.data_ptr()",
                      f"        {k} = ({t}, {a}.dtype, {a}.shape, {a}.stride(), not {p} & 15, {a}.get_device())",
                      f"    elif {t} is bool:",
                      f"        {p}, {k} = {a}, ({t}, None)",
                      "    else:",
                      f"        {decline}"]
        else:
            names[f"kind{i}"] = kind
            lines += [f"    if {t} is int or {t} is float or {t} is bool:",
                      f"        {p}, {k} = {a}, ({t}, kind{i})",
                      "    else:",
                      f"        {decline}"]
    unpack = "".join(f"a{i}, " for i in range(len(kinds)))
    if method:
        head = ["def __call__(self, *args, stream=None, cluster=None, pdl=False, check_launch=True, **kwargs):",
                f"    if kwargs or cluster is not None or pdl or not check_launch or len(args) != {len(kinds)} \\",
                "            or not self.fast or interpret_requested():",
                f"        {decline}",
                "    hots = self.hot"]
    else:
        head = ["def call(hots, args, stream):"]
    source = "\n".join([
        *head,
        f"    {unpack or '_'} = args" if kinds else "    pass",
        *lines,
        "    try:",
        f"        hot = hots.get(({''.join(k + ', ' for k in keys)}))",
        "    except TypeError:  # an unhashable constexpr",
        f"        {decline}",
        "    if hot is None or hot.thread != get_ident() or hot.tensormap_slots or hot.env_state != code_state():",
        f"        {decline}",
        "    if stream is None:   # this thread's use_stream() stream, else the legacy one (streams.stream_value)",
        "        stream = thread_state.stream",
        "        stream = 0 if stream is None else stream.value",
        "    elif stream.__class__ is not int:",
        "        stream = stream_value(stream)",
        f"    hot.pack_into(hot.buffer, 0, {', '.join(dyn)})",
        "    err = hot.launch_ex(hot.addresses.get(stream) or hot.address(stream), hot.handle, hot.params, None)",
        "    if err:",
        "        hot.fail(err)",
        "    return None" if method else "    return True"])
    exec(compile(source, f"{GENERATED_CODE_PREFIX}warm launch of {len(kinds)} parameters>", "exec"), names)  # noqa: S102
    return names["__call__" if method else "call"]


def _is_torch_tensor_type(t) -> bool:
    """True (and remembered) for torch.Tensor and its subclasses, recognized without importing torch."""
    for base in t.__mro__:
        if base.__module__ == "torch" and base.__name__ == "Tensor":
            _TORCH_TYPES.add(t)
            return True
    return False


class _TensorMapSlot:
    """A TMA descriptor argument: its kernelParams entry points at the descriptor's own 128 bytes."""

    __slots__ = ("address", "owner")

    def __init__(self, tmap):
        self.address = tmap.address()
        self.owner = tmap


def split_dynamic(dyn):
    """(packed values, descriptor addresses) of one call's changing values."""
    if not any(type(v) is _TensorMapSlot for v in dyn):
        return dyn, ()
    return [v for v in dyn if type(v) is not _TensorMapSlot], [v.address for v in dyn if type(v) is _TensorMapSlot]


def constexpr_kind(annotation, is_constexpr: bool):
    return _CONSTEXPR if is_constexpr else annotation


class LaunchPlan:
    """A loaded kernel plus a fixed parameter block for one argument signature.

    ``dynamic`` lists, per changing value, the struct format; ``static_values`` are the packed
    shapes/strides.  The buffer layout is: changing values first (native alignment), then the
    static values; ``pointers`` is the ``void*[]`` the driver reads.
    """

    def __init__(self, compiled, specs, values_per_param):
        self.compiled = compiled
        self.smem = compiled.metadata.smem_bytes
        #: (grid, block, smem, cluster, pdl, check_launch) -> launch_config.PreparedLaunch: each
        #: configuration is checked against the launch contract once, before the driver sees it.
        self.prepared: dict = {}
        self.function = None  # the driver function, loaded by the first prepared configuration
        #: env.code_state() when the plan was made, just after its kernel was compiled or loaded (Kernel
        #: compares it per launch: a changed TSJIT_DEBUG etc. needs another build)
        self.env_state = env.code_state()
        # values_per_param: list of (format char list, values list, dynamic flags)
        dyn_slots, static_slots = [], []
        for fmts, vals, flags in values_per_param:
            for f, val, is_dyn in zip(fmts, vals, flags):
                if f == BY_REFERENCE:
                    continue
                if is_dyn:
                    dyn_slots.append(f)
                else:
                    static_slots.append((f, val))
        self.dyn_format = "@" + "".join(dyn_slots)
        full_format = self.dyn_format + "".join(f for f, _ in static_slots)
        self.buffer = ctypes.create_string_buffer(max(8, struct.calcsize(full_format)))
        if static_slots:
            struct.pack_into(full_format, self.buffer, 0, *([0] * len(dyn_slots)), *[v for _, v in static_slots])
        # offsets of every slot, in kernel parameter order
        offsets_dyn = [struct.calcsize("@" + "".join(dyn_slots[:i + 1])) - struct.calcsize(dyn_slots[i])
                       for i in range(len(dyn_slots))]
        all_static = [f for f, _ in static_slots]
        offsets_static = [struct.calcsize(self.dyn_format + "".join(all_static[:i + 1])) - struct.calcsize(all_static[i])
                          for i in range(len(all_static))]
        base = ctypes.addressof(self.buffer)
        pointers, di, si = [], 0, 0
        self.tensormap_slots = []
        for fmts, vals, flags in values_per_param:
            for f, is_dyn in zip(fmts, flags):
                if f == BY_REFERENCE:
                    self.tensormap_slots.append(len(pointers))
                    pointers.append(0)
                elif is_dyn:
                    pointers.append(base + offsets_dyn[di])
                    di += 1
                else:
                    pointers.append(base + offsets_static[si])
                    si += 1
        self.pointer_array = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        self.params = ctypes.addressof(self.pointer_array) if pointers else 0
        self.lock = threading.Lock()

    def pack(self, dyn) -> None:
        """Write one call's changing values (:func:`argument_signature`'s ``dyn``) into the parameter
        block and the descriptor slots; the caller holds :attr:`lock` until its driver call returns."""
        packed, descriptors = split_dynamic(dyn) if self.tensormap_slots else (dyn, ())
        if packed:
            struct.pack_into(self.dyn_format, self.buffer, 0, *packed)
        for slot, descriptor in zip(self.tensormap_slots, descriptors):
            self.pointer_array[slot] = descriptor


def config_address(prepared, addresses: dict, stream: int) -> int:
    """The address of ``prepared``'s ``CUlaunchConfig`` for raw stream handle ``stream`` (the
    struct is kept alive by ``prepared``), memoized in ``addresses``."""
    address = addresses.get(stream)
    if address is None:
        if len(addresses) >= 64:
            addresses.clear()
        address = addresses[stream] = prepared.for_stream(stream).getPtr()
    return address

def plan_layout(specs, packed_values):
    """Split the packed ctypes values of a launch into (formats, values, dynamic flags) per
    argument with parameters, as each spec's :meth:`parameters` (:mod:`tsjit.abi`) lays them out.

    Pointers and scalars are dynamic (they change per call under one signature); array shapes
    and strides are static (part of the signature); a TMA descriptor (format
    :data:`~tsjit.abi.BY_REFERENCE`) is not packed.
    """
    per_param, pos = [], 0
    for spec in specs:
        fields = spec.parameters()
        if not fields:
            continue
        values = packed_values[pos:pos + len(fields)]
        pos += len(fields)
        per_param.append(([f.host_format for f in fields],
                          [None if f.host_format == BY_REFERENCE else v.value for f, v in zip(fields, values)],
                          [f.dynamic for f in fields]))
    return per_param


_RAW_LAUNCH_EX = []   # [libcuda's cuLaunchKernelEx as a ctypes function, or None], loaded on first use


def raw_cu_launch_kernel_ex():
    """``cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void** kernelParams, void** extra)``
    called through ctypes with the address of a prepared ``CUlaunchConfig`` (cuda-python's
    ``getPtr()``): four pointer arguments, so it costs less host time than both the cuda-python
    wrapper and the eleven-argument ``cuLaunchKernel``, and it carries cluster and PDL attributes.
    None where libcuda cannot be loaded this way (CUDA driver API, "Execution Control")."""
    if not _RAW_LAUNCH_EX:
        try:
            fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
            fn.argtypes = [ctypes.c_void_p] * 4
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _RAW_LAUNCH_EX.append(fn)
    return _RAW_LAUNCH_EX[0]


_HELD_LAUNCH_EX = []  # [cuLaunchKernelEx through ctypes.PyDLL (the GIL kept), or None], loaded on first use


def held_cu_launch_kernel_ex():
    """:func:`raw_cu_launch_kernel_ex` called with the GIL held (``ctypes.PyDLL``, no argument
    conversion: it takes ``c_void_p`` objects), as torch's own launches are: 0.2-0.4 us less host time
    per launch (no GIL release / reacquire); a launch that blocks on a full queue blocks other Python
    threads meanwhile.  None where libcuda cannot be loaded this way."""
    if not _HELD_LAUNCH_EX:
        try:
            fn = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _HELD_LAUNCH_EX.append(fn)
    return _HELD_LAUNCH_EX[0]


def private_block(plan: LaunchPlan, packed=(), descriptors=()):
    """A copy of ``plan``'s parameter block (buffer, ``void*[]`` and its address) whose entries point
    into the copy, with ``packed`` changing values and TMA ``descriptors`` written in: a launcher
    owning one needs no lock around its driver call."""
    buffer = ctypes.create_string_buffer(plan.buffer.raw, len(plan.buffer))
    if packed:
        struct.pack_into(plan.dyn_format, buffer, 0, *packed)
    old, new = ctypes.addressof(plan.buffer), ctypes.addressof(buffer)
    pointers = [0 if p is None else p - old + new for p in plan.pointer_array]
    for slot, address in zip(plan.tensormap_slots, descriptors):
        pointers[slot] = address
    pointer_array = (ctypes.c_void_p * len(pointers))(*pointers)
    return buffer, pointer_array, ctypes.addressof(pointer_array) if plan.params else 0


class HotLaunch:
    """What a warm ``kernel[grid, block](...)`` needs for one argument signature: a private copy of
    the plan's parameter block (so no lock), the packer of its changing values, the driver
    function's handle and, per stream handle, the address of the prepared ``CUlaunchConfig``.
    Owned by one :class:`~tsjit.runtime.launcher.Launcher` and used only on the thread that built it
    (the driver context is current there)."""

    __slots__ = ("plan", "prepared", "handle", "addresses", "thread", "launch_ex", "buffer", "pointer_array",
                 "params", "pack_into", "tensormap_slots", "env_state")

    def __init__(self, plan: LaunchPlan, prepared, launch_ex):
        self.plan, self.prepared, self.launch_ex = plan, prepared, launch_ex
        self.handle = int(plan.function.handle)
        self.addresses: dict = {}
        self.thread = threading.get_ident()
        self.buffer, self.pointer_array, self.params = private_block(plan)
        self.pack_into = struct.Struct(plan.dyn_format).pack_into
        self.tensormap_slots = plan.tensormap_slots
        self.env_state = plan.env_state

    def address(self, stream: int) -> int:
        """The ``CUlaunchConfig`` address for raw stream handle ``stream``."""
        return self.addresses.get(stream) or config_address(self.prepared, self.addresses, stream)

    def __call__(self, dyn, stream: int) -> None:
        """Launch with one call's changing values (:func:`argument_signature`'s ``dyn``)."""
        if self.tensormap_slots:
            packed, descriptors = split_dynamic(dyn)
            for slot, descriptor in zip(self.tensormap_slots, descriptors):
                self.pointer_array[slot] = descriptor
        else:
            packed = dyn
        self.pack_into(self.buffer, 0, *packed)
        err = self.launch_ex(self.addresses.get(stream) or self.address(stream), self.handle, self.params, None)
        if err:
            self.fail(err)

    def fail(self, err) -> None:
        """Raise the ``LaunchError`` for driver result ``err``."""
        raise LaunchError(f"launch of kernel {self.plan.function.name!r} ({self.prepared.config}) failed: "
                          f"{driver.describe_result(err)}")


class BoundLaunch:
    """One kernel launch with every argument packed in advance (``Kernel.bind``): calling it costs
    one driver call (``cuLaunchKernelEx`` through ctypes on the thread that bound it, through
    cuda-python on other threads).  It owns a copy
    of its plan's parameter block, keeps the arguments (arrays, TensorMaps) alive, and may be
    called from several threads.

    ``bound(stream)``: ``stream`` is a raw CUDA stream handle (int; 0 = the legacy stream).
    """

    __slots__ = ("function", "prepared", "buffer", "pointer_array", "params", "arguments", "raw", "thread",
                 "handle", "addresses", "pinned")

    def __init__(self, plan: LaunchPlan, prepared, dyn, arguments):
        self.function = plan.function
        self.prepared = prepared
        self.arguments = arguments
        self.buffer, self.pointer_array, self.params = private_block(plan, *split_dynamic(dyn))
        self.raw = raw_cu_launch_kernel_ex()
        self.handle = None if self.raw is None else int(self.function.handle)
        self.addresses: dict = {}
        self.thread = threading.get_ident()
        self.pinned: dict = {}

    def direct(self, stream: int):
        """A zero-argument callable doing this launch on raw stream handle ``stream`` with no Python
        frame of its own: a :mod:`~tsjit.runtime.native_launch` ``Launch`` (the driver call made from C)
        where that extension is available, else :func:`held_cu_launch_kernel_ex` with its four arguments
        bound (ctypes).  It returns the driver's result (0: launched; anything else: nothing was launched,
        e.g. no current context on this thread: call ``bound(stream)``, which launches or raises); the GIL
        is held during the call either way.  None where ctypes cannot reach libcuda.  Valid while this
        BoundLaunch is alive (the native one keeps it alive)."""
        held = held_cu_launch_kernel_ex() if self.raw is not None else None
        if held is None or stream.__class__ is not int:
            return None
        cfg = self.pinned.get(stream)
        if cfg is None:
            if len(self.pinned) >= 16:          # never evicted (a callable handed out holds its address)
                return None
            cfg = self.pinned[stream] = self.prepared.for_stream(stream)
        native = native_launch.packed_launch(held, cfg.getPtr(), self.handle, self.params, self)
        if native is not None:
            return native
        pointer = ctypes.c_void_p
        return functools.partial(held, pointer(cfg.getPtr()), pointer(self.handle), pointer(self.params), None)

    def __call__(self, stream: int = 0) -> None:
        raw = self.raw
        if raw is not None and stream.__class__ is int and threading.get_ident() == self.thread:
            address = self.addresses.get(stream) or config_address(self.prepared, self.addresses, stream)
            err = raw(address, self.handle, self.params, None)
            if err:
                raise LaunchError(f"launch of kernel {self.function.name!r} ({self.prepared.config}) failed: "
                                  f"{driver.describe_result(err)}")
            return
        launch_config.launch_prepared(self.function, self.prepared, self.params, stream)
