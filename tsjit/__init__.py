"""tsjit: a Triton-style JIT for warp-specialized NVIDIA GPU kernels.

Write a kernel in a Python subset, launch it with a grid and a block::

    @tsjit.kernel
    def add(x, y, out, n):
        i = tsjit.block_idx().x * tsjit.block_dim().x + tsjit.thread_idx().x
        if i < n:
            out[i] = x[i] + y[i]

    add[(blocks,), (256,)](x, y, out, n)

The API, by task (every name is ``tsjit.<name>``):

Kernels and compilation (:mod:`tsjit.runtime.kernel`)
    ``kernel`` (decorator; ``k[grid, block](*args)`` launches), ``compile`` (LLVM IR, PTX and
    cubin for given argument specs, no GPU needed), ``Kernel``, ``CompiledKernel``; ``func``
    (a device function, inlined where kernel code calls it), ``DeviceFunction``
    (:mod:`tsjit.frontend.device_function`).
    Without a GPU, ``k.interpret[grid, block](*args)`` (numpy arrays as arguments),
    ``tsjit.compile(..., interpret=True)`` or ``TSJIT_INTERPRET=1`` (every launch, and
    ``to_device`` / ``empty`` / ``TensorMap`` in host memory) run kernels on the CPU
    interpreter (:mod:`tsjit.interpret`); ``TSJIT_INTERPRET_CHECK=race`` adds race checks.
Host arrays and arguments (:mod:`tsjit.runtime.arrays`, :mod:`tsjit.runtime.tensormap`)
    ``DeviceArray``, ``empty``, ``zeros``, ``to_device``, ``spec`` (an argument's shape and
    dtype without data, for ``compile``), ``TensorMap`` (a TMA descriptor), ``tensormap_spec``;
    ``bfloat16_bits_to_float32`` / ``float_to_bfloat16_bits`` (a BFloat16 array's ``.numpy()`` is
    its ``uint16`` bit patterns).
Streams (:mod:`tsjit.runtime.streams`)
    ``Stream``, ``use_stream`` (``with tsjit.use_stream(s):`` launches go to ``s``),
    ``current_stream``, ``synchronize`` (wait for the device), ``gpu_available()`` (a usable NVIDIA
    GPU and driver; never raises).
Types (:mod:`tsjit.lang.dtypes`)
    ``Int8 Int16 Int32 Int64 Uint8 Uint16 Uint32 Uint64 Float16 BFloat16 Float32 Float64
    Boolean`` and the storage-only ``Float8E4M3 Float8E5M2``; ``DType``.  ``tsjit.Float32(x)``
    converts in device code.
Compile time (:mod:`tsjit.lang.constexpr`)
    ``Constexpr`` (parameter annotation), ``const_expr``, ``range_constexpr`` (unrolled),
    ``range`` (a run-time loop with hints), ``static_print``.
Device values and memory (:mod:`tsjit.lang.values`, :mod:`tsjit.lang.memory`)
    ``Value``, ``select``, ``Pointer``, ``Tensor``, ``shared_array``, ``dynamic_shared``,
    ``address_of``, ``assume_aligned`` (promise a pointer's alignment, for a 16-byte ``cp_async``
    or vector access); ``math`` (``tsjit.math.exp`` ...).
Threads, warps, atomics (:mod:`tsjit.lang.builtins`)
    ``thread_idx block_idx block_dim grid_dim warp_idx lane_idx cluster_ctarank cluster_size``,
    ``syncthreads syncwarp threadfence named_barrier_sync named_barrier_arrive``,
    ``shuffle shuffle_up shuffle_down shuffle_xor vote_all vote_any vote_ballot``,
    ``atomic_add atomic_min atomic_max atomic_cas``, ``clock64``, ``device_print``.
Barriers, clusters, PDL (:mod:`tsjit.lang.sync`)
    ``mbarrier_init mbarrier_arrive mbarrier_arrive_cluster mbarrier_expect_tx
    mbarrier_arrive_expect_tx mbarrier_try_wait mbarrier_wait``, ``fence_mbarrier_init
    fence_proxy_async``, ``cluster_arrive cluster_wait cluster_sync map_shared_rank``,
    ``elect_one``, ``setmaxnreg``, ``griddepcontrol_wait griddepcontrol_launch_dependents``.
Asynchronous copies (:mod:`tsjit.lang.async_copy`, :mod:`tsjit.lang.tma`)
    ``cp_async cp_async_commit_group cp_async_wait_group cp_async_mbarrier_arrive``,
    ``tma_load tma_store bulk_commit_group bulk_wait_group prefetch_tensormap``.
Tensor cores (:mod:`tsjit.lang.wgmma`, :mod:`tsjit.lang.fragment`, :mod:`tsjit.lang.epilogue`)
    ``wgmma`` (``tsjit.wgmma.mma_async`` ...), ``Fragment``, ``epilogue``; on Blackwell
    ``tcgen05`` (:mod:`tsjit.lang.tcgen05`: TMEM alloc, ``tcgen05.mma``, commit, ld/st) and ``clc``
    (:mod:`tsjit.lang.clc`: cluster launch control ``try_cancel`` / ``query_cancel``).
Errors (:mod:`tsjit.errors`)
    ``TsjitError`` and its kinds ``CompilationError``, ``ScheduleError``,
    ``VerificationError``, ``LaunchError``, ``InterpretError`` (a fault the CPU interpreter
    found: race, deadlock, out-of-bounds access), ``UsageError`` (host API misuse: ``UsageTypeError``,
    ``UsageValueError``, ``UsageKeyError``, ``UsageStateError``, each also the built-in
    exception it refines; ``CompileArgumentError``: a ``tsjit.compile`` argument that does not
    fit the kernel), ``CacheError``.

The Task Scheduling model (resources, schedules, tasks, ``TaskManager``) is :mod:`tsjit.ts`;
library kernels written with tsjit (``matmul``, ``bmm``, ``attention``) are :mod:`tsjit.ops`.

``import tsjit`` is cheap: every name above except the errors is loaded on first use, so
LLVM (llvmlite) and the CUDA bindings load only when a kernel is compiled or launched.
"""
from __future__ import annotations

import importlib

from tsjit.errors import (CacheError, CompilationError, CompileArgumentError, InterpretError, LaunchError,
                          ScheduleError, TsjitError, UsageError, UsageKeyError, UsageStateError, UsageTypeError,
                          UsageValueError, VerificationError)
from tsjit.errors import install_excepthook as _install_excepthook

_install_excepthook()  # a TsjitError prints with the user's frames only

__version__ = "0.1.0"

#: module -> the public names it provides; each loads on first access (PEP 562 ``__getattr__``).
_PROVIDERS: dict[str, tuple[str, ...]] = {
    "tsjit.runtime.kernel": ("kernel", "compile", "Kernel", "CompiledKernel"),
    "tsjit.runtime.arrays": ("DeviceArray", "empty", "zeros", "to_device", "spec", "bfloat16_bits_to_float32",
                             "float_to_bfloat16_bits"),
    "tsjit.runtime.tensormap": ("TensorMap",),
    "tsjit.runtime.streams": ("Stream", "use_stream", "current_stream"),
    "tsjit.runtime.driver": ("synchronize", "gpu_available"),
    "tsjit.frontend.device_function": ("func", "DeviceFunction"),
    "tsjit.abi": ("tensormap_spec",),
    "tsjit.lang.dtypes": ("DType", "Int8", "Int16", "Int32", "Int64", "Uint8", "Uint16", "Uint32",
                          "Uint64", "Float16", "BFloat16", "Float32", "Float64", "Boolean",
                          "Float8E4M3", "Float8E5M2"),
    "tsjit.lang.constexpr": ("Constexpr", "const_expr", "range", "range_constexpr"),
    "tsjit.lang.values": ("Value", "select"),
    "tsjit.lang.memory": ("Pointer", "Tensor", "shared_array", "dynamic_shared", "assume_aligned"),
    "tsjit.lang.builtins": ("thread_idx", "block_idx", "block_dim", "grid_dim", "warp_idx", "lane_idx",
                            "cluster_ctarank", "cluster_size", "syncthreads", "syncwarp", "threadfence",
                            "named_barrier_sync", "named_barrier_arrive", "shuffle", "shuffle_up",
                            "shuffle_down", "shuffle_xor", "vote_all", "vote_any", "vote_ballot",
                            "atomic_add", "atomic_min", "atomic_max", "atomic_cas", "clock64",
                            "device_print", "address_of"),
    "tsjit.lang.sync": ("mbarrier_init", "mbarrier_arrive", "mbarrier_arrive_cluster", "mbarrier_expect_tx",
                        "mbarrier_arrive_expect_tx", "mbarrier_try_wait", "mbarrier_wait",
                        "fence_mbarrier_init", "fence_proxy_async", "cluster_arrive", "cluster_wait",
                        "cluster_sync", "map_shared_rank", "elect_one", "setmaxnreg",
                        "griddepcontrol_wait", "griddepcontrol_launch_dependents"),
    "tsjit.lang.async_copy": ("cp_async", "cp_async_commit_group", "cp_async_wait_group",
                              "cp_async_mbarrier_arrive"),
    "tsjit.lang.tma": ("tma_load", "tma_store", "bulk_commit_group", "bulk_wait_group", "prefetch_tensormap"),
    "tsjit.lang.fragment": ("Fragment",),
}
#: public name -> module, for names that are modules themselves (``tsjit.math.exp``).
_MODULES = {"math": "tsjit.lang.math", "wgmma": "tsjit.lang.wgmma", "tcgen05": "tsjit.lang.tcgen05",
            "clc": "tsjit.lang.clc", "epilogue": "tsjit.lang.epilogue", "ops": "tsjit.ops"}
_LAZY = {name: module for module, names in _PROVIDERS.items() for name in names}

__all__ = ["TsjitError", "CompilationError", "CompileArgumentError", "ScheduleError", "VerificationError", "LaunchError",
           "InterpretError", "UsageError", "UsageTypeError", "UsageValueError", "UsageKeyError", "UsageStateError",
           "CacheError", "static_print", *_LAZY, *_MODULES]


def static_print(*args) -> None:
    """Print compile-time values while a kernel compiles (Python's ``print`` at trace time)."""
    print(*args)


def _interpreter_entry():
    """The CPU interpreter's entry points (:mod:`tsjit.interpret.launch`) for the runtime, which sits
    below the interpreter and cannot import it."""
    from tsjit.interpret import launch  # lazily: the interpreter loads the compiler, llvmlite and numpy
    return launch


#: names a Triton or CUDA user reaches for first -> what tsjit calls them (tsjit is SIMT: one Python
#: function per thread, like CUDA C++ or numba-cuda, not Triton's block programs)
_FOREIGN_NAMES = {
    "program_id": "tsjit.block_idx().x (.y, .z); the thread inside the block is tsjit.thread_idx().x",
    "num_programs": "tsjit.grid_dim().x (.y, .z)",
    "arange": "nothing: tsjit kernels are per-thread (SIMT); index with tsjit.thread_idx().x and loop",
    "jit": "@tsjit.kernel (a kernel) or @tsjit.func (a device function)",
    "constexpr": "tsjit.Constexpr[int] (a parameter annotation) or tsjit.const_expr(...)",
    "static_range": "tsjit.range_constexpr",
    "cdiv": "Python's -(-a // b) or (a + b - 1) // b",
    "debug_barrier": "tsjit.syncthreads()",
    "__syncthreads": "tsjit.syncthreads()",
    "threadIdx": "tsjit.thread_idx()", "blockIdx": "tsjit.block_idx()", "blockDim": "tsjit.block_dim()",
    "gridDim": "tsjit.grid_dim()",
}


def _missing_name(name: str) -> AttributeError:
    """The AttributeError for ``tsjit.<name>`` that does not exist, with the closest public names
    (and the tsjit spelling of a Triton / CUDA name) in its message and in ``.hint``, which the
    frontend appends to the CompilationError of kernel code."""
    if name.startswith("__") and name.endswith("__"):
        return AttributeError(f"module 'tsjit' has no attribute {name!r}")
    import difflib  # lazily: only a missing name needs it; `import tsjit` stays cheap
    if name in _FOREIGN_NAMES:
        hint = f"tsjit's spelling of {name} is {_FOREIGN_NAMES[name]}"
    else:
        close = difflib.get_close_matches(name, __all__, n=3, cutoff=0.6)
        hint = ("did you mean " + " or ".join(f"tsjit.{c}" for c in close) + "?") if close else \
            "`dir(tsjit)` and `help(tsjit)` list the public names"
    exc = AttributeError(f"module 'tsjit' has no attribute {name!r}; {hint}")
    exc.hint = hint
    return exc


def __getattr__(name: str):
    """Load the public name ``name`` from the module that provides it, on its first use."""
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _LAZY:
        provider = importlib.import_module(_LAZY[name])
        if _LAZY[name] == "tsjit.runtime.kernel":
            provider.interpreter_loader = _interpreter_entry
        value = getattr(provider, name)
    else:
        raise _missing_name(name)
    globals()[name] = value  # later accesses are plain attribute lookups
    return value


def __dir__() -> list[str]:
    """The module's names, the not yet loaded public ones included (not the ``annotations`` and
    ``importlib`` this file uses itself)."""
    return sorted((set(globals()) - {"annotations", "importlib"}) | set(__all__))
