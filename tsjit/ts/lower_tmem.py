"""Lowering of tensor memory: the kernel code that allocates the TaskManager's TMEM layout before the
tasks run and frees it after (sm_100a / sm_100f; the layout itself is :mod:`tsjit.ts.tmem`).

``setup_resources_and_tasks()`` calls :func:`allocate` (warp 0: ``tcgen05.alloc`` of the layout's
columns rounded up to a power of 2, at least 32, into a 4-byte shared-memory mailbox, then
``tcgen05.relinquish_alloc_permit`` and ``tcgen05.fence::before_thread_sync``; PTX ISA 9.1
§9.7.16.7.1), its CTA barrier follows, and :func:`read_base` (``fence::after_thread_sync`` + a
load of the mailbox) gives the base address work bodies see as ``stage_info.context.tmem_ptr_i32``.
After the tasks ``run()`` calls :func:`free`: fence, CTA barrier, warp 0's ``tcgen05.dealloc``
(every allocation must be freed before the kernel exits).  The mailbox is the SMEM allocator's
``add_tmem_ptr`` allocation when there is one, else a reservation of its own.

Over 2-CTA UMMA pairs (the rings' ``cta_layout_vmnk`` has V = 2) every allocation instruction is
``.cta_group::2``: warp 0 of *each* CTA of the pair issues it, the two warps perform it collectively
(PTX ISA 9.1 §9.7.16.5, "Issue Granularity"), and the release waits at a cluster barrier instead of a
CTA barrier, so no CTA deallocates while its peer's MMAs may still use the pair's tensor memory.
Every tcgen05 instruction of a kernel uses the same CTA group (the MMAs and commits of the pair's
rings are ``cta_group::2`` too).
"""
from __future__ import annotations

from tsjit.errors import CompilationError
from tsjit.lang import builtins as B
from tsjit.lang import dtypes as dt
from tsjit.lang import sync
from tsjit.lang import tcgen05
from tsjit.lang.memory import shared_pointer
from tsjit.lang.values import compare
from tsjit.ts.cluster_layout import pair_size
from tsjit.ts.tmem import allocation_columns

__all__ = ["allocate", "read_base", "free", "cta_group"]


def cta_group(manager) -> int:
    """The tcgen05 CTA group of ``manager``'s kernel: V of the UMMA rings' ``cta_layout_vmnk`` (2 for a
    2-CTA pair, else 1)."""
    groups = {pair_size(cfg) for cfg in (getattr(r, "pipeline_config", None) for r in manager.resources)
              if cfg is not None and cfg.protocol.needs_sm100}
    return max(groups, default=1)


def _mailbox(ctx, manager):
    """The shared-memory Uint32 that receives the TMEM base: the SMEM allocator's ``add_tmem_ptr``
    allocation when there is one, else a 4-byte reservation of its own (``ctx.reserve_shared``)."""
    allocator = getattr(manager, "smem_allocator", None)
    slot = getattr(allocator, "tmem_ptr_allocation", None)
    if slot is not None and getattr(slot, "block_base", None) is not None and slot.offset is not None:
        return shared_pointer(slot.block_base + slot.offset, dt.Uint32, 16)
    offset = ctx.reserve_shared(4, 16)
    return shared_pointer(offset, dt.Uint32, 16)


def allocate(ctx, manager):
    """Emit the TMEM allocation of ``manager``'s layout through ``ctx`` (the kernel's
    :class:`~tsjit.frontend.structured.Structured` interface; warp 0: ``tcgen05.alloc`` +
    ``relinquish_alloc_permit``, then ``fence::before_thread_sync``); returns ``(mailbox, columns,
    cta group)``, or None when no resource needs TMEM.  The caller's CTA barrier must follow, then
    :func:`read_base`.

    Raises:
        CompilationError: the kernel is not compiled for a tcgen05 target (the resources need TMEM).
    """
    columns = allocation_columns(getattr(manager, "tmem_allocator", None))
    if not columns:
        return None
    target = ctx.target_name
    if target not in tcgen05.TCGEN05_TARGETS:
        users = sorted({getattr(a.owner, "name", "?") for a in manager.tmem_allocator.allocations})
        raise CompilationError(f"resources {users} need tensor memory (get_tmem_requirements), which exists on "
                               f"sm_100a / sm_100f only; this kernel is being compiled for {target}")
    mailbox = _mailbox(ctx, manager)
    group = cta_group(manager)

    def alloc():
        tcgen05.alloc(mailbox, columns, cta_group=group)
        tcgen05.relinquish_alloc_permit(cta_group=group)
    ctx.if_then(compare("==", B.warp_idx(), 0), alloc, "tmem.alloc", "tmem.alloc.done")
    tcgen05.fence_before_thread_sync()
    return mailbox, columns, group


def read_base(allocation):
    """After the CTA barrier that follows :func:`allocate`: ``fence::after_thread_sync`` and the TMEM
    base address from the mailbox (a Uint32 Value)."""
    mailbox = allocation[0]
    tcgen05.fence_after_thread_sync()
    return mailbox.load()


def free(ctx, allocation, base) -> None:
    """Emit the release at the end of the kernel through ``ctx`` (as :func:`allocate`):
    ``fence::before_thread_sync``, a CTA barrier (every task is done with TMEM; a cluster barrier over
    2-CTA pairs: the peer too), ``fence::after_thread_sync``, and warp 0's ``tcgen05.dealloc``."""
    if allocation is None:
        return
    _, columns, group = allocation
    tcgen05.fence_before_thread_sync()
    if group > 1:
        sync.cluster_sync()
    else:
        B.syncthreads()
    tcgen05.fence_after_thread_sync()
    ctx.if_then(compare("==", B.warp_idx(), 0), lambda: tcgen05.dealloc(base, columns, cta_group=group),
                "tmem.dealloc", "tmem.dealloc.done")
