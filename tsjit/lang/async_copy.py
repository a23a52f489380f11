"""``cp.async``: asynchronous global -> shared copies of 4, 8 or 16 bytes per thread (sm_80+).

Completion is tracked either with commit/wait groups (:func:`cp_async_commit_group`,
:func:`cp_async_wait_group`) or on an mbarrier (:func:`cp_async_mbarrier_arrive`: the barrier
receives this thread's arrival once all of its earlier ``cp.async`` copies have landed — what an
``AsyncLoad`` producer of a Task Scheduling pipeline does at ``commit``).
Source: PTX ISA 8.6 §9.7.9.24 "cp.async", §9.7.9.24.3 "cp.async.mbarrier.arrive".
"""
from __future__ import annotations

from llvmlite import ir

from tsjit.backend import emit
from tsjit.errors import CompilationError
from tsjit.lang.memory import Pointer, Tensor
from tsjit.lang.values import Value


def cp_async(dst, src, nbytes: int, *, cache_global_only: bool = False) -> None:
    """Copy ``nbytes`` (4, 8 or 16) from global ``src`` to shared ``dst`` asynchronously.

    Both addresses must be aligned to ``nbytes``; ``cache_global_only`` (16 bytes only) bypasses L1.

    Raises:
        CompilationError: wrong memory spaces, size, or known misalignment.
    """
    dst = dst.ptr if isinstance(dst, Tensor) else dst
    src = src.ptr if isinstance(src, Tensor) else src
    for name, p, memory in (("dst", dst, "shared"), ("src", src, "global")):
        if isinstance(p, Value):
            raise CompilationError(f"tsjit.cp_async: `{name}` must be a {memory}-memory pointer, got a "
                                   f"{p.dtype.name} element (t[i] loads it); pass its address: "
                                   f"tsjit.address_of(t, i) (e.g. tsjit.address_of(buf, s, e))")
    if not isinstance(dst, Pointer) or dst.address_space != emit.SHARED:
        raise CompilationError(f"tsjit.cp_async: `dst` must be a shared-memory pointer, got {_what(dst)}")
    if not isinstance(src, Pointer) or src.address_space != emit.GLOBAL:
        raise CompilationError(f"tsjit.cp_async: `src` must be a global-memory pointer, got {_what(src)}")
    if nbytes not in (4, 8, 16):
        raise CompilationError(f"tsjit.cp_async copies 4, 8 or 16 bytes, got {nbytes!r}")
    if cache_global_only and nbytes != 16:
        raise CompilationError("tsjit.cp_async: cache_global_only needs nbytes=16 (cp.async.cg)")
    for name, p in (("dst", dst), ("src", src)):
        if p.alignment < nbytes:
            raise CompilationError(f"tsjit.cp_async: `{name}` must be {nbytes}-byte aligned; it is only known to be "
                                   f"{p.alignment}-byte aligned. If the address is a multiple of {nbytes} bytes "
                                   f"(e.g. an index that is a multiple of {max(1, nbytes // p.dtype.itemsize)} "
                                   f"{p.dtype.name}), promise it: {name} = tsjit.assume_aligned({name}, {nbytes})")
    kind = "cg" if cache_global_only else "ca"
    emit.current().intrinsic(f"llvm.nvvm.cp.async.{kind}.shared.global.{nbytes}", [dst.ir, src.ir])


def _what(p) -> str:
    return repr(p) if isinstance(p, Pointer) else type(p).__name__


def cp_async_commit_group() -> None:
    """Close the group of this thread's pending ``cp.async`` copies."""
    emit.current().intrinsic("llvm.nvvm.cp.async.commit.group", [])


def cp_async_wait_group(pending: int = 0) -> None:
    """Wait until at most ``pending`` (compile-time) ``cp.async`` groups of this thread are in flight."""
    if not isinstance(pending, int) or pending < 0:
        raise CompilationError(f"cp_async_wait_group needs a compile-time count >= 0, got {pending!r}")
    emit.current().intrinsic("llvm.nvvm.cp.async.wait.group", [ir.Constant(emit.I32, pending)])


def cp_async_mbarrier_arrive(bar) -> None:
    """Arrive on mbarrier ``bar`` when this thread's earlier ``cp.async`` copies complete (``.noinc``:
    the arrival counts toward the barrier's initialized arrival count)."""
    if not isinstance(bar, Pointer) or bar.address_space != emit.SHARED or bar.dtype.bits != 64:
        raise CompilationError("tsjit.cp_async_mbarrier_arrive needs a shared-memory Int64 mbarrier pointer")
    emit.current().intrinsic("llvm.nvvm.cp.async.mbarrier.arrive.noinc.shared", [bar.ir])
