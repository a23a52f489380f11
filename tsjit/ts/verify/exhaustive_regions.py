"""Memory regions the exhaustive checker watches for races, and which of them conflict.

A *region* is what one data access touches:

* ``(resource, stage k, role)`` for a pipelined resource: the k-th slot of its ring; a TMA
  producer task that fills a stage together with other producer tasks (split A/B loads, each
  task arming and bringing its own ``num_bytes_per_warp_per_cta``) writes its own *part* of
  the stage: parts of one stage do not conflict with each other, only with the whole stage;
* ``(resource, None, role)`` for a resource without a pipeline that owns shared memory
  in the :class:`~tsjit.ts.memory.SmemAllocator` (other non-pipelined resources -- global
  memory tensors, barriers, work queues -- are not watched: nothing tells which addresses
  two tasks touch there).

Byte ranges come from the allocator: the allocations a resource owns (``alloc.owner``, or
an :class:`SmemAllocation` held in one of its fields), narrowed per role by
``get_producer_requirements()`` / ``get_consumer_requirements()`` when the resource
defines them.  A pipelined resource's allocations are split into ``num_stages`` equal
parts, stage ``k`` owning the ``k``-th part of each.

``physical_ranges()`` adds ``(memory_space, start, end)`` ranges of the whole resource, and
TMEM allocations (``get_tmem_requirements()``) count in columns; each memory space keeps its
ranges apart from the others'.

Two regions conflict when they are the same stage of the same resource (or one of them is
the whole resource), unless both have byte ranges and those do not overlap; regions of
two different resources conflict only when their byte ranges overlap (an alias group, or
``alias_pairs()`` of the allocator).  Without an allocator nothing aliases.
"""
from __future__ import annotations

from tsjit.ts.tx_bytes import work_bytes
from tsjit.ts.verify.pipelines import co_filling_tasks

__all__ = ["RegionTable", "stage_parts"]

#: each memory space (smem bytes, tmem columns, spaces named by ``physical_ranges()``) gets its own
#: band of this width in the interval numbers, so ranges of different spaces never overlap.
_SPACE_BAND = 1 << 40


def _interval(value) -> tuple | None:
    if value is None:
        return None
    if isinstance(value, range):
        return (value.start, value.stop)
    try:
        start, end = value
    except (TypeError, ValueError):
        return None
    return (start, end) if isinstance(start, int) and isinstance(end, int) else None


def _overlap(a: list, b: list) -> tuple | None:
    for s1, e1 in a:
        for s2, e2 in b:
            if s1 < e2 and s2 < e1:
                return (max(s1, s2), min(e1, e2))
    return None


def stage_parts(tasks, ring_config) -> dict:
    """``(id(ring), id(task)) -> part`` for the TMA rings several producer tasks fill, each
    arming and bringing its own ``num_bytes_per_warp_per_cta`` or per-work bytes
    (:func:`tsjit.ts.tx_bytes.work_bytes`; split A/B loads): each task's
    copies write their own part of the stage.  Without that declaration the tasks write the
    whole stage (their writes race; check P2 says what to declare)."""
    parts: dict = {}
    rings = {id(r): r for t in tasks for r in t.resources if ring_config(r) is not None}
    for rid, resource in rings.items():
        config = resource.pipeline_config
        if not config.protocol.producer_arms_tx or (config.num_bytes_per_warp_per_cta is None
                                                    and work_bytes(resource) is None):
            continue
        for index, task in enumerate(co_filling_tasks(tasks, resource)):
            parts[(rid, id(task))] = index
    return parts


class RegionTable:
    """Regions by id, their byte ranges and conflict bit masks (see the module docstring)."""

    def __init__(self, allocator=None):
        self.keys: list = []             # (resource, slot, role, part, cta)
        self.intervals: list = []        # list of (start, end) per region; [] when unknown
        self.ids: dict = {}
        self.allocator = allocator
        self._owned = self._allocations_by_owner(allocator)
        self._masks: list | None = None
        self._spaces: dict = {"smem": 0}

    # -- allocator ---------------------------------------------------------------------------
    @staticmethod
    def _allocations_by_owner(allocator) -> dict:
        out: dict = {}
        if allocator is None:
            return out
        try:
            allocations = list(getattr(allocator, "allocations", ()) or ())
        except Exception:  # layout not computed or an unknown allocator: no aliasing
            return out
        for alloc in allocations:
            owner = getattr(alloc, "owner", None)
            if owner is not None:
                out.setdefault(id(owner), []).append(alloc)
        return out

    def _allocations(self, resource, role: str) -> list:
        getter = getattr(resource, f"get_{role}_requirements", None)
        if callable(getter):
            try:
                chosen = getter()
            except Exception:
                chosen = None
            if chosen is not None:      # None (the base hook's default): every allocation
                return list(chosen)
        found = list(self._owned.get(id(resource), ()))
        for value in list(getattr(resource, "__dict__", {}).values()):
            if hasattr(value, "size_bytes") and hasattr(value, "range") \
                    and all(value is not a for a in found):
                found.append(value)
        tmem = getattr(resource, "get_tmem_requirements", None)
        if callable(tmem):
            try:
                found += [a for a in tmem() or () if all(a is not f for f in found)]
            except Exception:
                pass
        return found

    def _band(self, space: str) -> int:
        """Offset that keeps each memory space's ranges disjoint from the others' (smem first)."""
        if space not in self._spaces:
            self._spaces[space] = len(self._spaces)
        return self._spaces[space] * _SPACE_BAND

    def _physical_ranges(self, resource) -> list:
        declared = getattr(resource, "physical_ranges", None)
        try:
            ranges = list(declared() or ()) if callable(declared) else []
        except Exception:
            return []
        out = []
        for entry in ranges:
            if isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], str):
                band = self._band(entry[0])
                out.append((band + entry[1], band + entry[2]))
        return out

    def _byte_ranges(self, resource, slot, role) -> list:
        physical = self._physical_ranges(resource)
        if self.allocator is None:
            return physical
        out = []
        for alloc in self._allocations(resource, role):
            interval = _interval(getattr(alloc, "range", None))
            if interval is None:
                continue
            band = self._band("tmem" if hasattr(alloc, "num_columns") else "smem")
            if slot is not None:
                stages = resource.pipeline_config.num_stages
                size = (interval[1] - interval[0]) // stages
                interval = (interval[0] + slot * size, interval[0] + (slot + 1) * size)
            out.append((band + interval[0], band + interval[1]))
        return out + physical

    # -- regions -------------------------------------------------------------------------------
    def _region(self, resource, slot, role, part=None, cta=None) -> int:
        key = (id(resource), slot, role, part, cta)
        if key not in self.ids:
            self.ids[key] = len(self.keys)
            self.keys.append((resource, slot, role, part, cta))
            self.intervals.append(self._byte_ranges(resource, slot, role))
            self._masks = None
        return self.ids[key]

    def stage_region(self, resource, slot: int, role: str, part=None, cta=None) -> int:
        """Region of stage ``slot`` of a pipelined resource, as ``role`` touches it; ``part``
        (a hashable, e.g. the filling task's index) when one of several producer tasks fills
        its own part of the stage; ``cta`` when every CTA of a cluster is modelled (each has
        its own shared memory)."""
        return self._region(resource, slot, role, part, cta)

    def resource_region(self, resource, role: str, cta=None) -> int | None:
        """Region of a non-pipelined resource with SMEM (on ``cta``), or None when it has none."""
        if not self._byte_ranges(resource, None, role):
            return None
        return self._region(resource, None, role, None, cta)

    def conflicts(self, a: int, b: int) -> bool:
        ra, sa, _, pa, ca = self.keys[a]
        rb, sb, _, pb, cb = self.keys[b]
        if ca != cb:
            return False                 # two CTAs' shared memories
        ia, ib = self.intervals[a], self.intervals[b]
        if ra is rb:
            if sa is not None and sb is not None and sa != sb:
                return False
            if sa == sb and pa is not None and pb is not None and pa != pb:
                return False
            return not (ia and ib) or _overlap(ia, ib) is not None
        return bool(ia and ib) and _overlap(ia, ib) is not None

    @property
    def masks(self) -> list:
        """``masks[r]``: bit mask of every region conflicting with region ``r``."""
        if self._masks is None:
            n = len(self.keys)
            self._masks = [sum(1 << b for b in range(n) if self.conflicts(a, b))
                           for a in range(n)]
        return self._masks

    def name(self, region: int) -> str:
        resource, slot, _, _, cta = self.keys[region]
        where = f" of CTA {cta}" if cta is not None else ""
        return (f"{resource.name!r} stage {slot}" if slot is not None else repr(resource.name)) + where

    def byte_range_text(self, a: int, b: int) -> str:
        """``smem[x:y]`` where the two regions overlap, or a description without ranges."""
        overlap = _overlap(self.intervals[a], self.intervals[b])
        if overlap is None and self.intervals[a]:
            overlap = self.intervals[a][0]
        if overlap is not None:
            band = overlap[0] // _SPACE_BAND
            space = next((k for k, v in self._spaces.items() if v == band), "smem")
            return f"{space}[{overlap[0] - band * _SPACE_BAND}:{overlap[1] - band * _SPACE_BAND}]"
        return ("bytes not known: a tsjit.shared_array buffer, not a ts.SmemAllocation, so its "
                "aliasing with other buffers is not checked")
