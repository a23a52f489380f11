"""Tensor memory in the Task Scheduling model: the column layout (:class:`TmemAllocator`,
:class:`TmemAllocation`; check M2), host data only.  The kernel code that allocates and frees it
around the tasks is :mod:`tsjit.ts.lower_tmem`.

Tensor memory (TMEM) is 512 32-bit columns x 128 lanes per CTA on sm_100 (PTX ISA 9.1
§9.7.16.1).  Resources declare the columns they need with ``get_tmem_requirements()`` (a list of
:class:`TmemAllocation`, kept as attributes so work bodies read ``alloc.offset``); the
TaskManager lays them out one after another (:func:`layout_tmem_requirements`) and M2 refuses
more than the capacity.

Lowering (sm_100a / sm_100f): ``setup_resources_and_tasks()`` has warp 0 execute
``tcgen05.alloc`` for the layout's columns rounded up to a power of 2 (at least 32; PTX ISA
§9.7.16.7.1), writing the base address to a 4-byte shared-memory mailbox (the SMEM allocator's
``add_tmem_ptr`` allocation, or a reservation of its own), then
``tcgen05.relinquish_alloc_permit``; ``tcgen05.fence::before_thread_sync``, the setup's CTA
barrier, and ``tcgen05.fence::after_thread_sync`` order it before any thread reads the mailbox.
Every work body then sees the base as ``stage_info.context.tmem_ptr_i32`` (a Uint32 Value) and
adds its allocation's column (``tmem_ptr_i32 + alloc.offset``).  After the tasks, ``run()``
fences, synchronizes the CTA and has warp 0 ``tcgen05.dealloc`` the columns: every allocation
must be freed before the kernel exits.
"""
from __future__ import annotations

from typing import Any

from tsjit.errors import UsageStateError, UsageTypeError, UsageValueError, VerificationError

__all__ = ["TmemAllocation", "TmemAllocator", "TMEM_CAPACITY_COLUMNS", "layout_tmem_requirements",
           "allocation_columns"]

#: tensor-memory columns per SM on sm_100.
TMEM_CAPACITY_COLUMNS = 512
_MIN_ALLOC_COLUMNS = 32


class TmemAllocation:
    """A named range of tensor-memory columns (sm_100a; host data on Hopper).

    Args:
        name: label for reports and errors.
        num_columns: columns needed (a 128 x N Float32 accumulator needs N).

    Attributes:
        offset: the first column, set by :meth:`TmemAllocator.compute_layout` (None before).
        owner: the resource that declared it.
    """

    def __init__(self, name: str, num_columns: int):
        if not isinstance(name, str) or not name:
            raise UsageTypeError(f"TmemAllocation name must be a non-empty str, got {name!r}")
        if isinstance(num_columns, bool) or not isinstance(num_columns, int) or num_columns < 1:
            raise UsageValueError(f"TmemAllocation {name!r}: num_columns must be an int >= 1, got "
                                  f"{num_columns!r}")
        self.name = name
        self.num_columns = num_columns
        self.column: int | None = None
        self.owner: Any = None

    @property
    def offset(self) -> int | None:
        """The first column (the reference's name for it)."""
        return self.column

    @property
    def range(self) -> tuple[int, int] | None:
        return None if self.column is None else (self.column, self.column + self.num_columns)

    def __repr__(self) -> str:
        return f"<TmemAllocation {self.name} {self.num_columns} cols>"


class TmemAllocator:
    """Tensor-memory column layout: allocations placed one after another (check M2).

    Args:
        capacity_columns: the M2 limit (default 512).
    """

    def __init__(self, capacity_columns: int = TMEM_CAPACITY_COLUMNS):
        self.capacity_columns = capacity_columns
        self._allocs: list[TmemAllocation] = []
        self._laid_out = False

    def add(self, alloc: TmemAllocation) -> TmemAllocation:
        """Add one allocation; returns it (its ``offset`` is set by :meth:`compute_layout`)."""
        if self._laid_out:
            raise UsageStateError("TmemAllocator.add() after compute_layout(); add every allocation before "
                                  "the layout is computed")
        if not isinstance(alloc, TmemAllocation):
            raise UsageTypeError(f"TmemAllocator.add() takes a TmemAllocation(name, num_columns), got "
                                 f"{type(alloc).__name__}")
        self._allocs.append(alloc)
        return alloc

    @property
    def allocations(self) -> list[TmemAllocation]:
        return list(self._allocs)

    @property
    def total_columns(self) -> int:
        return sum(a.num_columns for a in self._allocs)

    def compute_layout(self) -> int:
        """Place the allocations back to back from column 0; returns the columns used."""
        if self._laid_out:
            raise UsageStateError("TmemAllocator.compute_layout() was already called; the layout is fixed "
                                  "once computed")
        column = 0
        for alloc in self._allocs:
            alloc.column = column
            column += alloc.num_columns
        self._laid_out = True
        return column

    def check_capacity(self, capacity_columns: int | None = None) -> None:
        """M2: raise ``VerificationError(check="M2")`` when the columns exceed the capacity."""
        capacity = self.capacity_columns if capacity_columns is None else capacity_columns
        if self.total_columns > capacity:
            listed = ", ".join(f"{a.name!r} {a.num_columns}" for a in self._allocs)
            raise VerificationError(
                f"tensor memory needs {self.total_columns} columns ({listed}) but the capacity "
                f"is {capacity} columns.\n  Shrink the accumulators or reuse columns across "
                f"phases.", check="M2")

    def usage_report(self) -> str:
        lines = [f"[tmem-layout] {len(self._allocs)} allocation(s)"]
        for a in self._allocs:
            lines.append(f"  {a.name:<20} {a.num_columns:>5} cols at {a.column}")
        lines.append(f"  total {self.total_columns} / {self.capacity_columns} columns")
        return "\n".join(lines)


def layout_tmem_requirements(resources, allocator: "TmemAllocator | None",
                             capacity_columns: int = TMEM_CAPACITY_COLUMNS) -> "TmemAllocator | None":
    """Add every resource's ``get_tmem_requirements()`` to ``allocator`` (a new
    :class:`TmemAllocator` when None and some resource needs columns), set each allocation's
    ``owner``, and compute the column layout if it is not computed yet.

    Returns:
        The allocator, or None when no allocator was given and no resource needs TMEM.
    """
    wanted = []
    for resource in resources:
        hook = getattr(resource, "get_tmem_requirements", None)
        for alloc in (hook() or ()) if callable(hook) else ():
            if alloc.owner is None:
                alloc.owner = resource
            wanted.append(alloc)
    if allocator is None and not wanted:
        return None
    allocator = allocator if allocator is not None else TmemAllocator(capacity_columns)
    laid_out = any(a.column is not None for a in allocator.allocations)
    for alloc in wanted:
        if all(alloc is not a for a in allocator.allocations) and not laid_out:
            allocator.add(alloc)
    if not laid_out and allocator.allocations:
        allocator.compute_layout()
    return allocator


def allocation_columns(allocator: "TmemAllocator | None") -> int:
    """Columns ``tcgen05.alloc`` must request for ``allocator``'s layout: the used columns rounded up to
    a power of 2, at least 32 (PTX ISA 9.1 §9.7.16.7.1); 0 without allocations."""
    if allocator is None or not allocator.allocations:
        return 0
    used = max(a.column + a.num_columns for a in allocator.allocations if a.column is not None)
    columns = _MIN_ALLOC_COLUMNS
    while columns < used:
        columns *= 2
    return columns
