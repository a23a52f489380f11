"""Raw (legacy) schedule lists: ``schedule_from_entries`` (rule T5).

An entry is a tuple ``(resource, stage[, section][, guard][, label])``:

* ``resource``: a MemoryResource; ``stage``: a :class:`ScheduleStage`;
* ``section``: a :class:`ScheduleStageType` (default ``Loop``); ``LoopFirstIter`` /
  ``LoopLastIter`` normalise to ``Loop`` with the matching guard;
* ``guard``: a :class:`LoopGuard` (default ``Always``), only on Loop entries;
* ``label``: a work method name (default None: the single method of that stage).

Entries must come Head, then Loop, then Tail (T5: the message names the offending
transition and entry index).  Labels are resolved here when possible; an unresolved
label leaves ``Step.spec`` None and is reported by the TaskManager's N1 check.  Raw
entries carry no tokens: each routed input of a work step is connected by name to the
most recent earlier consumer-work output of a variable with that name (a missing one is
reported by the routing checks R1-R4).
"""
from __future__ import annotations

import inspect
from typing import Any, Iterable

from tsjit.errors import VerificationError
from tsjit.ts.diagnostics import definition_location
from tsjit.ts.enums import BlockCondition, LoopGuard, ScheduleStage, ScheduleStageType, WorkAttr
from tsjit.ts.memory_resource import MemoryResource
from tsjit.ts.schedule import (DataFlowToken, DomainLoop, Guard, GuardBlock, Route, Schedule,
                               Step)
from tsjit.ts.work import WorkLabelError, resolve_work

__all__ = ["schedule_from_entries"]

_ORDER = {ScheduleStageType.Head: 0, ScheduleStageType.Loop: 1, ScheduleStageType.Tail: 2}
_GUARDS = {LoopGuard.FirstIter: BlockCondition.FirstIter,
           LoopGuard.LastIter: BlockCondition.LastIter}


def _parse(index: int, entry: Any) -> tuple:
    if not isinstance(entry, tuple) or len(entry) < 2:
        raise VerificationError(f"raw schedule entry {index} must be a tuple (resource, stage"
                                f"[, section][, guard][, label]), got {entry!r}", check="T5")
    resource, stage, *rest = entry
    if not isinstance(resource, MemoryResource) or not isinstance(stage, ScheduleStage):
        raise VerificationError(f"raw schedule entry {index}: expected (resource, "
                                f"ScheduleStage, ...), got {entry!r}", check="T5")
    section, guard, label = ScheduleStageType.Loop, LoopGuard.Always, None
    for item in rest:
        if isinstance(item, ScheduleStageType):
            section = item
        elif isinstance(item, LoopGuard):
            guard = item
        elif isinstance(item, str) or item is None:
            label = item
        else:
            raise VerificationError(f"raw schedule entry {index} ({resource.name} "
                                    f"{stage.name}): unexpected element {item!r}", check="T5")
    if section is ScheduleStageType.LoopFirstIter:
        section, guard = ScheduleStageType.Loop, LoopGuard.FirstIter
    elif section is ScheduleStageType.LoopLastIter:
        section, guard = ScheduleStageType.Loop, LoopGuard.LastIter
    if guard is not LoopGuard.Always and section is not ScheduleStageType.Loop:
        raise VerificationError(
            f"raw schedule entry {index} ({resource.name} {stage.name}): guard {guard} on a "
            f"{section} entry; guards only apply to Loop entries. Make it a Loop entry or drop "
            f"the guard.", check="T5")
    return resource, stage, section, guard, label


def schedule_from_entries(entries: Iterable[Any], *, start: Any = 0, end: Any, step: Any = 1,
                          unroll: int | None = None, name: str = "raw_schedule") -> Schedule:
    """Build a Schedule from a raw entry list (see the module docstring).

    Raises:
        VerificationError: (check ``T5``) malformed entry, guard outside Loop, or sections
            out of Head -> Loop -> Tail order.
    """
    parsed = [_parse(i, e) for i, e in enumerate(entries)]
    location = definition_location()   # the schedule_from_entries(...) line: messages name it, step by step
    for i in range(1, len(parsed)):
        previous, current = parsed[i - 1][2], parsed[i][2]
        if _ORDER[current] < _ORDER[previous]:
            res, stage = parsed[i][0], parsed[i][1]
            raise VerificationError(
                f"raw schedule {name!r}: entry {i} ({res.name} {stage.name}) is {current} but "
                f"follows a {previous} entry; entries must be ordered Head, then Loop, then "
                f"Tail.", check="T5")
    steps: list[Step] = []
    routes: list[Route] = []
    latest: dict[str, Step] = {}
    counters: dict[tuple, int] = {}
    resources: list[MemoryResource] = []
    for resource, stage, section, guard, label in parsed:
        if all(r is not resource for r in resources):
            resources.append(resource)
        variables = resource.task_local_variables()
        spec = None
        if stage.is_work:
            try:
                _, spec = resolve_work(resource, stage, label)
            except WorkLabelError:
                spec = None
        key = (id(resource), stage, section)
        counters[key] = counters.get(key, -1) + 1
        guards = (Guard(_GUARDS[guard]),) if guard in _GUARDS else ()
        new = Step(id=len(steps), resource=resource, stage=stage,
                   label=spec.label if spec else label, section=section,
                   call_index=counters[key], guards=guards, spec=spec,
                   work_attrs=spec.work_attrs if spec else
                   (WorkAttr.AUXILIARY if stage.is_aux else WorkAttr.NONE), location=location)
        if spec is not None:
            for param in spec.input_params:
                writer = latest.get(param)
                if writer is not None:
                    var = next(v for v in writer.outputs if v.name == param)
                    new.inputs[param] = DataFlowToken(var, writer, None)
                    routes.append(Route(writer, var, new, param))
            new.outputs = tuple(variables[r] for r in spec.returns if r in variables)
            new.output_tokens = tuple(DataFlowToken(v, new, None) for v in new.outputs)
            for var in new.outputs:
                latest[var.name] = new
        steps.append(new)
    head = [s for s in steps if s.section is ScheduleStageType.Head]
    tail = [s for s in steps if s.section is ScheduleStageType.Tail]
    loop_body = [GuardBlock(s.guards[0], (s,)) if s.guards else s
                 for s in steps if s.section is ScheduleStageType.Loop]
    provider = end if inspect.isfunction(end) else None
    loop = DomainLoop(start=start, end=None if provider else end, step=step, unroll=unroll,
                      end_provider=provider, body=tuple(loop_body))
    return Schedule(name=name, parameters=tuple(r.name for r in resources),
                    resources=tuple(resources), body=(*head, loop, *tail), steps=tuple(steps),
                    routes=tuple(routes))

