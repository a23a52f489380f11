"""The device language: dtypes, values, memory, builtins and math (see each module).

Modules: ``dtypes`` (scalar types; needs only numpy), ``values`` (typed SSA values and their
operators), ``constexpr``, ``memory`` (pointers, tensors, shared memory), ``builtins`` (thread ids,
atomics, shuffles, barriers), ``math``, ``sync`` (mbarrier, fences, cluster, PDL), ``async_copy``,
``tma``, ``fragment``, ``wgmma``, ``epilogue``, ``bounded_wait`` (the debug-build bounded waits),
``tcgen05`` / ``tmem`` / ``umma_descriptors`` (Blackwell tensor cores and tensor memory), ``clc``
(cluster launch control), ``warpgroup`` (the static warp range of emitted code; the warpgroup rule).

Every module but ``dtypes`` emits LLVM IR and so loads llvmlite.  This package imports none of
them itself: ``tsjit.lang.sync`` (attribute access on the package) loads the module on first use.
That lets host-only code such as the Task Scheduling model write device code against
``from tsjit import lang`` (``lang.sync.griddepcontrol_wait()`` in a work body, which the frontend
resolves when it compiles the body) and still import without llvmlite.
"""
from __future__ import annotations

import importlib

MODULES = ("dtypes", "values", "constexpr", "memory", "builtins", "math", "sync", "async_copy", "tma",
           "fragment", "wgmma", "epilogue", "bounded_wait", "tcgen05", "tmem", "umma_descriptors", "clc",
           "warpgroup")

__all__ = list(MODULES)


def __getattr__(name: str):
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(MODULES))
