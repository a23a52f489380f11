"""Shared-memory and TMEM capacity (checks M1, M2).

M1  the kernel's shared-memory block (data + barriers, as laid out by the manager's
    :class:`~tsjit.ts.memory.SmemAllocator`) fits ``smem_capacity_bytes``.
M2  the TMEM allocator's columns fit ``tmem_capacity_columns``.

Both messages give the totals and a hint to alias or shrink.
"""
from __future__ import annotations

from tsjit.errors import VerificationError
from tsjit.ts.verify.findings import Finding, error

__all__ = ["check_smem_capacity", "check_tmem_capacity"]


def check_smem_capacity(manager) -> list[Finding]:
    allocator = manager.smem_allocator
    if allocator is None:
        return []
    try:
        allocator.check_capacity(manager.smem_capacity_bytes)
    except VerificationError as exc:
        return [error("M1", str(exc).removeprefix("[M1] "))]
    return []


def check_tmem_capacity(manager) -> list[Finding]:
    allocator = getattr(manager, "tmem_allocator", None) or manager.options.tmem_allocator
    if allocator is None or not hasattr(allocator, "check_capacity"):
        return []
    try:
        allocator.check_capacity(manager.options.tmem_capacity_columns)
    except VerificationError as exc:
        return [error("M2", str(exc).removeprefix("[M2] "))]
    return []
