"""Shared-memory and TMEM allocators (checks M1, M2).

All shared memory of a tsjit kernel lives in one dynamic block (DESIGN.md); the
:class:`SmemAllocator` decides where each piece goes, on the host, before any code exists.

Layout algorithm (:meth:`SmemAllocator.compute_layout`, a bump allocator):

1. *Blocks* are single allocations and alias groups.  An alias group
   (:meth:`~SmemAllocator.add_alias_group`) has >= 2 phases (lists of allocations that are
   live at different times); each phase is laid out back to back from the group's base,
   and the group's region is as large as its largest phase (its alignment is the largest
   alignment of its members).
2. Blocks are sorted by alignment, largest first (stable: equal alignments keep the order
   they were added), and placed one after the other, each at the next multiple of its
   alignment.  The end of the last block is ``data_bytes``.
3. Barriers follow the data, 8-byte aligned: each pipelined resource registered with
   :meth:`~SmemAllocator.add_resource` (or :meth:`~SmemAllocator.add_barriers`) gets
   ``2 x num_stages`` 8-byte mbarriers (16 B per stage), full[0..S) then empty[0..S), in
   registration order.  ``barrier_offset(resource)`` is where its full[0] lives.  A pipeline
   group (:meth:`~SmemAllocator.add_pipeline_group`) reserves its (N + 1) x S barriers (2 x S
   for FusedMerge) instead of its members' rings; ``barrier_offsets(member)`` is where the
   full and empty barriers the member's operations use live.

Offsets are relative to the start of the block; the block itself must be aligned to the
largest alignment used (the kernel's block is 1024-aligned, the most TMA swizzling needs).
``total_bytes`` is the dynamic shared memory the kernel needs.  A second
``compute_layout()`` raises: the layout is fixed once code may depend on it.

M1: ``total_bytes`` must fit ``capacity_bytes`` (232448 B = 227 KiB on sm_90, the opt-in
maximum per block); otherwise :meth:`~SmemAllocator.check_capacity` raises
``VerificationError(check="M1")`` with the totals and a hint to alias or shrink.

:class:`~tsjit.ts.tmem.TmemAllocator` (in :mod:`tsjit.ts.tmem`, re-exported here) is the Blackwell
tensor-memory counterpart: a column layout (512 columns; M2).  ``SmemAllocator.add_tmem_ptr()``
reserves the 4-byte mailbox ``tcgen05.alloc`` writes the TMEM base address to.
"""
from __future__ import annotations

from typing import Any

from tsjit import lang  # the device language; lang.memory loads when a kernel takes a view
from tsjit.ts import protocol
from tsjit.errors import (CompilationError, UsageKeyError, UsageStateError, UsageTypeError, UsageValueError,
                          VerificationError)
from tsjit.ts.tmem import TMEM_CAPACITY_COLUMNS, TmemAllocation, TmemAllocator, layout_tmem_requirements  # noqa: F401
from tsjit.ts.verbose import report

__all__ = ["SmemAllocation", "SmemAllocator", "TmemAllocation", "TmemAllocator",
           "SMEM_CAPACITY_BYTES", "TMEM_CAPACITY_COLUMNS", "BARRIER_BYTES_PER_STAGE"]

#: opt-in dynamic shared memory per block on sm_90 (227 KiB).
SMEM_CAPACITY_BYTES = 232448
#: one full and one empty 8-byte mbarrier per stage.
BARRIER_BYTES_PER_STAGE = 16
_BARRIER_ALIGNMENT = 8


def _itemsize(dtype: Any) -> int:
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int) and size > 0:
        return size
    raise UsageTypeError(f"SmemAllocation dtype {dtype!r} has no positive int itemsize; pass a tsjit dtype "
                         f"(e.g. tsjit.Float16) with count, or give size_bytes")


def _align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


class SmemAllocation:
    """One named region of the shared-memory block.

    Args:
        name: label for the report and errors.
        size_bytes: size in bytes; when None, ``count x dtype.itemsize``.
        alignment: byte alignment of the start, a power of two (default 128; 1024 for
            128B-swizzled TMA tiles).
        dtype, count: element type and count (for the automatic size and typed views).

    Attributes set by the allocator: ``offset`` (None until the layout is computed),
    ``range`` = ``(offset, offset + size_bytes)``, ``owner`` (the resource whose
    ``get_smem_requirements()`` returned it, or None), ``aliased`` (in an alias group).
    """

    def __init__(self, name: str, size_bytes: int | None = None, alignment: int = 128,
                 dtype: Any = None, count: int | None = None):
        if not isinstance(name, str) or not name:
            raise UsageTypeError(f"SmemAllocation name must be a non-empty str, got {name!r}")
        if size_bytes is None:
            if dtype is None or count is None:
                raise UsageTypeError(f"SmemAllocation {name!r}: give size_bytes, or dtype and count")
            if not isinstance(count, int) or count < 0:
                raise UsageTypeError(f"SmemAllocation {name!r}: count must be an int >= 0, got {count!r}")
            size_bytes = count * _itemsize(dtype)
        if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) or size_bytes < 0:
            raise UsageTypeError(f"SmemAllocation {name!r}: size_bytes must be an int >= 0, got "
                                 f"{size_bytes!r}")
        if (not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1)):
            raise UsageValueError(f"SmemAllocation {name!r}: alignment must be a power of two, got "
                                  f"{alignment!r}")
        self.name = name
        self.size_bytes = size_bytes
        self.alignment = alignment
        self.dtype = dtype
        self.count = count
        self.offset: int | None = None
        self.owner: Any = None
        self.aliased = False

    @property
    def end(self) -> int | None:
        return None if self.offset is None else self.offset + self.size_bytes

    @property
    def range(self) -> tuple[int, int] | None:
        """``(start, end)`` byte range in the block once laid out, else None."""
        return None if self.offset is None else (self.offset, self.offset + self.size_bytes)

    def overlaps(self, other: "SmemAllocation") -> bool:
        a, b = self.range, other.range
        return a is not None and b is not None and a[0] < b[1] and b[0] < a[1] \
            and self.size_bytes > 0 and other.size_bytes > 0

    def __repr__(self) -> str:
        where = f" @{self.offset}" if self.offset is not None else ""
        return f"<SmemAllocation {self.name} {self.size_bytes} B align {self.alignment}{where}>"

    #: byte offset of the allocator's region in the kernel's dynamic shared-memory block; set by
    #: ``TaskManager.setup_resources_and_tasks()`` (the lowering places the whole layout at once)
    block_base: int | None = None

    def tensor(self, shape=None, dtype=None):
        """A typed row-major view of this allocation in device code (after ``setup_resources_and_tasks``):
        ``shape`` defaults to ``(count,)``, ``dtype`` to the allocation's dtype.

        Raises:
            CompilationError: used before the layout was placed, or the view is larger than the region.
        """
        dtype = dtype or self.dtype
        if self.block_base is None or self.offset is None or dtype is None:
            raise CompilationError(f"shared-memory allocation {self.name!r} has no device address yet: call "
                                   f"manager.setup_resources_and_tasks() first (and give it a dtype)")
        shape = (self.count if self.count is not None else self.size_bytes // dtype.itemsize,) \
            if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        elements = 1
        for extent in shape:
            elements *= extent
        if elements * dtype.itemsize > self.size_bytes:
            raise CompilationError(f"a {shape} {dtype.name} view needs {elements * dtype.itemsize} B but "
                                   f"allocation {self.name!r} has {self.size_bytes} B")
        start = self.block_base + self.offset
        strides, acc = [], 1
        for extent in reversed(shape):
            strides.append(acc)
            acc *= extent
        alignment = min(1024, start & -start) if start else 1024
        return lang.memory.Tensor(lang.memory.shared_pointer(start, dtype, alignment), shape,
                                  tuple(reversed(strides)))


class _AliasGroup:
    def __init__(self, index: int, phases: list[list[SmemAllocation]]):
        self.index = index
        self.phases = phases
        self.offset: int | None = None

    @property
    def alignment(self) -> int:
        return max((a.alignment for phase in self.phases for a in phase), default=1)

    def phase_size(self, phase: list[SmemAllocation]) -> int:
        end = 0
        for alloc in phase:
            end = _align_up(end, alloc.alignment) + alloc.size_bytes
        return end

    @property
    def size_bytes(self) -> int:
        return max(self.phase_size(p) for p in self.phases)

    @property
    def unaliased_bytes(self) -> int:
        return sum(self.phase_size(p) for p in self.phases)

    def place(self, base: int) -> None:
        self.offset = base
        for phase in self.phases:
            end = base
            for alloc in phase:
                alloc.offset = _align_up(end, alloc.alignment)
                end = alloc.offset + alloc.size_bytes


class SmemAllocator:
    """Lays out the kernel's shared-memory block (see the module docstring).

    Args:
        capacity_bytes: the limit checked by M1 (default 232448 B).
    """

    def __init__(self, capacity_bytes: int = SMEM_CAPACITY_BYTES):
        if not isinstance(capacity_bytes, int) or capacity_bytes <= 0:
            raise UsageValueError(f"SmemAllocator capacity_bytes must be a positive int, got "
                                  f"{capacity_bytes!r}")
        self.capacity_bytes = capacity_bytes
        self._blocks: list = []                 # SmemAllocation | _AliasGroup, in add order
        self._barriers: list = []               # [resource, bytes, offset]
        self._resources: list = []
        self._laid_out = False
        self._data_bytes = 0
        self.tmem_ptr_allocation: SmemAllocation | None = None   # add_tmem_ptr()

    # -- building ----------------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self._laid_out:
            raise UsageStateError(f"SmemAllocator.{what}() after compute_layout(); add every "
                                  f"allocation before the layout is computed.")

    def _check_new(self, alloc: Any) -> None:
        if not isinstance(alloc, SmemAllocation):
            raise UsageTypeError(f"SmemAllocator takes SmemAllocation(name, size_bytes, ...) objects, got "
                                 f"{type(alloc).__name__}")
        if any(alloc is a for a in self.allocations):
            raise UsageValueError(f"SmemAllocation {alloc.name!r} was already added to this allocator; add "
                                  f"each allocation once (in one alias-group phase at most)")

    def add(self, alloc: SmemAllocation) -> SmemAllocation:
        """Add one allocation; returns it (its ``offset`` is set by ``compute_layout``)."""
        self._check_open("add")
        self._check_new(alloc)
        self._blocks.append(alloc)
        return alloc

    def add_resource(self, resource: Any) -> list[SmemAllocation]:
        """Add ``resource.get_smem_requirements()`` and, if pipelined, its barriers.

        Returns the resource's allocations (each gets ``owner = resource``).
        """
        self._check_open("add_resource")
        if any(r is resource for r in self._resources):
            raise UsageValueError(f"resource {getattr(resource, 'name', resource)!r} was already "
                                  f"added to this allocator; call add_resource() once per resource")
        requirements = resource.get_smem_requirements() if hasattr(
            resource, "get_smem_requirements") else []
        allocs = list(requirements or [])
        for alloc in allocs:
            self._check_new(alloc)
            alloc.owner = resource
            self._blocks.append(alloc)
        self._resources.append(resource)
        self.add_barriers(resource)
        return allocs

    def add_pipeline_group(self, group: Any) -> int:
        """Reserve a :class:`~tsjit.ts.group.PipelineGroup`'s barriers (idempotent): its
        ``barrier_arrays()`` of S 8-byte mbarriers each, (N + 1) x S for Merge / Fork and 2 x S for
        FusedMerge, in place of its members' own rings.  Returns the bytes reserved."""
        arrays = getattr(group, "barrier_arrays", None)
        if not callable(arrays):
            raise UsageTypeError(f"add_pipeline_group() takes a PipelineGroup, got {type(group).__name__}")
        if not self.has_barriers(group):
            self._check_open("add_pipeline_group")
            self._barriers.append([group, group.barrier_bytes, None])
        return group.barrier_bytes

    def add_barriers(self, resource: Any) -> int:
        """Reserve ``16 x num_stages`` barrier bytes for a pipelined resource (idempotent); a member
        of a pipeline group reserves its group's barriers (:meth:`add_pipeline_group`).

        Returns the bytes reserved (0 for a resource without a pipeline).
        """
        group = getattr(resource, "pipeline_group", None)
        if group is not None:
            return self.add_pipeline_group(group)
        config = getattr(resource, "pipeline_config", None)
        stages = getattr(config, "num_stages", None)
        if not isinstance(stages, int) or stages < 1:
            return 0
        if self.has_barriers(resource):
            return next(b[1] for b in self._barriers if b[0] is resource)
        self._check_open("add_barriers")
        size = BARRIER_BYTES_PER_STAGE * stages
        self._barriers.append([resource, size, None])
        return size

    def add_tmem_ptr(self, alloc: "SmemAllocation | None" = None) -> SmemAllocation:
        """Reserve the shared-memory mailbox that receives the TMEM base address from ``tcgen05.alloc``
        (4 bytes, 16-aligned; PTX ISA 9.1 §9.7.16.7.1); the TaskManager's lowering allocates TMEM into
        it and hands the address to work bodies as ``stage_info.context.tmem_ptr_i32``.

        Args:
            alloc: the allocation to use (default: a new ``SmemAllocation("tmem_ptr", 4, 16)``).

        Returns:
            The mailbox allocation.

        Raises:
            UsageStateError: after ``compute_layout()``, or called twice.
        """
        self._check_open("add_tmem_ptr")
        if self.tmem_ptr_allocation is not None:
            raise UsageStateError("SmemAllocator.add_tmem_ptr() was already called; one TMEM mailbox per kernel")
        alloc = alloc if alloc is not None else SmemAllocation("tmem_ptr", 4, alignment=16)
        self.add(alloc)
        self.tmem_ptr_allocation = alloc
        return alloc

    def has_barriers(self, resource: Any) -> bool:
        owner = getattr(resource, "pipeline_group", None) or resource
        return any(b[0] is owner for b in self._barriers)

    def add_alias_group(self, phases) -> list[list[SmemAllocation]]:
        """Let the allocations of different phases share one region.

        Args:
            phases: ``[[phase-0 allocations...], [phase-1 allocations...], ...]`` (>= 2
                phases, each non-empty).  Allocations of one phase are live together and
                do not overlap; allocations of different phases may.
        """
        self._check_open("add_alias_group")
        phases = [list(p) for p in phases]
        if len(phases) < 2:
            raise UsageValueError(f"add_alias_group needs >= 2 phases (lists of allocations live "
                                  f"at different times), got {len(phases)}")
        for i, phase in enumerate(phases):
            if not phase:
                raise UsageValueError(f"add_alias_group: phase {i} is empty; give every phase at least one "
                                      f"allocation")
            for alloc in phase:
                self._check_new(alloc)
                if sum(a is alloc for p in phases for a in p) > 1:
                    raise UsageValueError(f"add_alias_group: {alloc.name!r} appears twice; an allocation belongs "
                                          f"to one phase")
        for phase in phases:
            for alloc in phase:
                alloc.aliased = True
        self._blocks.append(_AliasGroup(len(self.alias_groups), phases))
        return phases

    # -- layout --------------------------------------------------------------------------
    def compute_layout(self) -> int:
        """Assign every offset (see the module docstring); returns ``total_bytes``.

        Raises:
            RuntimeError: called a second time.
        """
        if self._laid_out:
            raise UsageStateError("SmemAllocator.compute_layout() was already called; the layout "
                                  "is fixed once computed.")
        order = sorted(self._blocks, key=lambda b: -b.alignment)   # stable sort
        end = 0
        for block in order:
            base = _align_up(end, block.alignment)
            if isinstance(block, _AliasGroup):
                block.place(base)
            else:
                block.offset = base
            end = base + block.size_bytes
        self._data_bytes = end
        end = _align_up(end, _BARRIER_ALIGNMENT)
        for entry in self._barriers:
            entry[2] = end
            end += entry[1]
        self._laid_out = True
        return self.total_bytes

    @property
    def is_laid_out(self) -> bool:
        return self._laid_out

    def _require_layout(self, what: str) -> None:
        if not self._laid_out:
            raise UsageStateError(f"SmemAllocator.{what} needs the layout: call compute_layout() first "
                                  f"(TaskManager(smem_allocator=...) calls it for you)")

    @property
    def allocations(self) -> list[SmemAllocation]:
        """Every allocation, in the order added (alias-group members phase by phase)."""
        out = []
        for block in self._blocks:
            if isinstance(block, _AliasGroup):
                out += [a for phase in block.phases for a in phase]
            else:
                out.append(block)
        return out

    @property
    def alias_groups(self) -> list:
        return [b for b in self._blocks if isinstance(b, _AliasGroup)]

    @property
    def resources(self) -> list:
        """Resources added with ``add_resource`` (in order)."""
        return list(self._resources)

    @property
    def data_bytes(self) -> int:
        """End of the data region (before the barriers)."""
        if self._laid_out:
            return self._data_bytes
        return self._unplaced_data_bytes()

    def _unplaced_data_bytes(self) -> int:
        end = 0
        for block in sorted(self._blocks, key=lambda b: -b.alignment):
            end = _align_up(end, block.alignment) + block.size_bytes
        return end

    @property
    def barrier_bytes(self) -> int:
        return sum(b[1] for b in self._barriers)

    @property
    def total_bytes(self) -> int:
        """Dynamic shared memory the kernel needs: data, padding to 8, barriers."""
        data = self.data_bytes
        return (_align_up(data, _BARRIER_ALIGNMENT) if self._barriers else data) + self.barrier_bytes

    @property
    def max_alignment(self) -> int:
        """The alignment the block's base needs (largest of all allocations, at least 8)."""
        return max([_BARRIER_ALIGNMENT] + [b.alignment for b in self._blocks])

    @property
    def savings_bytes(self) -> int:
        """Bytes saved by alias groups (sum of phases minus the shared region)."""
        return sum(g.unaliased_bytes - g.size_bytes for g in self.alias_groups)

    def barrier_offset(self, resource: Any) -> int:
        """Byte offset of ``resource``'s full[0] barrier; empty[0] is ``+ 8 x num_stages``.

        Raises:
            RuntimeError: before ``compute_layout()``.
            KeyError: the resource has no barriers in this allocator.
        """
        self._require_layout("barrier_offset()")
        group = getattr(resource, "pipeline_group", None)
        if group is not None:
            raise UsageKeyError(f"resource {resource.name!r} is a member of pipeline group {group.name!r}: its full "
                                f"and empty barriers are not one ring; use barrier_offsets({resource.name})")
        for res, _, offset in self._barriers:
            if res is resource:
                return offset
        raise UsageKeyError(f"resource {getattr(resource, 'name', resource)!r} has no barriers in "
                            f"this SmemAllocator; add it with add_resource() or add_barriers()")

    def barrier_offsets(self, resource: Any) -> tuple[int, int]:
        """``(full[0], empty[0])`` byte offsets of the barriers ``resource``'s operations use: its own
        ring, or the arrays of its pipeline group (shared or its own, by the group's mode)."""
        group = getattr(resource, "pipeline_group", None)
        if group is None:
            full = self.barrier_offset(resource)
            return full, full + 8 * resource.pipeline_config.num_stages
        base = self.barrier_offset(group)
        return tuple(base + 8 * group.num_stages * group.array(resource, kind)[0]
                     for kind in (protocol.BarrierKind.Full, protocol.BarrierKind.Empty))

    def alias_pairs(self) -> list[tuple[SmemAllocation, SmemAllocation]]:
        """Pairs of allocations whose byte ranges overlap (the race checker watches them)."""
        self._require_layout("alias_pairs()")
        allocs = self.allocations
        return [(a, b) for i, a in enumerate(allocs) for b in allocs[i + 1:] if a.overlaps(b)]

    # -- M1 and the report ------------------------------------------------------------------
    def check_capacity(self, capacity_bytes: int | None = None) -> None:
        """M1: raise ``VerificationError(check="M1")`` when ``total_bytes`` exceeds the capacity."""
        capacity = self.capacity_bytes if capacity_bytes is None else capacity_bytes
        total = self.total_bytes
        if total <= capacity:
            return
        largest = sorted(self.allocations, key=lambda a: -a.size_bytes)[:3]
        listed = ", ".join(f"{a.name!r} {a.size_bytes} B" for a in largest) or "none"
        raise VerificationError(
            f"shared memory needs {total} B (data {self.data_bytes} B + barriers "
            f"{self.barrier_bytes} B) but the capacity is {capacity} B ({total - capacity} B "
            f"over).  Largest allocations: {listed}.\n  Alias allocations that are never live "
            f"together (add_alias_group), reduce num_stages or tile sizes, or raise "
            f"smem_capacity_bytes if the target allows more.", check="M1")

    def usage_report(self, shared_arrays=()) -> str:
        """The ``[smem-layout]`` table; needs the layout.

        Args:
            shared_arrays: ``(name, bytes)`` of the ``tsjit.shared_array`` buffers the resources
                allocated themselves (:func:`shared_arrays_of`); listed with their sizes and counted
                in the total (the kernel places them, so they have no offset here).
        """
        self._require_layout("usage_report()")
        rows = [("name", "size", "align", "offset", "end")]
        for alloc in sorted(self.allocations, key=lambda a: (a.offset, a.name)):
            mark = "*" if alloc.aliased else " "
            rows.append((mark + alloc.name, str(alloc.size_bytes), str(alloc.alignment),
                         str(alloc.offset), str(alloc.end)))
        for resource, size, offset in self._barriers:
            rows.append((f" {getattr(resource, 'name', '?')}.barriers", str(size),
                         str(_BARRIER_ALIGNMENT), str(offset), str(offset + size)))
        for name, size in shared_arrays:
            rows.append((f" {name} (shared_array)", str(size), "-", "-", "-"))
        width = max(len(r[0]) for r in rows)
        lines = [f"[smem-layout] {len(self.allocations)} allocation(s), "
                 f"{len(self._barriers)} barrier set(s)"
                 + (f", {len(shared_arrays)} shared_array buffer(s)" if shared_arrays else "")]
        for i, (name, *numbers) in enumerate(rows):
            name = name if i else " " + name
            lines.append(f"  {name:<{width}}  " + "  ".join(f"{n:>8}" for n in numbers))
        for group in self.alias_groups:
            lines.append(f"  alias group {group.index} at {group.offset}: region "
                         f"{group.size_bytes} B")
            for p, phase in enumerate(group.phases):
                lines.append(f"    phase {p} ({group.phase_size(phase)} B): "
                             + ", ".join(a.name for a in phase))
        arrays = sum(size for _, size in shared_arrays)
        if arrays:
            lines.append(f"  data {self.data_bytes} B + barriers {self.barrier_bytes} B + shared_array "
                         f"{arrays} B = total {self.total_bytes + arrays} B / {self.capacity_bytes} B")
        else:
            lines.append(f"  data {self.data_bytes} B + barriers {self.barrier_bytes} B = total "
                         f"{self.total_bytes} B / {self.capacity_bytes} B")
        if self.alias_groups:
            lines.append(f"  aliasing saves {self.savings_bytes} B")
        return "\n".join(lines)

    def print_usage_report(self) -> None:
        report(self.usage_report())


def shared_arrays_of(resources) -> list[tuple[str, int]]:
    """``("<resource>.<attribute>", bytes)`` of every shared-memory tensor (``tsjit.shared_array``)
    a resource holds in an attribute (also inside a tuple or list), in declaration order."""
    found = []
    for resource in resources:
        for attribute, value in vars(resource).items():
            items = value if isinstance(value, (tuple, list)) else (value,)
            for k, item in enumerate(items):
                pointer = getattr(item, "ptr", None)
                shape = getattr(item, "shape", None)
                if getattr(pointer, "address_space", None) != 3 or not isinstance(shape, tuple):
                    continue
                size = pointer.dtype.itemsize
                for extent in shape:
                    size *= extent
                suffix = f"[{k}]" if items is value else ""
                found.append((f"{getattr(resource, 'name', '?')}.{attribute}{suffix}", int(size)))
    return found
