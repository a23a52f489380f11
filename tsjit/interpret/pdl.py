"""Programmatic dependent launch under the interpreter: ``griddepcontrol`` with its ordering checked.

PTX ISA, "Parallel synchronization and communication instructions: griddepcontrol":

* ``griddepcontrol.launch_dependents`` lets the runtime schedule the dependent grid as soon as every
  CTA of this grid has issued it or completed; the dependent may then run *concurrently* with the
  rest of this grid.  It is a scheduling hint with no memory effect; repeated issues have no further
  effect, and without PDL it does nothing.
* ``griddepcontrol.wait`` makes the executing thread wait until the prerequisite grids have completed
  and their memory operations are performed and visible to the current grid.  Without a
  prerequisite grid in flight it returns at once.

No order of the two instructions is illegal; what the hardware does not forgive is a **dependent
grid (launched with** ``pdl=True``**) touching memory its primary grid writes before it is ordered
after a** ``griddepcontrol.wait``: a read may see the old bytes, a write may be overwritten by the
primary's later write.  The interpreter runs one grid at a time, so it sees no such race by itself;
this module makes it an :class:`~tsjit.errors.InterpretError`:

1. every launch records which global bytes it changed (:func:`snapshot` before, :func:`record_primary`
   after: a byte-wise comparison, so a write of the value already there is not seen);
2. a ``pdl=True`` launch's allocations that overlap the previous launch's changed bytes get a guard
   (:func:`guard_dependent`: ``Allocation.pdl_guard``, a boolean mask of its bytes);
3. each access to a guarded byte (loads, stores, atomics, bulk copies, ``cp.async``, and TMA loads /
   stores of a guarded array) checks that the thread is ordered after a ``griddepcontrol.wait``
   (:func:`check_access`): it executed one itself, or it synchronized (barrier, mbarrier) with a
   thread of its cluster after that thread's wait (the race checker's vector clocks, which a
   ``pdl=True`` launch always keeps).  CTAs of different clusters are never ordered by a barrier,
   so each cluster needs its own wait, as on the GPU.

Not checked: a dependent's write before its wait to memory the primary only *reads* (the byte
comparison cannot see reads).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsjit.errors import InterpretError

__all__ = ["PrimaryWrites", "snapshot", "record_primary", "last_primary", "guard_dependent", "note_wait",
           "ordered_after_wait", "check_access", "check_allocation"]


@dataclass
class PrimaryWrites:
    """What one interpreted launch wrote: ``kernel`` name, ``ranges`` [(base address, changed-byte mask
    (bool, one per byte), array name)]."""

    kernel: str
    ranges: list


@dataclass
class PdlGuard:
    """``Allocation.pdl_guard`` in a dependent launch: ``mask`` (bool per byte of the allocation: the
    primary changed it) and the primary's kernel name."""

    mask: np.ndarray
    primary: str


_LAST: list = [None]


def snapshot(gmem) -> list:
    """[(allocation, copy of its bytes)] of every argument array of a launch, before it runs."""
    return [(alloc, alloc.data.copy()) for alloc in gmem.allocations()
            if alloc.nbytes and not alloc.name.startswith(("kernel constant", "TensorMap descriptor"))]


def record_primary(kernel: str, before: list) -> None:
    """Remember the bytes the launch of ``kernel`` changed (``before`` from :func:`snapshot`), as the
    primary grid of the next ``pdl=True`` launch."""
    ranges = []
    for alloc, old in before:
        changed = alloc.data != old
        if changed.any():
            ranges.append((alloc.base, changed, alloc.name))
    _LAST[0] = PrimaryWrites(kernel, ranges)


def last_primary() -> PrimaryWrites | None:
    """What the previous interpreted launch (in this process) wrote, or None."""
    return _LAST[0]


def guard_dependent(gmem, primary: PrimaryWrites | None) -> None:
    """Guard every allocation of a dependent launch's ``gmem`` that overlaps bytes ``primary`` wrote."""
    if primary is None:
        return
    for alloc in gmem.allocations():
        mask = None
        for base, changed, _name in primary.ranges:
            lo, hi = max(base, alloc.base), min(base + len(changed), alloc.base + alloc.nbytes)
            if lo < hi and changed[lo - base:hi - base].any():
                if mask is None:
                    mask = np.zeros(alloc.nbytes, bool)
                mask[lo - alloc.base:hi - alloc.base] |= changed[lo - base:hi - base]
        if mask is not None:
            alloc.pdl_guard = PdlGuard(mask, primary.kernel)


def note_wait(th) -> None:
    """``th`` executed ``griddepcontrol.wait``: it, and whoever synchronizes with it later, may touch
    the primary grid's data."""
    th.pdl_waited = True
    if th.vc is not None:
        th.cta.cluster.pdl_waits.append((th.uid, th.vc.get(th.uid, 0)))


def ordered_after_wait(th) -> bool:
    """Whether ``th`` executed ``griddepcontrol.wait`` or is ordered after a thread of its cluster that did."""
    if th.pdl_waited:
        return True
    vc = th.vc
    if vc and any(vc.get(uid, 0) >= count for uid, count in th.cta.cluster.pdl_waits):
        th.pdl_waited = True
        return True
    return False


def _error(th, alloc, offset: int, what: str, where: str) -> InterpretError:
    guard = alloc.pdl_guard
    writes = "write" in what or "atomic" in what
    hazard = ("the primary grid's own write may land after it" if writes
              else "it may read the bytes from before the primary grid's write")
    return InterpretError(
        f"programmatic dependent launch: {th.describe()} at {where} ({what}) touches {alloc.describe(alloc.base + offset)}, "
        f"which the primary grid '{guard.primary}' (the launch before this pdl=True one) wrote, before the thread "
        f"is ordered after griddepcontrol.wait; {hazard} (PTX ISA griddepcontrol: only .wait makes the primary's "
        f"memory operations visible, and the primary may still be running).  Call tsjit.griddepcontrol_wait() "
        f"before the first access (in a TS program: PdlWaitBarrier.wait_griddep(), with the dependency edge "
        f"{{resource: [pdl_wait]}}), or synchronize with a thread that did")


def check_access(th, alloc, offset: int, nbytes: int, what: str, where: str) -> None:
    """Raise unless ``th`` may access bytes ``[offset, offset + nbytes)`` of guarded ``alloc`` now."""
    if alloc.pdl_guard.mask[offset:offset + nbytes].any() and not ordered_after_wait(th):
        first = offset + int(np.argmax(alloc.pdl_guard.mask[offset:offset + nbytes]))
        raise _error(th, alloc, first, what, where)


def check_allocation(th, alloc, what: str, where: str) -> None:
    """For a TMA load / store of (part of) ``alloc``: raise if the primary wrote any of it and ``th`` is not
    ordered after a wait (the whole array counts: the box's global footprint is the tensor side's)."""
    if alloc is not None and alloc.pdl_guard is not None and not ordered_after_wait(th):
        raise _error(th, alloc, int(np.argmax(alloc.pdl_guard.mask)), what, where)
