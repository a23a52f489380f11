"""Expansion of task schedules into the step sequences the exhaustive checker runs (§2.4).

Each task's schedule is expanded into the flat sequence of steps one
thread of it runs in one *variant* of the program: pre-work-loop steps, then per work
tile Head, the Loop body repeated for the trip count (FirstIter / LastIter / every(n)
guards applied per trip), Tail, then post-work-loop steps.  Trip counts: a static
domain unrolls exactly (counts above :data:`STATIC_UNROLL_CAP` shrink by a common amount
so that differences between tasks survive); a ``get_domain`` provider is probed with
tile ``(0, 0, 0)``; a run-time domain of a task sharing a ring with a static partner runs
the trips that open as many ring positions as the partner (a warp-lane task of stride k
against a non-interleaved partner: 1/k of its trips; the partner's count may itself be a
run-time one, given first); anything else runs as many trips as the longest static domain of
the program (a mismatch with a run-time count cannot be judged), or, when every domain is
run-time, ``2 * max_stages + 1`` trips rounded up to a multiple of the warp-lane strides, so
that every ring wraps twice and the lanes split it evenly.  Persistent tasks run two work tiles; the skip variants
run ``(full, skipped)`` and ``(skipped, skipped)`` tiles where a task has ``skip_if``.
Data guards (``when_true`` / ``when_false``): guards with one ``key=`` take one value in
every task, different keys are independent; an unkeyed guard is correlated only with the other
guards on the same token (one run-time value), so unkeyed guards of different tasks may
disagree; every combination of those values is a variant (for the first
:data:`MAX_GUARD_KEYS` keys or tokens; any further ones take the first one's value).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from tsjit.ts.enums import BlockCondition, ScheduleStage, ScheduleStageType
from tsjit.ts.pipeline import PipelineConfig

__all__ = ["ExpandedStep", "Variant", "trip_counts", "warp_lane_stride", "expand_task",
           "program_variants", "STATIC_UNROLL_CAP"]

#: static trip counts above this shrink (keeping the differences between tasks).
STATIC_UNROLL_CAP = 16
#: distinct when_true/when_false keys whose value combinations are checked (2**n variants).
MAX_GUARD_KEYS = 4


@dataclass(frozen=True)
class ExpandedStep:
    """One executed schedule step: the Step, its trip index (Loop only) and tile."""

    step: object
    iteration: int | None
    tile: int | None


@dataclass
class Variant:
    """Which program variant to compile: tile skip pattern and data-guard values.

    ``guard_values`` maps a ``when_true``/``when_false`` correlation group (:func:`guard_group`)
    to the value its guards see in this variant (one key's guards agree across tasks; different
    keys and different tokens are independent); groups not listed see ``guard_value``.
    """

    name: str
    skips: tuple = (False, False)
    guard_value: bool = True
    guard_values: dict = field(default_factory=dict)

    def guard_holds(self, guard) -> bool:
        return self.guard_values.get(guard_group(guard), self.guard_value)


def guard_group(guard) -> tuple:
    """The correlation group of a data guard: its ``key=``, else its token (the variable and the
    step that produced it: guards on one token see one value)."""
    if guard.key is not None:
        return ("key", guard.key)
    return ("token", id(guard.token.step), id(guard.token.variable))


def _max_stages(tasks) -> int:
    stages = [r.pipeline_config.num_stages for t in tasks for r in t.resources
              if isinstance(getattr(r, "pipeline_config", None), PipelineConfig)]
    return max(stages, default=1)


def _probe_provider(task, loop) -> int | None:
    if loop.end_provider is None or not isinstance(loop.start, int) \
            or not isinstance(loop.step, int) or loop.step == 0:
        return None
    try:
        end = loop.end_provider(task, (0, 0, 0))
    except Exception:  # a provider may need device values: fall back to a stand-in
        return None
    if isinstance(end, int) and not isinstance(end, bool):
        return len(range(loop.start, end, loop.step))
    return None


def trip_counts(tasks, dynamic_trip_count: int, notes: list) -> dict:
    """``{id(task): simulated trip count}`` (see the module docstring)."""
    counts, static, dynamic = {}, {}, []
    for task in tasks:
        loop = task.schedule.domain_loop
        count = loop.static_trip_count if loop is not None else 0
        if count is None:
            count = _probe_provider(task, loop)
        if count is None:
            dynamic.append(task)
        else:
            static[id(task)] = count
    large = [c for c in static.values() if c > STATIC_UNROLL_CAP]
    shrink = min(large) - STATIC_UNROLL_CAP if large else 0
    for task in tasks:
        if id(task) in static:
            count = static[id(task)]
            if count > STATIC_UNROLL_CAP:
                reduced = min(count - shrink, 4 * STATIC_UNROLL_CAP)
                notes.append(f"{task.describe()}: {count} domain iterations checked as "
                             f"{reduced}")
                count = reduced
            counts[id(task)] = count
    # A run-time trip count is assumed to match the static ones of the program (a mismatch
    # there cannot be judged); with none, it is long enough for every ring to wrap twice.
    busy = [counts[id(t)] for t in tasks if id(t) in static and counts[id(t)] > 0
            and any(s.section.value == "Loop" for s in t.schedule.steps)]
    representative = max(busy) if busy else max(dynamic_trip_count, 2 * _max_stages(tasks) + 1)
    strides = [warp_lane_stride(t) for t in dynamic]
    if not busy:
        # warp-lane tasks then split the partners' trips evenly between their lanes
        multiple = max(strides, default=1)
        representative += -representative % multiple
    # warp-lane tasks last: they balance against partners whose counts are known by then
    for _, task in sorted(zip(strides, dynamic), key=lambda pair: pair[0] > 1):
        balanced = _balancing_trips(task, tasks, counts)
        counts[id(task)] = representative if balanced is None else balanced
        notes.append(f"{task.describe()}: run-time domain end, checked with "
                     f"{counts[id(task)]} iterations"
                     + (" (the count that matches its partner on a ring)" if balanced is not None else ""))
    return counts


_OPENS = {True: ScheduleStage.ProducerAcquire, False: ScheduleStage.ConsumerWait}


def warp_lane_stride(task) -> int:
    """The interleave stride of a ring ``task`` covers one lane per warp of (1: none)."""
    for step in task.schedule.steps:
        config = getattr(step.resource, "pipeline_config", None)
        if isinstance(config, PipelineConfig) and step.stage in _OPENS.values():
            stride = config.interleave_strides[0 if step.stage.is_producer else 2]
            if stride > 1 and task.num_warps == stride:
                return stride
    return 1


def _ring_positions(task, resource, producer: bool):
    """``(positions per trip, positions outside the loop)`` ``task`` opens on one side of a ring:
    a warp-lane task (``num_warps == stride``) opens one position per warp and op; None when a
    guarded open, or a domain lane (which covers only part of the ring), makes it unclear."""
    config = resource.pipeline_config
    stride = config.interleave_strides[0 if producer else 2]
    lanes = 1
    if stride > 1:
        if task.num_warps != stride:
            return None
        lanes = stride
    per_trip = outside = 0
    for step in task.schedule.steps:
        if step.resource is not resource or step.stage is not _OPENS[producer]:
            continue
        if step.guards:
            return None
        if step.section is ScheduleStageType.Loop:
            per_trip += lanes
        else:
            outside += lanes
    return per_trip, outside


def _balancing_trips(task, tasks, counts) -> int | None:
    """The run-time task's trip count that opens as many positions of a shared ring as its
    partner with a static count (another task opening the ring's other side) opens: a warp-lane
    task with a run-time domain against a non-interleaved partner runs ``1 / stride`` of the
    partner's trips per warp.  None when no ring decides it."""
    for resource in task.resources:
        if not isinstance(getattr(resource, "pipeline_config", None), PipelineConfig):
            continue
        for producer in (True, False):
            mine = _ring_positions(task, resource, producer)
            if not mine or mine[0] == 0:
                continue
            for partner in tasks:
                if partner is task or id(partner) not in counts:
                    continue
                theirs = _ring_positions(partner, resource, not producer)
                if not theirs or theirs[0] + theirs[1] == 0:
                    continue
                total = counts[id(partner)] * theirs[0] + theirs[1]
                trips, rest = divmod(total - mine[1], mine[0])
                if rest == 0 and trips >= 0:
                    return trips
    return None


def _guard_runs(guard, iteration, trip_count, skipped, variant: Variant) -> bool:
    c = guard.condition
    if c is BlockCondition.Skippable:
        return not skipped
    if c is BlockCondition.WhenTrue:
        return variant.guard_holds(guard)
    if c is BlockCondition.WhenFalse:
        return not variant.guard_holds(guard)
    if iteration is None:
        return True
    return guard.holds(iteration, trip_count) is not False


def expand_task(task, trip_count: int, variant: Variant) -> list:
    """The ExpandedSteps one thread of ``task`` runs in ``variant``."""
    schedule = task.schedule
    steps = schedule.steps
    wtl = schedule.work_tile_loop
    pre = [s for s in steps if s.work_loop_slot == "pre"]
    post = [s for s in steps if s.work_loop_slot == "post"]
    inner = [s for s in steps if s.work_loop_slot is None]
    if wtl is None:
        tiles = [(None, False)]
    else:
        has_skip = wtl.skip_if is not None
        tiles = [(k, has_skip and skip) for k, skip in enumerate(variant.skips)]
    out = [ExpandedStep(s, None, None) for s in pre]
    for tile, skipped in tiles:
        def runs(step, i):
            return all(_guard_runs(g, i, trip_count, skipped, variant) for g in step.guards)
        out += [ExpandedStep(s, None, tile) for s in inner
                if s.section is ScheduleStageType.Head and runs(s, None)]
        loop = [s for s in inner if s.section is ScheduleStageType.Loop]
        for i in range(trip_count):
            out += [ExpandedStep(s, i, tile) for s in loop if runs(s, i)]
        out += [ExpandedStep(s, None, tile) for s in inner
                if s.section is ScheduleStageType.Tail and runs(s, None)]
    out += [ExpandedStep(s, None, None) for s in post]
    return out


def program_variants(tasks) -> list:
    """The variants to check: normal, skip patterns, data-guard values."""
    variants = [Variant("all tiles run")]
    if any(t.schedule.work_tile_loop is not None and t.schedule.work_tile_loop.skip_if
           is not None for t in tasks):
        variants.append(Variant("second tile skipped", skips=(False, True)))
        variants.append(Variant("both tiles skipped", skips=(True, True)))
    names: dict = {}                       # correlation group -> its name, keys first
    for task in tasks:
        for step in task.schedule.steps:
            for g in step.guards:
                if g.condition.is_data_dependent and g.key is not None:
                    names.setdefault(guard_group(g), f"key {g.key!r}")
    for task in tasks:
        for step in task.schedule.steps:
            for g in step.guards:
                if g.condition.is_data_dependent and g.key is None:
                    names.setdefault(guard_group(g), f"task {task.name!r} unkeyed "
                                                     f"[#{g.token.step.id}].{g.token.variable.name}")
    groups = sorted(names, key=lambda k: (k[0] != "key", k[1] if k[0] == "key" else 0))[:MAX_GUARD_KEYS]
    for values in product((True, False), repeat=len(groups)):
        if all(values):
            continue                       # the first variant: every block taken
        name = ("when_true blocks not taken" if len(groups) == 1 else
                "when_true " + ", ".join(f"{names[k]} {'taken' if v else 'not taken'}"
                                         for k, v in zip(groups, values)))
        variants.append(Variant(name, guard_value=values[0], guard_values=dict(zip(groups, values))))
    return variants
